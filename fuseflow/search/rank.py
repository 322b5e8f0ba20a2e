"""Choose a region's dataflow order by the cycle model (`order="auto"`; docs/architecture.md, "Design: planning").

The static estimate of `ordering.py` counts loop-nest coordinates and misses what a lowering
does with them (a locate-fused inner product under a sparse filter iterates only the filter's
nonzeros, SDDMM's 20x). So `auto` keeps the static estimate only to shortlist: it lowers the
`top` most promising orders (and the lowering's own default), predicts each graph's cycles with
`analysis.cycle_model` from the real statistics of the region's inputs, adds the conversion of
every model input the order re-lays out (parameters are laid out at compile time, free), and
keeps the fastest. Regions are lowered in program order, so the statistics of a tensor passed
between regions are the prediction from the chosen producer.

On a machine whose timing the model only approximates (finite FIFOs shallower than the memory
latency: `rda`, `amber`), the ranker verifies: it simulates the `verify` best orders by estimate
on the example inputs, when their values are at hand and the runs are small, and keeps the
fastest simulated one (docs/cycle-model.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from fuseflow import views
from fuseflow.analysis.index_notation import Access, Const, Reduce
from fuseflow.cost.cycle_model import estimate_graph
from fuseflow.cost.input_stats import relayout_cycles, stats_for_inputs
from fuseflow.cost.tensor_stats import TensorStats, level_counts
from fuseflow.cost.timing import Timing, model_approximates
from fuseflow.errors import FuseflowError
from fuseflow.formats import Format
from fuseflow.search.ordering import Candidate
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import graph_spec, parse_graphs, run_graph
from fuseflow.sim.values import evaluate_into, tensors_read

DEFAULT_TOP = 6
"""Orders per region lowered and estimated (shortlisted by the static estimate)."""
DEFAULT_VERIFY = 3
"""Orders per region simulated on a machine the model approximates (the best by estimate)."""
VERIFY_MAX_TOKENS = 2_000_000
"""Largest predicted token count of a region the ranker simulates to verify (about a second)."""
MAX_RANKED_NODES = 4000
"""A region whose default graph is larger than this is ranked on its shortlist's first order
only (lowering each of a huge region's orders costs seconds)."""


_INTERMEDIATE = re.compile(r"t\d+|out\d+")
"""Names of a region's intermediates and outputs, which differ between schedules that cut the
same region out of a model (model inputs and parameters keep their names: their data differs)."""


def _const(value: Any) -> Callable[[], Any]:
    """A function returning `value` (what `cost` takes for a typed graph already built)."""
    return lambda: value


def _region_key(graph: Any) -> str:
    """A region's graph up to its name and the names of intermediates: equal keys, equal regions."""
    return graph.digest(lambda name: _INTERMEDIATE.fullmatch(name) is not None)


class OrderRanker:
    """Ranks a region's candidate orders by predicted cycles.

    `data`: every model input and parameter by name (numpy or scipy), measured exactly; tensors
    without data fall back to their recorded density (a hand-written `.mlir`). `model_inputs`
    names the tensors whose re-layout costs cycles at run time.
    """

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        timing: Timing | None = None,
        model_inputs: set[str] | None = None,
        top: int = DEFAULT_TOP,
        keep_vars: set[str] | None = None,
        memo: dict[str, str] | None = None,
        arch: Arch | None = None,
        verify: int = DEFAULT_VERIFY,
        picks: dict[tuple, Candidate] | None = None,
        values: dict[tuple, Any] | None = None,
    ):
        self.data = dict(data or {})
        self.timing = timing or Timing()
        self.arch = arch if arch is not None and model_approximates(self.timing) else None
        self.verify = verify
        # region structure -> chosen order (lower_module): shared by the planner's compiles
        self.picks: dict[tuple, Candidate] = picks if picks is not None else {}
        # (region, tensors, index notation, order) -> its lowering: a region that several of
        # the planner's candidate schedules cut alike is lowered once (lower_module)
        # (a region's index notation, the arrays it reads) -> its outputs' values: the planner's
        # compiles evaluate a region their schedules share once (`_evaluate`)
        self.values = values
        self.model_inputs = model_inputs
        self.top = top
        self.memo = memo  # canonical default-order graph -> chosen order name (shared across compiles)
        self.keep_vars = set(keep_vars or ())  # index variables a later pass names (sam-parallelize levels)
        self.known: dict[str, TensorStats] = {}
        self.density: Mapping[str, float] = {}
        self.declared: Mapping[str, Format] = {}
        self._measured: dict = {}  # statistics of model inputs, counted once per format
        self._estimates: dict[str, Any] = {}  # graph text -> its estimate, within one region
        self._pending: dict[str, tuple[str, list, Any]] = {}  # tensor -> (graph, assigns) committed, not yet known

    def begin(self, density: Mapping[str, float], declared: Mapping[str, Format]) -> None:
        """Called by `lower_module` before the first region: fallback densities, declared formats."""
        self.density, self.declared = density, dict(declared)

    def _graph(self, text: str, typed: Callable[[], Any] | None = None):
        """The simulator's spec of a region's graph: from the lowering's typed graph when it is
        at hand (`SamLowering.typed`), else parsed from the text."""

        if typed is not None:
            return graph_spec(typed())
        from fuseflow.dialects.sam_ir import (  # loaded with MLIR or torch.export, when first needed
            module_text,
            parse_module,
        )

        graphs, _ = parse_graphs(parse_module(module_text([text])))
        return graphs[0]

    def _estimate(self, text: str, typed: Callable[[], Any] | None = None) -> tuple[Any, Any]:
        """The graph of one lowered region and its estimate (memoised by text within a region)."""
        if text not in self._estimates:
            spec = self._graph(text, typed)
            # an all-dense read's statistics are its extents: what writes it need not be evaluated
            # (on GPT-3 Small that would run every decoder in numpy to rank the final layer norm)
            self._resolve(
                t.copy_of or n
                for n, t in spec.tensors.items()
                if t.role == "input" and any(k != "dense" for k in t.fmt.levels)
            )
            stats = stats_for_inputs(spec, self.data, self.known, self.density, cache=self._measured)
            self._estimates[text] = (spec, estimate_graph(spec, stats, self.timing))
        return self._estimates[text]

    def _resolve(self, names: Iterable[str]) -> None:
        """Make the committed regions that write `names` (and, first, what they read) known:
        as values where cheap (`sim.values.evaluate_into`), else as predicted statistics."""

        stack = [b for n in names for b in views.bases_of(n)]
        while stack:
            name = stack[-1]
            region = self._pending.get(name)
            if region is None:
                stack.pop()
                continue
            text, assigns, typed = region
            unresolved = [b for n in tensors_read(assigns) for b in views.bases_of(n) if b in self._pending]
            if unresolved:
                stack.extend(unresolved)
                continue
            stack.pop()
            for a in assigns:
                self._pending.pop(a.out, None)
            if not self._evaluate(assigns):
                spec = self._graph(text, typed)
                stats = stats_for_inputs(spec, self.data, self.known, self.density, cache=self._measured)
                self.known.update(estimate_graph(spec, stats, self.timing).outputs)

    def _evaluate(self, assigns: list) -> bool:
        """`sim.values.evaluate_into`, served from `values` when an earlier compile evaluated the
        same index notation on the same arrays (model inputs by their memory, intermediates by
        the arrays this cache gave out; the cache holds every array it keys, so none is reused)."""

        if self.values is None:
            return evaluate_into(self.data, assigns)
        bases = sorted({b for n in tensors_read(assigns) for b in views.bases_of(n)})
        if not all(b in self.data for b in bases):
            return evaluate_into(self.data, assigns)
        arrays = [self.data[b] for b in bases]
        reads = tuple(
            (b, a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)
            if isinstance(a, np.ndarray)
            else (b, id(a))
            for b, a in zip(bases, arrays)
        )
        body = tuple((a.out, a.vars, tuple(sorted(a.dims.items())), _exact(a.expr, {})) for a in assigns)
        hit = self.values.get((body, reads))
        if hit is not None:
            self.data.update(hit[0])
            return True
        if not evaluate_into(self.data, assigns):
            return False
        self.values[(body, reads)] = ({a.out: self.data[a.out] for a in assigns}, arrays)
        return True

    def cost(self, text: str, typed: Callable[[], Any] | None = None) -> tuple[float, Any]:
        """Predicted cycles of one lowered region, re-layouts of model inputs included."""
        spec, est = self._estimate(text, typed)
        extra = 0.0
        for name, t in spec.tensors.items():
            source = t.copy_of or name
            if t.role != "input" or not self._is_model_input(source):
                continue
            declared = self.declared.get(source)
            if declared is not None and declared.mode_order != t.fmt.mode_order:
                key = ("relayout", source, declared.levels, declared.mode_order, t.block)
                if key not in self._measured:
                    self._measured[key] = level_counts(self.data[source], declared.levels, declared.mode_order, t.block)
                extra += relayout_cycles(self._measured[key])
        return est.cycles + extra, est

    def relayout_costs(self, name: str) -> bool:
        """Whether storing `name` against another order costs run-time cycles (a model input)."""
        return self._is_model_input(name)

    def _is_model_input(self, name: str) -> bool:
        return name in self.data and (self.model_inputs is None or name in self.model_inputs)

    def rank(self, region: str, pick: Candidate, build: Callable[[list[str] | None], Any]) -> Candidate:
        """The candidate of `pick.alternatives` with the lowest predicted cycles."""
        cands = list(pick.alternatives) or [pick]
        shortlist = sorted(cands, key=lambda c: (c.estimate.cost, c.index))[: self.top]
        if cands[0] in shortlist:
            shortlist.remove(cands[0])
        shortlist.insert(0, cands[0])  # the lowering's own default order is always a contender, built first
        scored: dict[int, float] = {}
        texts: dict[int, str] = {}
        extras: dict[int, float] = {}  # re-layout cycles of each scored order
        required: set[str] | None = None
        key = None
        for c in shortlist:
            try:
                lowering = build(list(c.order))
                text = lowering.text()
                graph = lowering.typed()
            except FuseflowError:
                continue
            if key is None and self.memo is not None:
                key = _region_key(graph)
                hit = self.memo.get(key)
                chosen = next((x for x in cands if x.name == hit), None)
                if chosen is not None:  # this region was ranked in another compile of the same model
                    return replace(chosen, alternatives=tuple(cands))
            if len(graph.ops) > MAX_RANKED_NODES and scored:
                break
            present = self.keep_vars & {op.index_var for op in graph.ops}
            if required is None:
                required = present  # the variables a later sam-parallelize names in the default graph
            elif not required <= present:
                continue  # this order renames one of them (Gustavson): the pass could not find it
            scored[c.index], est = self.cost(text, _const(graph))
            texts[c.index] = text
            extras[c.index] = scored[c.index] - est.cycles
        if not scored:  # no shortlisted order lowers: the first of the others that does
            for c in sorted(cands, key=lambda c: (c.estimate.cost, c.index)):
                if c in shortlist:
                    continue
                try:
                    build(list(c.order))
                except FuseflowError:
                    continue
                return replace(c, alternatives=tuple(cands))
            return pick
        simulated = self._verified(scored, texts)
        if simulated:
            best = min(simulated, key=lambda i: (simulated[i], i))
        else:
            best = min(scored, key=lambda i: (scored[i], i))
        alts = tuple(
            replace(
                c,
                cycles=scored.get(c.index),
                simulated=round(simulated[c.index] - extras[c.index]) if c.index in simulated else None,
            )
            for c in cands
        )
        if key is not None and self.memo is not None:
            self.memo[key] = alts[best].name
        return replace(alts[best], alternatives=alts)

    def _verified(self, scored: dict[int, float], texts: dict[int, str]) -> dict[int, float]:
        """Simulated cycles (re-layouts included) of the `verify` best scored orders, when the
        model only approximates the machine and the inputs' values are known; else empty."""
        if self.arch is None or self.verify < 2 or len(scored) < 2:
            return {}

        out: dict[int, float] = {}
        for i in sorted(scored, key=lambda i: (scored[i], i))[: self.verify]:
            spec, est = self._estimate(texts[i])
            inputs = [t.copy_of or n for n, t in spec.tensors.items() if t.role == "input"]
            if sum(n.tokens for n in est.nodes) > VERIFY_MAX_TOKENS or not all(views.has(self.data, n) for n in inputs):
                return {}  # verify all or none: a partial verification would compare unlike figures
            try:
                run = run_graph(spec, self.data, self.arch)
            except FuseflowError:
                return {}
            out[i] = run.cycles + (scored[i] - est.cycles)
        return out

    def commit(self, text: str, assigns: list | None = None, typed: Callable[[], Any] | None = None) -> None:
        """The chosen graph of a region: its written tensors feed later regions, as values
        where they are cheap to compute from `assigns`, else as predicted statistics. Both are
        made when a later region's ranking first reads them (`_resolve`): a compile whose
        orders are fixed, or whose later regions repeat an earlier one's structure, never
        evaluates them."""
        if assigns:
            for a in assigns:
                self._pending[a.out] = (text, assigns, typed)
        else:
            _, est = self._estimate(text, typed)
            self.known.update(est.outputs)
        self._estimates.clear()  # the next region sees new known statistics


def _exact(e: Any, memo: dict[int, tuple]) -> tuple:
    """An expression's whole structure, constants exactly (a key: `render` rounds them)."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    if isinstance(e, Access):
        out: tuple = ("a", e.tensor, e.vars, e.use)
    elif isinstance(e, Const):
        out = ("c", repr(e.value))
    elif isinstance(e, Reduce):
        out = ("r", e.kind, e.vars, _exact(e.body, memo))
    else:
        out = ("f", e.op, tuple(_exact(x, memo) for x in e.args))
    memo[id(e)] = out
    return out


def ranker_options(arch: Any) -> dict[str, Any]:
    """`OrderRanker` options that rank orders with `arch`'s timing (none: the default, comal)."""
    if arch is None:
        return {}
    arch_ = Arch.resolve(arch)
    return {"timing": Timing.from_settings(arch_.settings), "arch": arch_}
