"""``schedule="auto"``: find the fusion schedule, by the cycle model, and confirm it by simulation.

The space is the contiguous segmentations of a topological order of *units*: PyTorch-level ops
for small models (<= `OP_UNITS` ops), otherwise the ops of one module instance, where instances
that differ only in a list index and are independent of each other (the heads of an attention
layer) are one unit, so a region holds every head. A region is a run of consecutive units, so
every candidate is acyclic by construction, and FuseFlow's transformer split (LN + Q/K/V |
attention | the rest) is one of them.

Search (docs/architecture.md, "Design: planning" and "Planning"):
1. *Cover*: compile a few segmentations whose regions together are every possible segment,
   shortest segments first (`band`), with the lowering's own order, and take each region's
   predicted cycles, bytes and ALU ops from the cycle model. A region's cost barely depends on
   its neighbours, so a segmentation's cost is the sum of its segments'. A segment estimated
   `HOPELESS` times its best split is a fusion that recomputes (the heads' attention fused with
   the value projection it reads per key); the longer segments containing it are not estimated
   (their lowering is the cover's cost: a whole GPT block takes 20 s to lower).
   `Plan.explain()` names them.
2. *Choose*: the k best segmentations by that sum (dynamic programming); a candidate whose
   cycles, bytes and ALU ops are all dominated by another's is dropped.
3. *Confirm*: the best `top_k` by estimate (1 per 20 segmentations of the space, at most 3;
   always 3 on a machine the model only approximates, `timing.model_approximates`) are
   compiled again with each region's order chosen (``order="auto"``, Planning I), estimated
   whole and simulated, and so is the built-in schedule (unfused, layer, full, op) with the best
   estimate. Then the search widens: the next candidates by estimate are simulated until none
   left could beat the best simulated one even if the model were as optimistic about it as it
   was about any simulated one (a simulation more than `TRUST` times off its estimate is named
   as the reason). The fastest simulated wins, so the choice is never worse than anything the
   planner simulated.
4. *Fill the fabric* (finite fabrics only, `fill`): every simulated candidate's regions get lane
   options, assignments are placed by the fabric's scheduler, and the most promising are
   compiled with ``par=`` rules and simulated like the finalists (docs/fabric.md, "Filling the
   fabric").

`Plan.explain()` says what was considered, pruned and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fuseflow.cost.timing import Timing, model_approximates
from fuseflow.errors import FuseflowError
from fuseflow.fabric.resources import FitError, fits
from fuseflow.passes import PassStep
from fuseflow.planning.fill import LanePlan, fill
from fuseflow.planning.segmentations import band, best_splits, count_segmentations, k_best, most_of
from fuseflow.planning.space import Exported, Space
from fuseflow.planning.units import OP_UNITS, Unit
from fuseflow.schedule.rules import Schedule, as_schedule
from fuseflow.sim.arch import Arch

TRUST = 1.5
"""A simulation further than this factor from its estimate (either way) widens the search."""
BUILTINS = ("unfused", "layer", "full", "op")
MAX_TOP_K = 3
"""At most this many finalists are simulated; fewer in small spaces (`top_k_for`)."""
HOPELESS = 4.0
"""A segment estimated this many times its best split into shorter estimated segments makes
every longer segment containing it a candidate the planner does not estimate (docs/architecture.md,
"Planning")."""


def top_k_for(space_size: int) -> int:
    """Finalists to simulate: one per 20 points of the space, 1 to `MAX_TOP_K`, so confirming
    costs about a twentieth of sweeping the space (the cycle model ranks these models exactly:
    docs/results/planning.md, "Cycle model accuracy")."""
    return max(1, min(MAX_TOP_K, space_size // 20))


@dataclass
class Candidate:
    """One segmentation: its regions (unit ranges), estimate and, if confirmed, simulation."""

    segments: tuple[tuple[int, int], ...]
    estimate_cycles: float
    bytes: float = 0.0
    alu_ops: float = 0.0
    simulated_cycles: int | None = None
    status: str = ""
    schedule: Any = None  # a Schedule, or a built-in's name
    builtin: str | None = None  # a built-in schedule (its regions need not be unit segments)
    lanes: dict[str, str] = field(default_factory=dict)  # region -> ``i:8`` or ``block 16``, chosen by `fill`
    lanes_by: str = ""  # which lane assignment: ``greedy``, ``uniform 8``, ...

    def describe(self, units: list[Unit]) -> str:
        """The segmentation by unit labels (`a,b | c`), or the built-in's name; its lanes, if any."""
        if self.builtin is not None:
            base = f"built-in schedule {self.builtin!r}"
        else:
            base = " | ".join(",".join(u.label for u in units[a:b]) for a, b in self.segments)
        if not self.lanes_by:
            return base
        blocked = sum(1 for v in self.lanes.values() if "block" in v)
        parallel = sum(1 for v in self.lanes.values() if ":" in v)
        kinds = f"{parallel} region(s) parallel" + (f", {blocked} blocked" if blocked else "")
        return f"{base} + lanes ({self.lanes_by}: {kinds})"

    @property
    def error(self) -> float | None:
        """How far the simulation is from the estimate (simulated / estimated)."""
        if self.simulated_cycles is None:
            return None
        return self.simulated_cycles / max(self.estimate_cycles, 1.0)


