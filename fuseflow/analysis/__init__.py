"""Pure analyses of fuseflow's IR-independent data: no MLIR, no simulator.

`tensor_stats` measures the per-level structure of tensors; `cycle_model` predicts a sam graph's
tokens per node and cycles from those statistics (docs/cycle-model.md).
"""
