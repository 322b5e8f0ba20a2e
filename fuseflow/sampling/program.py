"""A program simulated with its large row-local regions sampled (docs/sampling.md).

Regions run in program order. A region is sampled when its rows can be cut (as micro-batches
are: `fabric/split.py`), its values can be computed from its index notation (they are its
outputs), and the cycle model predicts enough work for `min_units` units; any other region is
simulated whole, and the result names it with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

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
) -> tuple[list[RegionResult], SampleSummary]:
    """Every region's result, sampled where it can be, and the run's summary. `run` simulates
    unit ranges; `run_whole(graph)` simulates a region whole on `env`; `release(i)` drops the
    values no region after region i reads. `run` simulates units."""
    predicted = {r.name: float(r.cycles) for r in prog.estimate(*args, arch=replace(arch, fabric=None)).regions}
    rows = row_extent(prog)
    results: list[RegionResult] = []
    whole: dict[str, str] = {}
    simulated = total = 0
    for i, g in enumerate(prog.graphs):
        why, units, values = _sampleable(prog, g, env, rows, args)
        n = unit_count(predicted.get(g.name, 0.0), rows, target)
        if why is None and n < target.min_units:
            why = (
                f"too small to save time: {predicted.get(g.name, 0.0):.3g} predicted cycles make {n} units "
                f"of {target.unit_cycles:.3g}, fewer than {target.min_units}"
            )
        if why is not None or units is None or values is None:
            whole[g.name] = why or ""
            r = run_whole(g)
            env.update(r.outputs)
            results.append(RegionResult(g.name, r.cycles, r.nodes, r.writes, r.engine, whole_reason=whole[g.name]))
        else:
            work = row_work(g, prog.assigns[g.name], units.along, env, rows)
            cb = (lambda cycles, name=g.name: report(f"{name} (sampled)", cycles)) if report else None
            s = sample_region(g, units, values, n, work, target, run, prog.tolerance, cb, unbounded(arch))
            if isinstance(s, str):
                whole[g.name] = s
                r = run_whole(g)
                env.update(r.outputs)
                results.append(RegionResult(g.name, r.cycles, r.nodes, r.writes, r.engine, whole_reason=s))
                release(i)
                continue
            env.update(values)
            simulated, total = simulated + s.sampled.units, total + s.sampled.total
            results.append(RegionResult(g.name, s.cycles, s.nodes, list(values), s.engine, sampled=s.sampled))
        release(i)
    return results, SampleSummary(simulated, total, ESTIMATOR, target.describe(), whole)


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
    add in quadrature, and what each interval holds beyond its half-width (the warm-up's bias
    bound: systematic, not random) adds as it is. Otherwise
    the timeline is placed again with every region at the low end, then at the high end, of its
    interval (a bound that assumes the errors all go one way)."""
    if sequential:
        squares, below, above = 0.0, 0.0, 0.0
        for r in results:
            if r.sampled is None or r.interval is None:
                continue
            h = r.sampled.half_width
            squares += h * h
            below += max(0.0, r.cycles - r.interval[0] - h)
            above += max(0.0, r.interval[1] - r.cycles - h)
        half = math.sqrt(squares)
        return int(math.floor(makespan - half - below)), int(math.ceil(makespan + half + above))
    lows = [r.interval[0] if r.interval else r.cycles for r in results]
    highs = [r.interval[1] if r.interval else r.cycles for r in results]
    return min(place(lows), makespan), max(place(highs), makespan)
