"""Planning: what the compiler chooses and how it predicts what a choice costs.

- `ordering`: the order search (which dataflow orders a region has, and a static shortlist);
- `rank`: `OrderRanker`, which lowers the shortlisted orders and keeps the fastest by estimate;
- `planner`: ``schedule="auto"``, the fusion schedule by segment cover;
- `estimate`: a program's estimate, region by region;
- `units`: the planner's units (ops that fuse or split together);
- `lanes`, `fill`: each region's lanes on a finite fabric.

What a choice costs is predicted by `fuseflow.cost`.

Planning imports no user API: the planner receives the compile driver's lowering function from
its caller.
"""
