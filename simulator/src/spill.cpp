// The spill file (spill.h): positioned reads and writes, so slots need no seek state.
#include "fuseflow/sim/spill.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fuseflow/sim/token.h"

namespace fuseflow::sim {

SpillStore::SpillStore(size_t slot_bytes, const std::string& dir) : slot_bytes_(slot_bytes) {
  std::string path = (dir.empty() ? std::string("/tmp") : dir) + "/fuseflow-spill-XXXXXX";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) throw SimError("spill: cannot create a file in " + dir + ": " + std::strerror(errno));
  ::unlink(name.data());
}

SpillStore::~SpillStore() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t SpillStore::put(const void* p, size_t n) {
  uint64_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = slots_++;
  }
  const char* c = static_cast<const char*>(p);
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::pwrite(fd_, c + done, n - done, static_cast<off_t>(slot * slot_bytes_ + done));
    if (w <= 0) throw SimError(std::string("spill: cannot write queued tokens to disk (disk full?): ") + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  written_ += n;
  if (++in_use_ > peak_slots_) peak_slots_ = in_use_;
  return slot;
}

void SpillStore::get(uint64_t slot, void* p, size_t n, bool release) {
  char* c = static_cast<char*>(p);
  for (size_t done = 0; done < n;) {
    const ssize_t r = ::pread(fd_, c + done, n - done, static_cast<off_t>(slot * slot_bytes_ + done));
    if (r <= 0) throw SimError(std::string("spill: cannot read queued tokens back: ") + std::strerror(errno));
    done += static_cast<size_t>(r);
  }
  if (release) {
    free_.push_back(slot);
    --in_use_;
  }
}

}  // namespace fuseflow::sim
