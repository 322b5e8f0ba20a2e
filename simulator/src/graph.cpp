#include "fuseflow/sim/graph.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <algorithm>
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

int Graph::begin_part() {
  if (parts_.empty() && !nodes_.empty()) throw std::invalid_argument("begin_part: nodes were added outside any part");
  int start = static_cast<int>(nodes_.size());
  parts_.push_back({start, start});
  return static_cast<int>(parts_.size()) - 1;
}

int Graph::add_node(const std::string& kind, const std::string& name,
                    const std::vector<std::pair<int, int>>& inputs, const Params& params) {
  NodePtr n = make_node(kind, name, static_cast<int>(inputs.size()), params);
  if (n->inputs().size() != inputs.size())
    throw std::invalid_argument(kind + " '" + name + "' takes " + std::to_string(n->inputs().size()) +
                                " inputs, got " + std::to_string(inputs.size()));
  int id = static_cast<int>(nodes_.size());
  // Validate every input before wiring any: a refused node must leave the graph as it was (a
  // FIFO wired from an earlier input would feed a node that does not exist; found by the
  // builder fuzz, tests/unit/test_builder_fuzz.py).
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto [src, port] = inputs[i];
    if (src < 0 || src >= id)
      throw std::invalid_argument(kind + " '" + name + "': input " + std::to_string(i) + " refers to unknown node " +
                                  std::to_string(src));
    if (port < 0 || port >= static_cast<int>(nodes_[src]->outputs().size()))
      throw std::invalid_argument(kind + " '" + name + "': node '" + nodes_[src]->name() + "' has no output " +
                                  std::to_string(port));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto [src, port] = inputs[i];
    auto& outs = nodes_[src]->outputs();
    fifos_.push_back(std::make_unique<Fifo>(timing_.fifo_depth));
    Fifo* f = fifos_.back().get();
    f->src_node = src; f->src_port = port; f->dst_node = id; f->dst_port = static_cast<int>(i);
    outs[port].push_back(f);
    n->inputs()[i] = f;
  }
  n->configure(timing_.of(kind), &timing_, memory_.get(), tiles_.get());
  n->id = id;
  nodes_.push_back(std::move(n));
  if (!parts_.empty()) parts_.back().end = id + 1;
  return id;
}

namespace {

// Event loop state. Nodes queued for the current cycle are stepped in id order (a topological
// order): `cur_` flags are scanned upward from the node being stepped, so a wake-up of a later
// node runs this cycle and a wake-up of an earlier one runs next cycle (`next_`). Wake-ups
// further ahead go to a calendar ring (and a map beyond the ring's reach).
class EventLoop final : public Scheduler {
 public:
  explicit EventLoop(const std::vector<NodePtr>& nodes)
      : nodes_(nodes), n_(static_cast<int>(nodes.size())), cur_((nodes.size() + 63) / 64, 0), ring_(kRing) {
    next_.assign(cur_.size(), 0);
  }
  static constexpr uint64_t kRing = 256;

