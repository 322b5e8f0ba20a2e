"""A simulated program's timeline: its regions placed on the fabric by a strategy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fuseflow.fabric.dag import Task, graph_task
from fuseflow.fabric.resources import demand_of
from fuseflow.fabric.scheduler import FabricState, Span, timeline_from_durations
from fuseflow.fabric.strategy import Strategy, resolve
from fuseflow.sim.arch import Arch

if TYPE_CHECKING:
    from fuseflow.program import Program


def program_tasks(program: Program) -> list[Task]:
    """The relayouts (host conversions) then every region, in program order."""
    hosts = [Task(r.name, frozenset({r.source}), frozenset({r.tensor}), {}, True) for r in program.relayouts]
    return hosts + [graph_task(g, demand_of(g)) for g in program.graphs]


def predicted_cycles(program: Program, args: tuple, arch: Arch) -> list[float]:
    """The cycle model's cycles per task: what a strategy ranks by before anything has run."""
    return predictions(program, args, arch)[0]


def predictions(program: Program, args: tuple, arch: Arch) -> tuple[list[float], list[float]]:
    """The cycle model's cycles and off-chip bytes per task."""
    regions = program.estimate(*args, arch=replace(arch, fabric=None)).regions
    return [float(r.cycles) for r in regions], [float(r.mem_bytes) for r in regions]


def place(
    program: Program,
    cycles: Sequence[int],
    arch: Arch,
    strategy: str | Strategy,
    args: tuple,
    env: Mapping[str, Any] | None = None,
    predicted: Sequence[float] | None = None,
) -> list[Span]:
    """Each task's span. `cycles` are the tasks' own cycles (alone on the machine). With the
    memory model on and a strategy other than the sequential one, the regions run in one engine
    run sharing its channels (`env`: every tensor they read); otherwise spans follow from
    `cycles` exactly."""
    chosen = resolve(strategy)
    tasks = program_tasks(program)
    sequential = _one_at_a_time(chosen)
    traffic = None
    if not sequential and predicted is None:
        predicted, traffic = predictions(program, args, arch)
    if sequential or not arch.memory_model or env is None:
        return timeline_from_durations(tasks, cycles, arch.fabric, chosen, predicted, traffic)
    from fuseflow.fabric.shared_run import shared_timeline

    state = FabricState(tasks, arch.fabric, predicted if predicted is not None else cycles, chosen.name, traffic)
    n_hosts = len(program.relayouts)
    graphs = {n_hosts + k: g for k, g in enumerate(program.graphs)}
    hosts = {i: int(cycles[i]) for i in range(n_hosts)}
    values = {k: np.asarray(v) for k, v in env.items() if isinstance(v, np.ndarray)}
    return shared_timeline(state, chosen, graphs, hosts, env, values, arch)


def shares_memory(strategy: str | Strategy, arch: Arch) -> bool:
    """Whether `place` will run the regions together (so `simulate` must keep every input)."""
    return arch.memory_model and not _one_at_a_time(resolve(strategy))


def _one_at_a_time(strategy: Strategy) -> bool:
    """The base class's schedule: one region at a time never shares the memory with another, so
    each region's own run is its timing (and no shared run is needed)."""
    return type(strategy).schedule is Strategy.schedule
