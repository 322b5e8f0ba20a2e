// Thin nanobind bindings of the simulator core (fuseflow._simulator).
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "fuseflow/sim/alu_ops.h"
#include "fuseflow/sim/graph.h"
#include "fuseflow/sim/primitives.h"
#include "fuseflow/sim/writer.h"

namespace nb = nanobind;
using namespace fuseflow::sim;

namespace {

// One shared copy per distinct numpy buffer: the graphs of a program read each packed tensor from
// many nodes (pack_cache hands out one array per tensor). Keyed by address and length, and reused
// only while some node still holds it and its bytes still equal the buffer's, so a freed buffer
// whose address comes back with other contents is copied afresh.
template <typename T>
class ArrayPool {
 public:
  SharedArray<T> get(const T* data, size_t n) {
    auto key = std::make_pair(static_cast<const void*>(data), n);
    if (auto it = pool_.find(key); it != pool_.end())
      if (SharedArray<T> have = it->second.lock(); have && (n == 0 || std::memcmp(have->data(), data, n * sizeof(T)) == 0))
        return have;
    auto fresh = std::make_shared<const std::vector<T>>(data, data + n);
    pool_[key] = fresh;
    if (pool_.size() > 2 * swept_ + 1024) sweep();
    return fresh;
  }

 private:
  void sweep() {  // drop entries no node holds any more
    std::erase_if(pool_, [](const auto& kv) { return kv.second.expired(); });
    swept_ = pool_.size();
  }
  std::map<std::pair<const void*, size_t>, std::weak_ptr<const std::vector<T>>> pool_;
  size_t swept_ = 0;
};

ArrayPool<int64_t> int_pool;  // the GIL serialises add_node, so no lock
ArrayPool<float> float_pool;

Params to_params(const nb::dict& d) {
  Params p;
  for (auto [k, v] : d) {
    std::string key = nb::cast<std::string>(k);
    if (nb::isinstance<nb::bool_>(v)) p.ints[key] = nb::cast<bool>(v);
    else if (nb::isinstance<nb::int_>(v)) p.ints[key] = nb::cast<int64_t>(v);
    else if (nb::isinstance<nb::float_>(v)) p.floats[key] = nb::cast<double>(v);
    else if (nb::isinstance<nb::str>(v)) p.strings[key] = nb::cast<std::string>(v);
    else if (nb::isinstance<nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig>>(v)) {
      auto a = nb::cast<nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig>>(v);
      p.int_arrays[key] = int_pool.get(a.data(), a.shape(0));
    } else if (nb::isinstance<nb::ndarray<const float, nb::ndim<1>, nb::c_contig>>(v)) {
      auto a = nb::cast<nb::ndarray<const float, nb::ndim<1>, nb::c_contig>>(v);
      p.float_arrays[key] = float_pool.get(a.data(), a.shape(0));
    } else {
      throw std::invalid_argument("parameter '" + key +
                                  "' must be int, float, str, or a contiguous 1-D int64/float32 numpy array");
    }
  }
  return p;
}

KindTiming kind_timing(const nb::handle& h, KindTiming k) {
  nb::dict d = nb::cast<nb::dict>(h);
  for (auto [key, v] : d) {
    std::string name = nb::cast<std::string>(key);
    if (name == "latency") k.latency = nb::cast<uint64_t>(v);
    else if (name == "ii") k.ii = nb::cast<uint64_t>(v);
    else throw std::invalid_argument("unknown per-kind timing setting '" + name + "' (latency, ii)");
  }
  return k;
}

// Timing from the architecture dictionary fuseflow.sim.arch builds, validated there against
// kArchKeys (max_cycles is a run limit, passed to run() instead). An unknown key here means
// the table and this converter disagree (tests/unit/test_primitive_table.py).
Timing to_timing(const nb::dict& cfg) {
  Timing t;
  for (auto [key, v] : cfg) {
    std::string k = nb::cast<std::string>(key);
    if (k == "fifo_depth") t.fifo_depth = nb::cast<size_t>(v);
    else if (k == "max_fifo_mib") t.max_fifo_mib = nb::cast<uint64_t>(v);
    else if (k == "max_seconds") t.max_seconds = nb::cast<uint64_t>(v);
    else if (k == "spill_tokens") t.spill_tokens = nb::cast<uint64_t>(v);
    else if (k == "latency") t.default_kind.latency = nb::cast<uint64_t>(v);
    else if (k == "ii") t.default_kind.ii = nb::cast<uint64_t>(v);
    else if (k == "scan_emit_on_pop") t.scan_emit_on_pop = nb::cast<bool>(v);
    else if (k == "reduce_split_stop") t.reduce_split_stop = nb::cast<bool>(v);
    else if (k == "tile_matmul_ii_per_b") t.tile_matmul_ii_per_b = nb::cast<uint64_t>(v);
    else if (k == "tile_elementwise_ii_per_b") t.tile_elementwise_ii_per_b = nb::cast<uint64_t>(v);
    else if (k == "kinds") {
      for (auto [kind, kv] : nb::cast<nb::dict>(v))
        t.per_kind[nb::cast<std::string>(kind)] = kind_timing(kv, t.default_kind);
    } else if (k == "memory") {
      nb::dict m = nb::cast<nb::dict>(v);
      t.memory.enabled = true;
      for (auto [mk, mv] : m) {
        std::string n = nb::cast<std::string>(mk);
        if (n == "enabled") t.memory.enabled = nb::cast<bool>(mv);
        else if (n == "channels") t.memory.channels = nb::cast<int>(mv);
        else if (n == "bytes_per_request") t.memory.bytes_per_request = nb::cast<int>(mv);
        else if (n == "latency") t.memory.latency = nb::cast<uint64_t>(mv);
        else if (n == "ii") t.memory.ii = nb::cast<uint64_t>(mv);
        else if (n == "startup") t.memory.startup = nb::cast<uint64_t>(mv);
        else throw std::invalid_argument("unknown memory setting '" + n + "'");
      }
    } else {
      throw std::invalid_argument("unknown architecture setting '" + k + "'");
    }
  }
  return t;
}

template <class T>
nb::ndarray<nb::numpy, T> to_numpy(const std::vector<T>& v) {
  auto* copy = new std::vector<T>(v);
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(copy->data(), {copy->size()}, owner);
}

nb::dict counters_dict(const Counters& c) {
  nb::dict d;
  d["tokens_in"] = c.tokens_in; d["tokens_out"] = c.tokens_out;
  d["mem_read_bytes"] = c.mem_reads; d["mem_write_bytes"] = c.mem_writes; d["mem_lines"] = c.mem_lines;
  d["alu_ops"] = c.alu_ops; d["reductions"] = c.reductions;
  d["stall_input"] = c.stall_input; d["stall_output"] = c.stall_output;
  bool active = c.first_active != UINT64_MAX;
  d["first_active"] = active ? static_cast<int64_t>(c.first_active) : -1;
  d["last_active"] = active ? static_cast<int64_t>(c.last_active) : -1;
  return d;
}

nb::list token_list(const std::vector<Token>& toks, bool values) {
  nb::list out;
  for (const Token& t : toks) {
    if (t.is_data()) {
      if (values) out.append(nb::float_(t.f)); else out.append(nb::int_(t.i));
    } else {
      out.append(nb::str(describe(t).c_str()));
    }
  }
  return out;
}

nb::dict run_graph(Graph& g, uint64_t max_cycles, bool record, const std::vector<int>& value_nodes,
                   bool spans, nb::object progress, uint64_t progress_every, const std::string& engine,
                   nb::object release) {
  if (engine != "event" && engine != "window" && engine != "window+event")
    throw std::invalid_argument("unknown engine '" + engine + "' (event, window or window+event)");
  const Engine which = engine == "event" ? Engine::Event : engine == "window" ? Engine::Window : Engine::WindowThenEvent;
  RunResult r;
  std::function<void(uint64_t)> report;
  if (!progress.is_none()) {
    report = [&progress](uint64_t cycle) {  // back in Python: report, and honour Ctrl-C
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      progress(cycle);
    };
  }
  Release starts;
  if (!release.is_none()) {
    starts = [&release](int done, uint64_t cycle) {  // the strategy, in Python, picks what starts
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      return nb::cast<std::vector<std::pair<int, uint64_t>>>(release(done, cycle));
    };
  }
  {
    nb::gil_scoped_release unlock;
    r = g.run(max_cycles, record, spans, report, progress_every, which, starts);
  }
  nb::dict out;
  out["cycles"] = r.cycles;
  out["mem_requests"] = r.mem_requests;
  out["parts"] = r.parts;
  if (r.event_from != kNever) out["event_from"] = r.event_from;
  out["checkpoints"] = r.checkpoints;
  if (r.spill_queues > 0) {
    nb::dict sp;
    sp["queues"] = r.spill_queues;
    sp["peak_bytes"] = r.spill_peak_bytes;
    sp["bytes_written"] = r.spill_bytes_written;
    out["spill"] = sp;
  }
  if (r.resumed_from != kNever) out["resumed_from"] = r.resumed_from;
  nb::list nodes;
  for (size_t i = 0; i < g.size(); ++i) {
    Node& n = g.node(i);
    nb::dict d = counters_dict(n.counters());
    d["name"] = n.name(); d["kind"] = n.kind();
    if (spans) {
      nb::list sp;
      for (auto& [a, b] : r.spans[i]) sp.append(nb::make_tuple(a, b));
      d["spans"] = sp;
    }
    if (auto* w = dynamic_cast<WriterBase*>(&n)) {
      if (n.kind() == "write_val") d["vals"] = to_numpy(w->vals());
      else { d["seg"] = to_numpy(w->seg()); d["crd"] = to_numpy(w->crd()); }
    }
    nodes.append(d);
  }
  out["nodes"] = nodes;
  if (record) {
    std::vector<bool> is_value(g.size(), false);
    for (int v : value_nodes) if (v >= 0 && v < static_cast<int>(g.size())) is_value[v] = true;
    nb::list traces;
    for (auto& e : r.traces) {
      nb::dict d;
      d["src"] = e.src; d["src_port"] = e.src_port; d["dst"] = e.dst; d["dst_port"] = e.dst_port;
      d["tokens"] = token_list(e.tokens, is_value[e.src]);
      traces.append(d);
    }
    out["traces"] = traces;
  }
  return out;
}

}  // namespace

