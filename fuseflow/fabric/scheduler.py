"""When each region starts: strategies over the region DAG on a finite fabric.

A region may start once the regions it reads from have finished and the fabric has its units
free; it holds them from its start, through loading its configuration (`reconfig_cycles`), to
its end. `sequential` keeps program order, one region at a time. `concurrent` starts, whenever
units free up, every ready region that fits, longest predicted path first.

The `Scheduler` is driven either by known durations (`timeline_from_durations`: exact when
regions do not share a memory model) or by a shared engine run (`shared_run`) that reports each
region's end as it happens.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Sequence

from fuseflow.errors import FuseflowError
from fuseflow.fabric.dag import Task, dependencies, longest_paths
from fuseflow.sim.arch import RESOURCES, Fabric

STRATEGIES = ("sequential", "concurrent")


@dataclass(frozen=True)
class Span:
    """One region run on the timeline: it holds `units` from `start` to `end`; its configuration
    loads during the first `reconfig` cycles."""

    region: str
    start: int
    end: int
    units: dict[str, int] = field(default_factory=dict)
    reconfig: int = 0

    @property
    def cycles(self) -> int:
        return self.end - self.start - self.reconfig

    def to_json(self) -> dict:
        return {
            "region": self.region,
            "start": self.start,
            "end": self.end,
            "units": dict(self.units),
            "reconfig": self.reconfig,
        }


@dataclass(frozen=True)
class Utilization:
    """Busy units per resource class over time: `steps` are (cycle, {class: busy}) from that
    cycle on; `mean` is the time-averaged busy units, `fraction` that over the capacity."""

    steps: list[tuple[int, dict[str, int]]]
    mean: dict[str, float]
    fraction: dict[str, float] | None
    peak: dict[str, int]

    @staticmethod
    def of(timeline: Sequence[Span], fabric: Fabric | None) -> "Utilization":
        events: dict[int, dict[str, int]] = {}
        for s in timeline:
            for r in RESOURCES:
                n = s.units.get(r, 0)
                events.setdefault(s.start, dict.fromkeys(RESOURCES, 0))[r] += n
                events.setdefault(s.end, dict.fromkeys(RESOURCES, 0))[r] -= n
        busy = dict.fromkeys(RESOURCES, 0)
        steps, area, peak = [], dict.fromkeys(RESOURCES, 0.0), dict.fromkeys(RESOURCES, 0)
        prev = 0
        for t in sorted(events):
            for r in RESOURCES:
                area[r] += busy[r] * (t - prev)
            prev = t
            busy = {r: busy[r] + events[t][r] for r in RESOURCES}
            peak = {r: max(peak[r], busy[r]) for r in RESOURCES}
            steps.append((t, dict(busy)))
        span = max((s.end for s in timeline), default=0)
        mean = {r: (area[r] / span if span else 0.0) for r in RESOURCES}
        frac = {r: mean[r] / fabric.capacity(r) for r in RESOURCES} if fabric is not None else None
        return Utilization(steps, mean, frac, peak)


class Scheduler:
    """The state of one run: which regions finished, which run, what units are free."""

    def __init__(self, tasks: Sequence[Task], fabric: Fabric | None, strategy: str, predicted: Sequence[float]):
        if strategy not in STRATEGIES:
            raise FuseflowError(f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
        self.tasks = list(tasks)
        self.fabric = fabric
        self.strategy = strategy
        self.deps = dependencies(self.tasks)
        self.priority = longest_paths(self.deps, list(predicted))
        self.reconfig = fabric.reconfig_cycles if fabric is not None else 0
        self.free = {r: fabric.capacity(r) for r in RESOURCES} if fabric is not None else None
        self.start: dict[int, int] = {}
        self.end: dict[int, int] = {}  # known ends: finished regions, and host tasks from their issue

    def _ready(self, i: int) -> bool:
        return i not in self.start and all(d in self.end for d in self.deps[i])

    def pick(self, now: int) -> list[tuple[int, int]]:
        """Regions to start now, each with the cycle its own work begins (after its inputs are
        ready and its configuration is loaded); their units are taken."""
        if self.strategy == "sequential":
            nxt = len(self.start)
            if nxt == len(self.tasks) or len(self.end) < nxt or any(self.end[j] > now for j in range(nxt)):
                return []
            candidates = [nxt]
        else:
            ready = [i for i in range(len(self.tasks)) if self._ready(i)]
            candidates = sorted(ready, key=lambda i: (-self.priority[i], i))
        out = []
        for i in candidates:
            t = self.tasks[i]
            units = {} if t.host else t.units
            if self.free is not None and any(units.get(r, 0) > self.free[r] for r in RESOURCES):
                continue
            if self.free is not None:
                self.free = {r: self.free[r] - units.get(r, 0) for r in RESOURCES}
            begin = max([now, *(self.end[d] for d in self.deps[i])])
            self.start[i] = now
            out.append((i, begin + (0 if t.host else self.reconfig)))
        return out

    def finish(self, i: int, at: int) -> None:
        self.end[i] = at
        if self.free is not None and not self.tasks[i].host:
            self.free = {r: self.free[r] + self.tasks[i].units.get(r, 0) for r in RESOURCES}

    def span(self, i: int, end: int) -> Span:
        t = self.tasks[i]
        return Span(t.name, self.start[i], end, {} if t.host else dict(t.units), 0 if t.host else self.reconfig)


def timeline_from_durations(
    tasks: Sequence[Task],
    durations: Sequence[int],
    fabric: Fabric | None,
    strategy: str,
    predicted: Sequence[float] | None = None,
) -> list[Span]:
    """The timeline when each region takes its own `durations[i]` cycles wherever it runs."""
    sched = Scheduler(tasks, fabric, strategy, predicted if predicted is not None else durations)
    running: list[tuple[int, int]] = []  # (end, task)
    ends: dict[int, int] = {}
    now = 0

    def issue() -> None:
        for i, begin in sched.pick(now):
            end = begin + int(durations[i])
            heapq.heappush(running, (end, i))

    issue()
    while running:
        now, i = heapq.heappop(running)
        sched.finish(i, now)
        ends[i] = now
        while running and running[0][0] == now:
            _, j = heapq.heappop(running)
            sched.finish(j, now)
            ends[j] = now
        issue()
    if len(ends) < len(tasks):
        stuck = next(t.name for k, t in enumerate(tasks) if k not in ends)
        raise FuseflowError(f"strategy {strategy}: region {stuck} never started (it does not fit the fabric)")
    return [sched.span(i, ends[i]) for i in range(len(tasks))]


def tracks(timeline: Sequence[Span]) -> list[int]:
    """A row per span such that spans on one row never overlap (first free row, by start): the
    Gantt chart's rows and the Perfetto trace's tracks."""
    free_at: list[int] = []
    out = [0] * len(timeline)
    for k in sorted(range(len(timeline)), key=lambda k: (timeline[k].start, k)):
        s = timeline[k]
        row = next((r for r, t in enumerate(free_at) if t <= s.start), len(free_at))
        if row == len(free_at):
            free_at.append(0)
        free_at[row] = s.end
        out[k] = row
    return out
