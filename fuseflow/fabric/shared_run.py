"""Regions that run at the same time, simulated in one engine run that shares the memory model.

Each region is a part of one C++ graph (`Graph.begin_part`); the engine calls back when a part's
writers finish, and the `Scheduler` answers with the parts to start and the cycle each starts
at. Timing is exact under contention: requests of concurrently running regions queue on the
same channels. Values do not depend on timing; every region's outputs are checked against
those of the runs that computed them (`Program.simulate`).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

import fuseflow._simulator as _simulator
from fuseflow.errors import MismatchError, SimulationError
from fuseflow.fabric.scheduler import Scheduler, Span
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec, add_nodes, decode_outputs, pack_inputs


def shared_timeline(
    sched: Scheduler,
    graphs: Mapping[int, GraphSpec],
    host_cycles: Mapping[int, int],
    env: Mapping[str, np.ndarray],
    values: Mapping[str, np.ndarray],
    arch: Arch,
) -> list[Span]:
    """Run every task of `sched` in one engine run: `graphs` are the simulated tasks (by task
    index), `host_cycles` the modelled ones (relayouts); `env` holds every tensor they read."""
    g = _simulator.Graph(arch.settings)
    part_of: dict[int, int] = {}
    task_of: list[int] = []
    ranges: list[tuple[int, int]] = []
    for i, spec in graphs.items():
        part_of[i] = g.begin_part()
        task_of.append(i)
        first = len(g)
        add_nodes(g, spec, pack_inputs(spec, env))
        ranges.append((first, len(g)))
    host_end: dict[int, int] = {}

    def release(done: int, cycle: int) -> list[tuple[int, int]]:
        if done >= 0:
            sched.finish(task_of[done], cycle)
        starts: list[tuple[int, int]] = []
        while True:  # a host task's end is known when it starts: what waits on it may start too
            picked = sched.pick(cycle)
            if not picked:
                return starts
            for i, begin in picked:
                if i in part_of:
                    starts.append((part_of[i], begin))
                else:
                    host_end[i] = begin + int(host_cycles[i])
                    sched.finish(i, host_end[i])

    try:
        res = g.run(arch.max_cycles, engine="event", release=release)
    except _simulator.SimError as e:
        raise SimulationError(f"shared run of {len(graphs)} regions: {e}") from None
    for p, (first, end) in enumerate(ranges):
        spec = graphs[task_of[p]]
        for name, got in decode_outputs(spec, res["nodes"][first:end]).items():
            want = values.get(name)
            if want is not None and not np.array_equal(got, want, equal_nan=True):
                raise MismatchError(f"region {spec.name}: its shared run wrote other values for {name}")
    ends = {task_of[p]: int(finish) for p, (_, finish) in enumerate(res["parts"])}
    ends.update(host_end)
    return [sched.span(i, ends[i]) for i in range(len(sched.tasks))]
