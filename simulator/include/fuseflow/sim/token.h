// Stream tokens and bounded FIFO channels shared by every primitive.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <memory>
#include <vector>
#include <stdexcept>
#include <string>

#include "fuseflow/sim/spill.h"

namespace fuseflow::sim {

enum class Kind : uint8_t { Data = 0, Stop = 1, Empty = 2, Done = 3 };

// One stream element. Coordinates and references use `i`, values use `f`.
struct Token {
  Kind kind = Kind::Data;
  uint8_t level = 0;  // stop level for Kind::Stop
  union {
    int64_t i;
    float f;
  };
  Token() : i(0) {}
  static Token data(int64_t v) { Token t; t.i = v; return t; }
  static Token value(float v) { Token t; t.i = 0; t.f = v; return t; }
  static Token stop(int lvl) { Token t; t.kind = Kind::Stop; t.level = static_cast<uint8_t>(lvl); return t; }
  static Token empty() { Token t; t.kind = Kind::Empty; return t; }
  static Token done() { Token t; t.kind = Kind::Done; return t; }
  bool is_data() const { return kind == Kind::Data; }
  bool is_stop() const { return kind == Kind::Stop; }
  bool is_empty() const { return kind == Kind::Empty; }
  bool is_done() const { return kind == Kind::Done; }
};

// Raised for simulator faults (deadlock, protocol violation, cycle limit).
class SimError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The window engine met a run it cannot reproduce exactly (a FIFO filled, or a node acted
// after the last writer finished); the caller reruns the graph with the event engine.
class WindowUnsafe : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Storage shared by a run's FIFOs: growing past `limit` bytes throws (the run reports it instead
// of exhausting the machine's memory: unbounded FIFOs let a fast producer run far ahead).
// With a spill store (Timing::spill_tokens), a FIFO whose ring grows past `spill_tokens` entries
// joins `candidates`, which the window engine settles at the start of every window.
class Fifo;
struct FifoBudget {
  uint64_t used = 0, limit = UINT64_MAX;
  SpillStore* store = nullptr;
  size_t spill_tokens = 0, reserve = 0, chunk = 0;  // chunk: entries a slot of the store holds
  std::vector<Fifo*> candidates;
};
struct FifoBudgetExceeded : std::exception {
  const char* what() const noexcept override { return "FIFO storage limit exceeded"; }
};

// Wakes nodes when a FIFO changes: the event engine's calendar (EventLoop, graph.cpp). The
// common wake-up, for the next cycle, sets a bit inline; the others go through wake_at.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // A token becomes visible at `at` (>= the next cycle: every edge has latency >= 1).
  void wake(int node, uint64_t at) {
    if (at == cycle + 1) mark_next(node);
    else wake_at(node, at);
  }
  void wake_next(int node) { mark_next(node); }  // space was freed this cycle
  uint64_t cycle = 0;                             // the cycle being simulated

 protected:
  virtual void wake_at(int node, uint64_t at) = 0;
  void mark_next(int id) {
    next_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    any_next_ = true;
  }
  std::vector<uint64_t> next_;  // nodes to step next cycle, one bit per node id
  bool any_next_ = false;
};

// A bounded FIFO edge (a growable ring buffer); a token pushed at cycle t becomes visible at
// t + latency (later under the memory model; delivery stays in order).
// Cycles a FIFO entry can stamp (48 bits); Graph::run refuses a larger max_cycles.
inline constexpr uint64_t kMaxCycle = (uint64_t{1} << 48) - 1;

class Fifo {
 public:
  explicit Fifo(size_t depth) : buf_(static_cast<Entry*>(std::malloc(8 * sizeof(Entry)))), mask_(7), depth_(depth) {
    if (!buf_) throw std::bad_alloc();
  }
  bool ready(uint64_t now, size_t k = 0) const { return size_ > k && at(k).visible() <= now; }
  // The cycle queued token k becomes visible (a stream tape records it, stream.cpp).
  uint64_t visible_at(size_t k = 0) const { return at(k).visible(); }
  // True while the event engine's calendar is attached: a push then schedules its consumer.
  bool scheduled() const { return sched_ != nullptr; }
  Token peek(size_t k = 0) const { return at(k).token(); }
  // Consume the head at cycle `at` (recorded while the pops are logged, see log_pops). Inlined
  // into every primitive's step: one flag (on_pop_) guards the work a pop can have beyond that,
  // a scheduler to wake (the event engine) or a log to write (out of line, rare).
  inline __attribute__((always_inline)) void pop(uint64_t at) {
    head_ = (head_ + 1) & mask_;
    --size_;
    if (__builtin_expect(on_pop_, false)) {
      if (sched_) sched_->wake_next(src_node);
      if (logging_) append_pops(1, at, 0);
    }
  }
  // Consume the first `k` tokens at once, the j-th at cycle `first + j * step` (a bulk run of `k`
  // steps, Stepped::run_until).
  inline __attribute__((always_inline)) void pop_n(size_t k, uint64_t first, uint64_t step) {
    head_ = (head_ + k) & mask_;
    size_ -= k;
    if (__builtin_expect(on_pop_, false) && k > 0) {
      if (sched_) sched_->wake_next(src_node);
      if (logging_) append_pops(k, first, step);
    }
  }
  // Consumer first (the window engine's backpressure windows, Graph::run_window): the consumer
  // runs through the window before the producer, and its pops are logged with their cycles. The
  // producer's step at cycle `c` then sees the queue as the event engine would: without the
  // pops of cycles >= c (the consumer, a later node, steps after it within a cycle).
  void log_pops(bool on) {
    logging_ = on;
    pops_.clear();
    seen_ = 0;
    rehook();
  }
  bool logging() const { return logging_; }
  // The first logged pop at a cycle >= `c` (kNoPop: none in this window).
  uint64_t first_pop_from(uint64_t c) const {
    const size_t i = pending_index(c);
    return i < pops_.size() ? pops_[i] : kNoPop;
  }
  static constexpr uint64_t kNoPop = ~uint64_t{0};
  // How many of the first `max` queued tokens are visible by the step that reads them, the j-th
  // being read at cycle `t + j * ii`, and satisfy `accept` (a bulk run, Stepped::run_until).
  template <class P>
  inline __attribute__((always_inline)) size_t ready_run(uint64_t t, uint64_t ii, size_t max, P&& accept) const {
    const size_t n = std::min(max, size_), m = mask_, h = head_;
    const Entry* const b = buf_.get();
    for (size_t j = 0; j < n;) {  // in at most two back-to-back pieces (the ring wraps once)
      const size_t pos = (h + j) & m, len = std::min(n - j, m + 1 - pos);
      const Entry* const e = b + pos;
      uint64_t at = t + j * ii;
      for (size_t i = 0; i < len; ++i, at += ii)
        if (e[i].visible() > at || !accept(e[i].token())) return j + i;
      j += len;
    }
    return n;
  }
  // Push `k` tokens, the j-th `make(j)` visible at `first + j * step`: one growth check and the
  // queue's fields in registers (a bulk run). Hooked FIFOs push one by one.
  template <class F>
  inline __attribute__((always_inline)) void push_run(size_t k, uint64_t first, uint64_t step, F&& make) {
    if (__builtin_expect(hooked_, false)) {
      for (size_t j = 0; j < k; ++j) push_hooked(make(j), first + j * step);
      return;
    }
    while (size_ + k > mask_ + 1) grow();
    Entry* const b = buf_.get();
    const size_t m = mask_;
    for (size_t j = 0; j < k;) {  // in at most two back-to-back pieces (the ring wraps once)
      const size_t pos = (head_ + size_ + j) & m, len = std::min(k - j, m + 1 - pos);
      Entry* const e = b + pos;
      uint64_t when = first + j * step;
      for (size_t i = 0; i < len; ++i, when += step) set(e[i], make(j + i), when);
      j += len;
    }
    size_ += k;
  }
  // Tokens that can still be pushed before the FIFO is full.
  size_t space() const { return size_ < depth_ ? depth_ - size_ : 0; }
  // The same, as a producer's step at cycle `now` sees it (pops logged at `now` or later not yet).
  size_t space(uint64_t now) const {
    const size_t held = size_ + (logging_ ? pending(now) : 0);
    return held < depth_ ? depth_ - held : 0;
  }
  bool full() const { return size_ >= depth_; }
  size_t depth() const { return depth_; }
  size_t size() const { return size_; }
  bool has_room(size_t n) const { return size_ + n <= depth_; }
  // The same, as a producer's step at cycle `now` sees it (Node::room of a node whose outputs
  // may log pops; the others use the form above and pay no check).
  bool has_room(size_t n, uint64_t now) const { return size_ + n + (logging_ ? pending(now) : 0) <= depth_; }
  // The earliest cycle after `now` at which the head or the token behind it becomes visible
  // (no primitive looks deeper); UINT64_MAX when no queued token changes visibility later.
  uint64_t next_visible_after(uint64_t now) const {
    uint64_t best = UINT64_MAX;
    for (size_t k = 0; k < size_ && k < 2; ++k)
      if (at(k).visible() > now && at(k).visible() < best) best = at(k).visible();
    return best;
  }
  // By value: a token just built in registers is stored without a store-forwarding stall.
  // The window engine's pushes (no recording, no scheduler, a reader) take the first branch only.
  inline __attribute__((always_inline)) void push(Token t, uint64_t when) {
    if (__builtin_expect(hooked_, false)) return push_hooked(t, when);
    store(t, when);
  }
  void set_record(bool r) { record_ = r; rehook(); }
  void set_budget(FifoBudget* b) {
    budget_ = b;
    candidate_ = never_spill_ = false;
    spill_.reset();
  }
  // An output nobody reads: tokens are dropped on arrival (it never fills, stores nothing).
  void set_discard() { discard_ = true; rehook(); }
  void set_scheduler(Scheduler* s) { sched_ = s; rehook(); }
  const std::vector<Token>& trace() const { return trace_; }
  // A checkpoint's copy of the queue (state.h's StateOut / StateIn; templates: token.h comes first).
  template <class Out> void save(Out& o) const {
    o.pod(src_node); o.pod(src_port); o.pod(dst_node); o.pod(dst_port);
    o.pod(static_cast<uint64_t>(queued()));
    const size_t first = std::min(size_, mask_ + 1 - head_);  // the ring in at most two pieces
    o.bytes(buf_.get() + head_, first * sizeof(Entry));
    o.bytes(buf_.get(), (size_ - first) * sizeof(Entry));
    if (spill_) spill_->each([&o](const Entry* e, size_t n) { o.bytes(e, n * sizeof(Entry)); });
  }
  template <class In> void load(In& in) {
    if (in.template pod<int>() != src_node || in.template pod<int>() != src_port || in.template pod<int>() != dst_node ||
        in.template pod<int>() != dst_port)
      in.refuse("its FIFOs are not this graph's");
    head_ = size_ = 0;
    spill_.reset();
    uint64_t n = in.template pod<uint64_t>();
    const bool spill = budget_ && budget_->store && spills(n, budget_->reserve);
    const size_t ring = spill ? budget_->reserve : n;  // a spilled queue: its head in the ring, the rest to disk
    while (ring > mask_ + 1) grow();
    in.bytes(buf_.get(), ring * sizeof(Entry));
    size_ = ring;
    if (!spill) return;
    start_spill();
    std::vector<Entry> part(budget_->chunk);
    for (n -= ring; n > 0;) {
      const size_t k = std::min<uint64_t>(n, part.size());
      in.bytes(part.data(), k * sizeof(Entry));
      spill_->append(part.data(), k);
      n -= k;
    }
    spill_->mark(head_, size_);
  }
  // The tokens queued, those on disk included (size() counts the ring only: what the consumer reads).
  size_t queued() const { return size_ + (spill_ ? spill_->count : 0); }
  bool spilled() const { return spill_ != nullptr; }
  // Between two windows (Graph::run_window), for a FIFO in FifoBudget::candidates: a queue longer
  // than spill_tokens keeps its first `reserve` entries in the ring and the rest in the spill
  // store. A spilled queue's consumer reads only the ring; this window's pushes land in the ring
  // behind the reserve and are moved behind the spilled middle here, and the ring is topped up
  // to `reserve` again from the head of the middle. Exact while the consumer reads fewer than
  // `reserve` tokens in a window (checked) and the queue cannot fill (checked): `room` is the
  // most a window can push.
  void settle(size_t room) {
    const size_t reserve = budget_->reserve;
    if (!spill_) {
      if (!spills(size_, room)) return;
      start_spill();
      move_out(reserve);
      shrink(reserve + room);
    } else {
      move_out(kept());
      move_in(reserve);
      if (spill_->count == 0) {
        spill_.reset();
        return;
      }
    }
    spill_->mark(head_, size_);  // before unspill, which reads the pops since the mark
    if (queued() + room > depth_) {  // it could fill in the next window: a whole queue again, for good
      unspill();
      never_spill_ = true;
    }
  }
  // The whole queue back in the ring (the event engine reads no spill).
  void unspill() {
    if (!spill_) return;
    move_out(kept());
    move_in(SIZE_MAX);
    spill_.reset();
  }
  int src_node = -1, src_port = -1, dst_node = -1, dst_port = -1;

