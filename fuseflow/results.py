"""What a simulation returns: each region's run and the program's result, checked against PyTorch."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from fuseflow.errors import MismatchError
from fuseflow.fabric.scheduler import Span, Utilization
from fuseflow.fabric.split import SplitPlan
from fuseflow.sim.arch import Arch

if TYPE_CHECKING:
    from fuseflow.program import Program
    from fuseflow.sampling.program import SampleSummary
    from fuseflow.sampling.region import Sampled
    from fuseflow.sim.pieces import PiecesSummary


@dataclass
class RegionResult:
    """One region's run: name, cycles and per-node counters."""

    name: str
    cycles: int
    nodes: list[dict]
    writes: list[str] = field(default_factory=list)  # tensors the region writes
    engine: str = "event"  # simulation engine that ran it (results do not depend on it)
    memoised: bool = False  # cycles and counters from a structurally identical region (sim/memo.py)
    sampled: Sampled | None = None  # cycles and counters estimated from sampled units (sampling/)
    whole_reason: str | None = None  # in a sampled run: why this region was simulated whole
    pieces: PiecesSummary | None = None  # run in pieces from recorded streams (sim/pieces.py): exact
    spill: dict | None = None  # queues kept on disk (arch spill_tokens): queues, peak_bytes, bytes_written

    @property
    def interval(self) -> tuple[int, int] | None:
        """The cycles' interval when they are a sampled estimate (None: simulated exactly)."""
        return self.sampled.interval if self.sampled is not None else None

    def totals(self) -> dict[str, int]:
        """The region's counters summed over its nodes."""
        keys = ("tokens_in", "tokens_out", "mem_read_bytes", "mem_write_bytes", "alu_ops", "reductions")
        return {k: int(sum(n[k] for n in self.nodes)) for k in keys}


@dataclass
class SimResult:
    """Outputs and cycle counts of one simulated program run."""

    program: Program
    args: tuple
    outputs: tuple
    regions: list[RegionResult]
    arch: Arch
    max_abs_error: float | None = None
    output_errors: list[float] = field(default_factory=list)
    traces: list | None = None
    timeline: list[Span] = field(default_factory=list)  # one span per region run (fuseflow/fabric)
    strategy: str = "sequential"  # the strategy that placed them (auto names its choice)
    split: SplitPlan | None = None  # the micro-batches a strategy cut the rows into; None: whole
    considered: dict[str, float] = field(default_factory=dict)  # auto: predicted makespan per candidate
    sampled: SampleSummary | None = None  # a sampled run: units simulated of total, the estimator
    interval: tuple[int, int] | None = None  # a sampled run: the makespan's interval at its confidence

    @property
    def cycles(self) -> int:
        """The makespan: the cycle the last region ends in (with `strategy="sequential"`, the sum
        of the regions' cycles, plus reconfiguration on a finite fabric)."""
        if self.timeline:
            return max(s.end for s in self.timeline)
        return sum(r.cycles for r in self.regions)

    @property
    def serial_cycles(self) -> int:
        """The regions' own cycles summed: the makespan had they run one after another, alone."""
        return sum(r.cycles for r in self.regions)

    @property
    def utilization(self) -> Utilization:
        """Busy units per resource class over the timeline (`fraction` of the fabric when finite)."""
        return Utilization.of(self.timeline, self.arch.fabric)

    def check(self, rtol: float | None = None, atol: float | None = None) -> float:
        """Compare with eager PyTorch; returns the max abs error, raises MismatchError beyond tolerance.

        Default tolerance: rtol 1e-5 and atol 1e-5 scaled by the longest reduction (f32 sums
        reassociate differently in the simulator and in PyTorch). NaN must match NaN.
        """
        expected = self.program.reference(*self.args)
        rtol = self.program.tolerance if rtol is None else rtol
        atol = self.program.tolerance if atol is None else atol
        worst = 0.0
        self.output_errors = []
        for i, (got, want) in enumerate(zip(self.outputs, expected)):
            g = got.to_dense().numpy() if got.is_sparse or got.layout != torch.strided else got.numpy()
            w = (
                want.detach().to_dense().float().numpy()
                if want.layout != torch.strided
                else want.detach().float().numpy()
            )
            if g.shape != w.shape:
                raise MismatchError(f"output {i}: shape {g.shape} differs from PyTorch's {w.shape}")
            nan_g, nan_w = np.isnan(g), np.isnan(w)
            if (nan_g != nan_w).any():
                raise MismatchError(
                    f"output {i}: NaN pattern differs from PyTorch at {int((nan_g != nan_w).sum())} places"
                )
            ok = ~nan_w
            diff = np.abs(g[ok] - w[ok]) if ok.any() else np.zeros(1)
            err = float(diff.max()) if diff.size else 0.0
            inf_mismatch = (np.isinf(g[ok]) != np.isinf(w[ok])).any() if ok.any() else False
            if inf_mismatch or not np.allclose(g[ok], w[ok], rtol=rtol, atol=atol):
                raise MismatchError(
                    f"output {i}: max abs error {err:.3g} exceeds tolerance (rtol={rtol:.1e}, atol={atol:.1e})"
                )
            self.output_errors.append(err if np.isfinite(err) else 0.0)
            worst = max(worst, self.output_errors[-1])
        self.max_abs_error = worst
        return worst

    def to_json(self, detail: bool = False) -> dict:
        """Summary (cycles per region, totals, error); `detail` adds every node's counters and edges."""
        regions = []
        graphs = {g.name: g for g in self.program.graphs}
        for r in self.regions:
            entry = {"name": r.name, "cycles": r.cycles, "engine": r.engine, **r.totals()}
            if r.memoised:
                entry["memoised"] = True
            if r.sampled is not None:
                entry["sampled"] = r.sampled.to_json()
            if r.whole_reason is not None:
                entry["whole"] = r.whole_reason
            if r.pieces is not None:
                entry["pieces"] = {**asdict(r.pieces), "bytes_per_token": round(r.pieces.bytes_per_token, 2)}
            if r.spill is not None:
                entry["spill"] = dict(r.spill)
            g = graphs.get(r.name)
            if detail and g is not None:
                entry["nodes"] = [
                    {
                        k: (v.tolist() if hasattr(v, "tolist") else v)
                        for k, v in n.items()
                        if k not in ("seg", "crd", "vals")
                    }
                    for n in r.nodes
                ]
                entry["edges"] = [[src, port, dst] for dst, spec in enumerate(g.nodes) for src, port in spec.inputs]
            regions.append(entry)
        sampled = {"interval": list(self.interval or ()), "sampled": self.sampled.to_json()} if self.sampled else {}
        return {
            "total_cycles": self.cycles,
            **sampled,
            "serial_cycles": self.serial_cycles,
            "strategy": self.strategy,
            "split": self.split.to_json() if self.split is not None else None,
            "considered": dict(self.considered),
            "timeline": [sp.to_json() for sp in self.timeline],
            "arch": self.arch.name,
            "schedule": self.program.schedule,
            "passes": self.program.passes,
            "orders": dict(self.program.orders),
            "regions": regions,
            "max_abs_error": self.max_abs_error,
            "notes": list(self.program.imported.notes),
        }


def dumps(res: SimResult) -> str:
    """The result as indented JSON text."""
    return json.dumps(res.to_json(), indent=2)
