// Innermost reductions and sparse accumulators.
#include <cmath>
#include <limits>
#include <algorithm>
#include <cstdint>
#include <utility>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

bool is_max(const Params& p, const std::string& n) {
  std::string k = p.get_string("kind", "sum");
  if (k != "sum" && k != "max") throw std::invalid_argument("'" + n + "': unknown reduction '" + k + "'");
  return k == "max";
}

float combine(bool max, float a, float b) {
  if (!max) return a + b;
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return std::max(a, b);
}

// Accumulator policies: how a value token joins an accumulator and leaves as a token.
// Scalars: one float. Tiles: the incoming tile (layout `lin`) is reduced onto the accumulator's
// layout `lout` (the reduced variable's axis summed / maxed within the tile as well).
struct ScalarAcc {
  using V = float;
  bool max;
  V identity() const { return max ? -std::numeric_limits<float>::infinity() : 0.0f; }
  size_t add(V& acc, const Token& t, TileStore*) const {
    acc = combine(max, acc, t.is_data() ? t.f : 0.0f);
    return 1;
  }
  Token out(const V& v, TileStore*) const { return Token::value(v); }
  template <class N> void charge(N&) const {}
};

struct TileAcc {
  using V = std::vector<float>;
  bool max;
  TileLayout lin, lout;
  std::vector<std::vector<size_t>> strides;  // {into the input, into the accumulator} along `lin`
  TileAcc(bool m, TileLayout i, TileLayout o) : max(m), lin(std::move(i)), lout(std::move(o)) {
    strides = {lin.strides_along(lin.axes), lout.strides_along(lin.axes)};
  }
  V identity() const { return V(lout.size(), max ? -std::numeric_limits<float>::infinity() : 0.0f); }
  size_t add(V& acc, const Token& t, TileStore* store) const {
    if (!t.is_data()) {  // an absent tile is zeros
      for (float& a : acc) a = combine(max, a, 0.0f);
      return acc.size();
    }
    const float* x = store->get(t.i);
    for_each_element(lin.b, lin.axes.size(), strides,
                     [&](size_t, const std::vector<size_t>& off) { acc[off[1]] = combine(max, acc[off[1]], x[off[0]]); });
    return lin.size();
  }
  Token out(const V& v, TileStore* store) const { return Token::data(store->put(v)); }
  // Accumulating an incoming tile costs what the tile costs (a product tile: the matmul unit).
  template <class N> void charge(N& node) const { node.charge_tile(lin.axes.size(), lin.b); }
};

// A spacc's accumulators: entries in arrival order, found through an open-addressing index, and
// handed out in coordinate order when a fiber closes. No allocation per element once warm (a
// std::map allocated a node per coordinate; this is the simulator's hot loop).
template <class V>
class AccTable {
 public:
  using Key = std::pair<int64_t, int64_t>;
  FF_INLINE V& find_or_add(const Key& k, const V& identity) {
    // An order-1 spacc's keys are (0, crd): index small coordinates directly (no hashing).
    if (direct_key(k)) {
      size_t c = static_cast<size_t>(k.second);
      if (c >= direct_.size()) direct_.resize(std::max<size_t>(2 * direct_.size(), c + 1), -1);
      int32_t& slot = direct_[c];
      if (slot < 0) {
        slot = static_cast<int32_t>(entries_.size());
        direct_used_.push_back(c);
        entries_.push_back({k, identity});
      }
      return entries_[slot].second;
    }
    return find_or_add_hashed(k, identity);
  }
  V& find_or_add_hashed(const Key& k, const V& identity) {
    if (2 * (entries_.size() + 1) > slots_.size()) rehash(std::max<size_t>(16, 2 * slots_.size()));
    size_t s = probe(k);
    if (slots_[s] < 0) {
      slots_[s] = static_cast<int32_t>(entries_.size());
      used_.push_back(s);
      entries_.push_back({k, identity});
    }
    return entries_[slots_[s]].second;
  }
  // Visit every entry in key order, then empty the table (keeping its capacity).
  template <class F> void drain_sorted(F&& visit) {
    for (size_t s : used_) slots_[s] = -1;
    used_.clear();
    if (!direct_used_.empty() && direct_used_.size() == entries_.size()) {
      // every key is a small coordinate: when they span at most 4x their count, walking the
      // direct index in coordinate order is cheaper than sorting the entries
      auto [lo, hi] = std::minmax_element(direct_used_.begin(), direct_used_.end());
      const size_t first = *lo, last = *hi;
      if (last - first < 4 * entries_.size()) {
        for (size_t c = first; c <= last; ++c)
          if (const int32_t slot = direct_[c]; slot >= 0) {
            visit(entries_[slot].first, entries_[slot].second);
            direct_[c] = -1;
          }
        direct_used_.clear();
        entries_.clear();
        return;
      }
    }
    for (size_t c : direct_used_) direct_[c] = -1;
    direct_used_.clear();
    auto by_key = [](const auto& a, const auto& b) { return a.first < b.first; };
    if (!std::is_sorted(entries_.begin(), entries_.end(), by_key)) std::sort(entries_.begin(), entries_.end(), by_key);
    for (auto& [k, v] : entries_) visit(k, v);
    entries_.clear();
  }

