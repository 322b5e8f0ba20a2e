"""Step 4 of ``schedule="auto"`` on a finite fabric: lanes and blocks for the candidates it simulated.

For every simulated candidate, the regions' lane menus (`lanes.lane_menu`) are placed on the
fabric under the strategy's placement (``sequential`` places one region at a time; every other
strategy may run regions side by side, which ``concurrent`` models) and the assignments of
`lanes.assignments` are weighed by their predicted makespan. The best of each base (and its
runner-up within `NEAR`), when predicted at least `lanes.MIN_GAIN` faster than the base, is
ranked by that prediction times the model's error on the base (its simulated over its
predicted makespan); the `FINALISTS` best within `NEAR` of the best become candidates of their
own: the base's rules plus one ``par=`` rule per laned region, compiled, estimated and
simulated like every finalist, so the planner's choice stays the fastest program it simulated
(docs/fabric.md, "Filling the fabric").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fuseflow.errors import FuseflowError, SimulationError
from fuseflow.fabric.strategy import resolve
from fuseflow.planning.lanes import (
    FACTORS,
    MIN_GAIN,
    LaneOption,
    Menu,
    assignments,
    block_options,
    block_sizes,
    lane_cap,
    lane_menu,
    lane_rules,
    size,
    utilization,
)
from fuseflow.schedule.rules import Schedule, as_schedule
from fuseflow.sim.arch import Arch

FINALISTS = 3
"""Lane candidates confirmed (each one compile and simulation): of every simulated candidate's
best assignment and its runner-up within `NEAR`, those predicted fastest, scaled by the model's
error on the candidate itself."""
NEAR = 1.15
"""A runner-up assignment this close to a base's best is confirmed too: the model's errors
between lane choices of one program are about this large (docs/results/fabric.md, "Filling the fabric")."""


@dataclass
class LanePlan:
    """What filling the fabric weighed: per base candidate, each assignment's predicted makespan,
    and for the chosen program each region's lanes, units and predicted cycles."""

    candidates: list[Any] = field(default_factory=list)  # the lane candidates added (planner Candidates)
    weighed: list[tuple[str, str, int]] = field(default_factory=list)  # (base, assignment, predicted makespan)
    menus: dict[int, Menu] = field(default_factory=dict)  # id(candidate) -> its base's menu
    choices: dict[int, dict[str, LaneOption]] = field(default_factory=dict)  # id(candidate) -> its lanes
    placement: str = "sequential"
    rows: list[tuple[str, str, dict[str, int], float]] = field(default_factory=list)  # the chosen program's
    predicted_utilization: dict[str, float] = field(default_factory=dict)

    def choose(self, win: Any, program: Any) -> None:
        """Record the chosen program's lanes per region (one lane where the winner has none)."""
        menu = self.menus.get(id(win))
        choice = self.choices.get(id(win))
        if menu is None or choice is None:
            return
        self.rows = [(r, o.describe(), dict(o.units), o.cycles) for r, o in choice.items()]
        self.predicted_utilization = utilization(menu, choice, self.placement)

    def explain(self) -> list[str]:
        """`Plan.explain`'s lines on lanes: what was weighed, then the chosen program's regions."""
        lines = [f"lanes (placed {self.placement} by the cycle model):"]
        for base, name, span in self.weighed:
            lines.append(f"  {span:>12,} predicted  {name:<10}  on {base}")
        if self.rows:
            lines.append(f"  {'region':<24} {'lanes':<16} {'compute':>8} {'memory':>8} {'predicted':>12}")
            for r, lanes, units, cycles in self.rows:
                lines.append(
                    f"  {r:<24} {lanes:<16} {units.get('compute', 0):>8} {units.get('memory', 0):>8} {cycles:>12,.0f}"
                )
            util = ", ".join(f"{k} {v:.0%}" for k, v in self.predicted_utilization.items())
            lines.append(f"  predicted busy: {util}")
        return lines


def placement_of(strategy: Any) -> str:
    """How the strategy places regions, for the lane search: one at a time, or side by side."""
    return "sequential" if resolve(strategy).name == "sequential" else "concurrent"


