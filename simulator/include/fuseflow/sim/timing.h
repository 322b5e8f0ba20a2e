// Architecture timing: per-kind latency / initiation interval, preset quirks, memory model.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fuseflow::sim {

struct KindTiming {
  uint64_t latency = 1;  // cycles from a node's action to its outputs' visibility
  uint64_t ii = 1;       // cycles between two actions of one node
};

// An off-chip memory: `channels` each accept one request every `ii` cycles; a request
// moves `bytes_per_request` bytes (one line) and completes `latency` cycles after it starts.
// Nodes keep one line buffer per array they stream, so sequential accesses share requests.
struct MemoryConfig {
  bool enabled = false;
  int channels = 1;
  int bytes_per_request = 64;
  uint64_t latency = 100;
  uint64_t ii = 1;
  uint64_t startup = 0;
};

struct Timing {
  size_t fifo_depth = 10240000;
  uint64_t max_fifo_mib = 8192;  // storage all FIFOs of a run may hold (a simulator limit, not hardware)
  uint64_t max_seconds = 0;      // wall-clock time one run may take (0: no limit; a simulator limit)
  uint64_t spill_tokens = 0;     // a FIFO longer than this keeps its middle on disk (0: never; exact either way)
  KindTiming default_kind;
  std::map<std::string, KindTiming> per_kind;
  // Preset quirks (the sam preset): see docs/architecture.md.
  bool scan_emit_on_pop = false;        // emit a fiber's first coordinate the cycle its ref is popped
  bool reduce_split_stop = false;       // a stop above S0 costs the reduce a second cycle
  // Tile timing (blocked value streams of b-wide tiles, docs/architecture.md "Design: the simulator"): a tile of rank >= 3 is a
  // product being contracted, handled by a b x b matmul unit (II b * tile_matmul_ii_per_b,
  // latency 2b - 1); any other tile (E elements) by a b-lane vector unit (II ceil(E / b) *
  // tile_elementwise_ii_per_b, latency E: b^2 for a b x b tile).
  uint64_t tile_matmul_ii_per_b = 1;
  uint64_t tile_elementwise_ii_per_b = 1;
  MemoryConfig memory;

  KindTiming of(const std::string& kind) const {
    auto it = per_kind.find(kind);
    return it == per_kind.end() ? default_kind : it->second;
  }
};

// The one table of architecture settings (`[arch]` keys): name and value type. fuseflow.sim.arch
// validates user input against it (read through `_simulator.arch_keys()`), and the bindings'
// `to_timing` converts exactly these keys.
struct ArchKey {
  const char* name;
  const char* type;  // "int" (positive), "uint" (non-negative), "bool", or "table"
};
inline constexpr ArchKey kArchKeys[] = {
    {"fifo_depth", "int"},           {"latency", "int"},           {"ii", "int"},
    {"max_cycles", "int"},           {"max_fifo_mib", "int"},      {"max_seconds", "int"},      {"spill_tokens", "int"},
    {"tile_matmul_ii_per_b", "int"},
    {"tile_elementwise_ii_per_b", "int"}, {"scan_emit_on_pop", "bool"}, {"reduce_split_stop", "bool"},
    {"kinds", "table"},              {"memory", "table"},
};
inline constexpr ArchKey kKindKeys[] = {{"latency", "int"}, {"ii", "int"}};
inline constexpr ArchKey kMemoryKeys[] = {
    {"enabled", "bool"}, {"channels", "int"}, {"bytes_per_request", "int"},
    {"latency", "int"},  {"ii", "int"},       {"startup", "uint"},
};

// Shared channel state of the memory model.
class Memory {
 public:
  explicit Memory(const MemoryConfig& c) : cfg_(c), free_(std::max(1, c.channels), c.startup) {}
  bool enabled() const { return cfg_.enabled; }
  int line_bytes() const { return cfg_.bytes_per_request; }
  // Issue one line request at `now`; returns its completion cycle.
  uint64_t request(uint64_t now) {
    auto it = std::min_element(free_.begin(), free_.end());
    uint64_t start = std::max(now, *it);
    *it = start + cfg_.ii;
    ++requests_;
    return start + cfg_.latency;
  }
  uint64_t requests() const { return requests_; }

 private:
  MemoryConfig cfg_;
  std::vector<uint64_t> free_;
  uint64_t requests_ = 0;
};

}  // namespace fuseflow::sim