 private:
  // 16 bytes a queued token (a Token and its cycle were 24): the payload, and the cycle it
  // becomes visible (48 bits, see kMaxCycle) packed with the token's kind and stop level.
  struct Entry {
    int64_t payload;
    uint64_t meta;
    uint64_t visible() const { return meta >> 16; }
    Token token() const {
      Token t;
      t.i = payload;
      t.kind = static_cast<Kind>((meta >> 8) & 0xff);
      t.level = static_cast<uint8_t>(meta & 0xff);
      return t;
    }
  };
  static_assert(sizeof(Entry) == 16, "the spill store's slots hold 16-byte entries (Graph::run_window)");

 public:
  // The queue as a bulk run reads it, its fields copied out (stores into other FIFOs cannot
  // change them): valid until this FIFO's next push or pop.
  class View {
   public:
    View() = default;
    View(const Entry* b, size_t m, size_t h) : b_(b), m_(m), h_(h) {}
    Token operator[](size_t j) const { return b_[(h_ + j) & m_].token(); }
    uint64_t visible(size_t j) const { return b_[(h_ + j) & m_].visible(); }
    // The j-th entry, and how many entries from it on lie back to back before the ring wraps:
    // a run's loop walks them by pointer, chunk by chunk (Node::by_chunks).
    const Entry* at(size_t j) const { return b_ + ((h_ + j) & m_); }
    size_t contiguous(size_t j) const { return m_ + 1 - ((h_ + j) & m_); }

