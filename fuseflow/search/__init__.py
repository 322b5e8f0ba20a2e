"""Search: each region's dataflow order, chosen before the region is lowered for good.

- `ordering`: which orders a region has (enumerated by concordance), a static estimate, and
  `choose` (``auto``, ``K`` or ``i,k,j``);
- `rank`: `OrderRanker`, which lowers the shortlisted orders and keeps the fastest by the cycle
  model (`fuseflow.cost`);
- `orders`: the search over a module, region by region in program order, on the lowering's
  `ModuleLowering` (``fuseflow-order`` and ``lower-to-sam{order=}`` run it).

The package sits between the lowering it drives (`fuseflow.conversion`, which lowers at a given
order and knows no search) and the passes that run it.
"""