NB_MODULE(_simulator, m) {
  m.doc() = "fuseflow's cycle-level sparse streaming dataflow simulator (C++ core).";
  static nb::exception<SimError> sim_error(m, "SimError");
  static nb::exception<WindowUnsafe> window_unsafe(m, "WindowUnsafe");
  nb::class_<Graph>(m, "Graph", "A graph of SAM primitives joined by bounded FIFOs.")
      .def(nb::init<size_t, uint64_t>(), nb::arg("fifo_depth"), nb::arg("latency") = 1,
           "Create an empty graph whose edges hold `fifo_depth` tokens and deliver after `latency` cycles.")
      .def("__init__", [](Graph* g, const nb::dict& arch) { new (g) Graph(to_timing(arch)); }, nb::arg("arch"),
           "Create an empty graph from an architecture dictionary (fifo_depth, latency, ii, kinds, memory, "
           "scan_emit_on_pop, reduce_split_stop, tile timing).")
      .def("add_node",
           [](Graph& g, const std::string& kind, const std::string& name,
              const std::vector<std::pair<int, int>>& inputs, const nb::dict& params) {
             return g.add_node(kind, name, inputs, to_params(params));
           },
           nb::arg("kind"), nb::arg("name"), nb::arg("inputs"), nb::arg("params"),
           "Add a primitive (sam op mnemonic) fed by (node id, output port) pairs; returns the node id.")
      .def("run", &run_graph, nb::arg("max_cycles"), nb::arg("record") = false,
           nb::arg("value_nodes") = std::vector<int>{}, nb::arg("spans") = false,
           nb::arg("progress") = nb::none(), nb::arg("progress_every") = 1 << 20, nb::arg("engine") = "event",
           nb::arg("release") = nb::none(),
           "Run until every writer has seen D. Returns cycles, per-node counters and writer arrays; with "
           "`record`, every edge's token trace (edges leaving `value_nodes` print as floats); with `spans`, "
           "each node's active cycle intervals; `progress(cycle)` is called every `progress_every` cycles "
           "(Ctrl-C stops the run there). `engine` is 'event' (any timing) or 'window' (faster; raises "
           "WindowUnsafe for a run it cannot reproduce exactly, e.g. when a FIFO fills; the graph is then spent), or "
           "'window+event' (the window engine until a FIFO could fill within a window, then the event engine from "
           "that cycle on; `event_from` in the result says when). "
           "A graph with parts needs `release(done, cycle) -> [(part, start cycle)]`: called with -1 before the run "
           "and with each part whose writers finished; `parts` in the result is each part's (start, finish).")
      .def("set_checkpoint", &Graph::set_checkpoint, nb::arg("path"), nb::arg("key"), nb::arg("every_seconds"),
           "Save the run's whole state to `path` at the start of a window every `every_seconds` of wall time "
           "(0: every window; the window engine only); `key` names the graph, inputs and build.")
      .def("set_resume", &Graph::set_resume, nb::arg("path"), nb::arg("key"),
           "Continue the next run from a state `set_checkpoint` saved (refused unless its key is `key`).")
      .def("begin_part", &Graph::begin_part,
           "Nodes added from now on form a new part (one region of a shared run); returns its id.")
      .def_prop_ro("window_capable", &Graph::window_capable,
                   "Whether the window engine supports this graph's timing (no memory model).")
      .def("__len__", &Graph::size);
  m.def("arch_keys", [] {
    auto table = [](const auto& keys) {
      nb::dict d;
      for (const ArchKey& k : keys) d[k.name] = k.type;
      return d;
    };
    nb::dict d;
    d["arch"] = table(kArchKeys);
    d["kinds"] = table(kKindKeys);
    d["memory"] = table(kMemoryKeys);
    return d;
  }, "The architecture settings ([arch], [arch.kinds.*], [arch.memory]) and their value types.");
  m.def("primitive_kinds", &primitive_kinds, "Every primitive kind (sam op mnemonic) the simulator builds.");
  m.def("primitive_table", [] {
    nb::list out;
    auto as_dict = [](const std::vector<std::pair<std::string, std::string>>& items) {
      nb::dict d;
      for (const auto& [k, v] : items) d[k.c_str()] = v;
      return d;
    };
    for (const PrimitiveInfo& p : primitive_table()) {
      nb::dict d;
      d["kind"] = p.kind; d["resource"] = p.resource; d["inputs"] = p.inputs; d["outputs"] = p.outputs;
      d["params"] = as_dict(p.params); d["data"] = as_dict(p.data); d["tile"] = as_dict(p.tile);
      out.append(d);
    }
    return out;
  }, "Every primitive: kind, fabric resource class, port counts (-1: variadic), and the parameters it reads "
     "({name: type}) from its op's attributes (params), from tensor data (data) and for tiles (tile).");
  m.def("alu_ops", [] {
    std::vector<std::pair<std::string, bool>> out;
    for (auto& [name, op] : kAluOps) out.emplace_back(name, is_unary(op));
    return out;
  }, "Every ALU op name the simulator evaluates, with whether it is unary.");
  m.def("alu_apply", [](const std::string& op, float a, float b) { return apply(parse_op(op), a, b); },
        nb::arg("op"), nb::arg("a"), nb::arg("b") = 0.0f,
        "The ALU's result of `op` on f32 operands (b is ignored by unary ops): the semantics Python's "
        "op table is checked against.");
}
