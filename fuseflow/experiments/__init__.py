"""Experiments: many design points of one model, each measured alike.

- `point.measure`: one point (compile, estimate, simulate, check against PyTorch) as one row;
  `fuseflow dse`'s workers, `fuseflow study` and the benchmarks (`benchmarks/figure12.py`,
  `benchmarks/paper.py`) all measure through it.
- `study.study`: one model under several fusion schedules (``fuseflow study``).
- `order_sweep.order_sweep`: every dataflow order of one region (``fuseflow order-sweep``).
- `dse.sweep` over a `space.Space` of points on an `executor.Executor` (a local pool or Ray), with
  a cache of finished points (``fuseflow dse``); `evaluate.evaluate` is the worker's side.
"""
