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
const std::vector<int64_t>& Params::get_ints(const std::string& k) const { return *shared_ints(k); }
const std::vector<float>& Params::get_floats(const std::string& k) const { return *shared_floats(k); }
SharedArray<int64_t> Params::shared_ints(const std::string& k) const {
  auto it = int_arrays.find(k);
  if (it == int_arrays.end() || !it->second) throw std::invalid_argument("missing array '" + k + "'");
  return it->second;
}
SharedArray<float> Params::shared_floats(const std::string& k) const {
  auto it = float_arrays.find(k);
  if (it == float_arrays.end() || !it->second) throw std::invalid_argument("missing array '" + k + "'");
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

void Node::request_lines(int slot, int64_t addr, int bytes, bool write, uint64_t after) {
  int64_t line = addr / mem_->line_bytes();
  int64_t last = (addr + bytes - 1) / mem_->line_bytes();
  uint64_t ready = after;  // the address itself is known only then
  for (int64_t l = line; l <= last; ++l) {
    auto it = lines_.find(slot);
    if (it != lines_.end() && it->second.first == l) { ready = std::max(ready, it->second.second); continue; }
    uint64_t done = mem_->request(std::max(now_, after));
    if (!write) ++c_.mem_lines;
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
// `inputs`/`outputs` are port counts (kVariadic: the op's operand segments decide). `params` are
// the parameters the node reads from its sam op's attributes ("name:type"), `data` those the
// front end binds from tensor data, `tile` those of a blocked value stream; make_node refuses
// any other key, so the front end can send nothing the table does not declare.
constexpr int kVariadic = -1;
constexpr const char* kTileParams = "tile_b:int axes:ints in_axes:ints in_ranks:ints";
struct Primitive {
  const char* kind;
  const char* resource;
  int inputs, outputs;
  const char* params;
  const char* data;
  const char* tile;
  Factory make;
};
const Primitive kPrimitives[] = {
    {"root", "memory", 0, 1, "", "", "", [](const std::string& n, int, const Params& p) { return make_root(n, p); }},
    {"scan", "memory", 1, 2, "format:string dim:int", "seg:ints crd:ints lo:int hi:int", "",
     [](const std::string& n, int, const Params& p) { return make_scan(n, p); }},
    {"locate", "memory", 2, 1, "dim:int", "", "",
     [](const std::string& n, int, const Params& p) { return make_locate(n, p); }},
    {"intersect", "compute", kVariadic, kVariadic, "", "", "",
     [](const std::string& n, int k, const Params& p) { return make_intersect(n, k, p); }},
    {"union", "compute", kVariadic, kVariadic, "", "", "",
     [](const std::string& n, int k, const Params& p) { return make_union(n, k, p); }},
    {"repsiggen", "compute", 1, 1, "", "", "",
     [](const std::string& n, int, const Params& p) { return make_repsiggen(n, p); }},
    {"repeat", "compute", 2, 1, "", "", "", [](const std::string& n, int, const Params& p) { return make_repeat(n, p); }},
    {"load", "memory", 1, 1, "", "vals:floats", kTileParams,
     [](const std::string& n, int, const Params& p) { return make_load(n, p); }},
    {"alu", "compute", kVariadic, 1, "op:string scalar:float", "", kTileParams,
     [](const std::string& n, int k, const Params& p) { return make_alu(n, k, p); }},
    {"reduce", "compute", kVariadic, 1, "kind:string", "", kTileParams,
     [](const std::string& n, int k, const Params& p) { return make_reduce(n, k, p); }},
    {"spacc", "memory", kVariadic, kVariadic, "kind:string order:int", "", kTileParams,
     [](const std::string& n, int, const Params& p) { return make_spacc(n, p); }},
    {"crd_drop", "compute", 2, 2, "", "", "",
     [](const std::string& n, int, const Params& p) { return make_crd_drop(n, p); }},
    {"val_drop", "compute", 2, 2, "", "", "",
     [](const std::string& n, int, const Params& p) { return make_val_drop(n, p); }},
    {"write_crd", "memory", kVariadic, 0, "", "", "",
     [](const std::string& n, int k, const Params& p) { return make_write_crd(n, k, p); }},
    {"write_val", "memory", 1, 0, "", "", kTileParams,
     [](const std::string& n, int, const Params& p) { return make_write_val(n, p); }},
    {"fork", "compute", 1, kVariadic, "factor:int depth:int", "", "",
     [](const std::string& n, int, const Params& p) { return make_fork(n, p); }},
    {"join", "compute", kVariadic, 1, "factor:int depth:int", "", "",
     [](const std::string& n, int k, const Params& p) { return make_join(n, k, p); }},
};

// "a:int b:ints" -> {{"a", "int"}, {"b", "ints"}}
std::vector<std::pair<std::string, std::string>> split_params(const char* spec) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string s(spec);
  size_t i = 0;
  while (i < s.size()) {
    size_t end = s.find(' ', i);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(i, end - i);
    size_t colon = item.find(':');
    if (!item.empty()) out.emplace_back(item.substr(0, colon), item.substr(colon + 1));
    i = end + 1;
  }
  return out;
}

// Every key of `p` must be declared by the kind's table entry.
void check_declared(const Primitive& prim, const std::string& name, const Params& p) {
  auto declared = [&](const std::string& key) {
    for (const char* spec : {prim.params, prim.data, prim.tile})
      for (const auto& [k, type] : split_params(spec))
        if (k == key) return true;
    return false;
  };
  auto check = [&](const auto& map) {
    for (const auto& kv : map)
      if (!declared(kv.first))
        throw std::invalid_argument(std::string(prim.kind) + " '" + name + "': unknown parameter '" + kv.first + "'");
  };
  check(p.ints); check(p.floats); check(p.strings); check(p.int_arrays); check(p.float_arrays);
}
}  // namespace

std::vector<std::string> primitive_kinds() {
  std::vector<std::string> out;
  for (const auto& p : kPrimitives) out.emplace_back(p.kind);
  return out;
}

std::vector<PrimitiveInfo> primitive_table() {
  std::vector<PrimitiveInfo> out;
  for (const auto& p : kPrimitives)
    out.push_back(PrimitiveInfo{p.kind, p.resource, p.inputs, p.outputs, split_params(p.params),
                                split_params(p.data), split_params(p.tile)});
  return out;
}

NodePtr make_node(const std::string& kind, const std::string& name, int n, const Params& p) {
  if (kind == "tape" || kind == "replay") {  // a piece's stream ends (stream.cpp), outside the primitive table
    for (const auto& [k, v] : p.ints)
      if (k != "key") throw std::invalid_argument(kind + " '" + name + "': unknown parameter '" + k + "'");
    if (!p.floats.empty() || !p.int_arrays.empty() || !p.float_arrays.empty() || p.strings.size() != 1 ||
        !p.strings.count("path"))
      throw std::invalid_argument(kind + " '" + name + "' takes a path and a key");
    if (n != (kind == "tape" ? 1 : 0)) throw std::invalid_argument(kind + " '" + name + "': wrong number of inputs");
    return kind == "tape" ? make_tape(name, p) : make_replay(name, p);
  }
  for (const auto& prim : kPrimitives) {
    if (kind != prim.kind) continue;
    check_declared(prim, name, p);
    NodePtr node;
    if (p.ints.count("tile_b") && kind == "load") node = make_tile_load(name, p);  // blocked value streams
    else if (p.ints.count("tile_b") && kind == "alu") node = make_tile_alu(name, n, p);
    else if (p.ints.count("tile_b") && kind == "write_val") node = make_tile_write_val(name, p);
    else node = prim.make(name, n, p);
    if ((prim.inputs != kVariadic && node->inputs().size() != static_cast<size_t>(prim.inputs)) ||
        (prim.outputs != kVariadic && node->outputs().size() != static_cast<size_t>(prim.outputs)))
      throw std::logic_error(kind + " '" + name + "': ports differ from the primitive table");
    return node;
  }
  throw std::invalid_argument("unknown primitive kind '" + kind + "'");
}

}  // namespace fuseflow::sim
