// Factories for every SAM primitive, grouped by family (one source file each).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuseflow/sim/node.h"

namespace fuseflow::sim {

using NodePtr = std::unique_ptr<Node>;

template <class D, class... A>
NodePtr make_stepped(A&&... args) { return std::make_unique<Stepped<D>>(std::forward<A>(args)...); }

// scan.cpp: root, level scanners (dense / compressed) and iterate-locate.
NodePtr make_root(const std::string& name, const Params& p);
NodePtr make_scan(const std::string& name, const Params& p);
NodePtr make_locate(const std::string& name, const Params& p);
// joiner.cpp: N-way intersect and union (inputs: N crds then N refs).
NodePtr make_intersect(const std::string& name, int n_inputs, const Params& p);
NodePtr make_union(const std::string& name, int n_inputs, const Params& p);
// repeat.cpp: repeat-signal generator and repeater.
NodePtr make_repsiggen(const std::string& name, const Params& p);
NodePtr make_repeat(const std::string& name, const Params& p);
// compute.cpp: array loads and ALUs.
NodePtr make_load(const std::string& name, const Params& p);
NodePtr make_alu(const std::string& name, int n_inputs, const Params& p);
// reduce.cpp: innermost reduction and sparse accumulators of order 1 and 2.
NodePtr make_reduce(const std::string& name, int n_inputs, const Params& p);
NodePtr make_spacc(const std::string& name, const Params& p);
// drop.cpp: coordinate and value droppers.
NodePtr make_crd_drop(const std::string& name, const Params& p);
NodePtr make_val_drop(const std::string& name, const Params& p);
// writer.cpp: level writers.
NodePtr make_write_crd(const std::string& name, int n_inputs, const Params& p);
NodePtr make_write_val(const std::string& name, const Params& p);

// lanes.cpp: parallel lanes at one index-variable level.
NodePtr make_fork(const std::string& name, const Params& p);
NodePtr make_join(const std::string& name, int n_inputs, const Params& p);

// tile.cpp: tile variants of load, alu and write_val (blocked value streams).
NodePtr make_tile_load(const std::string& name, const Params& p);
NodePtr make_tile_alu(const std::string& name, int n_inputs, const Params& p);
NodePtr make_tile_write_val(const std::string& name, const Params& p);

// stream.cpp: a graph cut in pieces (not sam ops; make_node builds them by these kind names):
// `tape` (path, key) writes its input stream with each token's visible cycle to a file;
// `replay` (path, key) pushes a tape's tokens to its consumers, each visible at its cycle.
NodePtr make_tape(const std::string& name, const Params& p);
NodePtr make_replay(const std::string& name, const Params& p);

// Build any primitive by its sam op mnemonic; throws std::invalid_argument.
NodePtr make_node(const std::string& kind, const std::string& name, int n_inputs, const Params& p);
// Every primitive kind make_node builds (sam op mnemonics), in table order.
std::vector<std::string> primitive_kinds();
// One primitive's row of the table: its fabric resource class ("memory" or "compute"), port
// counts (-1: variadic), and the parameters it reads ({name, type}; type: int, ints, float,
// floats, string): from its op's attributes, from tensor data, and for blocked value streams.
struct PrimitiveInfo {
  std::string kind, resource;
  int inputs, outputs;
  std::vector<std::pair<std::string, std::string>> params, data, tile;
};
// The whole table, in table order.
std::vector<PrimitiveInfo> primitive_table();

}  // namespace fuseflow::sim
