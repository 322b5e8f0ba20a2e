// The node base class: ports, counters and the per-cycle step contract.
#pragma once
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fuseflow/sim/state.h"
#include "fuseflow/sim/tile.h"
#include "fuseflow/sim/timing.h"
#include "fuseflow/sim/token.h"

// The per-token helpers are small and called once per token: inline them into every step.
#define FF_INLINE inline __attribute__((always_inline))

namespace fuseflow::sim {

struct Counters {
  uint64_t tokens_in = 0, tokens_out = 0;
  uint64_t mem_reads = 0, mem_writes = 0;  // bytes
  uint64_t mem_lines = 0;                  // lines requested from the memory model for reads
  uint64_t alu_ops = 0, reductions = 0;
  uint64_t stall_input = 0, stall_output = 0;
  uint64_t first_active = std::numeric_limits<uint64_t>::max(), last_active = 0;
};

enum class Step { Progress, StallInput, StallOutput };

// What one run tracks across nodes (shared by both engines, graph.h).
struct RunCtx {
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>>* spans = nullptr;  // per node, when recording
  size_t live_sinks = 0;
  uint64_t last = 0;       // last cycle in which any node progressed
  uint64_t end_cycle = 0;  // cycle in which the last writer finished ...
  int end_sink = -1;       // ... and its id (the event engine stops right after it)
  // Runs of several parts (graph.h, Graph::begin_part): each node's part, each part's writers
  // still running, and the parts whose last writer finished since the loop last looked.
  std::vector<int> part_of;
  std::vector<size_t> part_sinks;
  std::vector<int> done_parts;
};
constexpr uint64_t kNever = UINT64_MAX;

// Scalar/array parameters a node is built from (filled from Python).
// A tensor's level or value array, read-only and shared by every node that reads it (a 123k-node
// region reads one tensor from thousands of scanners and loads; a copy each would not fit).
template <typename T>
using SharedArray = std::shared_ptr<const std::vector<T>>;

struct Params {
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> floats;
  std::map<std::string, std::string> strings;
  std::map<std::string, SharedArray<int64_t>> int_arrays;
  std::map<std::string, SharedArray<float>> float_arrays;
  int64_t get_int(const std::string& k) const;
  int64_t get_int(const std::string& k, int64_t dflt) const;
  double get_float(const std::string& k, double dflt) const;
  std::string get_string(const std::string& k, const std::string& dflt) const;
  const std::vector<int64_t>& get_ints(const std::string& k) const;
  const std::vector<float>& get_floats(const std::string& k) const;
  // The same arrays, shared: a node that keeps an array holds one of these, never a copy.
  SharedArray<int64_t> shared_ints(const std::string& k) const;
  SharedArray<float> shared_floats(const std::string& k) const;
};

class Node {
 public:
  Node(std::string name, std::string kind, int n_in, int n_out)
      : name_(std::move(name)), kind_(std::move(kind)), in_(n_in, nullptr), out_(n_out) {}
  virtual ~Node() = default;

  // Advance one cycle; must not consume or produce more than the ports allow. A step that
  // stalls changes nothing, so stepping a node in extra cycles never changes a run.
  virtual Step step() = 0;
  // Window engine: step at `t` and at every later cycle before `end` in which the event engine
  // would step this node; returns the next such cycle (kNever once finished, or when only a
  // token not yet pushed can wake it). Implemented once, by Stepped.
  virtual uint64_t run_until(uint64_t t, uint64_t end, RunCtx& ctx) = 0;
  // step() at `cycle` with the run's bookkeeping: stall accounting, II, spans, the run's end.
  Step step_at(uint64_t cycle, RunCtx& ctx) {
    before_step(cycle);
    Step s = step();
    after_step(s, cycle, ctx);
    return s;
  }
  // The earliest cycle after `now` at which an input token becomes visible (kNever: none queued).
  uint64_t next_wake(uint64_t now) const {
    uint64_t best = kNever;
    for (const Fifo* f : in_)
      if (f) best = std::min(best, f->next_visible_after(now));
    return best;
  }
  int id = -1;                 // position in the graph (a topological order)
  uint64_t busy_until = 0;     // the initiation interval ends
  uint64_t sleep_from = 0;     // cycle of the last step
  Step last_outcome = Step::Progress;
  // Writers are sinks: the run ends when every sink is finished.
  virtual bool is_sink() const { return false; }
  // A checkpoint of the node's state between two windows (Graph::run, state.h): the base's
  // fields; a primitive with state of its own saves it after them (most have none).
  virtual void save(StateOut& o) const { save_base(o); }
  virtual void load(StateIn& in) { load_base(in); }

