"""Micro-batches: a region's rows cut into K ranges, each run as the same sam graph on its slice.

A split cuts the program outputs' first dimension (the rows: graph nodes, batch, tokens) into K
ranges. A region is cut when every output it writes has that many rows and each tensor it
indexes by a row variable can be sliced there (`cut_region`); the micro-batch is the region's
graph with those dimensions shrunk to the range, run on the rows of each input it reads along
them (`batch_spec`, `batch_inputs`). Row slices change no reduction, so the micro-batches'
outputs, stacked, are the unsplit region's outputs bit for bit, and every run checks it.

`rows` splits into equal row ranges; `nnz` into ranges of equal work, the prefix sum of each
row's stored entries in the sparse inputs read along the rows (power-law graphs make equal rows
badly unbalanced).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse

from fuseflow import views
from fuseflow.analysis.index_notation import Assign, Reduce, accesses
from fuseflow.errors import FuseflowError
from fuseflow.sim.graph import GraphSpec

SPLIT_KINDS = ("rows", "nnz")


@dataclass(frozen=True)
class SplitInfo:
    """What a strategy's `split` sees: the rows' extent and the work of each row per sparse input
    (stored entries along the rows), and which regions can be cut at all."""

    var: str  # "rows": the program outputs' first dimension
    extent: int
    work: dict[str, np.ndarray] = field(default_factory=dict)
    regions: dict[str, str | None] = field(default_factory=dict)  # region -> None (cut) or why not

    def row_work(self) -> np.ndarray:
        """Each row's work summed over the sparse inputs; one per row when there are none."""
        if not self.work:
            return np.ones(self.extent)
        return np.sum([w for w in self.work.values()], axis=0).astype(float)


@dataclass(frozen=True)
class SplitPlan:
    """K row ranges `bounds` ([lo, hi) each) and each range's `work`."""

    kind: str  # rows | nnz | none
    bounds: tuple[tuple[int, int], ...]
    work: tuple[float, ...]

    @property
    def k(self) -> int:
        """How many micro-batches."""
        return len(self.bounds)

    @property
    def imbalance(self) -> float:
        """The largest micro-batch's work over the mean (1.0: perfectly balanced)."""
        mean = sum(self.work) / len(self.work) if self.work else 0.0
        return max(self.work) / mean if mean else 1.0

    def to_json(self) -> dict:
        """The plan as JSON: kind, count, row ranges, work and imbalance."""
        return {
            "kind": self.kind,
            "k": self.k,
            "bounds": [list(b) for b in self.bounds],
            "work": list(self.work),
            "imbalance": self.imbalance,
        }

    @staticmethod
    def one(info: SplitInfo) -> SplitPlan:
        """The plan that does not split: one range over every row."""
        return SplitPlan("none", ((0, info.extent),), (float(info.row_work().sum()),))


def split_rows(info: SplitInfo, k: int) -> SplitPlan:
    """K ranges of (nearly) equal rows."""
    _check_k(info, k)
    edges = [round(j * info.extent / k) for j in range(k + 1)]
    return _plan("rows", info, edges)


def split_nnz(info: SplitInfo, k: int) -> SplitPlan:
    """K ranges of (nearly) equal work: each cut is the row where the prefix sum of the work
    comes closest to its share, keeping at least one row per range."""
    _check_k(info, k)
    prefix = np.concatenate([[0.0], np.cumsum(info.row_work())])
    total = prefix[-1]
    edges = [0]
    for j in range(1, k):
        target = j * total / k
        r = int(np.searchsorted(prefix, target))
        if r > 0 and abs(prefix[r - 1] - target) <= abs(prefix[min(r, info.extent)] - target):
            r -= 1
        edges.append(min(max(r, edges[-1] + 1), info.extent - (k - j)))
    edges.append(info.extent)
    return _plan("nnz", info, edges)


def _plan(kind: str, info: SplitInfo, edges: Sequence[int]) -> SplitPlan:
    prefix = np.concatenate([[0.0], np.cumsum(info.row_work())])
    bounds = tuple((int(a), int(b)) for a, b in zip(edges, edges[1:]))
    return SplitPlan(kind, bounds, tuple(float(prefix[b] - prefix[a]) for a, b in bounds))


def _check_k(info: SplitInfo, k: int) -> None:
    if k < 1:
        raise FuseflowError(f"a split needs at least one micro-batch, not {k}")
    if k > info.extent:
        raise FuseflowError(f"cannot split {info.extent} rows into {k} micro-batches (at most one per row)")


