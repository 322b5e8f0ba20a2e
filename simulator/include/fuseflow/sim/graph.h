// A dataflow graph of primitives connected by FIFOs, and the cycle loop that runs it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuseflow/sim/primitives.h"

namespace fuseflow::sim {

struct Edge { int src, src_port, dst, dst_port; std::vector<Token> tokens; };

struct RunResult {
  uint64_t cycles = 0;
  std::vector<Edge> traces;  // filled when recording
};

class Graph {
 public:
  // fifo_depth: capacity of every edge; latency: cycles from push to visibility.
  Graph(size_t fifo_depth, uint64_t latency);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Add a primitive fed by (node, output port) pairs; returns its id.
  int add_node(const std::string& kind, const std::string& name,
               const std::vector<std::pair<int, int>>& inputs, const Params& params);
  // Run to completion; throws SimError on deadlock or when max_cycles is reached.
  RunResult run(uint64_t max_cycles, bool record);
  size_t size() const { return nodes_.size(); }
  Node& node(size_t i) { return *nodes_.at(i); }

 private:
  [[noreturn]] void deadlock(uint64_t cycle, const char* why);
  size_t depth_;
  uint64_t latency_;
  std::vector<NodePtr> nodes_;
  std::vector<std::unique_ptr<Fifo>> fifos_;
};

}  // namespace fuseflow::sim
