#include "fuseflow/sim/graph.h"

#include <sstream>
#include <stdexcept>
#include <map>
#include <queue>

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
  n->configure(timing_.of(kind), &timing_, memory_.get(), tiles_.get());
  nodes_.push_back(std::move(n));
  return id;
}

namespace {

// Event loop state. Nodes queued for the current cycle are stepped in id order (a topological
// order): `cur_` flags are scanned upward from the node being stepped, so a wake-up of a later
// node runs this cycle and a wake-up of an earlier one runs next cycle (`next_`). Wake-ups
// further ahead go to a calendar ring (and a map beyond the ring's reach).
class EventLoop : public Scheduler {
 public:
  explicit EventLoop(const std::vector<NodePtr>& nodes)
      : nodes_(nodes), cur_(nodes.size(), 0), next_(nodes.size(), 0), ring_(kRing) {}
  static constexpr uint64_t kRing = 256;

  void wake(int id, uint64_t at) override { schedule(id, at); }
  void wake_next(int id) override { schedule(id, cycle + 1); }

  void schedule(int id, uint64_t at) {
    if (id < 0) return;
    if (at <= cycle) {
      if (id > pos_) { cur_[id] = 1; ++n_cur_; }
      else mark_next(id);
    } else if (at == cycle + 1) {
      mark_next(id);
    } else if (at - cycle < kRing) {
      ring_[at % kRing].push_back(id);
      ++ring_count_;
    } else {
      far_[at].push_back(id);
    }
  }
  // Next node to step this cycle (ascending ids), or -1 when the cycle is done.
  int next() {
    const int n = static_cast<int>(cur_.size());
    while (n_cur_ > 0 && ++pos_ < n) {
      if (cur_[pos_]) {
        cur_[pos_] = 0;
        --n_cur_;
        if (!nodes_[pos_]->finished()) return pos_;
      }
    }
    n_cur_ = 0;
    return -1;
  }
  // Move to the next cycle with work; false when nothing is scheduled at all.
  bool advance() {
    while (true) {
      pos_ = -1;
      if (n_next_ > 0) {
        ++cycle;
        cur_.swap(next_);
        n_cur_ = n_next_;
        n_next_ = 0;
      } else if (ring_count_ > 0) {
        ++cycle;
      } else if (!far_.empty()) {
        cycle = far_.begin()->first;
      } else {
        return false;
      }
      auto& bucket = ring_[cycle % kRing];
      ring_count_ -= bucket.size();
      for (int id : bucket) add_cur(id);
      bucket.clear();
      auto it = far_.find(cycle);
      if (it != far_.end()) {
        for (int id : it->second) add_cur(id);
        far_.erase(it);
      }
      if (n_cur_ > 0) return true;
    }
  }
  uint64_t cycle = 0;

 private:
  void mark_next(int id) { if (!next_[id]) { next_[id] = 1; ++n_next_; } }
  void add_cur(int id) { if (!cur_[id]) { cur_[id] = 1; ++n_cur_; } }
  const std::vector<NodePtr>& nodes_;
  std::vector<char> cur_, next_;
  size_t n_cur_ = 0, n_next_ = 0;
  int pos_ = -1;
  std::vector<std::vector<int>> ring_;
  size_t ring_count_ = 0;
  std::map<uint64_t, std::vector<int>> far_;
};

}  // namespace

RunResult Graph::run(uint64_t max_cycles, bool record, bool want_spans,
                     const std::function<void(uint64_t)>& progress, uint64_t progress_every) {
  // Event-driven: a node is stepped only in cycles where it may progress. It runs again
  // `ii` cycles after progressing; a node stalled on input sleeps until a token pushed to one
  // of its inputs becomes visible; a node stalled on output sleeps until a consumer pops.
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (size_t p = 0; p < nodes_[i]->outputs().size(); ++p)
      if (nodes_[i]->outputs()[p].empty())  // unconsumed outputs drain into unbounded sinks
        nodes_[i]->outputs()[p].push_back(fifos_.emplace_back(std::make_unique<Fifo>(SIZE_MAX)).get());
  const int n = static_cast<int>(nodes_.size());
  size_t live_sinks = 0;
  for (auto& nd : nodes_) live_sinks += nd->is_sink();
  if (live_sinks == 0) throw std::invalid_argument("graph has no writer: nothing would ever finish");

  EventLoop loop(nodes_);
  for (auto& f : fifos_) { f->set_record(record); f->set_scheduler(&loop); }
  std::vector<uint64_t> sleep_from(n, 0), busy_until(n, 0);
  std::vector<Step> sleep_why(n, Step::Progress);
  for (int i = 0; i < n; ++i) loop.schedule(i, 0);  // pos_ is -1: all run in cycle 0
  RunResult r;
  if (want_spans) r.spans.resize(n);
  uint64_t last = 0, next_report = progress_every;
  while (live_sinks > 0) {
    int id = loop.next();
    if (id < 0) {
      if (!loop.advance()) deadlock(loop.cycle, "deadlock: no node can make progress");
      if (loop.cycle >= max_cycles) deadlock(loop.cycle, "cycle limit reached");
      if (progress && loop.cycle >= next_report) {
        progress(loop.cycle);
        next_report = loop.cycle + progress_every;
      }
      continue;
    }
    const uint64_t cycle = loop.cycle;
    if (cycle < busy_until[id]) {  // initiation interval not elapsed
      loop.schedule(id, busy_until[id]);
      continue;
    }
    Node* nd = nodes_[id].get();
    Counters& c = nd->counters();
    if (sleep_why[id] != Step::Progress && cycle > sleep_from[id] + 1) {
      uint64_t idle = cycle - sleep_from[id] - 1;
      (sleep_why[id] == Step::StallInput ? c.stall_input : c.stall_output) += idle;
    }
    nd->set_now(cycle);
    Step s = nd->step();
    sleep_why[id] = s;
    sleep_from[id] = cycle;
    if (s == Step::Progress) {
      if (c.first_active > cycle) c.first_active = cycle;
      c.last_active = cycle;
      last = cycle;
      if (want_spans) {
        auto& sp = r.spans[id];
        if (!sp.empty() && sp.back().second + 1 >= cycle) sp.back().second = cycle;
        else sp.push_back({cycle, cycle});
      }
      if (nd->finished()) {
        live_sinks -= nd->is_sink();
      } else {
        busy_until[id] = cycle + nd->ii();
        loop.schedule(id, busy_until[id]);
      }
    } else if (s == Step::StallInput) {
      ++c.stall_input;
    } else {
      ++c.stall_output;
    }
  }
  r.cycles = last + 1;
  r.mem_requests = memory_->requests();
  for (auto& f : fifos_) f->set_scheduler(nullptr);
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
