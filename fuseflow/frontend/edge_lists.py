"""Edge lists as a message-passing model takes them, and the pattern matrices that replace them.

`message_passing` rewrites a PyTorch Geometric model to sparse algebra over 0/1 adjacency
patterns; this module finds the edge-list (and edge-weight) arguments of a call and, each run,
builds the patterns from the user's edge lists with the checks PyG does not do (node ids in
range, no duplicate edges, a node every max aggregation reaches).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from fuseflow.errors import FuseflowError, UnsupportedError


@dataclass(frozen=True)
class EdgeSet:
    """An edge list derived from one edge_index argument: ``base``, ``offdiag`` (self loops
    dropped), ``loops`` (self loops dropped, then one per node appended: PyG's
    ``add_remaining_self_loops``, or ``remove_self_loops`` then ``add_self_loops``) or
    ``plus_loops`` (one per node appended to the list as given: ``add_self_loops`` alone; a list
    that already has a self loop would then hold it twice, which a 0/1 pattern cannot), or
    ``diag`` (the self loops alone, one per node: what picks a loop's value out of, or puts
    one into, the other sets)."""

    arg: str
    kind: str = "base"
    transposed: bool = False  # stored by source rows (a count per source node reads it row by row)

    @property
    def name(self) -> str:
        """The pattern matrix's argument name (``edge_index``, ``edge_index_loops``, ``edge_index_t`` ...)."""
        own = self.arg if self.kind == "base" else f"{self.arg}_{self.kind}"
        return f"{own}_t" if self.transposed else own


