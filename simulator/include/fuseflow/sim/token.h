// Stream tokens and bounded FIFO channels shared by every primitive.
#pragma once
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>

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

// A bounded FIFO edge; a token pushed at cycle t becomes visible at t + latency.
class Fifo {
 public:
  explicit Fifo(size_t depth) : depth_(depth) {}
  bool ready(uint64_t now, size_t k = 0) const { return q_.size() > k && q_[k].at <= now; }
  const Token& peek(size_t k = 0) const { return q_[k].tok; }
  void pop() { q_.pop_front(); }
  bool full() const { return q_.size() >= depth_; }
  size_t space() const { return depth_ > q_.size() ? depth_ - q_.size() : 0; }
  size_t size() const { return q_.size(); }
  // Some queued token is not visible yet (pushes may carry non-monotonic times under the memory model).
  bool in_flight(uint64_t now) const { return !q_.empty() && max_at_ > now; }
  void push(const Token& t, uint64_t at) {
    q_.push_back({t, at});
    if (at > max_at_) max_at_ = at;
    if (record_) trace_.push_back(t);
  }
  void set_record(bool r) { record_ = r; }
  const std::deque<Token>& trace() const { return trace_; }
  int src_node = -1, src_port = -1, dst_node = -1, dst_port = -1;

 private:
  struct Entry { Token tok; uint64_t at; };
  std::deque<Entry> q_;
  std::deque<Token> trace_;
  size_t depth_;
  uint64_t max_at_ = 0;
  bool record_ = false;
};

std::string describe(const Token& t);

}  // namespace fuseflow::sim