  bool finished() const { return finished_; }
  // Stop a node whose part has ended (its writers are done): the event engine ends a lone graph
  // right after its last writer, so the part's other nodes must not act afterwards either.
  void retire() { finished_ = true; }
  const std::string& name() const { return name_; }
  const std::string& kind() const { return kind_; }
  Counters& counters() { return c_; }
  const Counters& counters() const { return c_; }
  std::vector<Fifo*>& inputs() { return in_; }
  std::vector<std::vector<Fifo*>>& outputs() { return out_; }
  void set_now(uint64_t now) {
    now_ = now;
    out_at_ = now + latency_;
    if (step_costs_) {  // the last step worked on a tile or waited on memory (occupy, request_lines)
      mem_ready_ = busy_ = tile_latency_ = 0;
      step_costs_ = false;
    }
  }
  // The ports are wired: cache each port's lone FIFO (most have one consumer) for emit and room.
  void freeze_ports() {
    for (size_t o = 0; o < kFastPorts; ++o) lone_[o] = o < out_.size() && out_[o].size() == 1 ? out_[o][0] : nullptr;
  }
  void configure(const KindTiming& t, const Timing* timing, Memory* mem, TileStore* tiles) {
    latency_ = t.latency; ii_ = t.ii; timing_ = timing; mem_ = mem; tiles_ = tiles;
  }
  // Cycles until the node may act again: its II, or longer after working on a large tile.
  uint64_t ii() const { return busy_ > ii_ ? busy_ : ii_; }
  // Every step costs the node's II and no memory line: bulk runs apply (the window engine never
  // runs the memory model; tile nodes have no bulk run).
  bool plain_steps() const { return !(mem_ && mem_->enabled()) && busy_ == 0 && !waits_on_pops; }
  // Set while an output FIFO logs its consumer's pops (Graph::run_window): the room a bulk run
  // would count changes from step to step, so the node steps one by one.
  bool waits_on_pops = false;
  // After a stall on output at `c`: the cycle after the first logged pop at or after `c` on an
  // output (the event engine wakes a producer the cycle after a pop); kNever when none is logged
  // yet in this window; kNoLog when no output logs pops (a FIFO filled outside a backpressure
  // window: the window engine cannot run it).
  uint64_t next_room(uint64_t c) const {
    uint64_t best = kNever;
    bool logged = false;
    for (const auto& port : out_)
      for (const Fifo* f : port)
        if (f->logging()) {
          logged = true;
          const uint64_t p = f->first_pop_from(c);
          if (p != Fifo::kNoPop) best = std::min(best, p + 1);
        }
    return logged ? best : kNoLog;
  }
  static constexpr uint64_t kNoLog = kNever - 1;

