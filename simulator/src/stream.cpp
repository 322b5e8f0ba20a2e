// Stream tapes: how a graph runs in pieces (fuseflow/sim/pieces.py, docs/pieces.md). A `tape`
// sink writes every token of one output port, with the cycle it became visible, to a file; a
// `replay` source pushes a tape's tokens into its consumers' FIFOs so that each becomes visible
// at its recorded cycle. Where the cut FIFOs are unbounded their producers never wait, so the
// consumers see exactly the stream they would see in the whole graph.
//
// File format (version 1): the 8-byte magic "FFSTREAM", a u32 version, a u32 zero, the u64 key
// the caller gives (a fingerprint of the graph and edge: a tape of another graph is refused),
// then one record per token: a byte holding the kind (bits 0-1) and the stop level (bits 2-7;
// 63 escapes to a second byte), a varint of the visible cycle's increase over the record
// before, and a zigzag varint of the payload's difference from the last payload of its kind.
#include <cstdio>
#include <unistd.h>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {
namespace {

constexpr char kMagic[8] = {'F', 'F', 'S', 'T', 'R', 'E', 'A', 'M'};
constexpr uint32_t kVersion = 1;

struct FileCloser {
  void operator()(std::FILE* f) const { if (f) std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

uint64_t key_of(const Params& p) { return static_cast<uint64_t>(p.get_int("key", 0)); }

class Tape : public Node {
 public:
  Tape(const std::string& n, const Params& p) : Node(n, "tape", 1, 0), path_(p.get_string("path", "")), key_(key_of(p)) {
    if (path_.empty()) throw std::invalid_argument("tape '" + n + "': no path");
  }
  bool is_sink() const override { return true; }
  FF_INLINE Step step() override {
    if (!file_ && !finished()) open();
    if (!has(0)) return Step::StallInput;
    while (has(0)) {  // every visible token: the tape never holds its producer back
      const uint64_t when = input(0)->visible_at();
      const Token t = take(0);
      put(t, when);
      if (t.is_done()) {
        flush();
        if (std::fclose(file_.release()) != 0) throw SimError("tape '" + name() + "': cannot close " + path_);
        finish();
        break;
      }
    }
    return Step::Progress;
  }

  // A checkpoint: the records so far are flushed, and the tape is cut back to them on resume.
  void save(StateOut& o) const override {
    save_base(o);
    auto* self = const_cast<Tape*>(this);
    if (file_) self->flush(), std::fflush(file_.get());
    o.pod(static_cast<int64_t>(file_ ? std::ftell(file_.get()) : -1));
    o.pod(last_when_); o.pod(last_);
  }
  void load(StateIn& in) override {
    load_base(in);
    const int64_t at = in.pod<int64_t>();
    in.pod(last_when_); in.pod(last_);
    buf_.clear();
    file_.reset();
    if (at < 0 || finished()) return;  // not opened yet (opens at its first step), or closed
    file_.reset(std::fopen(path_.c_str(), "r+b"));
    if (!file_ || ::ftruncate(fileno(file_.get()), at) != 0 || std::fseek(file_.get(), at, SEEK_SET) != 0)
      throw SimError("tape '" + name() + "': cannot resume " + path_ + " (its records up to the checkpoint are gone)");
  }

 private:
  void open() {
    file_.reset(std::fopen(path_.c_str(), "wb"));
    if (!file_) throw SimError("tape '" + name() + "': cannot write " + path_);
    uint32_t head[2] = {kVersion, 0};
    buf_.insert(buf_.end(), kMagic, kMagic + 8);
    put_raw(head, sizeof head);
    put_raw(&key_, sizeof key_);
  }
  void put_raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<uint8_t>(v));
  }
  void put(const Token& t, uint64_t when) {
    const int kind = static_cast<int>(t.kind);
    const int level = t.level < 63 ? t.level : 63;
    buf_.push_back(static_cast<uint8_t>(kind | (level << 2)));
    if (level == 63) buf_.push_back(t.level);
    varint(when - last_when_);  // a FIFO delivers in order: the cycles never decrease
    last_when_ = when;
    const int64_t d = static_cast<int64_t>(static_cast<uint64_t>(t.i) - static_cast<uint64_t>(last_[kind]));
    varint((static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63));
    last_[kind] = t.i;
    if (buf_.size() >= (1u << 20)) flush();
  }
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), file_.get()) != buf_.size())
      throw SimError("tape '" + name() + "': cannot write " + path_ + " (disk full?)");
    buf_.clear();
  }
  std::string path_;
  uint64_t key_;
  File file_;
  std::vector<uint8_t> buf_;
  uint64_t last_when_ = 0;
  int64_t last_[4] = {0, 0, 0, 0};
};