@dataclass
class EdgeAdapter:
    """Builds the rewritten model's arguments from the user's: each edge_index becomes the CSR
    pattern matrices of the edge sets the model uses (checked: ids in range, no duplicates)."""

    n_nodes: int
    edge_args: dict[int, str]  # position of an edge_index argument -> its name
    sets: list[EdgeSet]  # in the order the rewritten module takes them
    max_over: list[tuple[EdgeSet, int]] = field(default_factory=list)  # (set, side) reduced with amax
    weights: dict[int, int] = field(default_factory=dict)  # position of an edge-weight argument -> its edge list's

    def __call__(self, args: Sequence[Any]) -> tuple:
        """The rewritten module's arguments from the user's: each edge list as its pattern matrices."""
        lists = {p: edge_index_of(args[p], name, self.n_nodes) for p, name in self.edge_args.items()}
        out: list[Any] = []
        for pos, a in enumerate(args):
            if pos in self.weights:
                out.append(self.weighted(lists[self.weights[pos]], a, self.edge_args[self.weights[pos]]))
            elif pos not in self.edge_args:
                out.append(a)
            else:
                out.extend(self.pattern(lists[pos], s) for s in self.sets if s.arg == self.edge_args[pos])
        return tuple(out)

    def weighted(self, ei: torch.Tensor, w: Any, name: str) -> torch.Tensor:
        """Edge weights (E,) or edge features (E, d...) as a CSR matrix on the edge list's pattern
        (target row, source column), features as its dense trailing dimensions. Entry e belongs
        to edge e of the list: the values are permuted to the pattern's order here, once a run."""
        if not isinstance(w, torch.Tensor) or w.dim() < 1 or w.shape[0] != ei.shape[1]:
            raise FuseflowError(f"edge values of {name}: expected {ei.shape[1]} rows (one per edge), got {describe(w)}")
        if w.is_floating_point() and bool(torch.isinf(w).any()):  # the compiled model takes them finite
            k = int(torch.isinf(w).reshape(w.shape[0], -1).any(1).nonzero()[0])
            raise FuseflowError(f"edge values of {name}: entry {k} is infinite (fuseflow takes finite edge values)")
        return self._csr(ei[0], ei[1], w.detach().float())

    def _csr(self, src: torch.Tensor, dst: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
        n = self.n_nodes
        order = torch.argsort(dst * n + src)  # row i = target, column j = source
        crow = torch.zeros(n + 1, dtype=torch.int64)
        crow[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
        with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
            warnings.simplefilter("ignore", UserWarning)
            return torch.sparse_csr_tensor(crow, src[order], vals[order], (n, n, *vals.shape[1:]))

    def pattern(self, ei: torch.Tensor, s: EdgeSet) -> torch.Tensor:
        """Edge set `s` of edge list `ei` as an N x N CSR pattern (row: target, column: source; the
        other way round for a transposed set)."""
        src, dst = ei[0], ei[1]
        if s.kind == "diag":
            src = dst = torch.arange(self.n_nodes)
        if s.kind in ("offdiag", "loops"):
            keep = src != dst
            src, dst = src[keep], dst[keep]
        if s.kind == "plus_loops" and bool((src == dst).any()):
            k = int((src == dst).nonzero()[0])
            raise UnsupportedError(
                f"{s.arg}: edge {k} is a self loop ({int(src[k])} -> {int(src[k])}), and add_self_loops adds "
                "another: fuseflow builds a 0/1 adjacency (remove_self_loops first, or add_remaining_self_loops)"
            )
        if s.kind in ("loops", "plus_loops"):
            loop = torch.arange(self.n_nodes)
            src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
        n = self.n_nodes
        if s.transposed:  # the reversed list: row: source, column: target (`edge_index.flip(0)`)
            src, dst = dst, src
        for t, side in self.max_over:
            if t == s:
                have = torch.zeros(n, dtype=torch.bool)
                have[dst if side == 1 else src] = True
                if not bool(have.all()):
                    missing = int((~have).nonzero()[0])
                    raise FuseflowError(
                        f"{s.arg}: node {missing} has no {'incoming' if side == 1 else 'outgoing'} edge; a max or min "
                        "aggregation there is 0 in PyTorch Geometric but -inf or inf as sparse algebra (not supported)"
                    )
        return self._csr(src, dst, torch.ones(len(src)))


def edge_index_of(a: Any, name: str, n: int) -> torch.Tensor:
    """The (2, E) edge list of an argument: an integer edge_index, or a torch.sparse adjacency
    (PyG's ``adj_t``: entry (i, j) is the edge j -> i), checked against the node count."""
    if isinstance(a, torch.Tensor) and a.layout != torch.strided:
        adj = a.to_sparse_coo().coalesce()
        if not bool((adj.values() == 1).all()):
            raise UnsupportedError(
                f"{name}: a torch.sparse adjacency with values other than 1 (a weighted adj_t) is not supported; "
                "pass edge_index with the weights as an (E,) edge_weight argument"
            )
        ei = torch.stack([adj.indices()[1], adj.indices()[0]])
    elif isinstance(a, torch.Tensor) and not a.is_floating_point() and a.dim() == 2 and a.shape[0] == 2:
        ei = a.long()
    else:
        raise FuseflowError(f"{name}: expected an edge_index (2 x E integers) like the example, got {describe(a)}")
    if ei.numel():
        lo, hi = int(ei.min()), int(ei.max())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            col = int(((ei == bad).any(0)).nonzero()[0])
            raise FuseflowError(f"{name}: edge {col} names node {bad}, but the graph has {n} nodes (0..{n - 1})")
    key = ei[1] * n + ei[0]
    if torch.unique(key).numel() != key.numel():
        raise UnsupportedError(f"{name}: duplicate edges; fuseflow builds a 0/1 adjacency (coalesce the edge list)")
    return ei


def describe(a: Any) -> str:
    """An argument as an error message names it (a tensor by dtype and shape)."""
    if isinstance(a, torch.Tensor):
        return f"a {a.dtype} tensor of shape {tuple(a.shape)}"
    return type(a).__name__


def is_edge_list(a: Any) -> bool:
    """Whether `a` is a (2, E) integer edge list."""
    return (
        isinstance(a, torch.Tensor)
        and a.layout == torch.strided
        and not a.is_floating_point()
        and a.dim() == 2
        and a.shape[0] == 2
        and a.dtype != torch.bool
    )


def is_message_passing(model: torch.nn.Module) -> bool:
    """A PyTorch Geometric MessagePassing layer anywhere in the model (found by class name: the
    extra is optional, so torch_geometric is not imported for this)."""
    return any(
        any(c.__name__ == "MessagePassing" and c.__module__.startswith("torch_geometric") for c in type(m).__mro__)
        for m in model.modules()
    )


def edge_positions(model: torch.nn.Module, args: Sequence[Any]) -> list[int]:
    """Arguments that are edge lists: integer (2, E) tensors, and torch.sparse adjacencies given
    to a PyTorch Geometric model (its ``adj_t``)."""
    pyg = is_message_passing(model)
    return [
        i
        for i, a in enumerate(args)
        if is_edge_list(a) or (pyg and isinstance(a, torch.Tensor) and a.layout != torch.strided and a.dim() == 2)
    ]


def weight_positions(args: Sequence[Any], positions: list[int], n_nodes: int) -> dict[int, int]:
    """Edge-value arguments: floating-point tensors whose first dimension is as long as exactly
    one edge list (and not as long as the node count, which would make them ambiguous with node
    values): edge weights (E,) and edge features ``edge_attr`` (E, d)."""
    counts = {p: edge_count(args[p]) for p in positions}
    out = {}
    for i, a in enumerate(args):
        if i in positions or not isinstance(a, torch.Tensor) or not a.is_floating_point() or a.dim() < 1:
            continue
        owners = [p for p, c in counts.items() if c == a.shape[0]]
        if len(owners) == 1 and a.shape[0] != n_nodes:
            out[i] = owners[0]
    return out


def edge_count(a: torch.Tensor) -> int:
    """The edges of an edge list or a sparse adjacency."""
    return int(a.shape[1]) if a.layout == torch.strided else int(a._nnz())