 protected:
  bool has(int i, size_t k = 0) const { return in_[i]->ready(now_, k); }  // add_node connects every input
  Token peek(int i, size_t k = 0) const { return in_[i]->peek(k); }
  FF_INLINE Token take(int i) { Token t = in_[i]->peek(); in_[i]->pop(now_); ++c_.tokens_in; return t; }
  FF_INLINE bool room(int o, size_t n = 1) const {
    if (__builtin_expect(waits_on_pops, false)) return room_logged(o, n);
    if (Fifo* f = lone(o)) return f->has_room(n);
    for (auto* f : out_[o]) if (!f->has_room(n)) return false;
    return true;
  }
  // room() while an output logs its consumer's pops: each FIFO as the step at now_ sees it.
  __attribute__((noinline)) bool room_logged(int o, size_t n) const {
    for (auto* f : out_[o]) if (!f->has_room(n, now_)) return false;
    return true;
  }
  FF_INLINE void emit(int o, Token t) {
    if (Fifo* f = lone(o)) f->push(t, out_at_);
    else for (auto* f : out_[o]) f->push(t, out_at_);
    ++c_.tokens_out;
  }
  // Bulk runs (Stepped::run_until): a primitive's `bulk(t, n)` does what up to `n` calls of step()
  // at cycles t, t + ii, t + 2 ii, ... would do while each of them progresses without finishing,
  // and returns how many it did. These helpers are its view of the ports: which queued tokens the
  // run's steps find visible, and outputs stamped with each step's own cycle.
  // How many of input i's first `n` tokens the steps of a run from `t` find visible and accept.
  template <class P>
  FF_INLINE uint64_t ready_run(int i, uint64_t t, uint64_t n, P&& accept) const {
    return in_[i]->ready_run(t, ii_, n, accept);
  }
  FF_INLINE Fifo::View view(int i) const { return in_[i]->view(); }
  FF_INLINE void take_n(int i, size_t k) { in_[i]->pop_n(k, now_, ii_); c_.tokens_in += k; }
  // The outputs of `k` steps from `t` on port `o`: the j-th step's token is `make(j)` (called
  // once per FIFO of the port, so it must not change state).
  template <class F>
  FF_INLINE void emit_run(int o, uint64_t t, uint64_t k, F&& make) {
    if (k == 0) return;
    const uint64_t first = t + latency_;
    if (Fifo* f = lone(o)) f->push_run(k, first, ii_, make);
    else for (auto* f : out_[o]) f->push_run(k, first, ii_, make);
    c_.tokens_out += k;
  }
  // One-pass bulk runs: a run that reads its inputs and writes its output in the same loop
  // (Fifo::Tail) needs port `o` to be one FIFO without hooks; nullptr sends it to the two-pass
  // form (ready_run, then emit_run).
  FF_INLINE Fifo* plain_out(int o) const {
    Fifo* f = lone(o);
    return f && !f->hooked() ? f : nullptr;
  }
  // The first `k` tokens written through `f`'s Tail are queued (a one-pass run's emit_run).
  FF_INLINE void emitted(Fifo* f, uint64_t k) {
    f->commit(k);
    c_.tokens_out += k;
  }
  FF_INLINE const Fifo* input(int i) const { return in_[i]; }
  // A one-pass run from input 0 into `out` (plain_out(0)), one token in and one out a step:
  // `map(in, &result)` makes the step's output, or returns false where step() would act
  // differently. Consumes and queues what the run did; returns its steps.
  template <class F>
  FF_INLINE uint64_t map_run(Fifo* out, uint64_t t, uint64_t n, F&& map) {
    const uint64_t cap = std::min<uint64_t>({n, out->space(), in_[0]->size()});
    const Fifo::View in0 = view(0);
    const Fifo::Tail dst = out->tail(cap);
    const uint64_t ii = ii_, lat = latency_;
    const uint64_t k = by_chunks(
        cap, [&](uint64_t j) { return std::min(in0.contiguous(j), dst.contiguous(j)); },
        [&](uint64_t k0, uint64_t len) {
          const auto* x = in0.at(k0);
          auto* o = dst.at(k0);
          uint64_t at = t + k0 * ii, j = 0;
          for (Token r; j < len; ++j, at += ii) {
            if (x[j].visible() > at || !map(x[j].token(), &r)) break;
            Fifo::set(o[j], r, at + lat);
          }
          return j;
        });
    emitted(out, k);
    take_n(0, k);
    return k;
  }
  // A one-pass run's steps 0..cap-1 in chunks over which no ring wraps (`len_at(k)`: the entries
  // back to back from step k on, over every ring the run touches), so the loop walks pointers:
  // `chunk(k, len)` does up to `len` steps from step k and returns how many; a short one ends it.
  template <class L, class C>
  static FF_INLINE uint64_t by_chunks(uint64_t cap, L&& len_at, C&& chunk) {
    uint64_t k = 0;
    while (k < cap) {
      const uint64_t len = std::min<uint64_t>(cap - k, len_at(k));
      const uint64_t done = chunk(k, len);
      k += done;
      if (done < len) break;
    }
    return k;
  }
  // Tokens port `o` can take before one of its FIFOs is full.
  FF_INLINE uint64_t space(int o) const {
    if (Fifo* f = lone(o)) return waits_on_pops ? f->space(now_) : f->space();
    uint64_t s = UINT64_MAX;
    for (auto* f : out_[o]) s = std::min<uint64_t>(s, waits_on_pops ? f->space(now_) : f->space());
    return s;
  }
  // Account a memory access of `bytes` at byte address `addr` of array `slot`; with the memory
  // model on, this step's outputs wait for the line to arrive. An access whose address comes
  // from a line arriving at `after` (a fiber's bounds, read from its `seg` line) asks for its
  // lines from then on.
  void mem_access(int slot, int64_t addr, int bytes, bool write, uint64_t after = 0) {
    (write ? c_.mem_writes : c_.mem_reads) += bytes;
    if (mem_ && mem_->enabled()) request_lines(slot, addr, bytes, write, after);
  }
  // This step's outputs wait until `ready` (a line an earlier step asked for, whose contents
  // they depend on).
  void wait_until(uint64_t ready) {
    if (ready <= now_) return;
    mem_ready_ = std::max(mem_ready_, ready);
    step_costs_ = true;
    refresh_out_at();
  }
  // The cycle the lines this step asked for arrive (0: none).
  uint64_t lines_ready() const { return mem_ready_; }
  void request_lines(int slot, int64_t addr, int bytes, bool write, uint64_t after = 0);
  void finish() { finished_ = true; }
  // Aligned value inputs all hold the control token `a` (a stop or D): consume one from each
  // input, forward it once; D finishes the node.
  Step forward_aligned_control(const Token& a) {
    for (size_t i = 1; i < in_.size(); ++i)
      if (peek(static_cast<int>(i)).kind != a.kind || peek(static_cast<int>(i)).level != a.level)
        protocol_error("value streams are misaligned");
    Token t = a;
    for (size_t i = 0; i < in_.size(); ++i) take(static_cast<int>(i));
    emit(0, t);
    if (t.is_done()) finish();
    return Step::Progress;
  }
  // This step works on a tile of `rank` axes of extent b (timing.h: matmul vs vector unit).
  void occupy(size_t rank, int b) {
    uint64_t ub = static_cast<uint64_t>(b), e = 1;
    for (size_t i = 0; i < rank; ++i) e *= ub;
    uint64_t mm = timing_ ? timing_->tile_matmul_ii_per_b : 1, ew = timing_ ? timing_->tile_elementwise_ii_per_b : 1;
    uint64_t busy = rank >= 3 ? ub * mm : ((e + ub - 1) / ub) * ew;
    uint64_t lat = rank >= 3 ? 2 * ub - 1 : e;
    busy_ = std::max<uint64_t>(busy_, busy);
    tile_latency_ = std::max<uint64_t>(tile_latency_, lat);
    step_costs_ = true;
    refresh_out_at();
  }
  // When this step's outputs become visible: after the latency (or the tile's), and not before
  // the memory lines it read arrive.
  void refresh_out_at() { out_at_ = std::max(now_ + std::max(latency_, tile_latency_), mem_ready_); }
  // Follow a parent stream one fiber at a time: a child stop S(k) consumes the
  // parent's element for that fiber and, for k > 0, the parent's S(k-1).
  // Returns false (consuming nothing) if the needed parent tokens are not ready.
  bool follow_parent(int port, int k);
  // True when follow_parent(port, k) would succeed (consumes nothing).
  bool parent_ready(int port, int k) const;
  [[noreturn]] void protocol_error(const std::string& what) const;
  // A reference past the end of the array it indexes (`n` entries). Out of line and cold: the
  // message is built only on failure, so the step's hot path keeps a small frame.
  [[noreturn]] __attribute__((noinline, cold)) void out_of_range(const char* what, int64_t ref, size_t n) const;

