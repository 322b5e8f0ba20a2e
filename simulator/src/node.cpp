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

namespace {
// The one table of primitive kinds: each sam op mnemonic the simulator builds, and its factory.
// Python reads the names through `_simulator.primitive_kinds()` (arch keys, the cycle model).
using Factory = NodePtr (*)(const std::string&, int, const Params&);
// `resource` is the fabric unit that holds one: "memory" tiles hold what stores or streams a
// tensor's levels (scanners, loads, accumulators, writers), "compute" tiles the rest (Onyx maps
// sparse primitives this way: level scanners and writers in MEM tiles, joiners and ALUs in PEs).
struct Primitive { const char* kind; const char* resource; Factory make; };
const Primitive kPrimitives[] = {
    {"root", "memory", [](const std::string& n, int, const Params& p) { return make_root(n, p); }},
    {"scan", "memory", [](const std::string& n, int, const Params& p) { return make_scan(n, p); }},
    {"locate", "memory", [](const std::string& n, int, const Params& p) { return make_locate(n, p); }},
    {"intersect", "compute", [](const std::string& n, int k, const Params& p) { return make_intersect(n, k, p); }},
    {"union", "compute", [](const std::string& n, int k, const Params& p) { return make_union(n, k, p); }},
    {"repsiggen", "compute", [](const std::string& n, int, const Params& p) { return make_repsiggen(n, p); }},
    {"repeat", "compute", [](const std::string& n, int, const Params& p) { return make_repeat(n, p); }},
    {"load", "memory", [](const std::string& n, int, const Params& p) { return make_load(n, p); }},
    {"alu", "compute", [](const std::string& n, int k, const Params& p) { return make_alu(n, k, p); }},
    {"reduce", "compute", [](const std::string& n, int k, const Params& p) { return make_reduce(n, k, p); }},
    {"spacc", "memory", [](const std::string& n, int, const Params& p) { return make_spacc(n, p); }},
    {"crd_drop", "compute", [](const std::string& n, int, const Params& p) { return make_crd_drop(n, p); }},
    {"val_drop", "compute", [](const std::string& n, int, const Params& p) { return make_val_drop(n, p); }},
    {"write_crd", "memory", [](const std::string& n, int k, const Params& p) { return make_write_crd(n, k, p); }},
    {"write_val", "memory", [](const std::string& n, int, const Params& p) { return make_write_val(n, p); }},
    {"fork", "compute", [](const std::string& n, int, const Params& p) { return make_fork(n, p); }},
    {"join", "compute", [](const std::string& n, int k, const Params& p) { return make_join(n, k, p); }},
};
}  // namespace

std::vector<std::string> primitive_kinds() {
  std::vector<std::string> out;
  for (const auto& p : kPrimitives) out.emplace_back(p.kind);
  return out;
}

std::vector<std::pair<std::string, std::string>> primitive_resources() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : kPrimitives) out.emplace_back(p.kind, p.resource);
  return out;
}

NodePtr make_node(const std::string& kind, const std::string& name, int n, const Params& p) {
  if (p.ints.count("tile_b")) {  // blocked value streams
    if (kind == "load") return make_tile_load(name, p);
    if (kind == "alu") return make_tile_alu(name, n, p);
    if (kind == "write_val") return make_tile_write_val(name, p);
  }
  for (const auto& prim : kPrimitives)
    if (kind == prim.kind) return prim.make(name, n, p);
  throw std::invalid_argument("unknown primitive kind '" + kind + "'");
}

}  // namespace fuseflow::sim