  template <class Out> void save(Out& o) const {
    o.vec(entries_); o.vec(slots_); o.vec(used_); o.vec(direct_); o.vec(direct_used_);
  }
  template <class In> void load(In& in) {
    in.vec(entries_); in.vec(slots_); in.vec(used_); in.vec(direct_); in.vec(direct_used_);
  }

 private:
  size_t probe(const Key& k) const {  // the key's slot, or the empty slot where it belongs
    uint64_t h = static_cast<uint64_t>(k.first) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(k.second) * 0xC2B2AE3D27D4EB4Full;
    size_t mask = slots_.size() - 1;
    for (size_t s = (h ^ (h >> 29)) & mask;; s = (s + 1) & mask)
      if (slots_[s] < 0 || entries_[slots_[s]].first == k) return s;
  }
  void rehash(size_t n) {
    slots_.assign(n, -1);
    used_.clear();
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (direct_key(entries_[i].first)) continue;  // indexed directly, not hashed
      size_t s = probe(entries_[i].first);
      slots_[s] = static_cast<int32_t>(i);
      used_.push_back(s);
    }
  }
  std::vector<std::pair<Key, V>> entries_;
  std::vector<int32_t> slots_;
  std::vector<size_t> used_;  // occupied slots, to empty them without sweeping the table
  static constexpr uint64_t kDirect = uint64_t{1} << 20;  // coordinates indexed directly (4 MiB at most)
  static bool direct_key(const Key& k) { return k.first == 0 && static_cast<uint64_t>(k.second) < kDirect; }
  std::vector<int32_t> direct_;
  std::vector<size_t> direct_used_;
};

