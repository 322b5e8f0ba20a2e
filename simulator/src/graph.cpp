#include "fuseflow/sim/graph.h"

#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace fuseflow::sim {

namespace {
Timing uniform(size_t fifo_depth, uint64_t latency) {
  Timing t;
  t.fifo_depth = fifo_depth;
  t.default_kind.latency = latency;
  return t;
}
}  // namespace

Graph::Graph(const Timing& timing) : timing_(timing), memory_(std::make_unique<Memory>(timing.memory)) {
  if (timing_.fifo_depth < 1) throw std::invalid_argument("fifo depth must be at least 1");
  auto check = [](const KindTiming& k, const std::string& what) {
    if (k.latency < 1) throw std::invalid_argument(what + ": latency must be at least 1 cycle");
    if (k.ii < 1) throw std::invalid_argument(what + ": initiation interval must be at least 1 cycle");
  };
  check(timing_.default_kind, "default");
  for (auto& [k, v] : timing_.per_kind) check(v, k);
  if (timing_.memory.enabled && (timing_.memory.channels < 1 || timing_.memory.bytes_per_request < 1))
    throw std::invalid_argument("memory: channels and bytes_per_request must be positive");
}

Graph::Graph(size_t fifo_depth, uint64_t latency) : Graph(uniform(fifo_depth, latency)) {}

int Graph::add_node(const std::string& kind, const std::string& name,
                    const std::vector<std::pair<int, int>>& inputs, const Params& params) {
  NodePtr n = make_node(kind, name, static_cast<int>(inputs.size()), params);
  if (n->inputs().size() != inputs.size())
    throw std::invalid_argument(kind + " '" + name + "' takes " + std::to_string(n->inputs().size()) +
                                " inputs, got " + std::to_string(inputs.size()));
  int id = static_cast<int>(nodes_.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto [src, port] = inputs[i];
    if (src < 0 || src >= id)
      throw std::invalid_argument(kind + " '" + name + "': input " + std::to_string(i) + " refers to unknown node " +
                                  std::to_string(src));
    auto& outs = nodes_[src]->outputs();
    if (port < 0 || port >= static_cast<int>(outs.size()))
      throw std::invalid_argument(kind + " '" + name + "': node '" + nodes_[src]->name() + "' has no output " +
                                  std::to_string(port));
    fifos_.push_back(std::make_unique<Fifo>(timing_.fifo_depth));
    Fifo* f = fifos_.back().get();
    f->src_node = src; f->src_port = port; f->dst_node = id; f->dst_port = static_cast<int>(i);
    outs[port].push_back(f);
    n->inputs()[i] = f;
  }
  n->configure(timing_.of(kind), &timing_, memory_.get());
  nodes_.push_back(std::move(n));
  return id;
}

RunResult Graph::run(uint64_t max_cycles, bool record, bool want_spans) {
  for (auto& f : fifos_) f->set_record(record);
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (size_t p = 0; p < nodes_[i]->outputs().size(); ++p)
      if (nodes_[i]->outputs()[p].empty())
        nodes_[i]->outputs()[p].push_back(fifos_.emplace_back(std::make_unique<Fifo>(SIZE_MAX)).get());
  // Unconsumed outputs above drain into unbounded sinks so they never backpressure.
  std::vector<Node*> active;
  for (auto& n : nodes_) active.push_back(n.get());
  size_t sinks = 0;
  for (auto& n : nodes_) sinks += n->is_sink();
  if (sinks == 0) throw std::invalid_argument("graph has no writer: nothing would ever finish");
  std::vector<uint64_t> busy_until(nodes_.size(), 0);
  std::unordered_map<const Node*, int> id_of;
  for (size_t i = 0; i < nodes_.size(); ++i) id_of[nodes_[i].get()] = static_cast<int>(i);
  RunResult r;
  if (want_spans) r.spans.resize(nodes_.size());
  uint64_t cycle = 0;
  for (;; ++cycle) {
    if (cycle >= max_cycles) deadlock(cycle, "cycle limit reached");
    bool progress = false;
    size_t live_sinks = 0;
    std::vector<Node*> next;
    next.reserve(active.size());
    for (Node* n : active) {
      int id = id_of[n];
      if (cycle < busy_until[id]) {  // initiation interval not elapsed
        next.push_back(n);
        live_sinks += n->is_sink();
        progress = true;
        continue;
      }
      n->set_now(cycle);
      Step s = n->step();
      Counters& c = n->counters();
      if (s == Step::Progress) {
        progress = true;
        if (c.first_active > cycle) c.first_active = cycle;
        c.last_active = cycle;
        busy_until[id] = cycle + n->ii();
        if (want_spans) {
          auto& sp = r.spans[id];
          if (!sp.empty() && sp.back().second + 1 >= cycle) sp.back().second = cycle;
          else sp.push_back({cycle, cycle});
        }
      } else if (s == Step::StallInput) {
        ++c.stall_input;
      } else {
        ++c.stall_output;
      }
      if (!n->finished()) {
        next.push_back(n);
        live_sinks += n->is_sink();
      }
    }
    active.swap(next);
    if (live_sinks == 0) break;
    if (!progress) {
      bool in_flight = false;
      for (auto& f : fifos_) if (f->in_flight(cycle)) { in_flight = true; break; }
      if (!in_flight) deadlock(cycle, "deadlock: no node can make progress");
    }
  }
  r.cycles = cycle + 1;
  r.mem_requests = memory_->requests();
  if (record)
    for (auto& f : fifos_)
      if (f->dst_node >= 0)
        r.traces.push_back({f->src_node, f->src_port, f->dst_node, f->dst_port,
                            std::vector<Token>(f->trace().begin(), f->trace().end())});
  return r;
}

void Graph::deadlock(uint64_t cycle, const char* why) {
  std::ostringstream os;
  os << why << " at cycle " << cycle << "; blocked nodes:";
  int shown = 0;
  for (auto& n : nodes_) {
    if (n->finished()) continue;
    if (shown++ == 12) { os << " ..."; break; }
    os << "\n  " << n->name() << " (" << n->kind() << "):";
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      Fifo* f = n->inputs()[i];
      os << " in" << i << "=";
      if (f->size() == 0) os << "empty";
      else os << f->size() << (f->full() ? " full" : "") << " [" << describe(f->peek()) << "..]";
    }
    for (size_t o = 0; o < n->outputs().size(); ++o)
      for (Fifo* f : n->outputs()[o])
        if (f->full()) os << " out" << o << "=full";
  }
  throw SimError(os.str());
}

}  // namespace fuseflow::sim