  void save_base(StateOut& o) const {
    o.str(kind_);
    o.str(name_);
    o.pod(busy_until); o.pod(sleep_from); o.pod(last_outcome); o.pod(finished_); o.pod(c_);
    o.pod(now_); o.pod(mem_ready_); o.pod(busy_); o.pod(tile_latency_); o.pod(out_at_); o.pod(step_costs_);
    o.pod(static_cast<uint64_t>(lines_.size()));
    for (const auto& [slot, line] : lines_) { o.pod(slot); o.pod(line.first); o.pod(line.second); }
  }
  void load_base(StateIn& in) {
    if (in.str() != kind_ || in.str() != name_) in.refuse("node " + name_ + " (" + kind_ + ") is not the node saved here: another graph");
    in.pod(busy_until); in.pod(sleep_from); in.pod(last_outcome); in.pod(finished_); in.pod(c_);
    in.pod(now_); in.pod(mem_ready_); in.pod(busy_); in.pod(tile_latency_); in.pod(out_at_); in.pod(step_costs_);
    lines_.clear();
    for (uint64_t k = in.pod<uint64_t>(); k > 0; --k) {
      const int slot = in.pod<int>();
      const int64_t line = in.pod<int64_t>();
      lines_[slot] = {line, in.pod<uint64_t>()};
    }
  }
  // A sleeping node's idle cycles are charged to the stall that put it to sleep, when it wakes.
  void before_step(uint64_t cycle) {
    if (last_outcome != Step::Progress && cycle > sleep_from + 1)
      (last_outcome == Step::StallInput ? c_.stall_input : c_.stall_output) += cycle - sleep_from - 1;
    set_now(cycle);
  }
  // after_step for a run of progress steps at cycles first..last; the node is stepped next at `next`.
  void progressed(uint64_t first, uint64_t last, uint64_t next, RunCtx& ctx) {
    last_outcome = Step::Progress;
    sleep_from = last;
    if (c_.first_active > first) c_.first_active = first;
    c_.last_active = last;
    if (last > ctx.last) ctx.last = last;  // the window engine may step nodes out of id order
    busy_until = next;
  }
  void after_step(Step s, uint64_t cycle, RunCtx& ctx) {
    last_outcome = s;
    sleep_from = cycle;
    if (s == Step::Progress) {
      if (c_.first_active > cycle) c_.first_active = cycle;
      c_.last_active = cycle;
      if (cycle > ctx.last) ctx.last = cycle;
      if (ctx.spans) {
        auto& sp = (*ctx.spans)[id];
        if (!sp.empty() && sp.back().second + 1 >= cycle) sp.back().second = cycle;
        else sp.push_back({cycle, cycle});
      }
      if (finished_) {
        if (is_sink()) {
          --ctx.live_sinks;
          if (!ctx.part_of.empty() && --ctx.part_sinks[ctx.part_of[id]] == 0) ctx.done_parts.push_back(ctx.part_of[id]);
          if (cycle > ctx.end_cycle || (cycle == ctx.end_cycle && id > ctx.end_sink)) {
            ctx.end_cycle = cycle;
            ctx.end_sink = id;
          }
        }
      } else {
        busy_until = cycle + ii();
      }
    } else if (s == Step::StallInput) {
      ++c_.stall_input;
    } else {
      ++c_.stall_output;
    }
  }