@dataclass
class Plan:
    """What `plan` found: the chosen program and schedule, and every candidate it weighed."""

    program: Any
    schedule: Schedule
    units: list[Unit]
    candidates: list[Candidate]
    compiles: int
    simulated_cycles: int  # the cost of confirming: cycles simulated in total
    wall_s: float
    notes: list[str] = field(default_factory=list)
    lanes: LanePlan | None = None  # on a finite fabric: each region's lanes and units (fuseflow/planning/fill.py)

    @property
    def chosen(self) -> Candidate:
        """The candidate the planner returned."""
        return next(c for c in self.candidates if c.status == "chosen")

    def explain(self) -> str:
        """The units, each candidate's estimate and fate, and the chosen schedule as rules."""
        lines = [f"units ({len(self.units)}): " + ", ".join(u.label for u in self.units)]
        lines += [f"note: {n}" for n in self.notes]
        lines.append(f"{'estimated':>12} {'bytes':>12} {'alu ops':>12} {'simulated':>12}  status  schedule")
        for c in sorted(self.candidates, key=lambda c: c.estimate_cycles):
            sim = f"{c.simulated_cycles:,}" if c.simulated_cycles is not None else "-"
            lines.append(
                f"{c.estimate_cycles:>12,.0f} {c.bytes:>12,.0f} {c.alu_ops:>12,.0f} {sim:>12}  "
                f"{c.status}  {c.describe(self.units)}"
            )
        lines.append(
            f"{self.compiles} compiles, {len(self.candidates)} candidates, "
            f"{self.simulated_cycles:,} cycles simulated, {self.wall_s:.1f} s"
        )
        if self.lanes is not None:
            lines += self.lanes.explain()
        lines.append(f"chosen: {self.schedule!r}")
        return "\n".join(lines)


# --- units ---------------------------------------------------------------------------------------
def _hopeless(seg: tuple[int, int], cost: Mapping[tuple[int, int], float], split: Mapping) -> bool:
    return seg[1] - seg[0] > 1 and cost[seg] > HOPELESS * split[seg]


def _dominated(c: Candidate, others: list[Candidate]) -> Candidate | None:
    for o in others:
        if o is c:
            continue
        le = o.estimate_cycles <= c.estimate_cycles and o.bytes <= c.bytes and o.alu_ops <= c.alu_ops
        lt = o.estimate_cycles < c.estimate_cycles or o.bytes < c.bytes or o.alu_ops < c.alu_ops
        if le and lt:
            return o
    return None