def fill(
    simulated: Sequence[Any],
    programs: Mapping[int, Any],
    arch: Any,
    strategy: Any,
    caps: tuple[int | None, int | None],
    confirm: Callable[[Any, str], None],
    say: Callable[[str], None],
    notes: list[str],
    compile_rules: Callable[[Any], Any] | None = None,
) -> LanePlan:
    """Lane candidates for the fastest simulated candidates (module docstring), each confirmed.
    `caps`: (max_lanes, max_block), None for the arch's. With `compile_rules` (a schedule of
    rules -> its program), the fastest base's menu and every built-in's also hold each region's
    blocks (`BLOCKED`, `lanes.block_options`)."""
    arch_ = Arch.resolve(arch)
    assert arch_.fabric is not None
    cap = lane_cap(arch_, caps[0])
    sizes = block_sizes(arch_, caps[1])
    out = LanePlan(placement=placement_of(strategy))
    if cap < 2 and not sizes:
        notes.append(f"lanes: max_lanes={cap} and no block size: every region runs one lane, unblocked")
        return out
    weighed_bases = []
    ranked = sorted(simulated, key=lambda c: c.simulated_cycles or float("inf"))
    fastest_bases = ranked[:BLOCKED] + [c for c in ranked[BLOCKED:] if c.builtin]
    for base in simulated:
        program = programs.get(id(base))
        if program is None:
            continue
        desc = base.describe([]) if base.builtin else f"candidate simulated at {base.simulated_cycles:,}"
        say(f"lanes: weighing lanes for {desc}")
        menu = lane_menu(program, arch_, max_lanes=cap)
        if compile_rules is not None and any(base is c for c in fastest_bases):
            say(f"lanes: weighing blocks for {desc}")
            blocks = block_options(menu, program, _rules_of(base), compile_rules, arch_, sizes, cap)
            notes += [f"{desc}: {n}" for n in blocks]
        one = menu.makespan(menu.one_lane(), out.placement)
        out.weighed.append((desc, "1 lane", one))
        out.menus[id(base)] = menu
        out.choices[id(base)] = menu.one_lane()
        weighed = assignments(menu, out.placement, cap)
        spans = {name: menu.makespan(choice, out.placement) for name, choice in weighed.items()}
        out.weighed += [(desc, name, span) for name, span in spans.items()]
        fastest = min(spans.values())  # the smallest assignment within MIN_GAIN of the fastest
        best = min((n for n in spans if spans[n] <= fastest * (1 + MIN_GAIN)), key=lambda n: size(menu, weighed[n]))
        if spans[best] > one * (1 - MIN_GAIN):
            continue
        # the model's error on this base, measured by its simulation, scales its lanes' prediction
        error = base.simulated_cycles / max(one, 1)
        runner_up = sorted((n for n in spans if n != best and spans[n] <= NEAR * spans[best]), key=lambda n: spans[n])
        for name in [best, *runner_up[:1]]:
            weighed_bases.append((spans[name] * error, base, menu, name, weighed[name]))
    weighed_bases.sort(key=lambda w: w[0])
    near = [w for w in weighed_bases if w[0] <= NEAR * weighed_bases[0][0]] if weighed_bases else []
    for _, base, menu, best, choice in near[:FINALISTS]:
        cand, ran = _confirm_lanes(base, programs[id(base)], menu, best, choice, out.placement, confirm, notes)
        out.candidates.append(cand)
        out.menus[id(cand)] = menu
        out.choices[id(cand)] = ran
    return out


RETRIES = 2
"""Lane options refused by simulation (a deadlock or protocol error in one region) and retried
without, per lane candidate."""


def _confirm_lanes(
    base: Any,
    program: Any,
    menu: Menu,
    name: str,
    choice: Mapping[str, LaneOption],
    placement: str,
    confirm: Callable[[Any, str], None],
    notes: list[str],
) -> tuple[Any, dict[str, LaneOption]]:
    """The lane candidate of `base` under `choice`, confirmed by simulation. A region whose lane
    option the simulator refuses (`SimulationError.region`) loses that option and the
    assignment is weighed again, up to `RETRIES` times: the planner never returns a program it
    could not simulate, and one broken option does not cost the others their lanes. Returns the
    candidate and the assignment it ran."""
    base_rules = _rules_of(base)
    choice = dict(choice)
    cand = base
    for attempt in range(RETRIES + 1):
        schedule = Schedule.rules(*base_rules, *lane_rules(choice, program.region_ops, program.orders))
        laned = {r: " ".join(x for x in (o.par, f"block {o.block}" if o.block else "") if x) for r, o in choice.items()}
        laned = {r: v for r, v in laned.items() if v}
        cand = replace(
            base, schedule=schedule, lanes=laned, lanes_by=name, simulated_cycles=None, status="", estimate_cycles=0.0
        )
        try:
            confirm(cand, "simulated (lanes)")
            return cand, choice
        except SimulationError as e:
            cand.status = f"failed: {str(e).splitlines()[0][:80]}"
            region = e.region or ""
            bad = choice.get(region)
            if bad is None or (bad.par is None and not bad.block) or attempt == RETRIES:
                return cand, choice
            why = str(e).splitlines()[0][:70]
            notes.append(f"lanes: {region} with {bad.describe()} did not simulate ({why}); weighed without it")
            kept = [o for o in menu.options[region] if not _as_large(o, bad)]
            menu.options[region] = kept
            weighed = assignments(menu, placement, max(FACTORS))
            name = min(weighed, key=lambda n: menu.makespan(weighed[n], placement))
            choice = dict(weighed[name])
        except FuseflowError as e:
            cand.status = f"failed: {str(e).splitlines()[0][:80]}"
            return cand, choice
    return cand, choice


BLOCKED = 1
"""Simulated candidates, fastest first, whose menus also weigh blocks, besides every simulated
built-in schedule (each block size is one compile of the candidate's program). Blocks reorder
fusion choices: a fused region holds b units per tile primitive, so small unfused regions can
take blocks of 16 where a fused one fits only 4 (GPT-BigBird on `amber`)."""


def _rules_of(base: Any) -> tuple:
    """A candidate's own schedule rules (a built-in's, or its segmentation's)."""
    return as_schedule(base.builtin).ruleset if base.builtin else base.schedule.ruleset


def _as_large(o: LaneOption, bad: LaneOption) -> bool:
    """Whether option `o` is `bad` or a larger one of its kind (more lanes at its level, or
    larger blocks): what a refusal by the simulator rules out with it."""
    if bad.block:
        return o.block >= bad.block
    return o.block == 0 and o.level == bad.level and o.factor >= bad.factor