  void schedule(int id, uint64_t at) {
    if (at == cycle + 1) mark_next(id);  // the usual case: the node's II (or a latency) of one cycle
    else schedule_other(id, at);
  }
  __attribute__((noinline)) void schedule_other(int id, uint64_t at) {
    if (id < 0) return;
    if (at <= cycle) {
      if (id > pos_) add_cur(id);
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
  // Next node to step this cycle (ascending ids), or -1 when the cycle is done. The flags are
  // bits: the scan jumps to the next set one, not over every node id.
  int next() {
    while (pos_ + 1 < n_) {
      const int from = pos_ + 1;
      const size_t w = static_cast<size_t>(from) >> 6;
      const uint64_t bits = cur_[w] & (~uint64_t{0} << (from & 63));
      if (!bits) {
        pos_ = static_cast<int>((w + 1) << 6) - 1;
        continue;
      }
      pos_ = static_cast<int>(w << 6) + __builtin_ctzll(bits);
      cur_[w] &= ~(uint64_t{1} << (pos_ & 63));
      if (!nodes_[pos_]->finished()) return pos_;
    }
    return -1;
  }
  // The cycle `advance` would move to (all ones when nothing is scheduled).
  uint64_t next_cycle() const {
    if (any_next_) return cycle + 1;
    uint64_t best = far_.empty() ? ~uint64_t{0} : far_.begin()->first;
    if (ring_count_ > 0)
      for (uint64_t c = cycle + 1; c < cycle + kRing && c < best; ++c)
        if (!ring_[c % kRing].empty()) return c;
    return best;
  }
  // Move to the next cycle with work; false when nothing is scheduled at all.
  bool advance() {
    while (true) {
      pos_ = -1;
      any_cur_ = false;
      if (any_next_) {
        ++cycle;
        cur_.swap(next_);  // next() cleared every bit of the finished cycle's flags
        any_next_ = false;
        any_cur_ = true;
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
      if (any_cur_) return true;
    }
  }

 private:
  void wake_at(int id, uint64_t at) override { schedule(id, at); }
  void add_cur(int id) {
    cur_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    any_cur_ = true;
  }
  const std::vector<NodePtr>& nodes_;
  int n_;
  std::vector<uint64_t> cur_;  // nodes to step this cycle, one bit per node id
  bool any_cur_ = false;
  int pos_ = -1;
  std::vector<std::vector<int>> ring_;
  size_t ring_count_ = 0;
  std::map<uint64_t, std::vector<int>> far_;
};

std::string cycle_limit(uint64_t max_cycles) {
  return "cycle limit reached (max_cycles = " + std::to_string(max_cycles) + "; raise it in [arch])";
}

}  // namespace

RunResult Graph::run(uint64_t max_cycles, bool record, bool want_spans,
                     const std::function<void(uint64_t)>& progress, uint64_t progress_every, Engine engine,
                     const Release& release) {
  if (max_cycles > kMaxCycle / 2)  // a queued token stamps its cycle in 48 bits (token.h)
    throw std::invalid_argument("max_cycles = " + std::to_string(max_cycles) + " is above 2^47, the most a run can count");
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (size_t p = 0; p < nodes_[i]->outputs().size(); ++p)
      if (nodes_[i]->outputs()[p].empty()) {  // unconsumed outputs drain into sinks that drop tokens
        nodes_[i]->outputs()[p].push_back(fifos_.emplace_back(std::make_unique<Fifo>(SIZE_MAX)).get());
        fifos_.back()->set_discard();
        fifos_.back()->src_node = static_cast<int>(i);
      }
  RunResult r;
  RunCtx ctx;
  if (want_spans) {
    r.spans.resize(nodes_.size());
    ctx.spans = &r.spans;
  }
  for (auto& nd : nodes_) {
    ctx.live_sinks += nd->is_sink();
    nd->freeze_ports();
  }
  if (ctx.live_sinks == 0) throw std::invalid_argument("graph has no writer: nothing would ever finish");
  if (!parts_.empty()) {
    if (!release) throw std::invalid_argument("a graph with parts runs with a release function");
    if (engine != Engine::Event) throw WindowUnsafe("a graph with parts starts them during the run: the event engine runs it");
    ctx.part_of.assign(nodes_.size(), 0);
    ctx.part_sinks.assign(parts_.size(), 0);
    for (size_t p = 0; p < parts_.size(); ++p) {
      for (int i = parts_[p].first; i < parts_[p].end; ++i) {
        ctx.part_of[i] = static_cast<int>(p);
        ctx.part_sinks[p] += nodes_[i]->is_sink();
      }
      if (ctx.part_sinks[p] == 0) throw std::invalid_argument("part " + std::to_string(p) + " has no writer");
    }
  }
  const bool resume = !resume_path_.empty();
  if (resume || ckpt_every_ >= 0) {
    const char* why = engine == Engine::Event ? "the event engine runs it"
                      : !parts_.empty()      ? "a graph with parts runs on the event engine"
                      : record || want_spans ? "traces and spans are not saved"
                      : !window_capable()    ? "the memory model needs the event engine"
                                             : nullptr;
    if (why) throw std::invalid_argument(std::string("checkpoints are taken by the window engine: ") + why);
  }
  run_start_ = last_save_ = std::chrono::steady_clock::now();
  release_timer_ = ~uint64_t{0};
  FifoBudget budget;
  budget.limit = timing_.max_fifo_mib >= (uint64_t{1} << 43) ? UINT64_MAX : timing_.max_fifo_mib << 20;
  for (auto& f : fifos_) { f->set_record(record); f->set_budget(&budget); }
  budget_ = &budget;
  try {
    if (engine != Engine::Event) {
      if (!window_capable()) throw WindowUnsafe("the memory model's shared channels need the event engine");
      std::vector<uint64_t> next;
      r.event_from =
          run_window(ctx, max_cycles, progress, progress_every, engine == Engine::WindowThenEvent, next, resume);
      if (r.event_from != kNever) {
        for (auto& f : fifos_) f->unspill();  // the event engine reads whole queues
        const Resume resume{r.event_from, next};
        run_event(ctx, max_cycles, progress, progress_every, release, &resume);
      }
    } else {
      run_event(ctx, max_cycles, progress, progress_every, release);
    }
  } catch (const FifoBudgetExceeded&) {
    over_budget();
  }
  budget_ = nullptr;
  if (spill_) {
    r.spill_queues = spill_->queues;
    r.spill_peak_bytes = spill_->peak_bytes();
    r.spill_bytes_written = spill_->bytes_written();
  }
  r.cycles = ctx.last + 1;
  r.checkpoints = checkpoints_;
  r.resumed_from = resumed_from_;
  for (auto& p : parts_) r.parts.push_back({p.start, p.finish});
  r.mem_requests = memory_->requests();
  if (record)
    for (auto& f : fifos_)
      if (f->dst_node >= 0)
        r.traces.push_back({f->src_node, f->src_port, f->dst_node, f->dst_port,
                            std::vector<Token>(f->trace().begin(), f->trace().end())});
  return r;
}

template <class Loop>
void Graph::start_parts(Loop& loop, RunCtx& ctx, const Release& release, int done, uint64_t cycle) {
  release_timer_ = ~uint64_t{0};
  for (auto [p, at] : release(done, cycle)) {
    if (p == -1) {  // call again at `at` unless a part finishes first
      release_timer_ = std::max(at, cycle);
      continue;
    }
    if (p < 0 || p >= static_cast<int>(parts_.size())) throw std::invalid_argument("release: no part " + std::to_string(p));
    Part& part = parts_[p];
    if (part.released) throw std::invalid_argument("release: part " + std::to_string(p) + " was already started");
    part.released = true;
    part.start = std::max(at, cycle);
    for (int i = part.first; i < part.end; ++i) {
      nodes_[i]->busy_until = part.start;
      nodes_[i]->sleep_from = part.start;
      loop.schedule(i, part.start);
    }
  }
}

void Graph::run_event(RunCtx& ctx, uint64_t max_cycles, const std::function<void(uint64_t)>& progress,
                      uint64_t progress_every, const Release& release, const Resume* resume) {
  // Event-driven: a node is stepped only in cycles where it may progress. It runs again
  // `ii` cycles after progressing; a node stalled on input sleeps until a token pushed to one
  // of its inputs becomes visible; a node stalled on output sleeps until a consumer pops.
  const int n = static_cast<int>(nodes_.size());
  EventLoop loop(nodes_);
  for (auto& f : fifos_) f->set_scheduler(&loop);
  struct Detach {  // the loop dies with this frame, also when a node throws
    std::vector<std::unique_ptr<Fifo>>& fifos;
    ~Detach() { for (auto& f : fifos) f->set_scheduler(nullptr); }
  } detach{fifos_};
  std::vector<int> ended;  // parts whose writers finished this cycle: released from at the next
  if (resume) {  // each node when the window engine would step it next (graphs with parts never get here)
    loop.cycle = resume->from;
    for (int i = 0; i < n; ++i) {
      Node* nd = nodes_[i].get();
      if (nd->finished()) continue;
      const uint64_t t = resume->next[i] == kNever ? nd->next_wake(nd->sleep_from) : resume->next[i];
      if (t != kNever) loop.schedule(i, std::max(t, resume->from));  // asleep until a push wakes it
    }
  } else if (parts_.empty()) {
    for (int i = 0; i < n; ++i) loop.schedule(i, 0);  // pos_ is -1: all run in cycle 0
  } else {
    start_parts(loop, ctx, release, -1, 0);
  }
  uint64_t next_report = (resume ? resume->from : 0) + progress_every, cycles_seen = 0;
  while (ctx.live_sinks > 0) {
    int id = loop.next();
    if (id < 0) {
      for (int p : ended) start_parts(loop, ctx, release, p, loop.cycle + 1);
      ended.clear();
      if (release_timer_ != ~uint64_t{0} && release_timer_ <= loop.next_cycle()) {
        // due before (or with) the next cycle that has work: the parts it starts join that cycle
        start_parts(loop, ctx, release, -2, std::max(release_timer_, loop.cycle + 1));
      }
      if (!loop.advance()) {
        for (auto& p : parts_)
          if (!p.released)
            deadlock(loop.cycle, "nothing runs and region part " + std::to_string(&p - parts_.data()) +
                                     " was never started: the strategy issued nothing");
        deadlock(loop.cycle, "deadlock: no node can make progress");
      }
      if (loop.cycle >= max_cycles) deadlock(loop.cycle, cycle_limit(max_cycles));
      if ((++cycles_seen & 0xFFF) == 0) check_time(loop.cycle);
      if (progress && loop.cycle >= next_report) {
        progress(loop.cycle);
        next_report = loop.cycle + progress_every;
      }
      continue;
    }
    const uint64_t cycle = loop.cycle;
    Node* nd = nodes_[id].get();
    if (cycle < nd->busy_until) {  // initiation interval not elapsed
      loop.schedule(id, nd->busy_until);
      continue;
    }
    if (nd->step_at(cycle, ctx) == Step::Progress && !nd->finished()) loop.schedule(id, nd->busy_until);
    if (!ctx.done_parts.empty()) {  // a part's last writer finished: its other nodes stop now
      for (int p : ctx.done_parts) {
        parts_[p].finish = cycle + 1;
        for (int i = parts_[p].first; i < parts_[p].end; ++i) nodes_[i]->retire();
        ended.push_back(p);
      }
      ctx.done_parts.clear();
    }
  }
}

uint64_t Graph::run_window(RunCtx& ctx, uint64_t max_cycles, const std::function<void(uint64_t)>& progress,
                           uint64_t progress_every, bool handoff, std::vector<uint64_t>& next, bool resume) {
  // Windows of `window` cycles (window_cycles: shorter for shallow FIFOs). Within one, nodes
  // run in id (topological) order, each through
  // every cycle of the window in which the event engine would step it: the cycle its II ends
  // after progress, or, after a stall on input, the next cycle at which a queued input token
  // becomes visible. Tokens visible inside the window were pushed by producers (lower ids)
  // earlier in this pass, so each node sees exactly what it would see cycle by cycle.
  const uint64_t window = spill_window(window_cycles(timing_.fifo_depth));
  const int n = static_cast<int>(nodes_.size());
  for (auto& f : fifos_) f->set_scheduler(nullptr);
  // A node pushes at most a few tokens a step into one FIFO (a reduce: a value and a stop); with
  // room for handoff_room in every FIFO, none fills within the window.
  const size_t handoff_room = 4 * window;
  if (timing_.spill_tokens > 0) {  // a spilled queue keeps 4 windows' reads in memory (Fifo::settle)
    budget_->reserve = handoff_room;
    budget_->chunk = handoff_room / 4;  // what a spilled queue holds in memory beside its ring: two slots
    budget_->spill_tokens = timing_.spill_tokens;
    const char* dir = std::getenv("TMPDIR");
    spill_ = std::make_unique<SpillStore>(budget_->chunk * 16, dir && *dir ? dir : "/tmp");
    budget_->store = spill_.get();
  }
  next.assign(n, 0);  // the cycle each node is stepped next (kNever: when an input or a pop wakes it)
  uint64_t start = 0;
  if (resume) {
    load_state(start, next, ctx);
    resumed_from_ = start;
  }
  uint64_t next_report = start + progress_every;
  std::vector<int> ids(n), order;
  for (int i = 0; i < n; ++i) ids[i] = i;
  std::vector<Fifo*> filling, logged;
  while (true) {
    // Spilled queues first: a checkpoint then saves each as its ring followed by its middle.
    for (size_t i = 0; i < budget_->candidates.size(); ++i) budget_->candidates[i]->settle(handoff_room);
    if (ckpt_every_ >= 0 && !(resume && start == resumed_from_)) {  // between windows: nothing half done
      const auto now = std::chrono::steady_clock::now();
      if (ckpt_every_ == 0 || std::chrono::duration<double>(now - last_save_).count() >= ckpt_every_) {
        save_state(start, next, ctx);
        last_save_ = now;
        ++checkpoints_;
      }
    }
    // A FIFO that could fill in this window (less room than handoff_room): its consumer runs
    // first when that is exact (backpressure_order), else the event engine takes over (handoff).
    filling.clear();
    for (auto& f : fifos_)
      if (f->dst_node >= 0 && f->space() < handoff_room) filling.push_back(f.get());
    const std::vector<int>* run_order = &ids;
    if (!filling.empty()) {
      if (backpressure_order(filling, handoff_room, order)) {
        run_order = &order;
        for (Fifo* f : filling) {
          f->log_pops(true);
          nodes_[f->src_node]->waits_on_pops = true;
        }
        logged.swap(filling);
      } else if (handoff) {
        return start;
      }
    }
    const uint64_t end = std::min(start + window, max_cycles);
    for (int id : *run_order) {
      Node* nd = nodes_[id].get();
      if (nd->finished()) continue;
      uint64_t t = next[id];
      if (t == kNever)  // asleep: an input token becoming visible, or a pop on a full output, wakes it
        t = nd->last_outcome == Step::StallOutput ? nd->next_room(nd->sleep_from) : nd->next_wake(nd->sleep_from);
      if (t == Node::kNoLog) t = kNever;
      next[id] = t < end ? nd->run_until(t, end, ctx) : t;
    }
    for (Fifo* f : logged) {
      f->log_pops(false);
      nodes_[f->src_node]->waits_on_pops = false;
    }
    logged.clear();
    if (ctx.live_sinks == 0) break;
    uint64_t soonest = kNever;
    for (int id = 0; id < n; ++id)
      if (!nodes_[id]->finished()) soonest = std::min(soonest, next[id]);
    if (end >= max_cycles) deadlock(max_cycles, cycle_limit(max_cycles));
    check_time(end);
    if (soonest == kNever) deadlock(ctx.last + 1, "deadlock: no node can make progress");
    start = std::max(end, soonest);
    if (progress && start >= next_report) {
      progress(start);
      next_report = start + progress_every;
    }
  }
  // The event engine stops right after the last writer finishes; a node that acted later (one
  // feeding no writer) would make this run's counters differ from it.
  for (auto& nd : nodes_)
    if (nd->sleep_from > ctx.end_cycle || (nd->sleep_from == ctx.end_cycle && nd->id > ctx.end_sink))
      throw WindowUnsafe("node '" + nd->name() + "' acts after the last writer finished");
  return kNever;
}

namespace {
constexpr char kStateMagic[8] = {'F', 'F', 'C', 'H', 'K', 'P', 'T', '1'};
constexpr uint32_t kStateVersion = 1;
}  // namespace

void Graph::set_checkpoint(const std::string& path, const std::string& key, double every_seconds) {
  if (every_seconds < 0) throw std::invalid_argument("checkpoint interval must be at least 0 seconds");
  ckpt_path_ = path; ckpt_key_ = key; ckpt_every_ = every_seconds;
}

void Graph::set_resume(const std::string& path, const std::string& key) { resume_path_ = path; resume_key_ = key; }

void Graph::save_state(uint64_t start, const std::vector<uint64_t>& next, const RunCtx& ctx) {
  const std::string tmp = ckpt_path_ + ".tmp";
  {
    StateOut o(tmp);
    o.bytes(kStateMagic, sizeof kStateMagic);
    o.pod(kStateVersion);
    o.str(ckpt_key_);
    o.pod(static_cast<uint64_t>(nodes_.size()));
    o.pod(static_cast<uint64_t>(fifos_.size()));
    o.pod(start);
    o.vec(next);
    o.pod(ctx.live_sinks); o.pod(ctx.last); o.pod(ctx.end_cycle); o.pod(ctx.end_sink);
    o.vec(tiles_->arena());
    for (const auto& f : fifos_) f->save(o);
    for (const auto& nd : nodes_) nd->save(o);
    o.close();
  }
  if (std::rename(tmp.c_str(), ckpt_path_.c_str()) != 0) throw SimError("checkpoint: cannot write " + ckpt_path_);
}

void Graph::load_state(uint64_t& start, std::vector<uint64_t>& next, RunCtx& ctx) {
  StateIn in(resume_path_);
  char magic[sizeof kStateMagic];
  in.bytes(magic, sizeof magic);
  if (std::memcmp(magic, kStateMagic, sizeof magic) != 0) in.refuse("not a fuseflow checkpoint");
  if (in.pod<uint32_t>() != kStateVersion)
    in.refuse("a checkpoint of another format version (this build reads " + std::to_string(kStateVersion) + ")");
  if (in.str() != resume_key_) in.refuse("saved from another graph, other inputs, another arch or another simulator build");
  if (in.pod<uint64_t>() != nodes_.size() || in.pod<uint64_t>() != fifos_.size()) in.refuse("its graph has other nodes");
  in.pod(start);
  in.vec(next);
  if (next.size() != nodes_.size()) in.refuse("its graph has other nodes");
  in.pod(ctx.live_sinks); in.pod(ctx.last); in.pod(ctx.end_cycle); in.pod(ctx.end_sink);
  in.vec(tiles_->arena());
  for (auto& f : fifos_) f->load(in);
  for (auto& nd : nodes_) nd->load(in);
}

uint64_t Graph::spill_window(uint64_t window) const {
  // A spilled queue keeps 4 windows' reads in memory and spills past 2 of those: windows short
  // enough that spill_tokens holds 8 of them, and at least 16 cycles (a primitive looks a few
  // tokens past what it reads, Fifo::kLookahead: spill_tokens below 128 act as 128).
  if (timing_.spill_tokens == 0) return window;
  while (window > 16 && 8 * window > timing_.spill_tokens) window /= 2;
  return window;
}

uint64_t Graph::window_cycles(size_t fifo_depth) {
  // A FIFO that could fill (less room than 4 windows' pushes) must hold 4 windows' pops to run
  // consumer first (backpressure_order): both hold when a window is at most an eighth of the
  // depth. Shorter windows cost the hot loop more per event (docs/simulator-performance.md),
  // so the window is the longest that allows it, 64 to 1,024 cycles.
  uint64_t w = 1024;
  while (w > 64 && w * 8 > fifo_depth) w /= 2;
  return w;
}

bool Graph::backpressure_order(const std::vector<Fifo*>& filling, uint64_t reach, std::vector<int>& order) const {
  // A FIFO holding `reach` tokens or more is pre-buffered: its consumer cannot get to a token
  // pushed in this window, so it may run before its producer. A filling FIFO must be, and its
  // consumer runs first (its pops are logged for the producer). Every other FIFO's producer runs
  // before its consumer, as in every window. When these constraints have a cycle (a path around
  // a filling FIFO's consumer that is not pre-buffered), the window cannot run exactly.
  const int n = static_cast<int>(nodes_.size());
  for (Fifo* f : filling)
    if (f->size() < reach) return false;
  std::vector<std::vector<int>> after(n);
  std::vector<int> indegree(n, 0);
  for (auto& f : fifos_) {
    if (f->dst_node < 0 || f->src_node < 0) continue;
    const bool fills = std::find(filling.begin(), filling.end(), f.get()) != filling.end();
    if (!fills && f->size() >= reach) continue;
    const int a = fills ? f->dst_node : f->src_node, b = fills ? f->src_node : f->dst_node;
    after[a].push_back(b);
    ++indegree[b];
  }
  order.clear();
  for (int i = 0; i < n; ++i)
    if (indegree[i] == 0) order.push_back(i);
  for (size_t k = 0; k < order.size(); ++k)
    for (int b : after[order[k]])
      if (--indegree[b] == 0) order.push_back(b);
  return static_cast<int>(order.size()) == n;
}

void Graph::over_budget() {
  std::vector<Fifo*> by_size;
  for (auto& f : fifos_) by_size.push_back(f.get());
  std::sort(by_size.begin(), by_size.end(), [](Fifo* a, Fifo* b) { return a->size() > b->size(); });
  std::ostringstream os;
  os << "the FIFOs hold more than max_fifo_mib = " << timing_.max_fifo_mib
     << " MiB of queued tokens (a fast producer runs far ahead of a slow consumer; set a finite fifo_depth "
        "to model backpressure, or raise max_fifo_mib); fullest:";
  for (size_t k = 0; k < by_size.size() && k < 3 && by_size[k]->size() > 0; ++k) {
    Fifo* f = by_size[k];
    os << "\n  " << nodes_[f->src_node]->name() << " -> " << nodes_[f->dst_node]->name() << ": " << f->size()
       << " tokens";
  }
  throw SimError(os.str());
}

void Graph::check_time(uint64_t cycle) const {
  if (timing_.max_seconds == 0) return;
  const auto spent = std::chrono::steady_clock::now() - run_start_;
  if (spent < std::chrono::seconds(timing_.max_seconds)) return;
  throw SimError("time limit reached: the run took longer than max_seconds = " + std::to_string(timing_.max_seconds) +
                 " s (stopped at cycle " + std::to_string(cycle) +
                 "); raise max_seconds in [arch] or simulate a smaller input");
}

void Graph::deadlock(uint64_t cycle, const std::string& why) {
  std::ostringstream os;
  os << why << " at cycle " << cycle << "; blocked nodes:";
  int shown = 0;
  for (auto& n : nodes_) {
    if (n->finished()) continue;
    bool waiting = false;  // nodes of parts never started are not stuck
    for (auto& p : parts_) waiting |= !p.released && n->id >= p.first && n->id < p.end;
    if (waiting) continue;
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
