"""When each region starts: strategies over the region DAG on a finite fabric.

A region may start once the regions it reads from have finished and the fabric has its units
free; it holds them from its start, through loading its configuration (`reconfig_cycles`), to
its end. `sequential` keeps program order, one region at a time. `concurrent` starts, whenever
units free up, every ready region that fits, longest predicted path first.

A `Strategy` (fabric/strategy.py) decides; a `FabricState` checks and books every start. The
strategy is driven either by known durations (`timeline_from_durations`: exact when regions do
not share a memory model) or by a shared engine run (`shared_run`) that reports each region's
end as it happens.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fuseflow.errors import FuseflowError
from fuseflow.fabric.dag import Task, dependencies, longest_paths
from fuseflow.fabric.strategy import Context, resolve, run_schedule
from fuseflow.sim.arch import RESOURCES, Fabric

if TYPE_CHECKING:
    from fuseflow.fabric.strategy import Strategy
    from fuseflow.fabric.templates import TemplateRunner

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
    batch: int | None = None  # the micro-batch (fabric/split.py); None: the region whole
    template: str | None = None  # the hand-built graph that ran in place of the region

    @property
    def cycles(self) -> int:
        """The region's own run, without the configuration load before it."""
        return self.end - self.start - self.reconfig

    @property
    def label(self) -> str:
        """The task's name in timelines: the region, and its micro-batch after ``#``."""
        return self.region if self.batch is None else f"{self.region}#{self.batch}"

    def to_json(self) -> dict:
        """The span as `SimResult.to_json` reports it (micro-batch and template only when set)."""
        out = {
            "region": self.region,
            "start": self.start,
            "end": self.end,
            "units": dict(self.units),
            "reconfig": self.reconfig,
        }
        if self.batch is not None:
            out["batch"] = self.batch
        if self.template is not None:
            out["template"] = self.template
        return out


@dataclass(frozen=True)
class Utilization:
    """Busy units per resource class over time: `steps` are (cycle, {class: busy}) from that
    cycle on; `mean` is the time-averaged busy units, `fraction` that over the capacity."""

    steps: list[tuple[int, dict[str, int]]]
    mean: dict[str, float]
    fraction: dict[str, float] | None
    peak: dict[str, int]

    @staticmethod
    def of(timeline: Sequence[Span], fabric: Fabric | None) -> Utilization:
        """Units in use over `timeline`: the steps, and per resource the mean, the peak and the fraction of `fabric`."""
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


