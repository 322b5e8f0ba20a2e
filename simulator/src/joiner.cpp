// Co-iteration joiners. Ports: inputs crd_0..crd_{n-1}, ref_0..ref_{n-1};
// outputs crd, ref_0..ref_{n-1}. Reference streams move in lockstep with their coordinates.
#include <algorithm>
#include <stdexcept>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

class Joiner : public Node {
 public:
  Joiner(const std::string& n, const char* kind, int n_inputs, bool is_union)
      : Node(n, kind, 2 * n_inputs, 1 + n_inputs), n_(n_inputs), union_(is_union) {
    if (n_inputs < 1) throw std::invalid_argument(std::string(kind) + " '" + n + "' needs inputs");
  }
  FF_INLINE Step step() override {
    for (int i = 0; i < n_; ++i)
      if (!has(i) || !has(n_ + i)) return Step::StallInput;
    int n_data = 0, n_done = 0, n_stop = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int stop_level = -1;
    for (int i = 0; i < n_; ++i) {
      const Token& t = peek(i);
      if (t.is_data()) { ++n_data; lo = std::min(lo, t.i); hi = std::max(hi, t.i); }
      else if (t.is_done()) ++n_done;
      else if (t.is_stop()) { ++n_stop; stop_level = std::max<int>(stop_level, t.level); }
      else protocol_error("coordinate stream carries N");
    }
    for (int o = 0; o <= n_; ++o) if (!room(o)) return Step::StallOutput;
    if (n_done == n_) {
      for (int i = 0; i < 2 * n_; ++i) take(i);
      for (int o = 0; o <= n_; ++o) emit(o, Token::done());
      finish();
      return Step::Progress;
    }
    if (n_done > 0) protocol_error("inputs end at different times");
    if (n_stop == n_) {
      for (int i = 0; i < n_; ++i)
        if (peek(i).level != stop_level) protocol_error("inputs close fibers at different levels");
      for (int i = 0; i < 2 * n_; ++i) take(i);
      for (int o = 0; o <= n_; ++o) emit(o, Token::stop(stop_level));
      return Step::Progress;
    }
    if (!union_) {
      if (n_stop > 0 || lo != hi) {  // skip the coordinates that cannot match
        int64_t target = n_stop > 0 ? INT64_MAX : hi;
        for (int i = 0; i < n_; ++i)
          if (peek(i).is_data() && peek(i).i < target) { take(i); take(n_ + i); }
        return Step::Progress;
      }
      emit(0, Token::data(lo));
      for (int i = 0; i < n_; ++i) { take(i); emit(1 + i, take(n_ + i)); }
      return Step::Progress;
    }
    emit(0, Token::data(lo));
    for (int i = 0; i < n_; ++i) {
      if (peek(i).is_data() && peek(i).i == lo) { take(i); emit(1 + i, take(n_ + i)); }
      else emit(1 + i, Token::empty());
    }
    return Step::Progress;
  }
  // A run of steps over data coordinates (some operands may sit at a stop while the others drain
  // their fibers): each step reads every head, consumes some operands, and emits nothing (an
  // intersection skipping) or one token per port. Stops on every operand, D, N coordinates, a full
  // output, or logged pops end the run (step() acts on them or reports them).
  uint64_t bulk(uint64_t t, uint64_t n) {
    if (n_ > kMaxOperands) return 0;
    for (int i = 0; i < 2 * n_; ++i)
      if (input(i)->logging()) return 0;  // pops at the steps that take them, not one a step
    uint64_t room = UINT64_MAX;  // tokens every output FIFO can still take
    for (int o = 0; o <= n_; ++o) {
      if (outputs()[o].size() > kMaxFanout) return 0;
      for (Fifo* f : outputs()[o]) {
        if (f->hooked()) return 0;
        room = std::min<uint64_t>(room, f->space());
      }
    }
    Fifo::View crd[kMaxOperands], ref[kMaxOperands];
    uint64_t size[kMaxOperands], pos[kMaxOperands], total = 0, least = UINT64_MAX;
    for (int i = 0; i < n_; ++i) {
      crd[i] = view(i), ref[i] = view(n_ + i), pos[i] = 0;
      size[i] = std::min(input(i)->size(), input(n_ + i)->size());
      total += size[i], least = std::min(least, size[i]);
    }
    const uint64_t most = std::min<uint64_t>({n, room, union_ ? total : least});
    // every output FIFO with room for `most` more; port o's are tails[first[o]] .. tails[first[o + 1] - 1]
    Fifo::Tail tails[(kMaxOperands + 1) * kMaxFanout];
    int first[kMaxOperands + 2];
    first[0] = 0;
    for (int o = 0; o <= n_; ++o) {
      first[o + 1] = first[o];
      for (Fifo* f : outputs()[o]) tails[first[o + 1]++] = f->tail(most);
    }
    const uint64_t ii = ii_, lat = latency_;
    uint64_t e = 0, k = 0, at = t;
    auto put = [&](int o, Token tok) {
      for (int f = first[o]; f < first[o + 1]; ++f) Fifo::set(*tails[f].at(e), tok, at + lat);
    };
    int64_t crds[kMaxOperands];  // this step's coordinates (stops: is_data false)
    bool is_data[kMaxOperands];
    for (; k < n && room > 0; ++k, at += ii) {
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      int n_data = 0;
      bool ok = true;
      for (int i = 0; i < n_; ++i) {
        if (pos[i] >= size[i] || crd[i].visible(pos[i]) > at || ref[i].visible(pos[i]) > at) { ok = false; break; }
        const Token h = crd[i][pos[i]];
        is_data[i] = h.is_data();
        if (is_data[i]) ++n_data, crds[i] = h.i, lo = std::min(lo, h.i), hi = std::max(hi, h.i);
        else if (!h.is_stop()) { ok = false; break; }
      }
      if (!ok || n_data == 0) break;
      if (!union_) {
        if (n_data < n_ || lo != hi) {  // skip the coordinates that cannot match
          const int64_t target = n_data < n_ ? INT64_MAX : hi;
          for (int i = 0; i < n_; ++i)
            if (is_data[i] && crds[i] < target) ++pos[i];
          continue;
        }
        put(0, Token::data(lo));
        for (int i = 0; i < n_; ++i) put(1 + i, ref[i][pos[i]++]);
      } else {
        put(0, Token::data(lo));
        for (int i = 0; i < n_; ++i) put(1 + i, is_data[i] && crds[i] == lo ? ref[i][pos[i]++] : Token::empty());
      }
      ++e, --room;
    }
    for (int o = 0; o <= n_; ++o) {
      for (Fifo* f : outputs()[o]) f->commit(e);
      counters().tokens_out += e;
    }
    for (int i = 0; i < n_; ++i) take_n(i, pos[i]), take_n(n_ + i, pos[i]);
    return k;
  }
 private:
  static constexpr int kMaxOperands = 8, kMaxFanout = 8;  // bulk runs only: wider joiners step one by one
  int n_;
  bool union_;
};

}  // namespace

NodePtr make_intersect(const std::string& name, int n, const Params&) {
  if (n % 2) throw std::invalid_argument("intersect '" + name + "' needs a crd and a ref per operand");
  return make_stepped<Joiner>(name, "intersect", n / 2, false);
}
NodePtr make_union(const std::string& name, int n, const Params&) {
  if (n % 2) throw std::invalid_argument("union '" + name + "' needs a crd and a ref per operand");
  return make_stepped<Joiner>(name, "union", n / 2, true);
}

}  // namespace fuseflow::sim