@dataclass(frozen=True)
class RegionCut:
    """How a region is cut along the rows: the dimension of each tensor indexed by a row variable
    (inputs and outputs, by the graph's tensor names) and the row variables themselves."""

    dims: dict[str, int]
    row_vars: frozenset[str]

    def row_local(self, name: str) -> bool:
        """Whether the region reads `name` by its rows (dimension 0), so a micro-batch needs only
        the same rows of it."""
        return self.dims.get(name) == 0


def cut_region(spec: GraphSpec, assigns: Sequence[Assign], extent: int) -> RegionCut | str:
    """The region's cut along `extent` rows, or why it cannot be cut (it then runs whole)."""
    if spec.block:
        return "a blocked region"
    if not assigns:
        return "no index notation"
    rows = row_vars(assigns, extent)
    if isinstance(rows, str):
        return rows
    dims = _access_dims(assigns, rows)
    if isinstance(dims, str):
        return dims
    loops = _row_loops(spec, dims, rows, extent)
    if isinstance(loops, str):
        return loops
    if any(n.kind == "fork" for n in spec.nodes):
        # shrunk row loops and a fork's dealing do not yet agree everywhere: GCN's layer fused in
        # order j,k,i,l with lanes at k, and SDDMM with 8 lanes at its rows in 4 micro-batches,
        # each stopped with a join's stream protocol error
        return "it has lanes (sam.fork): a region with lanes runs whole"
    for name, t in spec.tensors.items():
        if t.role == "output" and name not in dims:
            return f"output {name} has no row dimension"
    return RegionCut(dims, frozenset(loops))


def row_vars(assigns: Sequence[Assign], extent: int) -> set[str] | str:
    """Each output's first variable, which must run over `extent` rows and never be reduced."""
    row_vars: set[str] = set()
    for a in assigns:
        if not a.vars or a.dims.get(a.vars[0]) != extent:
            return f"output {a.out} does not have {extent} rows"
        row_vars.add(a.vars[0])
    if any(_reduced(a.expr) & row_vars for a in assigns):
        return "it reduces over the rows"
    return row_vars


def _access_dims(assigns: Sequence[Assign], row_vars: set[str]) -> dict[str, int] | str:
    """The row dimension of every tensor the notation indexes by a row variable (outputs: 0)."""
    dims: dict[str, int] = {a.out: 0 for a in assigns}
    for a in assigns:
        for acc in accesses(a.expr):
            rows = [d for d, v in enumerate(acc.vars) if v in row_vars]
            d = rows[0] if rows else -1
            if len(rows) > 1 or dims.setdefault(acc.tensor, d) != d:
                return f"tensor {acc.tensor} is not read by its rows alone"
    return {t: d for t, d in dims.items() if d >= 0}


def _row_loops(spec: GraphSpec, dims: dict[str, int], row_vars: set[str], extent: int) -> set[str] | str:
    """The graph's loops over the rows. Fusion renames a variable per nest (``i_k``), so they are
    found by the tensor dimensions they walk; every scan or locate on them is shrunk, so each
    must walk a row dimension of `extent` (added to `dims` for tensors the notation names
    otherwise)."""
    scans = [n for n in spec.nodes if n.kind in ("scan", "locate")]
    loops: set[str] = set(row_vars)
    for n in scans:
        if n.var and n.tensor in spec.tensors and dims.get(n.tensor) == spec.tensors[n.tensor].fmt.mode_order[n.level]:
            loops.add(n.var)
    for n in scans:
        if n.tensor not in spec.tensors:  # a loop over a dimension alone (a broadcast)
            if n.var in loops and int(n.params.get("dim", -1)) != extent:
                return f"a loop over the rows ({n.var}) has another extent"
            continue
        dim = spec.tensors[n.tensor].fmt.mode_order[n.level]
        if n.var not in loops:
            if dims.get(n.tensor) == dim:
                return f"tensor {n.tensor} is read along the rows by a loop over other rows"
            continue
        if int(n.params.get("dim", -1)) != extent or spec.tensors[n.tensor].shape[dim] != extent:
            return f"tensor {n.tensor} is read along the rows with another extent"
        if dims.setdefault(n.tensor, dim) != dim:
            return f"tensor {n.tensor} is read along the rows twice"
    return loops


def _reduced(e) -> set[str]:
    if isinstance(e, Reduce):
        return set(e.vars) | _reduced(e.body)
    args = getattr(e, "args", ())
    return set().union(*(_reduced(x) for x in args)) if args else set()


