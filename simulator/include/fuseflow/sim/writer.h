// Writers expose what they wrote so the graph can return output tensors.
#pragma once
#include <vector>

#include "fuseflow/sim/node.h"

namespace fuseflow::sim {

class WriterBase : public Node {
 public:
  WriterBase(const std::string& n, const char* kind, int n_in) : Node(n, kind, n_in, 0) {}
  bool is_sink() const override { return true; }
  const std::vector<int64_t>& seg() const { return seg_; }
  const std::vector<int64_t>& crd() const { return crd_; }
  const std::vector<float>& vals() const { return vals_; }
  void save(StateOut& o) const override { save_base(o); o.vec(seg_); o.vec(crd_); o.vec(vals_); }
  void load(StateIn& in) override { load_base(in); in.vec(seg_); in.vec(crd_); in.vec(vals_); }

 protected:
  std::vector<int64_t> seg_, crd_;
  std::vector<float> vals_;
};

}  // namespace fuseflow::sim
