// Level writers: build the output tensor's seg/crd arrays and values.
#include "fuseflow/sim/primitives.h"
#include "fuseflow/sim/writer.h"

namespace fuseflow::sim {
namespace {

// write_crd(crd [, parent crd]): one segment entry per fiber, empty fibers
// included; with a parent stream, a stop that closes an empty parent fiber adds none.
class WriteCrd : public WriterBase {
 public:
  WriteCrd(const std::string& n, int n_in) : WriterBase(n, "write_crd", n_in) { seg_.push_back(0); }
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    const Token& t = peek(0);
    if (t.is_data()) {
      mem_access(0, static_cast<int64_t>(crd_.size()) * 4, 4, true);
      crd_.push_back(t.i);
      take(0);
      return Step::Progress;
    }
    if (t.is_stop()) {
      if (in_.size() > 1) {
        if (!parent_ready(1, t.level)) return Step::StallInput;
        bool has_fiber = peek(1).is_data() || peek(1).is_empty();
        follow_parent(1, t.level);
        if (has_fiber) seg_.push_back(static_cast<int64_t>(crd_.size()));
      } else {
        seg_.push_back(static_cast<int64_t>(crd_.size()));
      }
      mem_access(1, static_cast<int64_t>(seg_.size()) * 4, 4, true);
      take(0);
      return Step::Progress;
    }
    if (t.is_done()) {
      if (in_.size() > 1) {
        if (!has(1)) return Step::StallInput;
        take(1);
      }
      take(0);
      finish();
      return Step::Progress;
    }
    protocol_error("coordinate stream carries N");
  }
};

class WriteVal : public WriterBase {
 public:
  explicit WriteVal(const std::string& n) : WriterBase(n, "write_val", 1) {}
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    Token t = take(0);
    if (t.is_data() || t.is_empty()) {
      mem_access(0, static_cast<int64_t>(vals_.size()) * 4, 4, true);
      vals_.push_back(t.is_data() ? t.f : 0.0f);
    }
    else if (t.is_done()) finish();
    return Step::Progress;
  }
};

}  // namespace

NodePtr make_write_crd(const std::string& name, int n, const Params&) {
  if (n != 1 && n != 2) throw std::invalid_argument("write_crd '" + name + "' takes a crd and an optional parent crd");
  return make_stepped<WriteCrd>(name, n);
}
NodePtr make_write_val(const std::string& name, const Params&) { return make_stepped<WriteVal>(name); }

}  // namespace fuseflow::sim