  std::string name_, kind_;
  std::vector<Fifo*> in_;
  std::vector<std::vector<Fifo*>> out_;
  Counters c_;
  bool finished_ = false;
  uint64_t now_ = 0, latency_ = 1, ii_ = 1, mem_ready_ = 0, busy_ = 0, tile_latency_ = 0;
  uint64_t out_at_ = 1;  // refresh_out_at()
  bool step_costs_ = false;  // mem_ready_, busy_ or tile_latency_ is set for this step
  static constexpr size_t kFastPorts = 4;
  Fifo* lone_[kFastPorts] = {};  // freeze_ports()
  FF_INLINE Fifo* lone(int o) const { return static_cast<size_t>(o) < kFastPorts ? lone_[o] : nullptr; }
  TileStore* tiles_ = nullptr;
  const Timing* timing_ = nullptr;
  Memory* mem_ = nullptr;
  std::map<int, std::pair<int64_t, uint64_t>> lines_;  // slot -> (line, ready cycle)
};

// A primitive with a bulk run (Node::ready_at): dense fibers, value streams and reductions
// advance many steps per call.
template <class D>
concept HasBulk = requires(D& d, uint64_t t, uint64_t n) {
  { d.bulk(t, n) } -> std::same_as<uint64_t>;
};

// Every primitive is built as Stepped<Primitive> (make_stepped): the window engine's per-node
// loop, with the primitive's step() called directly so that it inlines.
template <class D>
class Stepped final : public D {
 public:
  using D::D;
  uint64_t run_until(uint64_t t, uint64_t end, RunCtx& ctx) override {
    if (ctx.spans) return run_each(t, end, ctx);
    while (t < end) {
      this->before_step(t);
      // A run of progress steps, each `ii` cycles after the last: the counters only need the
      // run's first and last cycle, so the per-step bookkeeping is done once for the run.
      const uint64_t first = t;
      uint64_t last = kNever;  // the run's last progress step (kNever: none yet)
      Step s = Step::Progress;
      while (true) {
        if constexpr (HasBulk<D>) {
          if (this->plain_steps()) {
            const uint64_t ii = this->ii();
            if (const uint64_t k = D::bulk(t, (end - t + ii - 1) / ii)) {
              last = t + (k - 1) * ii;
              t = last + ii;
              if (t >= end) break;
              this->set_now(t);
            }
          }
        }
        s = D::step();
        if (s != Step::Progress || this->finished()) break;
        last = t;
        t += this->ii();
        if (t >= end) break;
        this->set_now(t);  // the step before progressed: there is no sleep to charge
      }
      if (last != kNever) {
        this->progressed(first, last, t, ctx);
        if (t >= end) return t;
      }
      if ((t = after(s, t, ctx)) == kNever) return kNever;
    }
    return t;
  }

 private:
  // Every step through step_at's bookkeeping (used when recording spans).
  uint64_t run_each(uint64_t t, uint64_t end, RunCtx& ctx) {
    while (t < end) {
      this->before_step(t);
      Step s = D::step();
      if ((t = after(s, t, ctx)) == kNever) return kNever;
    }
    return t;
  }
  // The bookkeeping of the step at `t` and the cycle the node is stepped next.
  uint64_t after(Step s, uint64_t t, RunCtx& ctx) {
    this->after_step(s, t, ctx);
    if (s == Step::Progress) return this->finished() ? kNever : this->busy_until;
    if (s == Step::StallInput) return this->next_wake(t);
    if (const uint64_t w = this->next_room(t); w != Node::kNoLog) return w;
    throw WindowUnsafe("a FIFO filled up at node '" + this->name() + "'");
  }
};

}  // namespace fuseflow::sim