// reduce(val) -> val: one value per fiber (empty fibers give the identity);
// S0 -> value; S(n>0) -> value then S(n-1), in the same cycle.
// With a second input (the coordinate stream of the level above), a stop that closes an empty
// *parent* fiber emits no value: the stream alone cannot tell it from an empty fiber.
template <class Acc>
class Reduce : public Node {
 public:
  void charge_tile(size_t rank, int b) { occupy(rank, b); }
  Reduce(const std::string& n, int n_in, Acc acc) : Node(n, "reduce", n_in, 1), pol_(std::move(acc)) {
    if (n_in != 1 && n_in != 2) throw std::invalid_argument("reduce '" + n + "' takes a value and an optional parent crd");
    reset();
  }
  FF_INLINE Step step() override {
    if (pending_stop_ >= 0) {  // the lowered stop did not fit beside its value last cycle
      if (!room(0)) return Step::StallOutput;
      emit(0, Token::stop(pending_stop_));
      pending_stop_ = -1;
      return Step::Progress;
    }
    if (!has(0)) return Step::StallInput;
    const Token& t = peek(0);
    if (t.is_data() || t.is_empty()) {
      size_t work = pol_.add(acc_, t, tiles_);
      c_.reductions += work;
      pol_.charge(*this);
      take(0);
      return Step::Progress;
    }
    if (t.is_stop()) {
      if (!room(0)) return Step::StallOutput;
      bool fiber = true;
      if (in_.size() == 2) {
        if (!parent_ready(1, t.level)) return Step::StallInput;
        fiber = peek(1).is_data() || peek(1).is_empty();
        follow_parent(1, t.level);
      }
      Token s = take(0);
      if (fiber) emit(0, pol_.out(acc_, tiles_));
      if (s.level > 0) {
        bool split = timing_ && timing_->reduce_split_stop;
        if (!split && room(0)) emit(0, Token::stop(s.level - 1));  // same cycle when the FIFO has space
        else pending_stop_ = s.level - 1;
      }
      reset();
      return Step::Progress;
    }
    if (!room(0)) return Step::StallOutput;
    if (in_.size() == 2) {
      if (!has(1)) return Step::StallInput;
      take(1);
    }
    emit(0, take(0));
    finish();
    return Step::Progress;
  }
  // A run of scalar values (or N) joining the accumulator, one a step; tiles step one by one.
  uint64_t bulk(uint64_t t, uint64_t n) {
    const Fifo::View in0 = view(0);
    if constexpr (!std::is_same_v<Acc, ScalarAcc>) {
      return 0;
    } else {
      if (pending_stop_ >= 0) return 0;
      // One pass, each value checked and added in the same loop. The sum is held in a register:
      // accumulated in the member, each add waited for the store of the one before (a chain of
      // store-to-load forwards, the run's bottleneck).
      const uint64_t cap = std::min<uint64_t>(n, input(0)->size()), ii = ii_;
      float acc = acc_;
      const uint64_t k = by_chunks(
          cap, [&](uint64_t j) { return in0.contiguous(j); },
          [&](uint64_t k0, uint64_t len) {
            const auto* x = in0.at(k0);
            uint64_t at = t + k0 * ii, j = 0;
            for (; j < len; ++j, at += ii) {
              if (x[j].visible() > at) break;
              const Token v = x[j].token();
              if (!v.is_data() && !v.is_empty()) break;
              pol_.add(acc, v, nullptr);
            }
            return j;
          });
      acc_ = acc;
      c_.reductions += k;
      take_n(0, k);
      return k;
    }
  }
  void save(StateOut& o) const override {
    if constexpr (!std::is_trivially_copyable_v<typename Acc::V>) throw SimError("checkpoint: a tile reduction's state is not saved");
    else { save_base(o); o.pod(acc_); o.pod(pending_stop_); }
  }
  void load(StateIn& in) override {
    if constexpr (!std::is_trivially_copyable_v<typename Acc::V>) throw SimError("checkpoint: a tile reduction's state is not saved");
    else { load_base(in); in.pod(acc_); in.pod(pending_stop_); }
  }
 private:
  void reset() { acc_ = pol_.identity(); }
  Acc pol_;
  typename Acc::V acc_{};
  int pending_stop_ = -1;
};

// Tokens a spacc has decided to emit on one port: a vector read from the front, emptied (keeping
// its capacity) once read to the end; no allocation per token once warm (std::deque's was 2%).
class TokenQueue {
 public:
  bool empty() const { return head_ == q_.size(); }
  const Token& front() const { return q_[head_]; }
  void pop_front() {
    if (++head_ == q_.size()) { q_.clear(); head_ = 0; }
  }
  void push_back(Token t) { q_.push_back(t); }
  void save(StateOut& o) const { o.vec(q_); o.pod(head_); }
  void load(StateIn& in) { in.vec(q_); in.pod(head_); }
 private:
  std::vector<Token> q_;
  size_t head_ = 0;
};

// Output tokens queued per port; each port drains one token per cycle.
template <class Acc>
class Spacc : public Node {
 public:
  void charge_tile(size_t rank, int b) { occupy(rank, b); }
  // order 1 ports: in (inner crd, outer crd, val) -> out (crd, val)
  // order 2 ports: in (crd_k, crd_l, outer crd, val) -> out (crd_k, crd_l, val)
  Spacc(const std::string& n, Acc acc, int order)
      : Node(n, "spacc", order + 2, order + 1), order_(order), pol_(std::move(acc)), identity_(pol_.identity()),
        pending_(order + 1) {}

