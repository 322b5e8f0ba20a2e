"""How much of a finite fabric each region gets: its lanes (docs/fabric.md, "Filling the fabric").

A region's *menu* lists its lane options: one lane, or ``sam-parallelize`` at each index variable
it accepts with factors 2 to 16, each with the units it holds and the cycle model's cycles for
it (the parallelized graph estimated on the region's own input statistics, so where memory
channels rather than units bound a region, its extra lanes buy nothing and the menu shows it).
Options that need more units of some class and are not faster than a smaller one are dropped,
as are those that do not fit the fabric. `block_options` adds each region's blocked options (b x
b tiles, b units per tile primitive), from the program compiled once per block size.

`assign` fills the fabric by greedy marginal gain over the real placement: from one lane
everywhere it repeatedly takes the upgrade (one region's faster option) that shortens the
predicted makespan most per unit of the array it adds, the makespan coming from the fabric's
own list scheduler (`timeline_from_durations`) over the regions' predicted cycles, until no
upgrade shortens it by `MIN_GAIN`. A knapsack would need the makespan to be a sum of per-region
costs, which holds for ``sequential`` but not when regions run side by side and share units;
the scheduler sees both, and one greedy pass over about ten options per region stays within
seconds. `uniform` gives the comparison points: every region at most F lanes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fuseflow.cost.cycle_model import estimate_graph
from fuseflow.cost.input_stats import stats_for_inputs
from fuseflow.cost.timing import Timing
from fuseflow.dialects.sam_ir import SamGraph, parse_module, read_module
from fuseflow.errors import FuseflowError
from fuseflow.fabric.batches import program_task_list
from fuseflow.fabric.resources import demand_of, fits
from fuseflow.fabric.scheduler import Utilization, timeline_from_durations
from fuseflow.passes.sam_parallelize import parallelized_graph
from fuseflow.schedule.rules import Match, Rule, Schedule
from fuseflow.sim.arch import RESOURCES, UNBOUNDED, Arch, Fabric
from fuseflow.sim.graph import GraphSpec, graph_spec
from fuseflow.sim.values import evaluate_into

if TYPE_CHECKING:
    from fuseflow.program import Program

FACTORS = (2, 4, 8, 16)
"""Lane counts tried per level (powers of two: the menu stays small and the joins stay balanced)."""
MIN_GAIN = 0.01
"""An upgrade is taken only when it shortens the predicted makespan by this fraction: a region
whose next doubling the model says buys less (memory channels saturated) keeps its lanes."""


@dataclass(frozen=True)
class LaneOption:
    """One way to run a region: `factor` lanes at index variable `level` (None: one lane), or
    one lane over b x b blocks (`block` = b, in the dataflow order `order` it was weighed at)."""

    level: str | None
    factor: int
    units: Mapping[str, int]
    cycles: float  # the cycle model's prediction, alone on the machine
    block: int = 0
    order: str | None = None

    @property
    def key(self) -> tuple:
        """The option's value as a hashable tuple (what a placement of it depends on)."""
        return (self.level, self.factor, self.block, self.cycles, tuple(sorted(self.units.items())))

    @property
    def par(self) -> str | None:
        """The schedule rule option (``par="i:8"``), None for one lane."""
        return None if self.level is None else f"{self.level}:{self.factor}"

    def describe(self) -> str:
        """``8 lanes at i``, ``blocks of 16``, ``2 lanes at j, blocks of 16`` or ``1 lane``."""
        lanes = "1 lane" if self.level is None else f"{self.factor} lanes at {self.level}"
        if self.block:
            return f"blocks of {self.block}" if self.level is None else f"{lanes}, blocks of {self.block}"
        return lanes


