// Disk storage for the cold middle of long queues (Fifo::settle, docs/simulator-performance.md
// "Queues on disk"). A producer appends at a queue's tail and its consumer reads the head, so the
// tokens between can wait in a file; they come back in order before the consumer can reach them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fuseflow::sim {

// Fixed-size slots in one temporary file, unlinked as soon as it is made (the space goes back
// to the system when the run ends, however it ends). A slot read back is reused.
class SpillStore {
 public:
  SpillStore(size_t slot_bytes, const std::string& dir);
  ~SpillStore();
  SpillStore(const SpillStore&) = delete;
  SpillStore& operator=(const SpillStore&) = delete;
  size_t slot_bytes() const { return slot_bytes_; }
  // Write `n` <= slot_bytes bytes to a free slot; returns the slot.
  uint64_t put(const void* p, size_t n);
  // Read a slot's first `n` bytes; `release` frees it for reuse.
  void get(uint64_t slot, void* p, size_t n, bool release);
  uint64_t bytes_written() const { return written_; }
  uint64_t peak_bytes() const { return peak_slots_ * slot_bytes_; }
  int queues = 0;  // FIFOs that have spilled in this run

 private:
  int fd_ = -1;
  size_t slot_bytes_;
  std::vector<uint64_t> free_;
  uint64_t slots_ = 0, in_use_ = 0, peak_slots_ = 0, written_ = 0;
};

}  // namespace fuseflow::sim
