// Array loads and ALUs over value streams.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fuseflow/sim/alu_ops.h"
#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

// load(ref) -> val: reads values at refs; N (absent operand) loads 0.
class Load : public Node {
 public:
  Load(const std::string& n, const Params& p) : Node(n, "load", 1, 1), keep_(p.shared_floats("vals")), vals_(*keep_) {}
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    prefetch_ahead();
    Token t = take(0);
    if (t.is_data()) {
      if (t.i < 0 || t.i >= static_cast<int64_t>(vals_.size()))
        out_of_range("reference", t.i, vals_.size());
      mem_access(0, t.i * 4, 4, false);
      emit(0, Token::value(vals_[t.i]));
    } else if (t.is_empty()) {
      emit(0, Token::value(0.0f));
    } else {
      emit(0, t);
      if (t.is_done()) finish();
    }
    return Step::Progress;
  }
  // A run of refs (or N) in range: one value a step.
  uint64_t bulk(uint64_t t, uint64_t n) {
    if (Fifo* out = plain_out(0)) return bulk_one_pass(out, t, n);
    const Fifo::View in0 = view(0);
    uint64_t refs = 0;  // the run's refs (the rest are N)
    const uint64_t k = ready_run(0, t, std::min(n, space(0)), [&](Token r) {  // step() acts on the rest or reports them
      if (r.is_data() && static_cast<uint64_t>(r.i) < vals_.size()) return ++refs, true;
      return r.is_empty();
    });
    emit_run(0, t, k, [&](uint64_t j) {
      const Token r = in0[j];
      return Token::value(r.is_data() ? vals_[r.i] : 0.0f);
    });
    c_.mem_reads += 4 * refs;
    take_n(0, k);
    return k;
  }
 private:
  // The same run, each ref read once and its value stored in the same loop.
  FF_INLINE uint64_t bulk_one_pass(Fifo* out, uint64_t t, uint64_t n) {
    const uint64_t size = vals_.size();
    const float* vals = vals_.data();
    uint64_t empties = 0;  // N refs among the run's (the rest are refs in range)
    const uint64_t k = map_run(out, t, n, [&](Token r, Token* v) {
      if (r.is_data() && static_cast<uint64_t>(r.i) < size) *v = Token::value(vals[r.i]);
      else if (r.is_empty()) *v = Token::value(0.0f), ++empties;
      else return false;  // step() acts on it or reports it
      return true;
    });
    c_.mem_reads += 4 * (k - empties);
    return k;
  }
  // Gathers (a dense operand's rows under a sparse coordinate) miss the cache; the refs queued
  // behind the head are already known, so start fetching the value a few tokens ahead.
  // Simulation only: the modelled timing does not change.
  FF_INLINE void prefetch_ahead() const {
    constexpr size_t kAhead = 8;
    const Fifo* f = in_[0];
    if (f->size() > kAhead) {
      const Token u = f->peek(kAhead);
      if (u.is_data() && static_cast<uint64_t>(u.i) < vals_.size()) __builtin_prefetch(vals_.data() + u.i);
    }
  }
  SharedArray<float> keep_;
  const std::vector<float>& vals_;  // *keep_, shared with every load of the tensor
};