@dataclass
class Menu:
    """Every region's lane options (Pareto-efficient, fitting the fabric, fastest last), and what
    placing them needs: the program's tasks and the relayouts' modelled cycles."""

    regions: list[str]
    options: dict[str, list[LaneOption]]
    host_cycles: list[int]  # the relayouts (host conversions), before the regions
    tasks: list[Any]
    fabric: Fabric | None
    skipped: dict[str, str]  # region -> why it has no lane option beyond one lane
    fixed: set[str] = field(default_factory=set)  # regions no rule can give options (shared ops)
    _spans: dict[tuple, int] = field(default_factory=dict, repr=False, compare=False)

    def makespan(self, choice: Mapping[str, LaneOption], strategy: str) -> int:
        """The predicted makespan of one option per region placed by `strategy` on the fabric
        (kept per assignment: the searches of `assignments` meet the same ones again and again)."""
        key = (strategy, *(choice[r].key for r in self.regions))
        span = self._spans.get(key)
        if span is None:
            span = self._spans[key] = max((s.end for s in self.timeline(choice, strategy)), default=0)
        return span

    def timeline(self, choice: Mapping[str, LaneOption], strategy: str):
        """The predicted spans of one option per region placed by `strategy` on the fabric."""
        hosts = len(self.host_cycles)
        tasks = list(self.tasks[:hosts])
        durations = list(self.host_cycles)
        for t, name in zip(self.tasks[hosts:], self.regions, strict=True):
            opt = choice[name]
            tasks.append(replace(t, units=dict(opt.units)))
            durations.append(int(round(opt.cycles)))
        return timeline_from_durations(tasks, durations, self.fabric, strategy, [float(d) for d in durations])

    def one_lane(self) -> dict[str, LaneOption]:
        """Every region at one lane (what the program was compiled with)."""
        return {r: self.options[r][0] for r in self.regions}


def lane_menu(
    program: Program,
    arch: Arch,
    factors: Sequence[int] = FACTORS,
    max_lanes: int | None = None,
    progress=None,
) -> Menu:
    """Each region's lane options on `arch`'s fabric: every index variable `sam-parallelize`
    accepts, at each factor up to `max_lanes`, estimated on the region's inputs."""
    cap = lane_cap(arch, max_lanes)
    unbounded = replace(arch, fabric=None)
    timing = Timing.from_settings(unbounded.settings)
    data = program.bind(program.example_args)
    known: dict = {}
    cache: dict = {}
    ctx = program.imported.module.context
    read = {g.name: g for g in read_module(parse_module(program.sam_source, context=ctx)).graphs}
    options: dict[str, list[LaneOption]] = {}
    skipped: dict[str, str] = {}
    for spec in program.graphs:
        stats = stats_for_inputs(spec, data, known, cache=cache)
        base = estimate_graph(spec, stats, timing)
        if not evaluate_into(data, program.assigns[spec.name]):
            known.update(base.outputs)
        menu = [LaneOption(None, 1, demand_of(spec), float(base.cycles))]
        sam = read[spec.name]
        levels = sorted({op.index_var for op in sam.ops if op.index_var})
        why = ""
        for level in levels:
            for f in factors:
                if f > cap:
                    break
                try:
                    variant = _parallelized(sam, level, f)
                except FuseflowError as e:
                    why = str(e).splitlines()[0]
                    break
                units = demand_of(variant)
                if not fits(units, arch.fabric):
                    break
                est = estimate_graph(variant, stats, timing)
                menu.append(LaneOption(level, f, units, float(est.cycles)))
        options[spec.name] = _pareto(menu)
        if len(options[spec.name]) == 1:
            skipped[spec.name] = why or "no lane option is predicted faster"
        if progress is not None:
            progress(f"lanes: {spec.name}: {len(menu)} option(s)")
    fixed = _keep_expressible(options, skipped, program.region_ops)
    tasks, _ = program_task_list(program)
    host_cycles = [r.cycles for r in program.relayout_runs(data, cache)]
    return Menu([g.name for g in program.graphs], options, host_cycles, tasks, arch.fabric, skipped, fixed)