  FF_INLINE Step step() override {
    bool drained = drain();
    if (flushing()) return drained ? Step::Progress : Step::StallOutput;
    if (done_pending_) {
      for (int o = 0; o <= order_; ++o) emit(o, Token::done());
      finish();
      return Step::Progress;
    }
    return order_ == 1 ? step1() : step2();
  }
  // A run of accumulating steps of a scalar spacc (nothing queued to drain): each step reads a
  // data coordinate (order 2: the inner one, under a data outer one) and its value, and adds the
  // value into the table; stops, D and unseen tokens end the run (step() acts on them).
  uint64_t bulk(uint64_t t, uint64_t n) {
    if constexpr (!std::is_same_v<Acc, ScalarAcc>) {
      return 0;
    } else {
      if (flushing() || done_pending_) return 0;
      // order 1 reads (crd, val) a step; order 2 reads (crd_l, val) under the crd_k at its head,
      // which stays there for the whole run (step2 does not take it)
      const int cp = order_ == 1 ? 0 : 1, vp = val_port();
      int64_t key = 0;
      if (order_ == 2) {
        if (!has(0) || !peek(0).is_data()) return 0;  // step() waits or reports the misalignment
        key = peek(0).i;
      }
      const Fifo::View crd = view(cp), val = view(vp);
      const uint64_t cap = std::min<uint64_t>({n, input(cp)->size(), input(vp)->size()});
      uint64_t k = 0;
      for (uint64_t at = t; k < cap; ++k, at += ii_) {
        if (crd.visible(k) > at || val.visible(k) > at) break;
        const Token c = crd[k];
        if (!c.is_data()) break;
        accumulate(key, c.i, val[k]);
      }
      take_n(cp, k), take_n(vp, k);
      return k;
    }
  }

  void save(StateOut& o) const override {
    if constexpr (!std::is_trivially_copyable_v<typename Acc::V>) throw SimError("checkpoint: a tile accumulator's state is not saved");
    else {
      save_base(o);
      o.pod(done_pending_); o.pod(queued_);
      acc_.save(o);
      o.pod(static_cast<uint64_t>(pending_.size()));
      for (const auto& q : pending_) q.save(o);
    }
  }
  void load(StateIn& in) override {
    if constexpr (!std::is_trivially_copyable_v<typename Acc::V>) throw SimError("checkpoint: a tile accumulator's state is not saved");
    else {
      load_base(in);
      in.pod(done_pending_); in.pod(queued_);
      acc_.load(in);
      if (in.pod<uint64_t>() != pending_.size()) in.refuse("a spacc's ports differ: another graph");
      for (auto& q : pending_) q.load(in);
    }
  }
 private:
  bool flushing() const {
    return queued_ != 0;
  }
  void queue(int o, Token t) {
    pending_[o].push_back(t);
    ++queued_;
  }
  bool drain() {
    if (!flushing()) return false;
    bool any = false;
    for (int o = 0; o <= order_; ++o)
      if (!pending_[o].empty() && room(o)) {
        emit(o, pending_[o].front());
        pending_[o].pop_front();
        --queued_;
        any = true;
      }
    return any;
  }
  FF_INLINE void accumulate(int64_t k, int64_t l, const Token& v) {
    size_t work = pol_.add(acc_.find_or_add({k, l}, identity_), v, tiles_);
    c_.reductions += work;
    pol_.charge(*this);
  }
  int val_port() const { return order_ + 1; }
  int outer_port() const { return order_; }

  Step step1() {
    if (!has(0) || !has(val_port())) return Step::StallInput;
    const Token& k = peek(0);
    if (k.is_data()) {
      const Token& v = peek(val_port());
      accumulate(0, k.i, v);
      take(0); take(val_port());
      return Step::Progress;
    }
    if (k.is_stop()) {
      int m = k.level;
      if (!follow_parent(outer_port(), m)) return Step::StallInput;
      take(0); take(val_port());
      if (m >= 1) {
        acc_.drain_sorted([&](const auto& key, const auto& v) {
          queue(0, Token::data(key.second));
          queue(1, pol_.out(v, tiles_));
        });
        queue(0, Token::stop(m - 1));
        queue(1, Token::stop(m - 1));
        drain();
      }
      return Step::Progress;
    }
    if (k.is_done()) return finish_inputs();
    protocol_error("coordinate stream carries N");
  }