// alu(vals...) -> val. A binary op with one input uses the `scalar` parameter as
// its second operand (rsub / rdiv put the scalar first). Control tokens must agree.
class Alu : public Node {
 public:
  Alu(const std::string& n, int n_in, const Params& p)
      : Node(n, "alu", n_in, 1), op_(parse_op(p.get_string("op", ""))),
        scalar_(static_cast<float>(p.get_float("scalar", 0.0))) {
    // a binary op takes two inputs, or one and the `scalar` parameter as its other operand
    int want = is_unary(op_) ? 1 : (n_in == 1 && p.floats.count("scalar") ? 1 : 2);
    if (n_in != want)
      throw std::invalid_argument("alu '" + n + "' op '" + p.get_string("op", "") + "' takes " +
                                  std::to_string(want) + " input(s), got " + std::to_string(n_in));
  }
  FF_INLINE Step step() override {
    for (size_t i = 0; i < in_.size(); ++i) if (!has(i)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    const Token& a = peek(0);
    if (a.is_data() || a.is_empty()) {
      float x = a.is_data() ? a.f : 0.0f;
      float y = scalar_;
      if (in_.size() == 2) {
        const Token& b = peek(1);
        if (!b.is_data() && !b.is_empty()) protocol_error("value streams are misaligned");
        y = b.is_data() ? b.f : 0.0f;
      }
      for (size_t i = 0; i < in_.size(); ++i) take(i);
      emit(0, Token::value(apply(op_, x, y)));
      ++c_.alu_ops;
      return Step::Progress;
    }
    return forward_aligned_control(a);
  }
  // A run of aligned values (or N): one result a step.
  uint64_t bulk(uint64_t t, uint64_t n) {
    if (Fifo* out = plain_out(0)) {
      if (in_.size() == 2 && op_ == Op::Mul) return bulk_one_pass<true>(out, t, n, [](float a, float b) { return a * b; });
      if (in_.size() == 2 && op_ == Op::Add) return bulk_one_pass<true>(out, t, n, [](float a, float b) { return a + b; });
      const Op op = op_;
      auto any = [op](float a, float b) { return apply(op, a, b); };
      return in_.size() == 2 ? bulk_one_pass<true>(out, t, n, any) : bulk_one_pass<false>(out, t, n, any);
    }
    const bool binary = in_.size() == 2;
    const Fifo::View in0 = view(0), in1 = view(binary ? 1 : 0);
    auto value = [](Token v) { return v.is_data() || v.is_empty(); };  // step() acts on the rest or reports them
    uint64_t k = ready_run(0, t, std::min(n, space(0)), value);
    if (binary) k = ready_run(1, t, k, value);
    auto f = [](const Token& v) { return v.is_data() ? v.f : 0.0f; };
    // the common binary ops inlined into the run (apply's switch is a call per value otherwise)
    auto run2 = [&](auto op) { emit_run(0, t, k, [&](uint64_t j) { return Token::value(op(f(in0[j]), f(in1[j]))); }); };
    if (binary && op_ == Op::Mul) run2([](float a, float b) { return a * b; });
    else if (binary && op_ == Op::Add) run2([](float a, float b) { return a + b; });
    else if (binary) emit_run(0, t, k, [&](uint64_t j) { return Token::value(apply(op_, f(in0[j]), f(in1[j]))); });
    else emit_run(0, t, k, [&](uint64_t j) { return Token::value(apply(op_, f(in0[j]), scalar_)); });
    for (size_t i = 0; i < in_.size(); ++i) take_n(static_cast<int>(i), k);
    c_.alu_ops += k;
    return k;
  }
 private:
  // The same run, each step's operands read once and its result stored in the same loop (one
  // input: `scalar_` is the second operand).
  template <bool binary, class F>
  FF_INLINE uint64_t bulk_one_pass(Fifo* out, uint64_t t, uint64_t n, F&& op) {
    uint64_t cap = std::min<uint64_t>({n, out->space(), input(0)->size()});
    if constexpr (binary) cap = std::min<uint64_t>(cap, input(1)->size());
    const Fifo::View in0 = view(0), in1 = view(binary ? 1 : 0);
    const Fifo::Tail dst = out->tail(cap);
    const uint64_t ii = ii_, lat = latency_;
    const float scalar = scalar_;
    auto value = [](Token v) { return v.is_data() || v.is_empty(); };  // step() acts on the rest or reports them
    const uint64_t k = by_chunks(
        cap,
        [&](uint64_t j) {
          const uint64_t c = std::min(in0.contiguous(j), dst.contiguous(j));
          return binary ? std::min(c, in1.contiguous(j)) : c;
        },
        [&](uint64_t k0, uint64_t len) {
          const auto* x = in0.at(k0);
          const auto* z = in1.at(k0);
          auto* o = dst.at(k0);
          uint64_t at = t + k0 * ii, j = 0;
          for (; j < len; ++j, at += ii) {
            if (x[j].visible() > at) break;
            const Token a = x[j].token();
            if (!value(a)) break;
            float y = scalar;
            if constexpr (binary) {
              if (z[j].visible() > at) break;
              const Token b = z[j].token();
              if (!value(b)) break;
              y = b.is_data() ? b.f : 0.0f;
            }
            Fifo::set(o[j], Token::value(op(a.is_data() ? a.f : 0.0f, y)), at + lat);
          }
          return j;
        });
    emitted(out, k);
    take_n(0, k);
    if constexpr (binary) take_n(1, k);
    c_.alu_ops += k;
    return k;
  }
  Op op_;
  float scalar_;
};

}  // namespace

NodePtr make_load(const std::string& name, const Params& p) { return make_stepped<Load>(name, p); }
NodePtr make_alu(const std::string& name, int n, const Params& p) { return make_stepped<Alu>(name, n, p); }

}  // namespace fuseflow::sim