def plan(
    exported: Exported,
    *,
    arch: Any = None,
    node_budget: int = 100_000,
    order: Any = None,
    passes: str | Sequence[PassStep] | None = None,
    top_k: int | None = None,
    candidates: int = 6,
    constraints: Schedule | None = None,
    progress=None,
    strategy: Any = "sequential",
    max_lanes: int | None = None,
    max_block: int | None = None,
) -> Plan:
    """Choose a fusion schedule for the `exported` model (see the module docstring): returns the
    `Plan`, whose ``program`` is compiled with the chosen schedule (``fuseflow.plan`` and
    ``fuseflow.compile(schedule="auto")`` export the model and call this).
    `strategy`: how the regions will run on the fabric (docs/fabric.md); the finalists are
    estimated and simulated under it, so the choice is the fastest makespan simulated (the
    cover still ranks segments by the sum of their predicted cycles). On a finite
    fabric the simulated candidates then get lanes per region (`fill`), at most `max_lanes`
    (default: the arch's ``max_lanes``, else 16), or blocks of at most `max_block` (the arch's
    ``max_block``, else 16; 1: none)."""
    t0 = time.perf_counter()
    space = Space(exported, node_budget=node_budget, passes=passes, constraints=constraints, arch=arch)
    units, notes = space.units, space.notes
    top_k = _top_k(space, arch) if top_k is None else top_k

    def say(msg: str) -> None:
        if progress is not None:
            progress(msg)

    # 1. cover: every segment's predicted cost; on a finite fabric, only segments that fit, each
    # paying its configuration load
    seg_cost, too_big, pruned = _cover(space, order, arch, say, notes)
    # 2. choose: the k best segmentations by the sum; dominated ones are dropped
    cands, alive = _shortlist(space, seg_cost, candidates, top_k)
    # the built-in schedules, estimated whole: the best of them is always simulated
    if constraints is None or not constraints.ruleset:
        builtin = _best_builtin(space, order, arch, say, seg_cost, pruned, notes)
        if builtin is not None:
            cands.append(builtin)
    if not alive and not too_big and not any(c.builtin is not None for c in cands):
        raise FuseflowError("schedule=auto: no candidate schedule could be compiled")
    # 3. confirm: each finalist compiled with its regions' orders chosen, estimated whole, simulated
    confirm = _Confirm(space, order, arch, strategy, say)
    programs = confirm.programs

    finalists = alive[:top_k] + [c for c in cands if c.builtin is not None]
    for c in finalists:
        _try(confirm, c, "simulated" if c.builtin is None else "simulated (best built-in by estimate)")
    _widen(alive[top_k:], [c for c in cands if c.simulated_cycles is not None], confirm, notes, units)
    lanes = None
    fabric = Arch.resolve(arch).fabric if arch is not None else None
    if fabric is not None:  # 4. fill the fabric: each simulated candidate's regions get lanes or blocks
        done = [c for c in cands if c.simulated_cycles is not None]
        caps = (max_lanes, max_block)
        lanes = fill(done, programs, arch, strategy, caps, confirm, say, notes, lambda s: space.compile(s, order))
        cands += [c for c in lanes.candidates if c not in cands]
    win = _fastest(cands, programs, arch, too_big)
    win.status = "chosen"
    program = programs[id(win)]
    program.schedule = "auto"
    schedule = win.schedule if win.builtin is None or win.lanes_by else as_schedule(win.builtin)
    if lanes is not None:
        lanes.choose(win, program)
    return Plan(program, schedule, units, cands, space.compiles, confirm.cycles, time.perf_counter() - t0, notes, lanes)


def _top_k(space: Space, arch: Any) -> int:
    """How many candidates to simulate: more where estimates are close (finite FIFOs and
    memory: estimates 3-9% apart may swap, docs/results/planning.md)."""
    if model_approximates(Timing.from_settings(Arch.resolve(arch).settings)):
        return MAX_TOP_K
    return top_k_for(count_segmentations(len(space.units), space.allowed))


def _try(confirm: Callable[[Candidate, str], None], c: Candidate, why: str) -> None:
    """Confirm `c`; a candidate that fails to compile or simulate says why instead."""
    try:
        confirm(c, why)
    except FuseflowError as e:
        c.status = f"failed: {str(e).splitlines()[0][:80]}"


class _Confirm:
    """Confirms a candidate: compiled with its regions' orders chosen, estimated whole and
    simulated under the strategy; keeps each program and the cycles simulated in all."""

    def __init__(self, space: Space, order: Any, arch: Any, strategy: Any, say: Callable[[str], None]) -> None:
        self.space, self.order, self.arch, self.strategy, self.say = space, order, arch, strategy, say
        self.programs: dict[int, Any] = {}
        self.cycles = 0

    def __call__(self, c: Candidate, why: str) -> None:
        self.say(f"confirming: {c.describe(self.space.units)}")
        what = c.schedule if c.lanes_by else c.builtin or c.segments
        prog = self.programs[id(c)] = self.space.compile(what, self.order)
        est = prog.estimate(arch=self.arch, strategy=self.strategy)
        c.estimate_cycles, c.bytes, c.alu_ops = float(est.cycles), float(est.mem_bytes), float(est.alu_ops)
        res = prog.simulate(arch=self.arch, strategy=self.strategy)
        c.simulated_cycles = res.cycles
        self.cycles += res.cycles
        c.status = why


def _shortlist(
    space: Space, seg_cost: Mapping[tuple, tuple], candidates: int, top_k: int
) -> tuple[list[Candidate], list[Candidate]]:
    """The `candidates` best segmentations by their segments' summed cost, and those alive:
    neither dominated by another nor outside the `top_k` by estimate (the others say why)."""
    n, allowed, units = len(space.units), space.allowed, space.units
    best = k_best(n, {s: c[0] for s, c in seg_cost.items() if allowed(*s)}, candidates)
    cands = [
        Candidate(
            segs,
            cycles,
            sum(seg_cost[x][1] for x in segs),
            sum(seg_cost[x][2] for x in segs),
            schedule=space.schedule(segs),
        )
        for cycles, segs in best
    ]
    for c in cands:
        dom = _dominated(c, cands)
        if dom is not None:
            c.status = f"pruned: dominated by [{dom.describe(units)}]"
    alive = sorted((c for c in cands if not c.status), key=lambda c: c.estimate_cycles)
    for c in alive[top_k:]:
        c.status = f"pruned: not in the top {top_k} by estimate"
    return cands, alive


