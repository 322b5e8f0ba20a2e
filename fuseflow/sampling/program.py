"""A program simulated with its large row-local regions sampled (docs/sampling.md).

Regions run in program order. A region is sampled when its rows can be cut (as micro-batches
are: `fabric/split.py`), its values can be computed from its index notation (they are its
outputs), and the cycle model predicts enough work for `min_units` units; any other region is
simulated whole, and the result names it with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fuseflow.cost.cycle_model import estimate_graph
from fuseflow.cost.input_stats import stats_for_inputs
from fuseflow.cost.timing import Timing
from fuseflow.fabric.run import row_extent
from fuseflow.results import RegionResult
from fuseflow.sampling.region import ESTIMATOR, Runner, sample_region, unit_count
from fuseflow.sampling.spec import SampleSpec
from fuseflow.sampling.window import Units, row_work, units_for
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec
from fuseflow.sim.values import Unevaluable, region_values

if TYPE_CHECKING:
    from fuseflow.program import Program


@dataclass(frozen=True)
class SampleSummary:
    """What a sampled run simulated: units of the sampled regions (simulated of total), the
    estimator, the target, and each region run whole with why."""

    units: int
    total: int
    estimator: str
    target: str
    whole: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The summary as JSON."""
        return asdict(self)


def simulate_sampled(
    prog: Program,
    env: dict,
    args: tuple,
    arch: Arch,
    target: SampleSpec,
    run: Runner,
    run_whole: Callable[[GraphSpec], Any],
    release: Callable[[int], None],
    report: Callable[[str, int], None] | None = None,
    key: Callable[[GraphSpec], str | None] | None = None,
) -> tuple[list[RegionResult], SampleSummary]:
    """Every region's result, sampled where it can be, and the run's summary. `run` simulates
    unit ranges; `run_whole(graph)` simulates a region whole on `env`; `release(i)` drops the
    values no region after region i reads. With `key` (the memo's structure key), a region
    structurally identical to one met before takes that one's result, estimate and interval
    included, and its values from its index notation (`copy_of`)."""
    timing = Timing.from_settings(arch.settings)
    stats_cache: dict = {}  # tensor statistics measured once per tensor and format
    rows = row_extent(prog)
    results: list[RegionResult] = []
    whole: dict[str, str] = {}
    seen: dict[str, RegionResult] = {}
    simulated = total = 0
    for i, g in enumerate(prog.graphs):
        k = key(g) if key is not None else None
        copied = copy_of(seen[k], g, prog, env) if k is not None and k in seen else None
        if copied is not None:
            results.append(copied)
            if copied.whole_reason is not None:
                whole[g.name] = copied.whole_reason
            release(i)
            continue
        predicted = _predicted(g, env, timing, stats_cache)
        r = _one_region(prog, g, env, rows, args, arch, predicted, target, run, run_whole, report)
        if r.sampled is not None:
            simulated, total = simulated + r.sampled.units, total + r.sampled.total
        else:
            whole[g.name] = r.whole_reason or ""
        results.append(r)
        if k is not None:
            seen[k] = r
        release(i)
    return results, SampleSummary(simulated, total, ESTIMATOR, target.describe(), whole)


def _predicted(g: GraphSpec, env: Mapping[str, Any], timing: Timing, cache: dict) -> float:
    """The cycle model's cycles for region `g` on its actual inputs (`env` holds them when it
    comes to run), to size its units. Estimated here, region by region, rather than by
    `prog.estimate()` up front: that evaluates every region's values once more, and estimates the
    copies of identical regions that take their first's result (half of a GPT-3 Small sampled
    run's time beyond its units)."""
    return float(estimate_graph(g, stats_for_inputs(g, env, cache=cache), timing).cycles)


def copy_of(first: RegionResult, g: GraphSpec, prog: Program, env: dict) -> RegionResult | None:
    """Region `g`'s result as the structurally identical `first`'s (same cycles, counters under
    g's node names, the same estimate and interval), its values computed from its index
    notation and put in `env`; None when they cannot be (then `g` is simulated)."""
    try:
        values = region_values(prog.assigns[g.name], env)
    except Unevaluable:
        return None
    env.update(values)
    nodes = [{**n, "name": s.name} for n, s in zip(first.nodes, g.nodes, strict=True)]
    reason = None if first.whole_reason is None else f"as {first.name}: {first.whole_reason}"
    return replace(first, name=g.name, nodes=nodes, writes=list(values), memoised=True, whole_reason=reason)