  Step step2() {
    if (!has(1) || !has(val_port())) return Step::StallInput;
    const Token& l = peek(1);
    if (l.is_data()) {
      if (!has(0)) return Step::StallInput;
      const Token& k = peek(0);
      if (!k.is_data()) protocol_error("outer inner-coordinate stream misaligned");
      const Token& v = peek(val_port());
      accumulate(k.i, l.i, v);
      take(1); take(val_port());
      return Step::Progress;
    }
    if (l.is_stop()) {
      int m = l.level;
      // S0 ends one k fiber; S1 ends a fiber of the reduced variable; S2+ ends the enclosing one.
      if (!parent_ready(0, m) || (m >= 1 && !parent_ready(outer_port(), m - 1))) return Step::StallInput;
      if (!follow_parent(0, m)) return Step::StallInput;
      if (m >= 1 && !follow_parent(outer_port(), m - 1)) protocol_error("outer stream misaligned");
      take(1); take(val_port());
      if (m >= 2) {
        int64_t cur = INT64_MIN;
        bool first = true;
        acc_.drain_sorted([&](const auto& key, const auto& v) {
          if (first || key.first != cur) {
            if (!first) { queue(1, Token::stop(0)); queue(2, Token::stop(0)); }
            queue(0, Token::data(key.first));
            cur = key.first;
            first = false;
          }
          queue(1, Token::data(key.second));
          queue(2, pol_.out(v, tiles_));
        });
        queue(0, Token::stop(m - 2));
        queue(1, Token::stop(m - 1));
        queue(2, Token::stop(m - 1));
        drain();
      }
      return Step::Progress;
    }
    if (l.is_done()) return finish_inputs();
    protocol_error("coordinate stream carries N");
  }

  Step finish_inputs() {
    for (size_t i = 0; i < in_.size(); ++i) if (!has(i)) return Step::StallInput;
    for (size_t i = 0; i < in_.size(); ++i) {
      if (!peek(i).is_done()) protocol_error("inputs end at different times");
      take(i);
    }
    done_pending_ = true;
    return Step::Progress;
  }

  int order_;
  Acc pol_;
  bool done_pending_ = false;
  typename Acc::V identity_;
  AccTable<typename Acc::V> acc_;
  std::vector<TokenQueue> pending_;
  size_t queued_ = 0;  // tokens in pending_ (flushing() is checked every step)
};

}  // namespace

// A node reduces tiles when Python gave it tile layouts (tile_b, in_axes, axes).
bool tiled(const Params& p) { return p.ints.count("tile_b") > 0; }

TileAcc tile_acc(const Params& p, const std::string& name) {
  int b = static_cast<int>(p.get_int("tile_b"));
  std::vector<int> in(p.get_ints("in_axes").begin(), p.get_ints("in_axes").end());
  std::vector<int> out(p.get_ints("axes").begin(), p.get_ints("axes").end());
  return TileAcc(is_max(p, name), TileLayout{b, in}, TileLayout{b, out});
}

NodePtr make_reduce(const std::string& name, int n, const Params& p) {
  if (tiled(p)) return make_stepped<Reduce<TileAcc>>(name, n, tile_acc(p, name));
  return make_stepped<Reduce<ScalarAcc>>(name, n, ScalarAcc{is_max(p, name)});
}
NodePtr make_spacc(const std::string& name, const Params& p) {
  int64_t order = p.get_int("order", 1);
  if (order != 1 && order != 2) throw std::invalid_argument("spacc '" + name + "': order must be 1 or 2");
  if (tiled(p)) return make_stepped<Spacc<TileAcc>>(name, tile_acc(p, name), static_cast<int>(order));
  return make_stepped<Spacc<ScalarAcc>>(name, ScalarAcc{is_max(p, name)}, static_cast<int>(order));
}

}  // namespace fuseflow::sim