def _fastest(cands: list[Candidate], programs: Mapping[int, Any], arch: Any, too_big: bool) -> Candidate:
    """The candidate simulated fastest; on a finite fabric a tie goes to the program holding
    fewer units. Refuses when none was simulated."""
    done = [c for c in cands if c.simulated_cycles is not None]
    if not done and too_big:
        raise FitError(
            f"schedule=auto: no schedule fits the fabric of {Arch.resolve(arch).name}: even the built-in "
            f"schedules have a region that needs more units than it has"
        )
    if not done:
        raise FuseflowError("schedule=auto: no candidate schedule could be simulated")
    fabric = Arch.resolve(arch).fabric if arch is not None else None

    def held(c: Candidate) -> int:
        if fabric is None or id(c) not in programs:
            return 0
        return sum(sum(u.values()) for u in programs[id(c)].resources().values())

    return min(done, key=lambda c: (c.simulated_cycles, held(c), c.estimate_cycles))


def _cover(space: Space, order: Any, arch: Any, say, notes: list[str]):
    """Step 1: every segment's estimate, band by band (`band`), except the segments that do not
    fit the fabric and those pruned as holding a hopeless one (`HOPELESS`); returns the
    estimates, the segments too big for the fabric (-> what they need) and the pruned ones (->
    the hopeless segment each holds)."""
    n, units, allowed = len(space.units), space.units, space.allowed
    fabric = Arch.resolve(arch).fabric if arch is not None else None
    seg_cost: dict[tuple[int, int], tuple[float, float, float]] = {}
    too_big: dict[tuple[int, int], str] = {}
    pruned: dict[tuple[int, int], tuple[int, int]] = {}
    failed: dict[tuple[int, int], str] = {}  # segments whose lowering is refused (too large, say)
    compiled = [0]

    def filler(a: int, b: int) -> bool:
        return ((a, b) in seg_cost or b - a == 1) and (a, b) not in failed

    def estimate(segs: tuple[tuple[int, int], ...], length: int, fresh: list[tuple[int, int]]) -> None:
        compiled[0] += 1
        say(f"estimating segments of {length} unit(s): compile {compiled[0]}")
        try:
            prog = space.compile(segs, order, quick=n > OP_UNITS)  # small models: the full order search
        except FuseflowError as e:
            if len(fresh) == 1:
                failed[fresh[0]] = str(e).splitlines()[0]
            else:  # which of them is refused: one at a time
                for seg in fresh:
                    alone = most_of(n, allowed, {seg}, filler)
                    if alone:
                        estimate(alone, length, [seg])
            return
        est = prog.estimate(arch=replace(Arch.resolve(arch), fabric=None) if fabric else arch)
        by_name = {r.name: r for r in est.regions}
        need = prog.resources()
        for k, seg in enumerate(segs):
            r = by_name.get(f"p{k}")
            if r is not None and not fits(need[r.name], fabric):
                too_big.setdefault(seg, ", ".join(f"{v} {c}" for c, v in need[r.name].items()))
            elif r is not None:
                reconfig = fabric.reconfig_cycles if fabric else 0
                k = space.scale  # every block holds this segment
                seg_cost.setdefault(seg, (k * (r.cycles + reconfig), k * float(r.mem_bytes), k * float(r.alu_ops)))

    for length in range(1, n + 1):  # shortest first: a hopeless segment prunes the longer ones
        for segs in band(n, allowed, length, seg_cost, pruned.keys() | too_big.keys() | failed.keys()):
            estimate(segs, length, [s for s in segs if s[1] - s[0] == length and s not in seg_cost])
        cycles = {s: c[0] for s, c in seg_cost.items()}
        split = best_splits(n, cycles)
        ends = [s for s in cycles if s[1] - s[0] == length and _hopeless(s, cycles, split)]
        ends += [s for s in failed if s[1] - s[0] == length]  # a longer fusion is refused too
        for seg in ends:
            for a in range(seg[0] + 1):
                for b in range(seg[1], n + 1):
                    if (a, b) != seg and (a, b) not in seg_cost:
                        pruned.setdefault((a, b), seg)
    if failed:
        first = min(failed)
        labels = ",".join(u.label for u in units[first[0] : first[1]])
        notes.append(f"{len(failed)} segment(s) do not compile, e.g. [{labels}]: {failed[first]}")
    hopeless = {s for s in pruned.values() if s in seg_cost}
    if hopeless:
        cycles = {s: c[0] for s, c in seg_cost.items()}
        split = best_splits(n, cycles)
        worst = max(hopeless, key=lambda s: cycles[s] / split[s])
        labels = ",".join(u.label for u in units[worst[0] : worst[1]])
        notes.append(
            f"{sum(v in hopeless for v in pruned.values())} segment(s) not estimated: each contains a segment "
            f"estimated over {HOPELESS:g}x its best split, e.g. [{labels}] at {cycles[worst] / split[worst]:.1f}x"
        )
    pruned.update({s: s for s in failed})
    if too_big and fabric is not None:
        first = min(too_big)
        labels = ",".join(u.label for u in units[first[0] : first[1]])
        notes.append(
            f"{len(too_big)} segment(s) do not fit the fabric ({fabric.compute} compute, {fabric.memory} memory "
            f"units) and were split, e.g. [{labels}] needs {too_big[first]}"
        )
    return seg_cost, too_big, pruned


