// Root, level scanners and iterate-locate.
#include <algorithm>
#include <stdexcept>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

// Emits the root reference stream `0 D`.
class Root : public Node {
 public:
  explicit Root(const std::string& n) : Node(n, "root", 0, 1) {}
  FF_INLINE Step step() override {
    if (!room(0)) return Step::StallOutput;
    if (!sent_) { emit(0, Token::data(0)); sent_ = true; }
    else { emit(0, Token::done()); finish(); }
    return Step::Progress;
  }
  void save(StateOut& o) const override { save_base(o); o.pod(sent_); }
  void load(StateIn& in) override { load_base(in); in.pod(sent_); }
 private:
  bool sent_ = false;
};

// Maps each input ref to one fiber of (ref, crd) closed by a stop token.
// Outputs: 0 = ref, 1 = crd. Dense levels iterate 0..dim-1 with ref = parent*dim + i; a dense level
// with a window (params lo, hi) iterates lo..hi-1 only: a sampled unit of rows (fuseflow/sampling).
class Scan : public Node {
 public:
  Scan(const std::string& n, const Params& p)
      : Node(n, "scan", 1, 2), seg_keep_(level_array(p, "seg")), crd_keep_(level_array(p, "crd")),
        seg_(*seg_keep_), crd_(*crd_keep_) {
    const std::string format = p.get_string("format", "compressed");
    if (format != "dense" && format != "compressed")  // no singleton scanner: refused, never run as another
      throw std::invalid_argument("scan '" + n + "': unknown level format '" + format + "' (dense or compressed)");
    dense_ = format == "dense";
    if (dense_) {
      dim_ = p.get_int("dim");
      if (dim_ < 0) throw std::invalid_argument("scan '" + n + "': negative dim");
      lo_ = p.get_int("lo", 0);
      hi_ = p.get_int("hi", dim_);
      if (lo_ < 0 || lo_ > hi_ || hi_ > dim_)
        throw std::invalid_argument("scan '" + n + "': window " + std::to_string(lo_) + ".." + std::to_string(hi_) +
                                    " outside 0.." + std::to_string(dim_));
    } else {
      if (seg_.empty()) throw std::invalid_argument("scan '" + n + "': empty seg array");
      // A malformed level would read past crd: refuse it here, once, not in the hot loop.
      if (seg_.front() < 0) throw std::invalid_argument("scan '" + n + "': seg starts below 0");
      for (size_t i = 1; i < seg_.size(); ++i)
        if (seg_[i] < seg_[i - 1])
          throw std::invalid_argument("scan '" + n + "': seg decreases at position " + std::to_string(i));
      if (seg_.back() > static_cast<int64_t>(crd_.size()))
        throw std::invalid_argument("scan '" + n + "': seg ends at " + std::to_string(seg_.back()) + " but crd has " +
                                    std::to_string(crd_.size()) + " entries");
    }
  }
  FF_INLINE Step step() override {
    if (in_fiber_) {
      if (!room(0) || !room(1)) return Step::StallOutput;
      if (pos_ < end_) {
        if (dense_) {
          emit(0, Token::data(base_ * dim_ + pos_));
          emit(1, Token::data(pos_));
        } else {
          mem_access(1, pos_ * 4, 4, false, seg_ready_);
          emit(0, Token::data(pos_));
          emit(1, Token::data(crd_[pos_]));
        }
        ++pos_;
        return Step::Progress;
      }
      // Fiber finished: merge a following input stop into our stop token.
      if (!has(0)) return Step::StallInput;
      const Token& t = peek(0);
      Token s = Token::stop(0);
      if (t.is_stop()) { s = Token::stop(t.level + 1); take(0); }
      wait_until(seg_ready_);  // the fiber's end is known once its seg line is in
      emit(0, s);
      emit(1, s);
      in_fiber_ = false;
      return Step::Progress;
    }
    if (!has(0)) return Step::StallInput;
    const Token& t = peek(0);
    if (t.is_data()) {
      int64_t r = t.i;
      if (dense_) { base_ = r; pos_ = lo_; end_ = hi_; }
      else {
        if (r < 0 || r + 1 >= static_cast<int64_t>(seg_.size()))
          out_of_range("reference", r, seg_.size() - 1);
        pos_ = seg_[r]; end_ = seg_[r + 1];
        mem_access(0, r * 4, 8, false);
        seg_ready_ = lines_ready();  // the fiber's bounds: its coordinates are read from then on
      }
      take(0);
      in_fiber_ = true;
      if (timing_ && timing_->scan_emit_on_pop && pos_ < end_ && room(0) && room(1)) {
        if (dense_) { emit(0, Token::data(base_ * dim_ + pos_)); emit(1, Token::data(pos_)); }
        else {
          mem_access(1, pos_ * 4, 4, false, seg_ready_);
          emit(0, Token::data(pos_));
          emit(1, Token::data(crd_[pos_]));
        }
        ++pos_;
      }
      return Step::Progress;
    }
    if (t.is_empty()) { take(0); in_fiber_ = true; pos_ = end_ = 0; return Step::Progress; }
    if (!room(0) || !room(1)) return Step::StallOutput;
    if (t.is_stop()) {  // an empty parent fiber: no child fibers, one level up
      Token s = Token::stop(t.level + 1);
      take(0);
      emit(0, s); emit(1, s);
      return Step::Progress;
    }
    take(0);
    emit(0, Token::done()); emit(1, Token::done());
    finish();
    return Step::Progress;
  }
  // The rest of the open fiber, one (ref, crd) pair a step, while both outputs have room.
  uint64_t bulk(uint64_t t, uint64_t n) {
    if (!in_fiber_) return 0;
    const uint64_t k = std::min({n, static_cast<uint64_t>(end_ - pos_), space(0), space(1)});
    const int64_t p = pos_;
    if (dense_) {
      const int64_t base = base_ * dim_ + p;
      emit_run(0, t, k, [&](uint64_t j) { return Token::data(base + static_cast<int64_t>(j)); });
      emit_run(1, t, k, [&](uint64_t j) { return Token::data(p + static_cast<int64_t>(j)); });
    } else {
      emit_run(0, t, k, [&](uint64_t j) { return Token::data(p + static_cast<int64_t>(j)); });
      emit_run(1, t, k, [&](uint64_t j) { return Token::data(crd_[p + j]); });
      c_.mem_reads += 4 * k;
    }
    pos_ += static_cast<int64_t>(k);
    return k;
  }
  void save(StateOut& o) const override {
    save_base(o);
    o.pod(in_fiber_); o.pod(base_); o.pod(pos_); o.pod(end_); o.pod(seg_ready_);
  }
  void load(StateIn& in) override {
    load_base(in);
    in.pod(in_fiber_); in.pod(base_); in.pod(pos_); in.pod(end_); in.pod(seg_ready_);
  }
 private:
  bool dense_ = false, in_fiber_ = false;
  int64_t dim_ = 0, base_ = 0, pos_ = 0, end_ = 0, lo_ = 0, hi_ = 0;
  uint64_t seg_ready_ = 0;  // when the open fiber's seg line arrives (memory model)
  // A compressed level's arrays, shared with every scanner of the level (empty for a dense level).
  static SharedArray<int64_t> level_array(const Params& p, const std::string& key) {
    static const SharedArray<int64_t> none = std::make_shared<const std::vector<int64_t>>();
    return p.get_string("format", "compressed") == "compressed" ? p.shared_ints(key) : none;
  }
  SharedArray<int64_t> seg_keep_, crd_keep_;
  const std::vector<int64_t>& seg_;  // *seg_keep_
  const std::vector<int64_t>& crd_;  // *crd_keep_
};

