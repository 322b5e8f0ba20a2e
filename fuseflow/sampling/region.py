"""One region simulated by sampling its row units (docs/sampling.md).

The region's rows are cut into N contiguous units of about equal work (`window.row_work`: known
before anything runs); a unit runs as the region's graph with its row window (`window.py`).
Unit 0 runs alone;
it carries the pipeline's fill. Every other sampled unit u is measured by its *marginal*: the
run of units u-1 and u together less the run of u-1 alone. The unit before it warms the
pipeline, and the fill and drain cancel in the difference. The marginals of the unsampled units
are estimated by stratified ratio estimation on their work (`estimator.py`). Each round draws
more units until the interval meets the target or every unit has run. Every run's outputs must
equal the region's index-notation values on its rows (check()'s tolerance): the region's outputs
are those values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from fuseflow.errors import MismatchError
from fuseflow.sampling.estimator import MIN_SAMPLE, PILOT, Strata, allocate, draw, ratio_estimate, stratify
from fuseflow.sampling.spec import SampleSpec
from fuseflow.sampling.window import Job, Units
from fuseflow.sim.graph import GraphRun, GraphSpec

ADDITIVE = (
    "tokens_in",
    "tokens_out",
    "mem_read_bytes",
    "mem_write_bytes",
    "mem_lines",
    "alu_ops",
    "reductions",
    "stall_input",
    "stall_output",
)
"""Per-node counters that add up over rows (estimated like cycles); first/last_active do not."""

ESTIMATOR = "stratified ratio on work, warmed marginals"
WARM = 4
"""Unit 0 must run at least this many times as long as the region's one-row run (units are
coarsened until it does): that run is the pipeline's latency, its fill, drain and side branches
(a weight streamed alongside the rows)."""
WARM_UP = 8
"""A unit's warm-up runs this many one-row runs long: shorter, and the latency's side branches
stay in the marginal (GCN's ``X @ W`` on Cora: -12%)."""
BIAS_PER_UNIT = 12
"""Cycles per unit the warm-up may leave in a marginal (measured over random regions,
tests/e2e/test_sampling.py: -9.1 to +4.6; the -9.1 is a 2.3%-dense SpMM of 290 rows in 21
units whose bottleneck estimate came out 192 cycles under its whole run); the interval widens by
this much per unit, so a run whose every unit was simulated still states what it may be off by."""
GROWTH = 0.25  # each further round adds at least this fraction of the units simulated so far

Runner = Callable[[Sequence[Job]], list[GraphRun]]
"""Runs unit graphs on their inputs and returns their runs in order."""


@dataclass(frozen=True)
class Sampled:
    """How a region's figures were estimated: units simulated of the total, the estimator, the
    target asked for, the interval it met, and the cycles simulated to get there (warm-ups too)."""

    units: int
    total: int
    estimator: str
    target: str
    interval: tuple[int, int]
    half_width: float
    simulated_cycles: int

    def to_json(self) -> dict:
        """The sampling summary as JSON (the half-width is the interval's, less the bias bound)."""
        return {**asdict(self), "interval": list(self.interval)}


@dataclass
class SampledRun:
    """A sampled region's estimated cycles and per-node counters, and how they were obtained."""

    cycles: int
    nodes: list[dict]
    sampled: Sampled
    engine: str


def unit_bounds(work: np.ndarray, n: int) -> list[tuple[int, int]]:
    """`n` contiguous row ranges of about equal work, each at least one row."""
    rows = len(work)
    n = max(1, min(n, rows))
    prefix = np.concatenate([[0.0], np.cumsum(work)])
    edges = [0]
    for j in range(1, n):
        r = int(np.searchsorted(prefix, j * prefix[-1] / n))
        edges.append(min(max(r, edges[-1] + 1), rows - (n - j)))
    edges.append(rows)
    return list(zip(edges, edges[1:]))


def unit_count(predicted: float, rows: int, spec: SampleSpec) -> int:
    """How many units: units of `spec.unit_cycles` predicted cycles, between 1 and the rows."""
    per = max(spec.unit_cycles, 1.0)
    return int(max(1, min(rows, spec.max_units, predicted // per)))


def _busy(run: GraphRun) -> np.ndarray:
    """Each node's busy cycles: its active span less the cycles it stalled on either side."""
    return np.array(
        [n["last_active"] - n["first_active"] - n["stall_input"] - n["stall_output"] for n in run.nodes], dtype=float
    )


def _quantities(run: GraphRun) -> np.ndarray:
    """Cycles, every node's additive counters, then every node's busy cycles, as one vector."""
    return np.concatenate([[run.cycles], [n[k] for n in run.nodes for k in ADDITIVE], _busy(run)])


class _Region:
    """The sampled region's runs, by row range (a range that is a warm-up of one unit and the
    unit of another runs once)."""

    def __init__(self, spec: GraphSpec, units: Units, values, tolerance: float, run: Runner, bottleneck: bool):
        self.spec, self.units, self.values, self.tolerance, self.run = spec, units, values, tolerance, run
        self.bottleneck = bottleneck
        self.warm_rows = 0  # rows before a unit that warm it (`_warm_units` sets them)
        self.runs: dict[tuple[int, int], GraphRun] = {}

    def ensure(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Simulate every range not yet run, checking each run's outputs."""
        todo = sorted({r for r in ranges if r not in self.runs})
        for r, run in zip(todo, self.run([self.units.job(lo, hi) for lo, hi in todo])):
            self._check(run, *r)
            self.runs[r] = run

    def _check(self, run: GraphRun, lo: int, hi: int) -> None:
        for name, full in run.outputs.items():
            want = self.values.get(name)
            if want is None:
                continue
            got, want = self.units.rows(full, lo, hi), np.asarray(want)[lo:hi]
            tol = self.tolerance
            if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
                raise MismatchError(
                    f"region {self.spec.name}: rows {lo}..{hi} of {name} simulated differ from its "
                    "index-notation values"
                )

    def offset(self) -> tuple[float, float]:
        """A run's cycles beyond its busiest node's busy cycles (fill and drain): the median over
        the runs so far, and half their range (how much the fill varies: part of the interval)."""
        fills = np.array([r.cycles - _busy(r).max(initial=0.0) for r in self.runs.values()])
        return float(np.median(fills)), float((fills.max() - fills.min()) / 2)

    def excess_trend(self, at: float) -> float:
        """How far the excess `offset` takes as constant would move, at `at` busy cycles, if it
        kept the trend the runs show: a least-squares line through the runs' (busiest node's busy
        cycles, excess), extrapolated, less the median excess; 0 where fewer than three run
        lengths were simulated or the slope is within two standard errors of none.

        The excess can grow with the run (GPT's fused projection + FFN: 12,880 cycles at 1 row,
        13,934 at 16), sublinearly, so the truth lies between the constant and the line: the
        interval is widened by this on its side, as a bias bound (docs/sampling.md)."""
        busy = np.array([_busy(r).max(initial=0.0) for r in self.runs.values()])
        fills = np.array([r.cycles for r in self.runs.values()]) - busy
        if len(np.unique(busy)) < 3:
            return 0.0
        slope, icept = np.polyfit(busy, fills, 1)
        resid = fills - (icept + slope * busy)
        sxx = float(((busy - busy.mean()) ** 2).sum())
        se = math.sqrt(float((resid**2).sum()) / max(len(busy) - 2, 1) / sxx)
        if abs(slope) <= 2 * se:
            return 0.0
        return float(icept + slope * at - np.median(fills))

    def simulated_cycles(self) -> int:
        """Cycles simulated so far, every range once."""
        return sum(r.cycles for r in self.runs.values())


def sample_region(
    spec: GraphSpec,
    units: Units,
    values: Mapping[str, np.ndarray],
    count: int,
    work: Mapping[str, np.ndarray],
    target: SampleSpec,
    run: Runner,
    tolerance: float,
    report: Callable[[int], None] | None = None,
    bottleneck: bool = False,
) -> SampledRun | str:
    """Estimate `spec`'s cycles and counters from sampled units run by `units` (about `count`
    of them, fewer when a unit would not outlast the pipeline's latency), or say why the region
    must run whole. `work` holds candidate measures of each row's work (`window.row_work`): units
    are cut and stratified by the first; each round's estimate uses the one whose ratio to the
    measured cycles varies least."""
    region = _Region(spec, units, values, tolerance, run, bottleneck)
    bounds = _warm_units(region, next(iter(work.values())), count, target.min_units)
    if isinstance(bounds, str):
        return bounds
    xs = {name: np.array([w[lo:hi].sum() for lo, hi in bounds])[1:] for name, w in work.items()}  # units 1..N-1
    strata = stratify(next(iter(xs.values())))
    rng = np.random.default_rng(target.seed)
    marginals: dict[int, np.ndarray] = {}
    more = [min(PILOT, len(strata.members(h))) for h in range(strata.count)]
    while True:
        new = draw(strata, list(marginals), more, rng)
        region.ensure([bounds[0]] + [r for u in new for r in _ranges(region, bounds, u + 1)])
        for u in new:
            marginals[u] = _marginal(region, bounds, u + 1)
        aux, (total, (low, high), dof, column) = min(
            ((name, _totals(region, bounds, x, strata, marginals, target)) for name, x in xs.items()),
            key=lambda c: c[1][1][1] - c[1][1][0],
        )
        half = (high - low) / 2
        if report is not None:
            report(region.simulated_cycles())
        met = target.error > 0 and half <= target.error * total[0] and len(marginals) >= MIN_SAMPLE
        if met or len(marginals) == len(strata.of):
            break
        more = _more(xs[aux], strata, marginals, target, total[0], dof, column)
        costlier = _costlier_than_whole(region, len(marginals), sum(more), float(total[0]))
        if costlier is not None and target.error > 0:  # error 0 asks for every unit
            return costlier
    first = region.runs[bounds[0]]
    cycles = int(round(total[0]))
    bias = BIAS_PER_UNIT * len(bounds)
    trend = region.excess_trend(float(total[column])) if bottleneck else 0.0
    lo = int(np.floor(min(low, total[0]) - bias + min(trend, 0.0)))
    hi = int(np.ceil(max(high, total[0]) + bias + max(trend, 0.0)))
    sampled = Sampled(
        len(marginals) + 1,
        len(bounds),
        f"{ESTIMATOR}{', bottleneck node' if bottleneck else ''}, units by {units.how}, ratio to {aux}",
        target.describe(),
        (lo, hi),
        float(half),
        region.simulated_cycles(),
    )
    return SampledRun(cycles, _nodes(first, total, cycles), sampled, first.engine)


def _costlier_than_whole(region: _Region, done: int, more: int, whole: float) -> str | None:
    """Why sampling stops here for a whole run: the next round's units, each costing what a unit
    (its warm-up and the runs that difference it) has cost so far, would simulate more cycles
    than the whole region (the cycles so far are spent either way)."""
    per_unit = region.simulated_cycles() / max(done, 1)
    if more * per_unit < whole:
        return None
    return (
        f"too costly to sample: {done} units left the target unmet and {more} more would simulate "
        f"about {more * per_unit:.3g} cycles, more than the region's {whole:.3g} whole"
    )


def _warm_units(region: _Region, work: np.ndarray, units: int, least: int) -> list[tuple[int, int]] | str:
    """Unit bounds whose first unit runs at least `WARM` times the one-row run, coarsened until
    it does; why not, when that leaves fewer than `least` units."""
    region.ensure([(0, 1)])
    latency = region.runs[(0, 1)].cycles
    while True:
        bounds = unit_bounds(work, units)
        region.ensure([bounds[0]])
        first = region.runs[bounds[0]].cycles
        if first >= WARM * latency:
            per_row = first / max(bounds[0][1] - bounds[0][0], 1)
            region.warm_rows = max(1, int(np.ceil(WARM_UP * latency / max(per_row, 1e-9))))
            return bounds
        units = int(units * first / (WARM * latency * 1.25))
        if units < least:
            return (
                f"its one-row run takes {latency} cycles (pipeline latency): units that outlast {WARM} times "
                f"that leave fewer than {least} units"
            )


def _ranges(region: _Region, bounds: Sequence[tuple[int, int]], u: int) -> list[tuple[int, int]]:
    """The runs unit u's marginal needs: its warm-up alone, and the warm-up and u together. The
    warm-up is the rows just before u that run `WARM_UP` one-row runs long (at most unit u-1;
    at the sizes sampling pays, a small part of it). The bottleneck
    estimator needs the warm-up too: a unit run alone shows its busiest node 1.6% fewer busy
    cycles than the same rows after a warm-up (fused GraphSAGE on Cora, every unit)."""
    start = max(bounds[u - 1][0], bounds[u][0] - region.warm_rows)
    return [(start, bounds[u][0]), (start, bounds[u][1])]


def _marginal(region: _Region, bounds: Sequence[tuple[int, int]], u: int) -> np.ndarray:
    warm, pair = _ranges(region, bounds, u)
    return _quantities(region.runs[pair]) - _quantities(region.runs[warm])


def _totals(
    region, bounds, x, strata: Strata, marginals, target: SampleSpec
) -> tuple[np.ndarray, tuple[float, float], int, int]:
    """The estimated totals (unit 0 exactly, the rest by the ratio estimator), the cycles'
    interval at the target's confidence, and the column the cycles' estimate rests on.

    Summed marginals estimate the cycles where FIFOs are bounded: a unit's warm-up then holds all
    the pipeline remembers. With unbounded FIFOs (`bottleneck`) branches run apart for the whole
    region, and the run takes its busiest node's busy cycles plus the fill: the cycles are then
    the largest estimated busy cycles (additive over rows) plus the runs' fill, and the interval
    runs from the largest lower bound to the largest upper bound of the nodes' busy cycles (nodes
    that compete for the bottleneck widen it; docs/sampling.md)."""
    est = ratio_estimate(x, strata, marginals)
    total = _quantities(region.runs[bounds[0]]) + est.total
    half = est.half_width(target.confidence)
    if not region.bottleneck:
        return total, (total[0] - half[0], total[0] + half[0]), est.dof, 0
    k = len(region.runs[bounds[0]].nodes)
    busy, spread = total[-k:], half[-k:]
    seen = sum(m[-k:] for m in marginals.values())  # the busiest node in what was simulated
    node = int(np.argmax(seen))
    column = len(total) - k + node
    fill, vary = region.offset()
    total[0] = busy[node] + fill
    low, high = (busy - spread).max() + fill - vary, (busy + spread).max() + fill + vary
    return total, (float(low), float(high)), est.dof, column


def _more(x, strata: Strata, marginals, target: SampleSpec, total: float, dof: int, column: int) -> list[int]:
    """The next round's units per stratum: Neyman allocation for the target variance, and at
    least `GROWTH` of the sample so far (few rounds: each round's units run at once)."""
    t = stats.t.ppf(0.5 + target.confidence / 2, max(dof, 1))
    more = allocate(x, strata, marginals, (target.error * total / t) ** 2, column)
    floor = int(np.ceil(GROWTH * len(marginals)))
    if sum(more) < floor:
        free = [sum(1 for u in strata.members(h) if u not in marginals) for h in range(strata.count)]
        for h in np.argsort(free)[::-1]:
            add = min(free[h] - more[h], floor - sum(more))
            if add > 0:
                more[h] += add
    return more


def _nodes(first: GraphRun, total: np.ndarray, cycles: int) -> list[dict]:
    """Per-node counters from the estimated totals (rounded); activity spans from unit 0's run,
    the last one stretched to the estimated cycles."""
    out = []
    k = len(ADDITIVE)
    for i, n in enumerate(first.nodes):
        node = dict(n)
        for j, key in enumerate(ADDITIVE):
            node[key] = max(0, int(round(total[1 + i * k + j])))
        node["last_active"] = max(int(n["first_active"]), cycles - (first.cycles - int(n["last_active"])))
        out.append(node)
    return out
