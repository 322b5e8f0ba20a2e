// Parallel lanes: fork deals the elements of one index-variable level round-robin to P lanes,
// join merges the lanes back in element order. Params: factor (P), depth (how many levels the
// stream lies below the parallel level: 0 for the level's own coordinates/refs).
//
// A depth-d stream's elements end with S(d-1); the level's fiber ends with S(k >= d). Each lane
// sees a well-formed stream: its elements, then the fiber's S(k) (alone if it got none).
#include <algorithm>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

// Deals the data tokens of a depth-0 stream round-robin; stops and D go to every lane.
class Fork : public Node {
 public:
  Fork(const std::string& n, int factor, bool copy) : Node(n, "fork", 1, factor), p_(factor), copy_(copy) {}
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    const Token& t = peek(0);
    if ((t.is_data() || t.is_empty()) && !copy_) {
      if (!room(lane_)) return Step::StallOutput;
      emit(lane_, take(0));
      lane_ = (lane_ + 1) % p_;
      return Step::Progress;
    }
    for (int l = 0; l < p_; ++l)
      if (!room(l)) return Step::StallOutput;
    Token s = take(0);
    for (int l = 0; l < p_; ++l) emit(l, s);
    if (!s.is_data() && !s.is_empty()) lane_ = 0;  // the next fiber starts again at lane 0, as the join expects
    if (s.is_done()) finish();
    return Step::Progress;
  }

 private:
  void save(StateOut& o) const override { save_base(o); o.pod(lane_); }
  void load(StateIn& in) override { load_base(in); in.pod(lane_); }
  int p_, lane_ = 0;
  bool copy_;  // depth -1: a stream from above the level, every token to every lane
};

// Merges P lanes of a depth-d stream back into element order. An element's closing S(d-1) is
// held back until the next element starts, so that the fiber's last element closes with the
// fiber's S(k) instead.
class Join : public Node {
 public:
  Join(const std::string& n, int factor, int depth)
      : Node(n, "join", factor, 1), p_(factor), d_(depth), done_(factor, false) {}
  FF_INLINE Step step() override {
    if (in_element_) return continue_element();
    if (done_[lane_] || (has(lane_) && peek(lane_).is_stop() && peek(lane_).level >= d_)) return end_fiber();
    if (!has(lane_)) return Step::StallInput;
    const Token& t = peek(lane_);
    if (t.is_done()) return finish_all();
    if (!room(0)) return Step::StallOutput;
    if (pending_ >= 0) {  // the previous element was not the fiber's last
      emit(0, Token::stop(pending_));
      pending_ = -1;
      return Step::Progress;
    }
    if (d_ == 0) {  // an element is one token
      emit(0, take(lane_));
      lane_ = (lane_ + 1) % p_;
      return Step::Progress;
    }
    if (t.is_stop() && t.level == d_ - 1) {  // an empty element
      take(lane_);
      pending_ = d_ - 1;
      lane_ = (lane_ + 1) % p_;
      return Step::Progress;
    }
    emit(0, take(lane_));
    in_element_ = true;
    return Step::Progress;
  }

 private:
  Step continue_element() {
    if (!has(lane_)) return Step::StallInput;
    const Token& t = peek(lane_);
    if (t.is_stop() && t.level >= d_ - 1) {
      Token s = take(lane_);
      if (s.level >= d_) { done_[lane_] = true; level_ = s.level; }
      pending_ = d_ - 1;
      in_element_ = false;
      lane_ = (lane_ + 1) % p_;
      return Step::Progress;
    }
    if (t.is_done()) protocol_error("lane " + std::to_string(lane_) + " ended inside an element");
    if (!room(0)) return Step::StallOutput;
    emit(0, take(lane_));
    return Step::Progress;
  }

  // The next lane has no element left: every lane is at the fiber's S(k); emit it once.
  Step end_fiber() {
    for (int l = 0; l < p_; ++l)
      if (!done_[l] && !has(l)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    int k = -1;
    for (int l = 0; l < p_; ++l) {
      if (done_[l]) { k = std::max(k, level_); continue; }
      const Token& t = peek(l);
      if (!t.is_stop() || t.level < d_)
        protocol_error("lane " + std::to_string(l) + " has " + describe(t) + " where its fiber should end");
      k = std::max(k, static_cast<int>(t.level));
      take(l);
    }
    emit(0, Token::stop(k));
    std::fill(done_.begin(), done_.end(), false);
    pending_ = -1;
    lane_ = 0;
    return Step::Progress;
  }

  Step finish_all() {
    for (int l = 0; l < p_; ++l)
      if (!has(l)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    for (int l = 0; l < p_; ++l) {
      if (!peek(l).is_done()) protocol_error("lane " + std::to_string(l) + " is not done when lane 0 is");
      take(l);
    }
    emit(0, Token::done());
    finish();
    return Step::Progress;
  }

  void save(StateOut& o) const override {
    save_base(o);
    o.vec(done_); o.pod(lane_); o.pod(pending_); o.pod(level_); o.pod(in_element_);
  }
  void load(StateIn& in) override {
    load_base(in);
    in.vec(done_); in.pod(lane_); in.pod(pending_); in.pod(level_); in.pod(in_element_);
  }
  int p_, d_;
  std::vector<bool> done_;
  int lane_ = 0, pending_ = -1, level_ = 0;
  bool in_element_ = false;
};

}  // namespace

NodePtr make_fork(const std::string& name, const Params& p) {
  int f = static_cast<int>(p.get_int("factor"));
  if (f < 1) throw std::invalid_argument("fork '" + name + "': factor must be positive");
  int64_t depth = p.get_int("depth", 0);
  if (depth != 0 && depth != -1)
    throw std::invalid_argument("fork '" + name + "': depth must be 0 (the level's own stream) or -1 (a stream "
                                "from above, copied to every lane)");
  return make_stepped<Fork>(name, f, depth == -1);
}

NodePtr make_join(const std::string& name, int n, const Params& p) {
  int f = static_cast<int>(p.get_int("factor"));
  if (f != n) throw std::invalid_argument("join '" + name + "': factor " + std::to_string(f) + " but " +
                                          std::to_string(n) + " inputs");
  return make_stepped<Join>(name, f, static_cast<int>(p.get_int("depth")));
}

}  // namespace fuseflow::sim