def _keep_expressible(
    options: dict[str, list[LaneOption]], skipped: dict[str, str], region_ops: Mapping[str, tuple[int, ...]]
) -> set[str]:
    """One lane for a region whose PyTorch-level ops another region shares (a rule matching its
    ops would set the other's lanes too) or that has none; returns those regions."""
    fixed: set[str] = set()
    owner: dict[int, set[str]] = {}
    for r, ops in region_ops.items():
        for op in ops:
            owner.setdefault(op, set()).add(r)
    for r in options:
        ops = region_ops.get(r, ())
        if not ops or any(len(owner[op]) > 1 for op in ops):
            options[r] = options[r][:1]
            skipped[r] = "its PyTorch ops are shared with another region: lanes cannot be set by a rule"
            fixed.add(r)
    return fixed


def block_sizes(arch: Arch, max_block: int | None) -> tuple[int, ...]:
    """The block sizes weighed: `BLOCKS` up to `max_block` (default: the fabric's ``max_block``)."""
    cap = max_block if max_block is not None else (arch.fabric.max_block if arch.fabric else max(BLOCKS))
    return tuple(b for b in BLOCKS if b <= cap)


def lane_cap(arch: Arch, max_lanes: int | None) -> int:
    """The most lanes weighed: `max_lanes`, and below a bounded FIFO depth. With as many lanes
    as a FIFO holds tokens, the stream a level scanner sends both to the fork and to the repeat
    signal of the lanes can fill before the join drains a lane: GPT-BigBird's attention scores
    (``i,k,j``) deadlock at 16 lanes on `amber`'s 16-deep FIFOs and run at 8."""
    cap = max_lanes if max_lanes is not None else (arch.fabric.max_lanes if arch.fabric else max(FACTORS))
    depth = arch.settings.get("fifo_depth", UNBOUNDED)
    if depth != UNBOUNDED:
        cap = min(cap, max(1, int(depth) - 1))
    return cap


def _parallelized(sam: SamGraph, level: str, factor: int) -> GraphSpec:
    """The node specs of `sam` in lanes, built typed (the pass verifies what a plan compiles:
    `sam_parallelize.run` refuses lanes the dialect does not verify, with the region's name)."""
    return graph_spec(parallelized_graph(sam, {level}, factor))


def _pareto(menu: list[LaneOption]) -> list[LaneOption]:
    """One lane first, then the options faster than every option needing no more units of each class."""
    kept = [menu[0]]
    for o in sorted(menu[1:], key=lambda o: (o.cycles, sum(o.units.values()))):
        dominated = any(k.cycles <= o.cycles and all(k.units[r] <= o.units[r] for r in RESOURCES) for k in kept)
        if not dominated and o.cycles < menu[0].cycles:
            kept.append(o)
    return [kept[0], *sorted(kept[1:], key=lambda o: -o.cycles)]


def _size(o: LaneOption, fabric: Fabric | None) -> float:
    """The option's share of the array: units over capacity, summed over the classes."""
    if fabric is None:
        return float(sum(o.units.values()))
    return sum(o.units.get(r, 0) / max(fabric.capacity(r), 1) for r in RESOURCES)


def assign(menu: Menu, strategy: str, progress: Callable[[str], None] | None = None) -> dict[str, LaneOption]:
    """Greedy marginal gain (module docstring): the option per region that the placement predicts
    fastest, growing from one lane while an upgrade shortens the makespan by `MIN_GAIN`."""
    choice = menu.one_lane()
    current = menu.makespan(choice, strategy)
    while True:
        best: tuple[float, str, LaneOption, int] | None = None
        for r in menu.regions:
            now = choice[r]
            for o in menu.options[r]:
                if o.cycles >= now.cycles:
                    continue
                trial = {**choice, r: o}
                span = menu.makespan(trial, strategy)
                gain = current - span
                if gain < MIN_GAIN * current:
                    continue
                extra = max(_size(o, menu.fabric) - _size(now, menu.fabric), 1e-6)
                score = gain / extra
                if best is None or score > best[0]:
                    best = (score, r, o, span)
        if best is None:
            return choice
        _, r, o, current = best
        choice[r] = o
        if progress is not None:
            progress(f"lanes: {r} -> {o.describe()} (predicted makespan {current:,})")


