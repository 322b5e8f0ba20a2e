"""Ping-pong: two lanes of regions alternate, so that one region loads its configuration while
the other computes.

Regions are dealt to two lanes in program order; each lane runs its regions one after another,
and a lane starts its next ready region as soon as its previous one ends. On a fabric with room
for two regions this overlaps independent work (the Q/K/V projections of two heads) without
ever holding more than two regions' units; regions that wait on each other still run in order.

    fuseflow run examples/gpt_bigbird.py -O seq=32 --arch amber --strategy examples/strategies/ping_pong.py:PingPong
"""

from __future__ import annotations

import fuseflow


class PingPong(fuseflow.Strategy):
    name = "ping-pong"

    def schedule(self, ctx: fuseflow.Context) -> None:
        lanes: list[list[fuseflow.RegionTask]] = [[], []]
        for k, task in enumerate(ctx.tasks):
            lanes[k % 2].append(task)
        busy: dict[int, fuseflow.RegionTask] = {}  # lane -> the region it runs
        while any(lanes) or busy:
            for lane, queue in enumerate(lanes):
                if lane in busy or not queue:
                    continue
                head = queue[0]
                if head in ctx.ready() and ctx.fits(head):
                    ctx.issue(queue.pop(0))
                    busy[lane] = head
            done = ctx.wait()
            if done is None:  # nothing runs: the earliest region left is ready; it must fit alone
                lane = min((q for q in range(2) if lanes[q]), key=lambda q: lanes[q][0].index)
                busy[lane] = lanes[lane].pop(0)
                ctx.issue(busy[lane])
                continue
            for lane, task in list(busy.items()):
                if task == done:
                    del busy[lane]
