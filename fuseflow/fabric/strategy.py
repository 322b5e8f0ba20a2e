"""Strategies: programmable scheduling of regions on the fabric (DynaFlow's interface).

A strategy is kept apart from the model: its `schedule(ctx)` drives a simulated run through
`ctx.ready()` (the regions not yet issued whose inputs are done), `ctx.issue(task)` (start one
on free units) and `ctx.wait()` (advance to the next region that finishes; None when nothing
runs). `ctx.cost(task)` is the cycle model's prediction (`ctx.memory_bytes(task)` its traffic),
`ctx.priority(task)` that plus the
longest predicted chain waiting on it, `ctx.free` the free units per class. Whatever a
strategy does, `FabricState` refuses an issue before the inputs are done, an oversubscribed
fabric and a region issued twice, naming the region; a strategy that leaves regions unissued
fails naming the first.

A strategy may also cut the rows into micro-batches (`split(info)`, fabric/split.py): the tasks
are then (region, micro-batch) pairs, and a consumer that reads its producer by rows waits only
for the same micro-batch.

Built-in: ``sequential`` (program order, one at a time; the default), ``concurrent`` (every ready
region that fits, highest priority first), ``pipeline:K`` (K micro-batches of equal work, issued
round-robin, one running copy per region) and ``auto`` (the best of those by the cycle model,
confirmed by simulation; fabric/run.py). A user strategy is a subclass in a file:
``strategy="my_strategy.py:PingPong"`` (CLI ``--strategy FILE.py:Class``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fuseflow.errors import FuseflowError, user_location
from fuseflow.fabric.split import SPLIT_KINDS, SplitInfo, SplitPlan, split_nnz, split_rows
from fuseflow.model_files import load_python_file

if TYPE_CHECKING:
    from fuseflow.fabric.scheduler import FabricState


@dataclass(frozen=True)
class RegionTask:
    """One region run a strategy may issue."""

    region: str
    index: int  # position in program order (relayouts first)
    units: dict = field(hash=False, compare=False)
    host: bool = False  # a modelled conversion of a model input: no fabric units
    batch: int | None = None  # its micro-batch; None: the region whole

    def __repr__(self) -> str:
        return (
            f"RegionTask({self.region!r})" if self.batch is None else f"RegionTask({self.region!r}, batch={self.batch})"
        )


class Driver(Protocol):
    """What runs the issued regions: known durations, or a shared engine run."""

    now: int

    def issue(self, i: int, template: Any = None) -> None:
        """Start task `i` (optionally as a loaded template) now."""
        ...

    def wait(self) -> int | None:
        """Block until a running task ends; its index, or None when none runs."""
        ...


class Context:
    """What `Strategy.schedule` sees of a run."""

    def __init__(self, state: FabricState, driver: Driver):
        self._state, self._driver = state, driver
        self._tasks = [RegionTask(t.name, i, state.units(i), t.host, t.batch) for i, t in enumerate(state.tasks)]

    @property
    def now(self) -> int:
        """The current cycle."""
        return self._driver.now

    @property
    def free(self) -> dict[str, int] | None:
        """Free units per resource class (None: an unbounded fabric)."""
        return self._state.available()

    @property
    def tasks(self) -> list[RegionTask]:
        """Every region run of the program, in program order."""
        return list(self._tasks)

    def ready(self) -> list[RegionTask]:
        """Regions not yet issued whose inputs are done, in program order."""
        return [self._tasks[i] for i in self._state.ready()]

    def running(self) -> list[RegionTask]:
        """Tasks issued and not yet finished."""
        return [self._tasks[i] for i in self._state.running()]

    def fits(self, task: RegionTask) -> bool:
        """Whether `task`'s units are free now."""
        return self._state.fits(task.index)

    def issue(self, task: RegionTask, template: Any = None) -> None:
        """Start `task` now on free units (it loads its configuration first). `template`: a sam
        graph (a `.mlir` file, sam text or a parsed graph) to run in place of the region; it must
        compute the region's values (fabric/templates.py)."""
        self._driver.issue(task.index, template)

    def wait(self) -> RegionTask | None:
        """Advance to the next region that finishes and return it; None when nothing runs."""
        i = self._driver.wait()
        return None if i is None else self._tasks[i]

    def cost(self, task: RegionTask) -> float:
        """The cycle model's prediction of `task`'s cycles alone on the machine."""
        return self._state.predicted[task.index]

    def memory_bytes(self, task: RegionTask) -> float:
        """The cycle model's prediction of `task`'s off-chip bytes (0 for a relayout)."""
        return self._state.predicted_bytes[task.index]

    def priority(self, task: RegionTask) -> float:
        """`cost` plus the longest predicted chain of regions that wait on `task`."""
        return self._state.priority[task.index]


class Strategy:
    """The base strategy: one micro-batch, program order, one region at a time. Subclasses
    override `split`, `schedule` or both."""

    name = "sequential"

    def split(self, info: SplitInfo) -> SplitPlan:
        """The micro-batches: `SplitPlan.one(info)` (the rows whole), or `split_nnz(info, K)` /
        `split_rows(info, K)`, or any `SplitPlan` of contiguous ranges covering the rows."""
        return SplitPlan.one(info)

    def schedule(self, ctx: Context) -> None:
        """Issue the regions in program order, each after its inputs are done."""
        for task in ctx.tasks:
            while task not in ctx.ready():  # its inputs are still running
                if ctx.wait() is None:
                    raise FuseflowError(f"strategy {self.name}: region {task.region} can never become ready")
            ctx.issue(task)
            ctx.wait()