def uniform(menu: Menu, factor: int) -> dict[str, LaneOption]:
    """Every region at its fastest predicted option of at most `factor` lanes (one lane where none fits)."""
    out = {}
    for r in menu.regions:
        fitting = [o for o in menu.options[r] if o.factor <= factor]
        out[r] = min(fitting, key=lambda o: o.cycles)
    return out


def size(menu: Menu, choice: Mapping[str, LaneOption]) -> float:
    """An assignment's share of the array, summed over its regions (`_size`)."""
    return sum(_size(o, menu.fabric) for o in choice.values())


def utilization(menu: Menu, choice: Mapping[str, LaneOption], strategy: str) -> dict[str, float]:
    """Predicted busy units over the fabric's capacity, per class, over the predicted makespan."""
    frac = Utilization.of(menu.timeline(choice, strategy), menu.fabric).fraction
    return dict(frac or {})


def lane_rules(
    choice: Mapping[str, LaneOption], region_ops: Mapping[str, tuple[int, ...]], orders: Mapping[str, str]
) -> list:
    """The choice as schedule rules: one per region with lanes, matching the region's ops and
    naming it, with ``par=`` and the order the lanes were weighed at (`orders`: without it the
    order search, which keeps every parallel level a region names, may pick another order, in
    which the level is not where the menu saw it). Appended after a schedule's own rules, each
    only attaches its options (the ops' regions are already decided by the rules before it)."""
    rules = []
    for region, o in choice.items():
        if o.par is None and not o.block:
            continue
        ops = region_ops.get(region)
        if not ops:
            raise FuseflowError(f"lanes: region {region} has no PyTorch-level ops to attach {o.describe()} to")
        order = o.order or orders.get(region)
        rules.append(Rule(Match(index=tuple(ops)), name=region, par=o.par, block=o.block or None, order=order))
    return rules


BLOCKS = (4, 8, 16)
"""Block sizes weighed per region (`block_options`)."""
BLOCK_LANES = 4
"""The most lanes weighed over blocks: a blocked region is already b units wide per tile
primitive, and 2-4 lanes are where its gains were (SDDMM and SAE in blocks of 16: 1.8-1.9x at
2 to 4 lanes); fewer variants keep planning GPT-BigBird within a minute."""
BLOCK_RETRIES = 4
"""Regions refused by one block size (a dimension it does not divide) dropped and the rest
compiled again, before that size is given up."""


def block_options(
    menu: Menu,
    program: Program,
    rules: Sequence[Rule],
    compile_rules: Callable[[Any], Program],
    arch: Arch,
    sizes: Sequence[int] = BLOCKS,
    max_lanes: int = 1,
) -> list[str]:
    """Add to `menu` each region's blocked options: for every size b, the program compiled with
    ``block=b`` on every region whose lanes a rule can set (after `rules`, the program's own),
    estimated on its own inputs, each blocked region an option holding its units (a tile
    primitive holds b compute units: `resources.tile_units`). A region whose dimensions b does
    not divide is dropped and the rest compiled again. The regions of the largest size that
    compiled also get lanes over their blocks (`lane_menu` of that program, at most `max_lanes` and
    `BLOCK_LANES`).
    Returns notes on what was refused."""
    unbounded = replace(arch, fabric=None)
    notes: list[str] = []
    blockable = [r for r in menu.regions if r not in menu.fixed and program.region_ops.get(r)]
    largest: tuple[int, Program] | None = None
    for b in sizes:
        regions = list(blockable)
        for _ in range(BLOCK_RETRIES + 1):
            extra = [Rule(Match(index=tuple(program.region_ops[r])), name=r, block=b) for r in regions]
            try:
                blocked = compile_rules(Schedule.rules(*rules, *extra))
                break
            except FuseflowError as e:
                refused = next((r for r in regions if f"region {r}:" in str(e)), None)
                if refused is None:
                    notes.append(f"blocks of {b}: {str(e).splitlines()[0][:100]}")
                    regions = []
                    break
                regions.remove(refused)
        else:
            continue
        if not regions:
            continue
        est = {e.name: e for e in blocked.estimate(arch=unbounded).regions}
        for g in blocked.graphs:
            if g.name not in menu.options or not g.block or g.name not in est:
                continue
            units = demand_of(g)
            if fits(units, arch.fabric):
                opt = LaneOption(None, 1, units, float(est[g.name].cycles), b, blocked.orders.get(g.name))
                menu.options[g.name] = _pareto([*menu.options[g.name], opt])
        largest = (b, blocked)
    if largest is not None and min(max_lanes, BLOCK_LANES) > 1:
        _lanes_over_blocks(menu, *largest, arch, min(max_lanes, BLOCK_LANES))
    return notes


