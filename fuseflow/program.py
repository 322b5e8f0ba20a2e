"""The Python API: ``compile`` a PyTorch model, ``simulate`` it, ``check`` it against PyTorch."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fuseflow import views
from fuseflow.cost.cycle_model import estimate_graph
from fuseflow.cost.estimates import GraphEstimate
from fuseflow.cost.input_stats import relayout_cycles, stats_for_inputs
from fuseflow.cost.tensor_stats import level_counts
from fuseflow.cost.timing import Timing
from fuseflow.errors import FuseflowError
from fuseflow.fabric.resources import check_fits, demand_of
from fuseflow.fabric.run import predicted_timeline
from fuseflow.fabric.strategy import resolve
from fuseflow.formats import Format
from fuseflow.frontend.export import ImportedModel, densify
from fuseflow.frontend.torch_sparse import is_plain_2d, is_sparse, to_coo_array, to_scipy, validate
from fuseflow.mlir import ir
from fuseflow.planning.estimate import ProgramEstimate
from fuseflow.results import RegionResult, SimResult
from fuseflow.schedule.regions import OpInfo
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec
from fuseflow.sim.values import evaluate_into
from fuseflow.simulation import SimOptions, simulate

if TYPE_CHECKING:
    from fuseflow.planning.estimate import ProgramEstimate

SCHEDULES = ("unfused", "layer", "full", "op", "auto")


@dataclass(frozen=True)
class Relayout:
    """A model input that a region reads in another level order than the user declared: it is
    converted at run time by a region of its own (cycles: `input_stats.relayout_cycles`)."""

    name: str  # relayout_<tensor>
    tensor: str  # the graph's name of the converted copy
    source: str  # the model input
    declared: Format
    stored: Format
    block: int = 0


@dataclass
class Program:
    """A compiled model: its linalg and sam modules and the cached simulator graph specs."""

    model: torch.nn.Module
    example_args: tuple
    imported: ImportedModel
    schedule: str
    linalg_text: str  # the imported module with its locations (region names come from them)
    sam_source: str  # the sam module as lowered (generic form, every distinct graph verified)
    summary: dict[str, list[str]]
    graphs: list[GraphSpec] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    op_infos: list[OpInfo] = field(default_factory=list)
    passes: str = ""
    orders: dict[str, str] = field(default_factory=dict)  # region -> dataflow order chosen by a pass
    order_candidates: dict[str, tuple] = field(default_factory=dict)  # region -> enumerated orders
    relayouts: list[Relayout] = field(default_factory=list)  # model inputs converted at run time
    pipeline: str = ""  # the registered pipeline compile ran (fuseflow-opt --pass-pipeline takes it)
    plan: Any = None  # schedule="auto": the planner's `Plan` (plan.explain(), plan.schedule)
    assigns: dict[str, list] = field(default_factory=dict)  # region -> outputs in index notation (sim/values.py)
    arch: Any = None  # the machine orders were ranked for; simulate() and estimate() default to it
    relower: Any = None  # order -> Program: the compile driver's lowering of this model (reorder)
    region_ops: dict[str, tuple[int, ...]] = field(default_factory=dict)  # region -> its PyTorch-level ops
    _sam_printed: str | None = field(default=None, repr=False)

    @property
    def sam_text(self) -> str:
        """The sam module as MLIR prints it, parsed and printed on first use (the lowering's own
        text is not MLIR's printed form; printing GPT-3 Small's takes a second)."""
        if self._sam_printed is None:
            from fuseflow.dialects.sam_ir import parse_module  # loaded with MLIR or torch.export, when first needed

            self._sam_printed = str(parse_module(self.sam_source, context=self.imported.module.context))
        return self._sam_printed

    def relayout_runs(self, data: Mapping[str, Any], cache: dict | None = None) -> list[RegionResult]:
        """The conversion regions of re-laid model inputs, with their modelled cycles."""

        out = []
        for r in self.relayouts:
            key = (r.source, r.declared.levels, r.declared.mode_order, r.block)
            st = cache.get(key) if cache is not None else None
            if st is None:
                st = level_counts(data[r.source], r.declared.levels, r.declared.mode_order, r.block)
            out.append(RegionResult(r.name, int(round(relayout_cycles(st))), [], [r.tensor], "model"))
        return out

    def reorder(self, order: str | Mapping[str, str]) -> Program:
        """The same model, schedule and passes lowered under another dataflow order (no re-export):
        what an order sweep calls once per order."""
        if self.relower is None:
            raise FuseflowError("this program was not built by compile(): it cannot be lowered again")
        return self.relower(order)

    def estimate(self, *args, arch: Any = None, strategy: str | Any = "sequential") -> ProgramEstimate:
        """Predict every region's cycles, tokens per node, ALU ops and memory bytes without
        simulating (docs/cycle-model.md). Model inputs are measured exactly (entries per storage
        level of `args`, default the example arguments); tensors passed between regions are
        counted from their values where those are cheap to compute (`sim.values`), and
        predicted from the writers of the region that produces them otherwise. `strategy` places
        the predicted regions on the fabric as `simulate` does (`.cycles` is the makespan)."""

        args = tuple(args) if args else self.example_args
        arch_ = Arch.resolve(arch if arch is not None else self.arch)
        data = self.bind(args)
        known: dict = {}
        cache: dict = {}
        regions = []
        timing = Timing.from_settings(arch_.settings)
        for g in self.graphs:
            est = estimate_graph(g, stats_for_inputs(g, data, known, cache=cache), timing)
            if not evaluate_into(data, self.assigns[g.name]):
                known.update(est.outputs)
            regions.append(est)
        conversions = [
            GraphEstimate(r.name, float(r.cycles), [], {}, "relayout", 0.0) for r in self.relayout_runs(data, cache)
        ]

        strategy_ = resolve(strategy)
        whole = ProgramEstimate(self, conversions + regions, arch_, strategy_.name)
        check_fits(self.resources().items(), arch_.fabric, arch_.name)
        if strategy_.name != "sequential" or arch_.fabric is not None:
            predicted = [r.cycles for r in whole.regions]
            whole.timeline, whole.split = predicted_timeline(self, predicted, args, arch_, strategy_, data)
            chosen = getattr(strategy_, "chosen", None)
            if chosen is not None:
                whole.strategy = f"auto({chosen.name})"
        return whole

    def mlir(self, stage: str = "sam") -> str:
        """The module at a stage: ``linalg`` (imported, with encodings) or ``sam``."""
        if stage == "linalg":
            return str(ir.Module.parse(self.linalg_text, context=self.imported.module.context))
        if stage == "sam":
            return self.sam_text
        raise FuseflowError(f"unknown stage {stage!r}; expected 'linalg' or 'sam'")

    @property
    def max_reduction(self) -> int:
        """The longest dimension of any tensor a region reads or writes (the tolerance scales with it)."""
        return max((max(t.shape) if t.shape else 1 for g in self.graphs for t in g.tensors.values()), default=1)

    @property
    def tolerance(self) -> float:
        """Default rtol and atol of comparisons: 1e-5 scaled by the longest reduction (f32 sums
        reassociate differently in the simulator, numpy and PyTorch)."""
        return 1e-5 * max(1, self.max_reduction)

    def ops(self) -> str:
        """The PyTorch-level ops, numbered: the indices a ``Schedule`` may name."""
        return "\n".join(
            f"{o.index:3d}  {o.node:<16} {o.path or '(top)':<20} {', '.join(o.kinds)}" for o in self.op_infos
        )

    def regions(self) -> str:
        """One line per fusion region: its name and the index-notation expression(s) it computes."""
        return "\n".join(f"{name}: {'; '.join(exprs)}" for name, exprs in self.summary.items())

    def reference(self, *args) -> tuple:
        """Eager PyTorch's outputs on `args`: what simulated outputs are checked against."""
        with torch.no_grad():
            out = self.model(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def bind(self, args: Sequence[Any]) -> dict[str, np.ndarray]:
        """Every model input (from `args`) and parameter by name, as the simulator reads them."""
        return bind_args(self.imported, args)

    def simulate(
        self,
        *args,
        arch: Any = None,
        record: bool = False,
        spans: bool = False,
        progress: Any = None,
        engine: str = "auto",
        memo: Any = None,
        jobs: int = 1,
        executor: Any = None,
        strategy: str | Any = "sequential",
        sample: Any = None,
        pieces: int | Sequence[str] | None = None,
        checkpoint: str | os.PathLike | None = None,
        every: str | float | None = None,
    ) -> SimResult:
        """Run every region on `args` (default: the example arguments) and place the runs on the
        fabric (`arch`'s ``[arch.fabric]``; unbounded without one) by `strategy`:
        ``sequential`` (program order, one region at a time) or ``concurrent`` (every ready region
        that fits starts, longest predicted path first; with the memory model on, regions that
        overlap are simulated together and contend for its channels). `res.cycles` is the
        makespan, `res.timeline` each region's span (docs/fabric.md). A `fuseflow.Strategy`, or
        ``"FILE.py:Class"`` naming one, schedules the regions itself (fabric/strategy.py).

        `progress`: True shows a live cycle count per region on stderr (long simulations); a
        callable is called as ``progress(region, cycle)`` about every million cycles.
        `engine`: ``auto`` (default), ``event`` or ``window``; all give the same results, the window
        engine is faster and applies when the memory model is off; ``auto`` hands a run to the event
        engine at the window where a FIFO could fill (the region's engine then reads ``window+event``).
        `memo`: True, a directory or a `RegionMemo`: a region structurally identical to one already
        simulated takes its cycles and counters from the memo and its values from its index
        notation (`sim/memo.py`). `jobs` > 1 (or an `executor` from `fuseflow.experiments`) simulates
        regions at once, each on inputs computed from the index notation; every simulated
        intermediate is checked against that computation. Cycles and counters are those of the
        plain run either way (tests/e2e/test_memo.py).

        `sample`: True (±2% at 95%), ``"1%@99%"`` or a dict of `fuseflow.sampling.spec.SampleSpec`
        fields estimates each large row-local region from a sample of its row units
        (docs/sampling.md): `res.cycles` is then the estimate, `res.interval` its interval,
        `res.regions[k].interval` each region's, and `res.sampled` says what was simulated and
        which regions ran whole and why. Outputs are still checked by `check()`. With `memo`, a
        region identical to one before takes that one's estimate and interval.

        `pieces`: a count, or the names of the nodes that start a piece, runs each region's graph
        in pieces, one after another, each replaying the streams the pieces before it recorded
        to disk (docs/pieces.md): the cycles, counters and outputs are the whole run's, and the
        peak memory is the largest piece's. It needs unbounded FIFOs and the memory model off,
        and refuses otherwise. `checkpoint`: a directory that keeps every finished piece (without
        `pieces`, every region is one piece; with `memo`, a region of independent parts keeps each
        part it simulates as one); the same call with the same directory resumes after
        the last one (`res.regions[k].pieces` says how many it found). `every` (``"10m"``,
        seconds) also saves the state of a running piece that often, and a stopped piece continues
        from its last state (the window engine: memory model off). With `jobs` > 1 or an
        `executor`, each piece runs in a worker.
        """

        options = SimOptions(
            arch, record, spans, progress, engine, memo, jobs, executor, strategy, sample, pieces, checkpoint, every
        )
        return simulate(self, args, options)

    def resources(self) -> dict[str, dict[str, int]]:
        """Each region's units per fabric resource class (``compute``, ``memory``): one per
        primitive, so a region with P lanes holds P lanes' worth."""
        return {g.name: demand_of(g) for g in self.graphs}

    @functools.cached_property
    def last_readers(self) -> dict[int, list[str]]:
        """Region index -> the tensors no later region reads (simulation releases them after it)."""
        last: dict[str, int] = {}
        for k, g in enumerate(self.graphs):
            for name, t in g.tensors.items():
                if t.role == "input":
                    for base in views.bases_of(t.copy_of or name):  # a derived tensor reads its sources
                        last[base] = k
        out: dict[int, list[str]] = {}
        for name, k in last.items():
            out.setdefault(k, []).append(name)
        return out


def bind_args(imported: ImportedModel, args: Sequence[Any]) -> dict[str, Any]:
    """Model inputs by name (sparse ones as scipy matrices or N-D COO arrays, never densified)
    plus parameters."""
    expected = imported.n_call_args if imported.n_call_args is not None else imported.n_user_args
    if len(args) != expected:
        raise FuseflowError(f"simulate() takes {expected} arguments, got {len(args)}")
    if imported.adapt is not None:  # edge lists -> pattern matrices (frontend/message_passing.py)
        args = imported.adapt(args)
    data: dict[str, Any] = {}
    for name, a in zip(imported.input_names, args):
        if is_sparse(a):  # packed without densifying (large graphs)
            if is_plain_2d(a):
                validate(a, name)
                data[name] = to_scipy(a)
            else:
                data[name] = to_coo_array(a, name)
            continue
        d, _ = densify(a, name)
        data[name] = d.float().numpy()
    data.update(imported.param_values)
    return data