class FabricState:
    """What a run knows: which tasks finished (or, for host conversions, when they will), which
    hold units, and what is free. Every start goes through `begin`, which refuses what a strategy
    must not do, naming the task.

    A finished task leaves its region's configuration on its units: a later micro-batch of the
    same region that starts on them loads nothing. Any other task may take those units (free
    ones first, then the configurations left longest ago), and loads its own."""

    def __init__(
        self,
        tasks: Sequence[Task],
        fabric: Fabric | None,
        predicted: Sequence[float],
        name: str,
        predicted_bytes: Sequence[float] | None = None,
        deps: Sequence[frozenset[int]] | None = None,
    ):
        self.tasks = list(tasks)
        self.predicted_bytes = list(predicted_bytes) if predicted_bytes is not None else [0.0] * len(tasks)
        self.fabric = fabric
        self.name = name
        self.deps = list(deps) if deps is not None else dependencies(self.tasks)
        self.predicted = list(predicted)
        self.priority = longest_paths(self.deps, self.predicted)
        self.reconfig = fabric.reconfig_cycles if fabric is not None else 0
        self.free = {r: fabric.capacity(r) for r in RESOURCES} if fabric is not None else None
        self.idle: list[tuple[str, dict[str, int]]] = []  # configurations left on free units, oldest first
        self.start: dict[int, int] = {}
        self.loads: dict[int, int] = {}  # cycles each started task spends loading its configuration
        self.end: dict[int, int] = {}  # known ends: finished tasks, and host tasks from their start
        self.before: dict[int, int] = {}  # a micro-batch task -> the one before it in program order
        last: dict[int, int] = {}
        for i, t in enumerate(self.tasks):
            if t.batch is not None:
                if t.batch in last:
                    self.before[i] = last[t.batch]
                last[t.batch] = i

    def units(self, i: int) -> dict[str, int]:
        """Units task `i` holds while it runs (host tasks, such as re-layouts, hold none)."""
        t = self.tasks[i]
        return {} if t.host else dict(t.units)

    def is_ready(self, i: int) -> bool:
        """Whether task `i` may start: not started, its dependences finished, and any task it must follow started."""
        return (
            i not in self.start
            and all(d in self.end for d in self.deps[i])
            and (i not in self.before or self.before[i] in self.start)
        )

    def ready(self) -> list[int]:
        """Every task that may start now, in program order."""
        return [i for i in range(len(self.tasks)) if self.is_ready(i)]

    def running(self) -> list[int]:
        """Tasks started and not yet finished."""
        return [i for i in self.start if i not in self.end]

    def available(self) -> dict[str, int] | None:
        """Units a task may take now: free ones and those holding a finished task's configuration."""
        if self.free is None:
            return None
        return {r: self.free[r] + sum(u.get(r, 0) for _, u in self.idle) for r in RESOURCES}

    def fits(self, i: int) -> bool:
        """Whether task `i`'s units are available now."""
        units, avail = self.units(i), self.available()
        return avail is None or all(units.get(r, 0) <= avail[r] for r in RESOURCES)

    def begin(self, i: int, now: int) -> int:
        """Take task `i`'s units now; returns the cycle its own work begins (its inputs ready,
        its configuration loaded)."""
        t = self.tasks[i]
        if i in self.start:
            raise FuseflowError(f"strategy {self.name}: region {t.label} was issued twice")
        waiting = [self.tasks[d].label for d in self.deps[i] if d not in self.end]
        if waiting:
            raise FuseflowError(
                f"strategy {self.name}: region {t.label} was issued at cycle {now} before its input "
                f"region {waiting[0]} finished"
            )
        if i in self.before and self.before[i] not in self.start:
            raise FuseflowError(
                f"strategy {self.name}: region {t.label} was issued before {self.tasks[self.before[i]].label}: "
                f"a micro-batch runs its regions in program order"
            )
        if not self.fits(i):
            avail = self.available()
            assert avail is not None
            short = next(r for r in RESOURCES if self.units(i).get(r, 0) > avail[r])
            raise FuseflowError(
                f"strategy {self.name}: region {t.label} needs {self.units(i)[short]} {short} units at cycle "
                f"{now}, but only {avail[short]} are free (the fabric would be oversubscribed)"
            )
        self.loads[i] = 0 if t.host else self._take(t.name, self.units(i))
        self.start[i] = now
        return max([now, *(self.end[d] for d in self.deps[i])]) + self.loads[i]

    def _take(self, region: str, units: dict[str, int]) -> int:
        """Book `units` for `region`; the cycles spent loading its configuration."""
        if self.free is None:
            return self.reconfig
        for k, (name, held) in enumerate(self.idle):
            if name == region and held == units:  # its configuration is still there
                del self.idle[k]
                return 0
        while any(units.get(r, 0) > self.free[r] for r in RESOURCES):
            _, held = self.idle.pop(0)
            self.free = {r: self.free[r] + held.get(r, 0) for r in RESOURCES}
        self.free = {r: self.free[r] - units.get(r, 0) for r in RESOURCES}
        return self.reconfig

    def finish(self, i: int, at: int) -> None:
        """Record that task `i` finished at cycle `at`; its units stay configured until reused."""
        self.end[i] = at
        if self.free is not None and not self.tasks[i].host:
            self.idle.append((self.tasks[i].name, self.units(i)))

    def check_all_started(self) -> None:
        """A strategy must issue every region: refuse a run that left one out, naming it."""
        left = [t.label for i, t in enumerate(self.tasks) if i not in self.start]
        if left:
            raise FuseflowError(
                f"strategy {self.name} finished with {len(left)} region(s) never issued, first {left[0]}"
                + ("" if self.fabric is None else " (does it fit the fabric?)")
            )

    def span(self, i: int, end: int, template: str | None = None) -> Span:
        """Task `i`'s span in the timeline, ending at `end` (run by `template`, if one)."""
        t = self.tasks[i]
        return Span(t.name, self.start[i], end, self.units(i), self.loads.get(i, 0), t.batch, template)


def timeline_from_durations(
    tasks: Sequence[Task],
    durations: Sequence[int],
    fabric: Fabric | None,
    strategy: str | Strategy,
    predicted: Sequence[float] | None = None,
    predicted_bytes: Sequence[float] | None = None,
    deps: Sequence[frozenset[int]] | None = None,
    templates: TemplateRunner | None = None,
) -> list[Span]:
    """The timeline when each task takes its own `durations[i]` cycles wherever it runs (a task
    issued with a template: the template's, run by `templates`)."""

    chosen = resolve(strategy)
    state = FabricState(
        tasks, fabric, predicted if predicted is not None else durations, chosen.name, predicted_bytes, deps
    )
    driver = _TimedDriver(state, durations, templates)
    run_schedule(chosen, Context(state, driver))
    state.check_all_started()
    while driver.wait() is not None:  # what the strategy issued last runs to its end
        pass
    names = templates.names if templates is not None else {}
    return [state.span(i, driver.ends[i], names.get(i)) for i in range(len(tasks))]


class _TimedDriver:
    """Runs issued regions for known durations: `wait` pops the next end off a calendar."""

    def __init__(self, state: FabricState, durations: Sequence[int], templates: TemplateRunner | None = None):
        self.state, self.durations, self.templates = state, durations, templates
        self.now = 0
        self.running: list[tuple[int, int]] = []  # (end, task)
        self.ends: dict[int, int] = {}

    def issue(self, i: int, template: Any = None) -> None:
        duration = int(self.durations[i])
        if template is not None:
            if self.templates is None:
                raise FuseflowError(
                    f"strategy {self.state.name}: region {self.state.tasks[i].label} was issued with a template, "
                    "but this run has no values to check it against (estimate() runs none)"
                )
            duration = self.templates.run(i, template)
        begin = self.state.begin(i, self.now)
        heapq.heappush(self.running, (begin + duration, i))

    def wait(self) -> int | None:
        if not self.running:
            return None
        self.now, i = heapq.heappop(self.running)
        self.state.finish(i, self.now)
        self.ends[i] = self.now
        return i


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
