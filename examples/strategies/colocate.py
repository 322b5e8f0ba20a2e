"""Co-location by bottleneck: run side by side only regions that stress different resources.

DynaFlow measured that overlapping two pieces that contend for one unit can lose (0.70x). Here a
region is *memory-bound* when the cycle model predicts its memory traffic, not its ALU work, to
set its cycles. A memory-bound region never starts while another memory-bound one runs; compute
bound ones start whenever they fit. Highest priority (longest predicted chain) first.

    fuseflow run examples/graphsage.py --arch amber --strategy examples/strategies/colocate.py:Colocate
"""

from __future__ import annotations

import fuseflow


class Colocate(fuseflow.Strategy):
    name = "colocate"
    bytes_per_cycle = 4.0  # memory traffic per cycle above which a region counts as memory-bound

    def schedule(self, ctx: fuseflow.Context) -> None:
        running: set[fuseflow.RegionTask] = set()
        while True:
            for task in sorted(ctx.ready(), key=lambda t: -ctx.priority(t)):
                memory_bound = self.memory_bound(ctx, task)
                if memory_bound and any(self.memory_bound(ctx, r) for r in running):
                    continue  # it would contend for the memory channels
                if ctx.fits(task):
                    ctx.issue(task)
                    running.add(task)
            done = ctx.wait()
            if done is None:
                return
            running.discard(done)

    def memory_bound(self, ctx: fuseflow.Context, task: fuseflow.RegionTask) -> bool:
        return ctx.memory_bytes(task) > self.bytes_per_cycle * max(ctx.cost(task), 1.0)