def _one_region(
    prog: Program,
    g: GraphSpec,
    env: dict,
    rows: int,
    args: tuple,
    arch: Arch,
    predicted: float,
    target: SampleSpec,
    run: Runner,
    run_whole: Callable[[GraphSpec], Any],
    report: Callable[[str, int], None] | None,
) -> RegionResult:
    """One region sampled, or simulated whole with the reason; its outputs put in `env`."""
    why, units, values = _sampleable(prog, g, env, rows, args)
    n = unit_count(predicted, rows, target)
    if why is None and n < target.min_units:
        why = (
            f"too small to save time: {predicted:.3g} predicted cycles make {n} units "
            f"of {target.unit_cycles:.3g}, fewer than {target.min_units}"
        )
    if why is None and units is not None and values is not None:
        work = row_work(g, prog.assigns[g.name], units.along, env, rows)
        cb = (lambda cycles, name=g.name: report(f"{name} (sampled)", cycles)) if report else None
        s = sample_region(g, units, values, n, work, target, run, prog.tolerance, cb, unbounded(arch))
        if not isinstance(s, str):
            env.update(values)
            return RegionResult(g.name, s.cycles, s.nodes, list(values), s.engine, sampled=s.sampled)
        why = s
    r = run_whole(g)
    env.update(r.outputs)
    return RegionResult(g.name, r.cycles, r.nodes, r.writes, r.engine, whole_reason=why or "")


UNBOUNDED_FIFO = 1 << 20
"""FIFOs at least this deep count as unbounded (the `comal` and `sam` presets': 10,240,000)."""


def unbounded(arch: Arch) -> bool:
    """Whether the arch's FIFOs let branches run apart for a whole region (`sample_region`'s
    bottleneck estimator)."""
    return int(arch.settings.get("fifo_depth", 0)) >= UNBOUNDED_FIFO


def _sampleable(
    prog: Program, g: GraphSpec, env: dict, rows: int, args: tuple
) -> tuple[str | None, Units | None, dict | None]:
    """Why region `g` cannot be sampled (None: it can), how its units run, and its values."""
    units = units_for(g, prog.assigns.get(g.name, ()), env, rows)
    if isinstance(units, str):
        return units, None, None
    try:
        return None, units, region_values(prog.assigns[g.name], env)
    except Unevaluable as e:
        eager = _reference_values(prog, g, args)
        if eager is None:
            return f"its values are too large to compute from its index notation ({e})", None, None
        return None, units, eager


def _reference_values(prog: Program, g: GraphSpec, args: tuple) -> dict | None:
    """A region that writes program outputs only, in PyTorch's own layout, takes its values from
    eager PyTorch when its index notation is too large to evaluate (a graph of 736k nodes): every
    unit it simulates is then checked against PyTorch itself. None where that does not apply."""
    outs = [n for n, t in g.tensors.items() if t.role == "output"]
    if not outs or any(n not in prog.output_names for n in outs):
        return None
    if any(list(g.tensors[n].fmt.mode_order) != list(range(len(g.tensors[n].shape))) for n in outs):
        return None
    eager = prog.reference(*args)
    values = {}
    for n in outs:
        v = eager[prog.output_names.index(n)]
        v = v.to_dense() if v.layout != torch.strided else v
        arr = v.detach().float().numpy()
        if arr.size != int(np.prod(g.tensors[n].shape)):
            return None
        values[n] = arr.reshape(g.tensors[n].shape)
    return values


def makespan_interval(
    results: Sequence[RegionResult], makespan: int, sequential: bool, place: Callable[[list[int]], int]
) -> tuple[int, int]:
    """The makespan's interval. One region after another: the half-widths of independent samples
    add in quadrature, an estimate reused by k identical regions (a memo's copies) counting k
    times its half-width (their errors are one error), and what each interval holds beyond its
    half-width (the warm-up's bias bound: systematic, not random) adds as it is. Otherwise
    the timeline is placed again with every region at the low end, then at the high end, of its
    interval (a bound that assumes the errors all go one way)."""
    if sequential:
        below, above = 0.0, 0.0
        copies: dict[int, tuple[float, int]] = {}  # one estimate, reused by identical regions: (h, uses)
        for r in results:
            if r.sampled is None or r.interval is None:
                continue
            h = r.sampled.half_width
            copies[id(r.sampled)] = (h, copies.get(id(r.sampled), (h, 0))[1] + 1)
            below += max(0.0, r.cycles - r.interval[0] - h)
            above += max(0.0, r.interval[1] - r.cycles - h)
        half = math.sqrt(sum((h * uses) ** 2 for h, uses in copies.values()))
        return int(math.floor(makespan - half - below)), int(math.ceil(makespan + half + above))
    lows = [r.interval[0] if r.interval else r.cycles for r in results]
    highs = [r.interval[1] if r.interval else r.cycles for r in results]
    return min(place(lows), makespan), max(place(highs), makespan)