def batch_spec(spec: GraphSpec, cut: RegionCut, lo: int, hi: int, batch: int) -> GraphSpec:
    """`spec` on rows [lo, hi): every row dimension shrunk to the range. Inputs are read under
    their own names (`batch_inputs` slices them), so no tensor is a copy of another any more."""
    size = hi - lo
    nodes = [
        replace(n, params={**n.params, "dim": size}) if n.kind in ("scan", "locate") and n.var in cut.row_vars else n
        for n in spec.nodes
    ]
    tensors = {}
    for name, t in spec.tensors.items():
        d = cut.dims.get(name)
        shape = t.shape if d is None else tuple(size if i == d else s for i, s in enumerate(t.shape))
        tensors[name] = replace(t, shape=shape, copy_of=None)
    return replace(spec, name=f"{spec.name}#{batch}", nodes=nodes, tensors=tensors)


def batch_inputs(spec: GraphSpec, cut: RegionCut, env: Mapping[str, Any], lo: int, hi: int) -> dict[str, Any]:
    """Each input of `spec` as the micro-batch reads it: the rows [lo, hi) of those it reads along
    the rows (views where the layout allows: dense arrays and CSR rows), the rest whole."""
    out: dict[str, Any] = {}
    for name, t in spec.tensors.items():
        if t.role != "input":
            continue
        data = views.lookup(env, t.copy_of or name)
        d = cut.dims.get(name)
        out[name] = data if d is None else slice_rows(data, d, lo, hi)
    return out


def slice_rows(data, dim: int, lo: int, hi: int):
    """`data[..., lo:hi, ...]` along `dim`; a CSR matrix's rows keep its crd and val arrays."""
    if scipy.sparse.issparse(data):
        if dim == 0 and data.format == "csr":
            ptr = data.indptr
            return scipy.sparse.csr_matrix(
                (data.data[ptr[lo] : ptr[hi]], data.indices[ptr[lo] : ptr[hi]], ptr[lo : hi + 1] - ptr[lo]),
                shape=(hi - lo, data.shape[1]),
            )
        return data.tocsr()[lo:hi] if dim == 0 else data.tocsc()[:, lo:hi]
    arr = np.asarray(data)
    index = [slice(None)] * arr.ndim
    index[dim] = slice(lo, hi)
    return arr[tuple(index)]


def row_counts(data, dim: int) -> np.ndarray:
    """Stored (nonzero) entries of a sparse tensor per index of `dim`; a tensor declared sparse
    but handed over dense counts its nonzeros, which is what its compressed levels store."""
    if scipy.sparse.issparse(data):
        coo = data.tocoo()
        return np.bincount(coo.coords[dim], minlength=coo.shape[dim]).astype(float)
    arr = np.asarray(data)
    return np.count_nonzero(arr, axis=tuple(a for a in range(arr.ndim) if a != dim)).astype(float)


def split_info(graphs: Sequence[GraphSpec], assigns: Mapping[str, Sequence[Assign]], env, extent: int) -> SplitInfo:
    """The rows a strategy may split, which regions can be cut, and the per-row work of every
    sparse model input a cut region reads along the rows."""
    regions: dict[str, str | None] = {}
    work: dict[str, np.ndarray] = {}
    for g in graphs:
        cut = cut_region(g, assigns.get(g.name, ()), extent)
        if not isinstance(cut, str):
            cut = _sliceable(g, cut, env)
        regions[g.name] = cut if isinstance(cut, str) else None
        if isinstance(cut, str):
            continue
        for name, d in cut.dims.items():
            t = g.tensors[name]
            source = t.copy_of or name
            if t.role != "input" or source not in env or source in work:
                continue
            if scipy.sparse.issparse(env[source]) or "compressed" in t.fmt.levels:
                work[source] = row_counts(env[source], d)
    return SplitInfo("rows", extent, work, regions)


def _sliceable(g: GraphSpec, cut: RegionCut, env) -> RegionCut | str:
    """`cut`, or why its inputs cannot be sliced here: sparse inputs of rank above 2 (scipy
    slices matrices only) run whole."""
    for name, t in g.tensors.items():
        source = t.copy_of or name
        if t.role == "input" and name in cut.dims and source in env:
            data = env[source]
            if scipy.sparse.issparse(data) and data.ndim != 2:
                return f"sparse input {source} has rank {data.ndim}"
    return cut
