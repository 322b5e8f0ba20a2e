#include "fuseflow/sim/node.h"

#include <stdexcept>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {

std::string describe(const Token& t) {
  switch (t.kind) {
    case Kind::Data: return std::to_string(t.i);
    case Kind::Stop: return "S" + std::to_string(t.level);
    case Kind::Empty: return "N";
    case Kind::Done: return "D";
  }
  return "?";
}

int64_t Params::get_int(const std::string& k) const {
  auto it = ints.find(k);
  if (it == ints.end()) throw std::invalid_argument("missing integer parameter '" + k + "'");
  return it->second;
}
int64_t Params::get_int(const std::string& k, int64_t dflt) const {
  auto it = ints.find(k);
  return it == ints.end() ? dflt : it->second;
}
double Params::get_float(const std::string& k, double dflt) const {
  auto it = floats.find(k);
  return it == floats.end() ? dflt : it->second;
}
std::string Params::get_string(const std::string& k, const std::string& dflt) const {
  auto it = strings.find(k);
  return it == strings.end() ? dflt : it->second;
}
const std::vector<int64_t>& Params::get_ints(const std::string& k) const {
  auto it = int_arrays.find(k);
  if (it == int_arrays.end()) throw std::invalid_argument("missing array '" + k + "'");
  return it->second;
}
const std::vector<float>& Params::get_floats(const std::string& k) const {
  auto it = float_arrays.find(k);
  if (it == float_arrays.end()) throw std::invalid_argument("missing array '" + k + "'");
  return it->second;
}

bool Node::parent_ready(int port, int k) const {
  if (!has(port)) return false;
  const Token& h = peek(port);
  return !((h.is_data() || h.is_empty()) && k > 0 && !has(port, 1));
}

bool Node::follow_parent(int port, int k) {
  if (!parent_ready(port, k)) return false;
  const Token& h = peek(port);
  if (h.is_data() || h.is_empty()) {
    if (k > 0) {
      if (!has(port, 1)) return false;
      const Token& s = peek(port, 1);
      if (!s.is_stop() || s.level != k - 1)
        protocol_error("parent stream has " + describe(s) + " where S" + std::to_string(k - 1) +
                       " was expected");
      take(port);
    }
    take(port);
    return true;
  }
  if (h.is_stop()) {
    if (k == 0 || h.level != k - 1)
      protocol_error("parent stream has " + describe(h) + " at the end of a child fiber closed by S" +
                     std::to_string(k));
    take(port);
    return true;
  }
  protocol_error("parent stream has " + describe(h) + " before its child stream ended");
}

void Node::request_lines(int slot, int64_t addr, int bytes, bool write) {
  int64_t line = addr / mem_->line_bytes();
  int64_t last = (addr + bytes - 1) / mem_->line_bytes();
  uint64_t ready = 0;
  for (int64_t l = line; l <= last; ++l) {
    auto it = lines_.find(slot);
    if (it != lines_.end() && it->second.first == l) { ready = std::max(ready, it->second.second); continue; }
    uint64_t done = mem_->request(now_);
    lines_[slot] = {l, done};
    ready = std::max(ready, done);
  }
  if (!write) {
    mem_ready_ = std::max(mem_ready_, ready);
    step_costs_ = true;
    refresh_out_at();
  }
}

void Node::out_of_range(const char* what, int64_t ref, size_t n) const {
  throw SimError(kind_ + " '" + name_ + "': " + what + " " + std::to_string(ref) + " out of range (" + std::to_string(n) +
                 " entries)");
}

void Node::protocol_error(const std::string& what) const {
  throw SimError("stream protocol violation at node '" + name_ + "' (" + kind_ + "): " + what);
}

NodePtr make_node(const std::string& kind, const std::string& name, int n, const Params& p) {
  if (p.ints.count("tile_b")) {  // blocked value streams
    if (kind == "load") return make_tile_load(name, p);
    if (kind == "alu") return make_tile_alu(name, n, p);
    if (kind == "write_val") return make_tile_write_val(name, p);
  }
  if (kind == "root") return make_root(name, p);
  if (kind == "scan") return make_scan(name, p);
  if (kind == "locate") return make_locate(name, p);
  if (kind == "intersect") return make_intersect(name, n, p);
  if (kind == "union") return make_union(name, n, p);
  if (kind == "repsiggen") return make_repsiggen(name, p);
  if (kind == "repeat") return make_repeat(name, p);
  if (kind == "load") return make_load(name, p);
  if (kind == "alu") return make_alu(name, n, p);
  if (kind == "reduce") return make_reduce(name, n, p);
  if (kind == "spacc") return make_spacc(name, p);
  if (kind == "crd_drop") return make_crd_drop(name, p);
  if (kind == "val_drop") return make_val_drop(name, p);
  if (kind == "write_crd") return make_write_crd(name, n, p);
  if (kind == "write_val") return make_write_val(name, p);
  if (kind == "fork") return make_fork(name, p);
  if (kind == "join") return make_join(name, n, p);
  throw std::invalid_argument("unknown primitive kind '" + kind + "'");
}

}  // namespace fuseflow::sim