   private:  // left unset by the default constructor (arrays of views, filled before use)
    const Entry* b_;
    size_t m_, h_;
  };
  View view() const { return View(buf_.get(), mask_, head_); }
  // The stores of a one-pass bulk run (reads and writes in one loop, Node::map_run): room for
  // `k` more entries is made first, the j-th is written through `at(j)` with `Fifo::set`, and
  // `commit` queues the first k written. Only for a FIFO without hooks (nothing to record, wake
  // or drop).
  class Tail {
   public:
    Tail() = default;
    Tail(Entry* b, size_t m, size_t t) : b_(b), m_(m), t_(t) {}
    Entry* at(size_t j) const { return b_ + ((t_ + j) & m_); }
    size_t contiguous(size_t j) const { return m_ + 1 - ((t_ + j) & m_); }

   private:  // left unset by the default constructor (arrays of tails, filled before use)
    Entry* b_;
    size_t m_, t_;
  };
  bool hooked() const { return hooked_; }
  static void set(Entry& e, Token t, uint64_t when) {
    e.payload = t.i;
    e.meta = (when << 16) | (static_cast<uint64_t>(t.kind) << 8) | t.level;
  }
  Tail tail(size_t k) {
    while (size_ + k > mask_ + 1) grow();
    return Tail(buf_.get(), mask_, head_ + size_);
  }
  void commit(size_t k) { size_ += k; }

