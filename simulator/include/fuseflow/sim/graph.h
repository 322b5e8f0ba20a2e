// A dataflow graph of primitives connected by FIFOs, and the cycle loop that runs it.
#pragma once
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuseflow/sim/primitives.h"
#include "fuseflow/sim/timing.h"

namespace fuseflow::sim {

struct Edge { int src, src_port, dst, dst_port; std::vector<Token> tokens; };

// How a run is scheduled; both give the same cycles, outputs and counters (tested on every
// compiled graph). `Event` steps nodes cycle by cycle from a global wake-up calendar and handles
// every timing model. `Window` steps each node, in topological order, through a window of
// cycles before moving to the next node: valid because every edge has latency >= 1, so a node's
// inputs for the window are known once its producers have run it. It needs FIFOs that never fill
// and no shared memory channels, and throws WindowUnsafe when a run breaks that. `WindowThenEvent`
// runs the window engine until, at a window's start, some FIFO has no room for a window's tokens,
// and the event engine from that cycle on: the state between two windows is the state the event
// engine has after the same cycles.
enum class Engine { Event, Window, WindowThenEvent };

// A part of a graph: the nodes one region adds (ids [first, end)), started when the run's
// release function says. A graph without parts is one part started at cycle 0. Parts share the
// run's memory model, so regions that run at the same time contend for its channels.
struct Part {
  int first = 0, end = 0;
  size_t sinks = 0;
  bool released = false;
  uint64_t start = 0, finish = 0;  // cycles: first in which its nodes may act, one past its last writer
};
// Called when part `done` has finished at `cycle` (-1 and 0 before the run starts; -2 when the
// timer it asked for is due, at that cycle); returns the parts to start and the cycle each starts
// at (at least `cycle`). An entry (-1, t) asks to be called again at cycle t unless a part
// finishes first (the caller's own events of known time, such as modelled host tasks); every
// call replaces the timer the last one asked for.
using Release = std::function<std::vector<std::pair<int, uint64_t>>(int done, uint64_t cycle)>;

struct RunResult {
  uint64_t cycles = 0;
  std::vector<std::pair<uint64_t, uint64_t>> parts;  // per part: start, finish
  uint64_t mem_requests = 0;
  uint64_t event_from = kNever;  // WindowThenEvent: the cycle the event engine took over
  std::vector<Edge> traces;  // filled when recording
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> spans;  // per node active [start, end]
  uint64_t checkpoints = 0;          // states saved (set_checkpoint)
  uint64_t resumed_from = kNever;    // the cycle a resumed run continued from (set_resume)
  int spill_queues = 0;              // FIFOs whose middle went to disk (Timing::spill_tokens)
  uint64_t spill_peak_bytes = 0, spill_bytes_written = 0;
};

class Graph {
 public:
  explicit Graph(const Timing& timing);
  // Uniform timing: every edge holds fifo_depth tokens; every node has this latency, II 1.
  Graph(size_t fifo_depth, uint64_t latency);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Add a primitive fed by (node, output port) pairs; returns its id.
  int add_node(const std::string& kind, const std::string& name,
               const std::vector<std::pair<int, int>>& inputs, const Params& params);
  // Nodes added from now on form a new part; returns its id (runs with parts need `release`).
  int begin_part();
  size_t parts() const { return parts_.size(); }
  // Run to completion; throws SimError on deadlock or when max_cycles is reached.
  // `progress(cycle)` is called every `progress_every` simulated cycles (it may throw to stop).
  RunResult run(uint64_t max_cycles, bool record, bool spans = false,
                const std::function<void(uint64_t)>& progress = {}, uint64_t progress_every = 1 << 20,
                Engine engine = Engine::Event, const Release& release = {});
  // Checkpoints (state.h): the window engine saves the run's whole state to `path` at the start
  // of a window once `every_seconds` have passed since the last save (0: every window), writing
  // `path`.tmp and renaming it, so the file always holds a whole state. `key` names the graph,
  // its inputs and the simulator build (the caller's): set_resume refuses a file of another key.
  // A run that hands over to the event engine saves no more states from there.
  void set_checkpoint(const std::string& path, const std::string& key, double every_seconds);
  // Continue from a saved state (the graph built as before): identical cycles, counters, outputs.
  void set_resume(const std::string& path, const std::string& key);
  // True when the window engine can run this graph's timing (memory model off).
  bool window_capable() const { return !timing_.memory.enabled; }
  size_t size() const { return nodes_.size(); }
  Node& node(size_t i) { return *nodes_.at(i); }

 private:
  [[noreturn]] void deadlock(uint64_t cycle, const std::string& why);
  void check_time(uint64_t cycle) const;  // a run past max_seconds stops with an error naming the limit
  std::chrono::steady_clock::time_point run_start_;
  [[noreturn]] void over_budget();
  // From cycle 0, or from `resume->from`, each node stepped next at `resume->next` (the window
  // engine's hand-off).
  struct Resume { uint64_t from; const std::vector<uint64_t>& next; };
  void run_event(RunCtx& ctx, uint64_t max_cycles, const std::function<void(uint64_t)>& progress,
                 uint64_t progress_every, const Release& release, const Resume* resume = nullptr);
  template <class Loop> void start_parts(Loop& loop, RunCtx& ctx, const Release& release, int done, uint64_t cycle);
  // The window engine's window for FIFOs of this depth (cycles; Graph::run_window).
  static uint64_t window_cycles(size_t fifo_depth);
  uint64_t spill_window(uint64_t window) const;
  // Returns kNever when the run ended, or (with `handoff`) the cycle from which the event engine
  // continues, `next` then holding the cycle each node is stepped next (kNever: when an input arrives).
  // The order of one window's nodes with each `filling` FIFO's consumer before its producer, when
  // that runs the window exactly (Graph::run_window); false when it cannot.
  bool backpressure_order(const std::vector<Fifo*>& filling, uint64_t reach, std::vector<int>& order) const;
  uint64_t run_window(RunCtx& ctx, uint64_t max_cycles, const std::function<void(uint64_t)>& progress,
                      uint64_t progress_every, bool handoff, std::vector<uint64_t>& next, bool resume = false);
  Timing timing_;
  std::unique_ptr<Memory> memory_;
  std::unique_ptr<TileStore> tiles_ = std::make_unique<TileStore>();
  std::vector<NodePtr> nodes_;
  std::vector<std::unique_ptr<Fifo>> fifos_;
  std::vector<Part> parts_;
  uint64_t release_timer_ = ~uint64_t{0};  // the cycle `release` asked to be called at (none: all ones)
  void save_state(uint64_t start, const std::vector<uint64_t>& next, const RunCtx& ctx);
  void load_state(uint64_t& start, std::vector<uint64_t>& next, RunCtx& ctx);
  std::string ckpt_path_, ckpt_key_, resume_path_, resume_key_;
  double ckpt_every_ = -1;  // < 0: no checkpoints
  std::chrono::steady_clock::time_point last_save_;
  uint64_t checkpoints_ = 0, resumed_from_ = kNever;
  FifoBudget* budget_ = nullptr;              // the running run's (Graph::run)
  std::unique_ptr<SpillStore> spill_;         // queues' middles on disk (Timing::spill_tokens)
};

}  // namespace fuseflow::sim