// locate(crd, parent_ref): ref = parent_ref * dim + crd for a dense level.
class Locate : public Node {
 public:
  Locate(const std::string& n, const Params& p) : Node(n, "locate", 2, 1), dim_(p.get_int("dim")) {}
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    const Token& t = peek(0);
    if (t.is_data()) {
      if (!has(1)) return Step::StallInput;
      const Token& r = peek(1);
      if (r.is_data()) emit(0, Token::data(r.i * dim_ + t.i));
      else if (r.is_empty()) emit(0, Token::empty());
      else protocol_error("parent ref stream has " + describe(r) + " under a coordinate");
      take(0);
      return Step::Progress;
    }
    if (t.is_stop()) {
      if (!follow_parent(1, t.level)) return Step::StallInput;
      emit(0, take(0));
      return Step::Progress;
    }
    if (t.is_done()) {
      if (!has(1)) return Step::StallInput;
      if (!peek(1).is_done()) protocol_error("parent ref stream not done when coordinates are");
      take(1);
      emit(0, take(0));
      finish();
      return Step::Progress;
    }
    protocol_error("coordinate stream carries N");
  }
  // A run of coordinates under one parent ref.
  uint64_t bulk(uint64_t t, uint64_t n) {
    const Fifo::View in0 = view(0);
    if (!has(1) || !peek(1).is_data()) return 0;
    const int64_t base = peek(1).i * dim_;
    if (Fifo* out = plain_out(0))  // one pass: each coordinate read once, its ref stored in the same loop
      return map_run(out, t, n, [base](Token c, Token* ref) {
        if (!c.is_data()) return false;
        *ref = Token::data(base + c.i);
        return true;
      });
    const uint64_t k = ready_run(0, t, std::min(n, space(0)), [](Token c) { return c.is_data(); });
    emit_run(0, t, k, [&](uint64_t j) { return Token::data(base + in0[j].i); });
    take_n(0, k);
    return k;
  }
 private:
  int64_t dim_;
};

}  // namespace

NodePtr make_root(const std::string& name, const Params&) { return make_stepped<Root>(name); }
NodePtr make_scan(const std::string& name, const Params& p) { return make_stepped<Scan>(name, p); }
NodePtr make_locate(const std::string& name, const Params& p) { return make_stepped<Locate>(name, p); }

}  // namespace fuseflow::sim
