"""Pure analyses of index notation: no MLIR, no simulator, no costs.

`index_notation` is the expression language regions lower from; `nests` plans a region's loop
nests; `storage_order`, `absent` and `alpha` answer questions the lowering asks of it. What a
graph costs lives in `fuseflow.cost`.
"""