def _lanes_over_blocks(menu: Menu, b: int, blocked: Program, arch: Arch, max_lanes: int) -> None:
    """Lanes over a blocked program's regions (blocks of `b`) as options of `menu`'s regions:
    tiles split among lanes like scalars (SDDMM in blocks of 16 at 4 lanes: 10,049 cycles
    against 18,986 in one lane)."""
    laned = lane_menu(blocked, arch, max_lanes=max_lanes)
    for g in blocked.graphs:
        if g.name not in menu.options or not g.block:
            continue
        for o in laned.options.get(g.name, [])[1:]:
            opt = replace(o, block=b, order=blocked.orders.get(g.name))
            menu.options[g.name] = _pareto([*menu.options[g.name], opt])


def refine(menu: Menu, choice: Mapping[str, LaneOption], strategy: str) -> dict[str, LaneOption]:
    """Coordinate descent from `choice`, in two phases that each end: first any region's other
    option that shortens the predicted makespan (by 0.1%), or keeps it and holds fewer units;
    then any smaller option that keeps the makespan within `MIN_GAIN` of the first phase's (lanes
    that buy less than that are given back). Greedy growth alone misses upgrades that only pay
    together (two regions running side by side must both speed up for the makespan to move);
    starting from every uniform assignment catches those."""
    out = dict(choice)
    current = menu.makespan(out, strategy)
    improved = True
    while improved:
        improved = False
        for r in menu.regions:
            for o in menu.options[r]:
                now = out[r]
                if o is now:
                    continue
                span = menu.makespan({**out, r: o}, strategy)
                smaller = _size(o, menu.fabric) < _size(now, menu.fabric)
                if span < current * (1 - 1e-3) or (span <= current and smaller):
                    out[r], current, improved = o, span, True
    limit = current * (1 + MIN_GAIN)
    for r in menu.regions:  # smallest first: each region keeps the fewest units within the limit
        for o in sorted(menu.options[r], key=lambda o: _size(o, menu.fabric)):
            if _size(o, menu.fabric) >= _size(out[r], menu.fabric):
                break
            if menu.makespan({**out, r: o}, strategy) <= limit:
                out[r] = o
                break
    return out


def assignments(menu: Menu, strategy: str, max_lanes: int) -> dict[str, dict[str, LaneOption]]:
    """The distinct lane assignments weighed for one program: greedy growth and every uniform
    factor up to `max_lanes`, each refined (`refine`), and every region at its fastest option
    (which the refinement may have traded for fewer units on a prediction within 1%), by name
    (``greedy``, ``uniform 8``; ``greedy = uniform 4`` when two arrive at the same one)."""
    found = [("greedy", refine(menu, assign(menu, strategy), strategy))]
    found += [(f"uniform {f}", refine(menu, uniform(menu, f), strategy)) for f in FACTORS if f <= max_lanes]
    found.append(("fastest", uniform(menu, max_lanes)))  # each region's fastest option, unrefined
    out: dict[str, dict[str, LaneOption]] = {}
    for name, choice in found:
        same = next((n for n, c in out.items() if c == choice), None)
        if same is None:
            out[name] = choice
        else:
            out[f"{same} = {name}"] = out.pop(same)
    return out
