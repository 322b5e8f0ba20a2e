"""Cost: what a sam graph costs, predicted without simulating (docs/cycle-model.md).

- `cycle_model`: a region's tokens per node, cycles and memory traffic from its sam graph
  (`CycleModel`, the extension point for other rules);
- `memory_stalls`: the memory term (channels, lines, stalls behind them);
- `coordinates`: where a stream's innermost coordinates come from (for unions and merges);
- `memory_walk`: how a reference stream walks memory lines;
- `tensor_stats`: per-level statistics of stored tensors;
- `input_stats`: those statistics for a program's inputs, and re-layout costs.

The package sits below the lowering, the fabric, the order search and planning: it reads plain
graph specs and statistics, never MLIR, the compiler or the simulator.
"""