// Reads a tape's records one after another (a replay holds two: what it pushes, and how far
// the whole run's producer had got).
class TapeReader {
 public:
  TapeReader(const std::string& who, const std::string& path, uint64_t key) : who_(who), path_(path) {
    file_.reset(std::fopen(path_.c_str(), "rb"));
    if (!file_) throw SimError(who_ + ": cannot read " + path_);
    char magic[8];
    uint32_t head[2];
    uint64_t saved = 0;
    if (std::fread(magic, 1, 8, file_.get()) != 8 || std::memcmp(magic, kMagic, 8) != 0)
      throw SimError(who_ + ": " + path_ + " is not a stream tape");
    if (std::fread(head, sizeof head, 1, file_.get()) != 1 || head[0] != kVersion)
      throw SimError(who_ + ": " + path_ + " is a tape of another format version (this build reads " +
                     std::to_string(kVersion) + ")");
    if (std::fread(&saved, sizeof saved, 1, file_.get()) != 1 || saved != key)
      throw SimError(who_ + ": " + path_ + " was recorded from another graph or edge");
    more = next();
  }
  // The record read ahead: its token and visible cycle (valid while `more`).
  Token token;
  uint64_t when = 0;
  bool more = false;
  // Read the next record; false at the end of the file.
  bool next() {
    const int head = byte();
    if (head < 0) return more = false;
    const int kind = head & 3;
    int level = head >> 2;
    if (level == 63 && (level = byte()) < 0) return more = false;
    uint64_t dw = 0, zz = 0;
    if (!varint(dw) || !varint(zz)) throw SimError(who_ + ": " + path_ + " ends inside a record");
    when += dw;
    const int64_t d = static_cast<int64_t>(zz >> 1) ^ -static_cast<int64_t>(zz & 1);
    last_[kind] = static_cast<int64_t>(static_cast<uint64_t>(last_[kind]) + static_cast<uint64_t>(d));
    token = Token();
    token.kind = static_cast<Kind>(kind);
    token.level = static_cast<uint8_t>(level);
    token.i = last_[kind];
    return more = true;
  }
  void save(StateOut& o) const {
    o.pod(static_cast<int64_t>(std::ftell(file_.get())) - static_cast<int64_t>(len_ - pos_));
    o.pod(more); o.pod(token); o.pod(when); o.pod(last_);
  }
  void load(StateIn& in) {
    const int64_t at = in.pod<int64_t>();
    in.pod(more); in.pod(token); in.pod(when); in.pod(last_);
    pos_ = len_ = 0;
    if (std::fseek(file_.get(), at, SEEK_SET) != 0) throw SimError(who_ + ": cannot resume " + path_);
  }

 private:
  int byte() {
    if (pos_ == len_) {
      len_ = std::fread(buf_.data(), 1, buf_.size(), file_.get());
      pos_ = 0;
      if (len_ == 0) return -1;
    }
    return buf_[pos_++];
  }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const int b = byte();
      if (b < 0) return false;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    throw SimError(who_ + ": " + path_ + " is corrupt");
  }
  std::string who_, path_;
  File file_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(1 << 16);
  size_t pos_ = 0, len_ = 0;
  int64_t last_[4] = {0, 0, 0, 0};
};

// Feeds one consumer's input from a tape. A token is pushed before it becomes visible, and no
// more than kBuffer tokens wait in the FIFO: a consumer slower than the recorded producer leaves
// its backlog on disk, not in memory (the whole run queued it). The FIFO then shows the consumer
// the same tokens at the same cycles as the whole run's, as far as the consumer can reach: at
// most a window's pops (1,024 cycles) go between two top-ups. A second reader counts the tokens
// the whole run's producer had pushed by each cycle: where that backlog would have reached the
// FIFO's depth, backpressure would have crossed the cut, and the run stops.
class Replay : public Node {
 public:
  static constexpr size_t kBuffer = 1 << 14;
  static constexpr uint64_t kTopUp = 512;  // cycles between top-ups while the consumer is behind
  Replay(const std::string& n, const Params& p)
      : Node(n, "replay", 0, 1), read_("replay '" + n + "'", p.get_string("path", ""), key_of(p)),
        count_("replay '" + n + "'", p.get_string("path", ""), key_of(p)) {}
  FF_INLINE Step step() override {
    if (out_[0].size() != 1) throw SimError("replay '" + name() + "' feeds one FIFO, not " + std::to_string(out_[0].size()));
    Fifo* f = out_[0][0];
    // Tokens visible within `ahead` cycles go in now: the window engine's consumers read a
    // window's tokens after this node's steps in it; the event engine's calendar takes near
    // wake-ups cheaply (its ring is 256 cycles).
    const uint64_t ahead = f->scheduled() ? 200 : 1024;
    while (count_.more && count_.when <= now_) {
      ++produced_;
      count_.next();
    }
    if (produced_ - (pushed_ - f->size()) >= f->depth())
      throw SimError("replay '" + name() + "': the whole run's FIFO to node " + std::to_string(f->dst_node) +
                     " reaches its depth here: backpressure could cross the cut (run this graph whole)");
    while (read_.more && read_.when <= now_ + ahead && f->size() < kBuffer) {
      if (read_.when <= now_ && f->size() == 0)
        throw SimError("replay '" + name() + "': a token due at cycle " + std::to_string(read_.when) +
                       " was read at cycle " + std::to_string(now_));
      f->push(read_.token, read_.when);
      ++pushed_;
      ++c_.tokens_out;
      if (read_.token.is_done()) {
        finish();
        return Step::Progress;
      }
      if (!read_.next())
        throw SimError("replay '" + name() + "': its tape ends before its stream's D (a tape cut short)");
    }
    const uint64_t due = read_.when > now_ + ahead ? read_.when - ahead - now_ : kTopUp;
    busy_ = f->size() >= kBuffer ? std::min(due, kTopUp) : due;  // the next token's turn, or a top-up
    step_costs_ = true;
    return Step::Progress;
  }
  // A checkpoint: both readers' places and the counts.
  void save(StateOut& o) const override {
    save_base(o);
    read_.save(o);
    count_.save(o);
    o.pod(pushed_); o.pod(produced_);
  }
  void load(StateIn& in) override {
    load_base(in);
    read_.load(in);
    count_.load(in);
    in.pod(pushed_); in.pod(produced_);
  }

 private:
  TapeReader read_, count_;
  uint64_t pushed_ = 0, produced_ = 0;
};

}  // namespace

NodePtr make_tape(const std::string& name, const Params& p) { return make_stepped<Tape>(name, p); }
NodePtr make_replay(const std::string& name, const Params& p) { return make_stepped<Replay>(name, p); }

}  // namespace fuseflow::sim
