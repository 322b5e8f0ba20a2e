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
 private:
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