 private:
  const Entry& at(size_t k) const { return buf_[(head_ + k) & mask_]; }
  // Log `k` pops, the j-th at cycle `first + j * step` (while log_pops is on).
  __attribute__((noinline)) void append_pops(size_t k, uint64_t first, uint64_t step) {
    for (size_t j = 0; j < k; ++j) pops_.push_back(first + j * step);
  }
  // Index of the first logged pop at a cycle >= `c`. A producer asks at increasing cycles within
  // a window, so the search resumes where the last one ended.
  size_t pending_index(uint64_t c) const {
    if (seen_ > pops_.size() || (seen_ > 0 && pops_[seen_ - 1] >= c)) seen_ = 0;
    while (seen_ < pops_.size() && pops_[seen_] < c) ++seen_;
    return seen_;
  }
  size_t pending(uint64_t c) const { return pops_.size() - pending_index(c); }
  inline __attribute__((always_inline)) void store(Token t, uint64_t when) {
    if (__builtin_expect(size_ > mask_, false)) grow();
    Entry& e = buf_[(head_ + size_) & mask_];
    e.payload = t.i;
    e.meta = (when << 16) | (static_cast<uint64_t>(t.kind) << 8) | t.level;
    ++size_;
  }
  __attribute__((noinline)) void push_hooked(Token t, uint64_t when) {
    if (discard_) return;
    store(t, when);
    if (__builtin_expect(record_, false)) record(t);
    if (sched_) sched_->wake(dst_node, when);
  }
  __attribute__((noinline)) void record(Token t) { trace_.push_back(t); }
  void rehook() {
    hooked_ = discard_ || record_ || sched_ != nullptr;
    on_pop_ = sched_ != nullptr || logging_;
  }
  __attribute__((noinline, cold)) void grow() {
    if (budget_) {  // the sum over growths tracks the capacity held (the first 8 entries are free)
      budget_->used += (mask_ + 1) * sizeof(Entry);
      if (budget_->used > budget_->limit) throw FifoBudgetExceeded();
    }
    // Raw storage (a Token is trivially copyable): no constructor pass over the new entries, and
    // the queue moves in two memcpy's. A backlogged FIFO grows to millions of entries.
    size_t cap = mask_ + 1, first = std::min(size_, cap - head_);
    const size_t popped = spill_ ? (head_ - spill_->head0) & mask_ : 0;
    Buffer nb(static_cast<Entry*>(std::malloc(2 * cap * sizeof(Entry))));
    if (!nb) throw std::bad_alloc();
    std::memcpy(nb.get(), buf_.get() + head_, first * sizeof(Entry));
    std::memcpy(nb.get() + first, buf_.get(), (size_ - first) * sizeof(Entry));
    buf_.swap(nb);
    mask_ = 2 * mask_ + 1;
    head_ = 0;
    if (spill_) spill_->head0 = (head_ - popped) & mask_;  // the pops since the window began, kept
    if (budget_ && budget_->store && !candidate_ && mask_ + 1 > budget_->spill_tokens && !hooked_) {
      candidate_ = true;
      budget_->candidates.push_back(this);
    }
  }
  // A spilled queue's middle, in order: `front` from `pos` (a slot read back), the slots on disk,
  // then `tail` (entries not yet a whole slot).
  struct Spill {
    SpillStore* store;
    size_t chunk;  // entries a slot holds
    std::vector<Entry> front, tail;
    size_t pos = 0, count = 0;
    std::deque<std::pair<uint64_t, size_t>> slots;
    size_t head0 = 0, reserve = 0;  // the ring's head and size when the window began
    void mark(size_t head, size_t size) { head0 = head; reserve = size; }
    void append(const Entry* e, size_t n) {
      tail.insert(tail.end(), e, e + n);
      count += n;
      while (tail.size() >= chunk) {
        slots.emplace_back(store->put(tail.data(), chunk * sizeof(Entry)), chunk);
        tail.erase(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(chunk));
      }
    }
    // Refill `front` from the next slot, or from `tail` when none is on disk.
    void advance() {
      pos = 0;
      if (slots.empty()) {
        front.swap(tail);
        tail.clear();
        return;
      }
      auto [slot, n] = slots.front();
      slots.pop_front();
      front.resize(n);
      store->get(slot, front.data(), n * sizeof(Entry), true);
    }
    // Every entry in order, in pieces (a checkpoint's copy; the store keeps its slots).
    template <class F> void each(F&& f) const {
      f(front.data() + pos, front.size() - pos);
      std::vector<Entry> buf(chunk);
      for (auto [slot, n] : slots) {
        store->get(slot, buf.data(), n * sizeof(Entry), false);
        f(buf.data(), n);
      }
      f(tail.data(), tail.size());
    }
  };
  void start_spill() {
    spill_ = std::make_unique<Spill>();
    spill_->store = budget_->store;
    spill_->chunk = budget_->chunk;
    ++budget_->store->queues;
    if (!candidate_) {
      candidate_ = true;
      budget_->candidates.push_back(this);
    }
  }
  // Whether a queue of `n` tokens moves its middle to disk: longer than spill_tokens and than
  // twice the reserve, and far from its depth (`room`: a window's pushes).
  bool spills(size_t n, size_t room) const {
    return n > std::max(budget_->spill_tokens, 2 * budget_->reserve) && !hooked_ && !never_spill_ &&
           n + 16 * room <= depth_;
  }
  // A smaller ring (at least `entries`), its storage back to the budget: a queue that grew long
  // before spilling keeps only its reserve and a window's pushes in memory.
  void shrink(size_t entries) {
    size_t cap = 8;
    while (cap < entries || cap < size_) cap *= 2;
    if (cap >= mask_ + 1) return;
    Buffer nb(static_cast<Entry*>(std::malloc(cap * sizeof(Entry))));
    if (!nb) throw std::bad_alloc();
    const size_t first = std::min(size_, mask_ + 1 - head_);
    std::memcpy(nb.get(), buf_.get() + head_, first * sizeof(Entry));
    std::memcpy(nb.get() + first, buf_.get(), (size_ - first) * sizeof(Entry));
    if (budget_) budget_->used -= std::min<uint64_t>(budget_->used, (mask_ + 1 - cap) * sizeof(Entry));
    buf_.swap(nb);
    mask_ = cap - 1;
    head_ = 0;
  }
  // Ring entries of the reserve not yet read this window (the consumer read `popped`).
  size_t kept() const {
    const size_t popped = (head_ - spill_->head0) & mask_;
    if (popped + kLookahead > spill_->reserve)
      throw SimError(edge() + ": its consumer read " + std::to_string(popped) + " tokens in a window, too near the " +
                     std::to_string(spill_->reserve) + " a spilled queue keeps in memory (raise spill_tokens)");
    return spill_->reserve - popped;
  }
  // Ring entries [from, size_) to the spill's tail, in order.
  void move_out(size_t from) {
    for (size_t k = from; k < size_;) {
      const size_t pos = (head_ + k) & mask_, len = std::min(size_ - k, mask_ + 1 - pos);
      spill_->append(buf_.get() + pos, len);
      k += len;
    }
    size_ = std::min(size_, from);
  }
  // Entries from the spill's head into the ring until it holds `want` or the spill is empty.
  void move_in(size_t want) {
    Spill& s = *spill_;
    while (size_ < want && s.count > 0) {
      if (s.pos == s.front.size()) s.advance();
      const size_t n = std::min({want - size_, s.front.size() - s.pos});
      while (size_ + n > mask_ + 1) grow();
      for (size_t j = 0; j < n; ++j) buf_[(head_ + size_ + j) & mask_] = s.front[s.pos + j];
      size_ += n;
      s.pos += n;
      s.count -= n;
    }
  }
  std::string edge() const {
    return "spill: the FIFO from node " + std::to_string(src_node) + " port " + std::to_string(src_port) + " to node " +
           std::to_string(dst_node);
  }
  // How far past the head a primitive looks (two tokens; a bulk run one past what it pops).
  static constexpr size_t kLookahead = 16;
  struct Free {
    void operator()(Entry* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<Entry[], Free>;
  // Hot fields first: one cache line serves push, pop and ready.
  Buffer buf_;
  size_t mask_;  // capacity - 1 (a power of two)
  size_t head_ = 0, size_ = 0;
  size_t depth_;
  Scheduler* sched_ = nullptr;
  bool hooked_ = false, record_ = false, discard_ = false, logging_ = false, on_pop_ = false;
  std::vector<uint64_t> pops_;  // log_pops: the consumer's pop cycles in this window, increasing
  mutable size_t seen_ = 0;     // pending_index's resume point
  FifoBudget* budget_ = nullptr;
  std::vector<Token> trace_;
  std::unique_ptr<Spill> spill_;
  bool candidate_ = false, never_spill_ = false;
};

std::string describe(const Token& t);

}  // namespace fuseflow::sim
