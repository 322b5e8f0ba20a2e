// Repeat-signal generator and repeater: broadcast a ref along an index variable.
#include <algorithm>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

// crd -> signal: R (data 0) per coordinate; stops keep their level; D.
class RepSigGen : public Node {
 public:
  explicit RepSigGen(const std::string& n) : Node(n, "repsiggen", 1, 1) {}
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    Token t = take(0);
    if (t.is_data()) t = Token::data(0);
    else if (t.is_empty()) protocol_error("coordinate stream carries N");
    emit(0, t);
    if (t.is_done()) finish();
    return Step::Progress;
  }
  // A run of coordinates: one R a step.
  uint64_t bulk(uint64_t t, uint64_t n) {
    const uint64_t k = ready_run(0, t, std::min(n, space(0)), [](Token c) { return c.is_data(); });
    emit_run(0, t, k, [](uint64_t) { return Token::data(0); });
    take_n(0, k);
    return k;
  }
};

// repeat(ref, signal): emits the current ref once per R; a signal stop S(k)
// consumes that ref (and the ref stream's S(k-1) for k > 0) and is forwarded.
class Repeat : public Node {
 public:
  explicit Repeat(const std::string& n) : Node(n, "repeat", 2, 1) {}
  FF_INLINE Step step() override {
    if (!has(1)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    const Token& s = peek(1);
    if (s.is_data()) {
      if (!has(0)) return Step::StallInput;
      const Token& r = peek(0);
      if (!r.is_data() && !r.is_empty()) protocol_error("ref stream has " + describe(r) + " under a repeat signal");
      emit(0, r);
      take(1);
      return Step::Progress;
    }
    if (s.is_stop()) {
      if (!follow_parent(0, s.level)) return Step::StallInput;
      emit(0, take(1));
      return Step::Progress;
    }
    if (s.is_done()) {
      if (!has(0)) return Step::StallInput;
      if (!peek(0).is_done()) protocol_error("ref stream not done when the signal is");
      take(0);
      emit(0, take(1));
      finish();
      return Step::Progress;
    }
    protocol_error("signal stream carries N");
  }
  // A run of R signals under one ref: the ref once a step.
  uint64_t bulk(uint64_t t, uint64_t n) {
    if (!has(0)) return 0;
    const Token r = peek(0);
    if (!r.is_data() && !r.is_empty()) return 0;
    const uint64_t k = ready_run(1, t, std::min(n, space(0)), [](Token s) { return s.is_data(); });
    emit_run(0, t, k, [&](uint64_t) { return r; });
    take_n(1, k);
    return k;
  }
};

}  // namespace

NodePtr make_repsiggen(const std::string& name, const Params&) { return make_stepped<RepSigGen>(name); }
NodePtr make_repeat(const std::string& name, const Params&) { return make_stepped<Repeat>(name); }

}  // namespace fuseflow::sim