def _best_builtin(
    space: Space, order: Any, arch: Any, say, seg_cost: Mapping, pruned: Mapping, notes: list[str]
) -> Candidate | None:
    """The built-in schedule with the best whole-program estimate (orders ranked on the cover's
    short list), as a candidate. A built-in whose regions are unit segments is costed from the
    cover's estimates of them; one holding a segment the cover pruned is not estimated."""
    best: Candidate | None = None
    for name in BUILTINS:
        segs = space.segments_of(name)
        held = [x for x in space.projections(name) if x in pruned]
        if held:
            inner = pruned[held[0]]
            labels = ",".join(u.label for u in space.units[inner[0] : inner[1]])
            notes.append(f"built-in schedule {name!r} not estimated: a region of it contains [{labels}]")
            continue
        if segs is not None and all(x in seg_cost for x in segs):
            cycles, mem, alu = (sum(seg_cost[x][i] for x in segs) for i in range(3))
        else:
            say(f"estimating the built-in schedule {name!r}")
            try:
                est = space.compile(name, order, quick=True).estimate(arch=arch)
            except FuseflowError:
                continue
            cycles, mem, alu = float(est.cycles), float(est.mem_bytes), float(est.alu_ops)
        c = Candidate((), cycles, mem, alu, None, "", name, name)
        if best is None or c.estimate_cycles < best.estimate_cycles:
            best = c
    return best


def _widen(rest: list[Candidate], simulated: list[Candidate], confirm, notes: list[str], units: list[Unit]) -> None:
    """Simulate the next candidates by estimate while one could still win: were its simulation
    as far below its estimate as the most optimistic error seen among the simulated ones, would
    it beat the best simulated? Stops at the first that could not (the ranking of the rest can
    then no longer change the choice). A simulation beyond `TRUST` of its estimate is reported as
    the reason; smaller errors widen the search only between close candidates."""
    errors = [(c, c.error) for c in simulated if c.error is not None]
    off = [(c, e) for c, e in errors if not (1 / TRUST <= e <= TRUST)]
    reason = ""
    if off:
        worst, err = max(off, key=lambda ce: max(ce[1], 1 / ce[1]))
        reason = (
            f"[{worst.describe(units)}] simulated {worst.simulated_cycles:,} cycles against "
            f"{worst.estimate_cycles:,.0f} estimated ({err:.2f}x, beyond {TRUST}x)"
        )
    added = 0
    stop = ""
    for c in sorted(rest, key=lambda c: c.estimate_cycles):
        done = [(x.simulated_cycles, x.error) for x in simulated]
        seen = [(s, e) for s, e in done if s is not None and e is not None]
        if not seen:
            break
        best = min(s for s, _ in seen)
        optimism = min(e for _, e in seen)
        if c.estimate_cycles * optimism >= best:
            stop = (
                f"the next candidate's estimate x {optimism:.2f} (the most optimistic error seen) "
                f"cannot beat {best:,} simulated cycles"
            )
            break
        try:
            confirm(c, "simulated (widened search)")
            simulated.append(c)
            added += 1
        except FuseflowError as e:
            c.status = f"failed: {str(e).splitlines()[0][:80]}"
    if added or reason:
        why = reason or "a candidate's estimate was within the simulated candidates' errors of the best"
        notes.append(f"widened the search ({why}): simulated {added} more candidate(s)")
        if stop:
            notes.append(f"stopped widening: {stop}")