class Concurrent(Strategy):
    """Whenever units free up, every ready region that fits, highest priority first."""

    name = "concurrent"

    def schedule(self, ctx: Context) -> None:
        """Issue every ready region that fits, the highest priority first."""
        while True:
            for task in sorted(ctx.ready(), key=lambda t: (-ctx.priority(t), t.index)):
                if ctx.fits(task):
                    ctx.issue(task)
            if ctx.wait() is None:
                return


class Pipeline(Strategy):
    """K micro-batches (`kind`: ``nnz``, equal work, or ``rows``), issued round-robin: whenever
    units free up, the ready tasks of the earliest micro-batches start, at most one running copy
    of each region, so a region keeps its configuration from one micro-batch to the next while
    the regions after it work on the ones before."""

    def __init__(self, k: int, kind: str = "nnz"):
        if kind not in SPLIT_KINDS:
            raise FuseflowError(f"unknown split {kind!r}: one of {', '.join(SPLIT_KINDS)}")
        self.k, self.kind = k, kind
        self.name = f"pipeline:{k}" + ("" if kind == "nnz" else f":{kind}")

    def split(self, info: SplitInfo) -> SplitPlan:
        """Cut the rows into `k` micro-batches, by rows or by stored entries."""
        return (split_nnz if self.kind == "nnz" else split_rows)(info, self.k)

    def schedule(self, ctx: Context) -> None:
        """Issue each region's micro-batches in order, one running copy per region."""
        while True:
            busy = {t.region for t in ctx.running()}
            for task in sorted(ctx.ready(), key=lambda t: (t.batch or 0, t.index)):
                if task.region not in busy and ctx.fits(task):
                    ctx.issue(task)
                    busy.add(task.region)
            if ctx.wait() is None:
                return


class Auto(Strategy):
    """Chooses among ``sequential``, ``concurrent`` and ``pipeline:K`` (K = 2, 4, 8) by the cycle
    model's makespan, then simulates those predicted to beat ``sequential``: the `FINALISTS`
    best, and every one within `NEAR` of the best prediction (the model's errors differ between
    candidates by about that much on a finite fabric). It keeps the fastest simulated,
    ``sequential`` included (fabric/run.py). `chosen` is the strategy it ran."""

    name = "auto"
    CANDIDATES: tuple[str, ...] = ("sequential", "concurrent", "pipeline:2", "pipeline:4", "pipeline:8")
    FINALISTS = 2
    NEAR = 1.15

    def __init__(self) -> None:
        self.chosen: Strategy | None = None
        self.considered: dict[str, float] = {}  # candidate -> predicted makespan


def run_schedule(strategy: Strategy, ctx: Context) -> None:
    """`strategy.schedule(ctx)`; an exception in a user's strategy is one located error."""
    try:
        strategy.schedule(ctx)
    except FuseflowError:
        raise
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise FuseflowError(
            f"strategy {strategy.name}: {type(e).__name__}: {first}", user_location(e.__traceback__)
        ) from None


BUILTIN: dict[str, type[Strategy]] = {"sequential": Strategy, "concurrent": Concurrent, "auto": Auto}


def _pipeline(text: str) -> Pipeline:
    _, k, *kind = text.split(":")
    if not k.isdigit() or int(k) < 1 or len(kind) > 1:
        raise FuseflowError(f"strategy {text!r}: expected pipeline:K or pipeline:K:rows, K a positive integer")
    return Pipeline(int(k), kind[0] if kind else "nnz")


def resolve(strategy: str | Strategy) -> Strategy:
    """A built-in by name, a `Strategy`, or ``FILE.py:Class`` (a `Strategy` subclass in a file)."""
    if isinstance(strategy, Strategy):
        return strategy
    if strategy in BUILTIN:
        return BUILTIN[strategy]()
    if isinstance(strategy, str) and strategy.startswith("pipeline:"):
        return _pipeline(strategy)
    if not isinstance(strategy, str) or ".py" not in strategy:
        raise FuseflowError(
            f"unknown strategy {strategy!r}: one of {', '.join(BUILTIN)}, pipeline:K[:rows], or FILE.py:Class"
        )
    path, _, cls_name = strategy.partition(":")
    p = Path(path)
    try:
        mod = load_python_file(path, f"fuseflow_strategy_{p.stem}")
    except FuseflowError as e:
        raise FuseflowError(f"strategy {strategy}: {e.message}", e.location) from None
    found = [
        v
        for v in vars(mod).values()
        if isinstance(v, type) and issubclass(v, Strategy) and v.__module__ == mod.__name__
    ]
    if cls_name:
        cls = getattr(mod, cls_name, None)
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            raise FuseflowError(f"strategy {strategy}: {path} defines no Strategy subclass {cls_name!r}")
    elif len(found) == 1:
        cls = found[0]
    else:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise FuseflowError(f"strategy {strategy}: name the class (FILE.py:Class); Strategy subclasses: {names}")
    obj = cls()
    if obj.name in BUILTIN and cls not in BUILTIN.values():
        obj.name = f"{p.name}:{cls.__name__}"
    return obj
