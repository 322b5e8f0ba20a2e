"""The planner's search space for one model: its units, the segments the user's rules allow, and
compiling a segmentation (docs/architecture.md, "Planning"). The planner (`planner.plan`) searches
it; `fuseflow.compiler.space` hands it to users who sweep it themselves."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fuseflow.conversion.linalg_attrs import main_func
from fuseflow.errors import FuseflowError
from fuseflow.passes import as_steps, step
from fuseflow.planning.units import MAX_UNITS, Unit, _op_dependences, period_of, units_of
from fuseflow.schedule.regions import assign_regions, listing
from fuseflow.schedule.regions import layer_of as layer_in
from fuseflow.schedule.rules import Match, OpView, Rule, Schedule, matches
from fuseflow.search.rank import ranker_options

Lower = Callable[..., Any]
"""The compile driver's `lower_program(model, args, imported, linalg_text, schedule, node_budget,
order, passes, ranker_options, arch) -> Program` (fuseflow/compiler.py)."""


@dataclass(frozen=True)
class Exported:
    """The model as the compile driver hands it to the planner (planning imports neither the
    frontend nor the driver): a copy of the module, its example inputs, the imported linalg
    (``frontend.export.ImportedModel``), and the driver's lowering."""

    model: Any
    args: tuple
    imported: Any
    lower: Lower


QUICK_TOP = 3
"""Orders per region ranked while estimating segments (the finalists rank the full shortlist)."""
QUICK_CAP = 8
"""Orders per region enumerated while estimating segments of models planned by module (order
enumeration dominates their compile time: 7.1 s -> 1.9 s per GPT compile). Small models keep the
full search: on GCN a capped search misses the order that makes A @ (relu(A @ X W)) W' fast."""


def _schedule(units: list[Unit], segments: Sequence[tuple[int, int]]) -> Schedule:
    rules = [
        Rule(Match(index=tuple(sorted(i for u in units[a:b] for i in u.ops))), name=f"p{k}")
        for k, (a, b) in enumerate(segments)
    ]
    return Schedule.rules(*rules)


def _constraints(constraints: Schedule | None, units: list[Unit], views: list[OpView], notes: list[str]):
    """Which segments (a, b) of units the user's rules allow: a ``materialize`` op ends its unit's
    segment, a ``no-fuse`` op's unit is a segment of its own, a ``fuse`` rule's ops stay together."""
    if constraints is None or not constraints.ruleset:
        return lambda a, b: True
    unit_of = {op: u for u, unit in enumerate(units) for op in unit.ops}
    cut: set[int] = set()  # a boundary before unit c
    keep: set[int] = set()  # no boundary before unit c
    for r in constraints.ruleset:
        hit, _ = matches(r, views)
        if not hit:
            notes.append(f"rule {r!r} matches no op")
            continue
        us = sorted({unit_of[i] for i in hit})
        if r.tag == "materialize":
            cut.update(u + 1 for u in us)
        elif r.tag == "no-fuse":
            cut.update(u for u in us)
            cut.update(u + 1 for u in us)
        elif r.by == "all":
            keep.update(range(us[0] + 1, us[-1] + 1))
        else:
            notes.append(f"rule {r!r}: only materialize, no-fuse and fuse(by='all') constrain the planner")
    clash = cut & keep
    if clash:
        c = min(clash)
        raise FuseflowError(
            f"schedule=auto: the rules both fuse and separate {units[c - 1].label} and {units[c].label}"
        )

    def allowed(a: int, b: int) -> bool:
        return not any(c in cut for c in range(a + 1, b)) and a not in keep and b not in keep

    return allowed


class Space:
    """The planner's search space for one model: its units, the segments the user's rules allow,
    and compiling a segmentation (the model is exported once; each compile re-lowers).

    A model of more than `MAX_UNITS` units made of identical blocks (the decoders of a
    transformer) is planned over one block's units: a segmentation of the block is applied to
    every block (`expand`), the units outside the blocks are regions of their own, and a
    segment's cost is its first block's times the number of blocks."""

    def __init__(self, exported: Exported, *, node_budget=100_000, passes=None, constraints=None, arch=None):
        self.args = exported.args
        self.imported = exported.imported
        self.asm = self.imported.module.operation.get_asm(enable_debug_info=True)
        self.model = exported.model
        self.node_budget, self.passes, self.arch = node_budget, as_steps(passes), arch
        self.lower = exported.lower
        with self.imported.module.context:
            func = main_func(self.imported.module)
            listed = listing(func)
            infos, index_of = listed.infos, listed.index_of
            op_deps = _op_dependences(func, listed.ops, index_of)
        self.infos = infos

        def layer_of(path: str) -> str:
            return layer_in(path, self.imported.containers)

        units, self.notes = units_of(infos, op_deps, layer_of, coarsen=False)
        self.period = period_of(units, infos, layer_of) if len(units) > MAX_UNITS else None
        if self.period is not None and self.period[1] > MAX_UNITS:
            self.period = None
        if len(units) > MAX_UNITS and self.period is None:
            units, self.notes = units_of(infos, op_deps, layer_of)
        views = [OpView(o.index, o.node, o.path, self.imported.module_classes) for o in infos]
        self.all_units = units
        allowed = _constraints(constraints, units, views, self.notes)
        self.scale = 1
        if self.period is None:
            self.units, self.allowed = units, allowed
        else:
            start, length, count = self.period
            self.units, self.scale = units[start : start + length], count
            self.notes.append(
                f"{count} identical blocks of {length} units ({len(units)} in all): one block is planned, "
                "and its segmentation applies to every block"
            )

            def allowed_in_every_block(a: int, b: int) -> bool:
                return all(allowed(start + k * length + a, start + k * length + b) for k in range(count))

            self.allowed = allowed_in_every_block
        self.compiles = 0
        self.memo: dict[str, str] = {}
        self.quick_memo: dict[str, str] = {}
        self.picks: dict[tuple, Any] = {}  # region structure -> chosen order, across compiles (lower_module)
        self.quick_picks: dict[tuple, Any] = {}
        self.lowerings: dict[tuple, Any] = {}  # region lowerings shared by every compile (lower_module)
        self.values: dict[tuple, Any] = {}  # regions' values on the example inputs (OrderRanker._evaluate)

    def compile(self, segments: Sequence[tuple[int, int]] | str | Schedule, order: Any = None, quick: bool = False):
        """The program of one segmentation (or a built-in schedule, by name). `quick` (the cover):
        orders ranked on a shortlist of `QUICK_TOP`, and a region ranked in an earlier compile
        keeps its order (`OrderRanker.memo`)."""
        from fuseflow.mlir import ir  # loaded with MLIR or torch.export, when first needed

        self.compiles += 1
        fresh = replace(self.imported, module=ir.Module.parse(self.asm, context=self.imported.module.context))
        sched = segments if isinstance(segments, str | Schedule) else self.schedule(segments)
        opts: dict[str, Any] = (
            {"top": QUICK_TOP, "memo": self.quick_memo, "picks": self.quick_picks}
            if quick
            else {"memo": self.memo, "picks": self.picks}
        )
        opts["values"] = self.values
        opts.update(ranker_options(self.arch))
        if quick:
            opts["verify"] = 0  # the cover compares estimates; the planner simulates its finalists
        passes = self.passes
        if quick and order in (None, "auto") and not any(s.name == "fuseflow-order" for s in passes):
            passes = [*passes, step("fuseflow-order", order="auto", cap=QUICK_CAP)]
            order = None
        return self.lower(
            self.model,
            self.args,
            fresh,
            self.asm,
            sched,
            self.node_budget,
            order,
            passes,
            opts,
            self.arch,
            lowering_cache=self.lowerings,
        )

    def expand(self, segments: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """Segments of `units` as segments of every unit: the first block's first (the regions
        the cover reads, p0, p1, ...), then the other blocks', then each unit outside the blocks."""
        if self.period is None:
            return list(segments)
        start, length, count = self.period
        out = [(start + k * length + a, start + k * length + b) for k in range(count) for a, b in segments]
        inside = range(start, start + count * length)
        return out + [(u, u + 1) for u in range(len(self.all_units)) if u not in inside]

    def schedule(self, segments: Sequence[tuple[int, int]]) -> Schedule:
        """The rules of a segmentation of `units` (every block's, in periodic planning)."""
        return _schedule(self.all_units, self.expand(segments))

    def segments_of(self, schedule: str) -> tuple[tuple[int, int], ...] | None:
        """The segments of `units` a built-in schedule's regions are, in order; None when a
        region is not a run of whole units (a PyTorch op split between regions, say), or, over
        identical blocks, when the blocks are not segmented alike."""
        segs = self._unit_segments(schedule)
        if segs is None or self.period is None:
            return segs
        start, length, _ = self.period
        window = tuple((a - start, b - start) for a, b in segs if start <= a and b <= start + length)
        return window if sorted(self.expand(window)) == list(segs) else None

    def projections(self, schedule: str) -> list[tuple[int, int]]:
        """The segments of `units` that the schedule's regions fuse at least (a region over
        several blocks fuses a whole block); [] when a region is not a run of whole units."""
        segs = self._unit_segments(schedule) or ()
        if self.period is None:
            return list(segs)
        start, length, count = self.period
        out = []
        for a, b in segs:
            for k in range(count):
                lo, hi = max(a, start + k * length), min(b, start + (k + 1) * length)
                if lo < hi:
                    out.append((lo - start - k * length, hi - start - k * length))
        return out

    def _unit_segments(self, schedule: str) -> tuple[tuple[int, int], ...] | None:
        """The segments of every unit a built-in schedule's regions are, in order, or None."""
        from fuseflow.mlir import ir  # loaded with MLIR or torch.export, when first needed

        module = ir.Module.parse(self.asm, context=self.imported.module.context)
        with module.context:
            func = main_func(module)
            try:
                listed = listing(func)
                res = assign_regions(func, schedule, self.imported.containers, self.imported.module_classes, listed)
            except FuseflowError:
                return None
            index_of = listed.index_of
            ops_of: dict[str, set[int]] = {}
            for name, op in zip(res.names, index_of, strict=True):
                ops_of.setdefault(name, set()).add(op)
        units = self.all_units
        unit_of = {op: u for u, unit in enumerate(units) for op in unit.ops}
        segs = []
        for ops in ops_of.values():
            us = sorted({unit_of[o] for o in ops})
            seg = (us[0], us[-1] + 1)
            if us != list(range(*seg)) or {o for u in us for o in units[u].ops} != ops:
                return None
            segs.append(seg)
        segs.sort()
        if any(a[1] != b[0] for a, b in zip(segs, segs[1:])) or sum(b - a for a, b in segs) != len(units):
            return None  # overlapping regions: a PyTorch op in two of them
        return tuple(segs)

    def segmentations(self) -> list[tuple[tuple[int, int], ...]]:
        """Every allowed segmentation (2^(units-1) at most: for exhaustive sweeps of small models)."""
        n = len(self.units)
        out: list[tuple] = []

        def go(a: int, acc: tuple) -> None:
            if a == n:
                out.append(acc)
                return
            for b in range(a + 1, n + 1):
                if self.allowed(a, b):
                    go(b, acc + ((a, b),))

        go(0, ())
        return out
