// Droppers that keep outputs compressed.
#include <optional>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

// crd_drop(outer, inner) -> (outer, inner): drops outer coordinates whose inner
// fiber is empty, and the stop tokens of those fibers (merging stop levels).
class CrdDrop : public Node {
 public:
  explicit CrdDrop(const std::string& n) : Node(n, "crd_drop", 2, 2) {}
  FF_INLINE Step step() override {
    if (!has(1)) return Step::StallInput;
    const Token& t = peek(1);
    if (t.is_data()) {
      if (pending_) {  // the previous fiber's stop goes out before new data
        if (!room(1)) return Step::StallOutput;
        emit(1, *pending_);
        pending_.reset();
        return Step::Progress;
      }
      if (!emitted_outer_) {
        if (!has(0)) return Step::StallInput;
        if (!peek(0).is_data()) protocol_error("outer stream has no coordinate for a non-empty fiber");
        if (!room(0) || !room(1)) return Step::StallOutput;
        emit(0, peek(0));
        emitted_outer_ = true;
      } else if (!room(1)) {
        return Step::StallOutput;
      }
      emit(1, take(1));
      nonempty_ = true;
      return Step::Progress;
    }
    if (t.is_stop()) {
      int k = t.level;
      if (!parent_ready(0, k)) return Step::StallInput;
      bool outer_stop = k > 0;
      if (outer_stop && !room(0)) return Step::StallOutput;
      follow_parent(0, k);
      if (outer_stop) emit(0, Token::stop(k - 1));
      take(1);
      if (nonempty_) pending_ = Token::stop(k);
      else if (pending_) { if (k > pending_->level) pending_ = Token::stop(k); }
      else if (k > 0) pending_ = Token::stop(k);
      nonempty_ = emitted_outer_ = false;
      return Step::Progress;
    }
    if (t.is_done()) {
      if (pending_) {
        if (!room(1)) return Step::StallOutput;
        emit(1, *pending_);
        pending_.reset();
        return Step::Progress;
      }
      if (!has(0)) return Step::StallInput;
      if (!room(0) || !room(1)) return Step::StallOutput;
      if (!peek(0).is_done()) protocol_error("outer stream not done when the inner one is");
      emit(0, take(0));
      emit(1, take(1));
      finish();
      return Step::Progress;
    }
    protocol_error("coordinate stream carries N");
  }
  void save(StateOut& o) const override {
    save_base(o);
    o.pod(pending_.has_value()); o.pod(pending_.value_or(Token())); o.pod(nonempty_); o.pod(emitted_outer_);
  }
  void load(StateIn& in) override {
    load_base(in);
    const bool has = in.pod<bool>();
    const Token t = in.pod<Token>();
    pending_ = has ? std::optional<Token>(t) : std::nullopt;
    in.pod(nonempty_); in.pod(emitted_outer_);
  }
 private:
  std::optional<Token> pending_;
  bool nonempty_ = false, emitted_outer_ = false;
};

// val_drop(crd, val) -> (crd, val): drops pairs whose value is exactly zero.
class ValDrop : public Node {
 public:
  explicit ValDrop(const std::string& n) : Node(n, "val_drop", 2, 2) {}
  FF_INLINE Step step() override {
    if (!has(0) || !has(1)) return Step::StallInput;
    const Token& c = peek(0);
    const Token& v = peek(1);
    if (c.is_data() && (v.is_empty() || (v.is_data() && v.f == 0.0f))) {
      take(0); take(1);
      return Step::Progress;
    }
    if (!room(0) || !room(1)) return Step::StallOutput;
    if (c.kind != v.kind && !(c.is_data() && v.is_data())) protocol_error("coordinate and value streams misaligned");
    emit(0, take(0));
    Token val = take(1);
    emit(1, val);
    if (val.is_done()) finish();
    return Step::Progress;
  }
};

}  // namespace

NodePtr make_crd_drop(const std::string& name, const Params&) { return make_stepped<CrdDrop>(name); }
NodePtr make_val_drop(const std::string& name, const Params&) { return make_stepped<ValDrop>(name); }

}  // namespace fuseflow::sim
