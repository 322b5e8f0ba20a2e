"""What a value of a message-passing graph is, abstractly, and the rewriter that emits the new
graph (`message_passing.translate`).

The exported graph's values are tracked symbolically where they are index arithmetic (an edge
list, its sides, its length, self-loop masks, node ranges, allocations) and as nodes of the new
graph otherwise: an `Edge` is an (N, N, *trailing) tensor zero off its edge set's pattern
matrix, a `Real` an ordinary (node-space) tensor. `Rewriter` emits the new graph's ops with the
source node's metadata, and knows the patterns: gathers, the reciprocal trick for divisions by
a gathered value, and scatters back to nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.fx as fx

from fuseflow.errors import UnsupportedError
from fuseflow.frontend.edge_lists import EdgeSet
from fuseflow.frontend.ops import graph_name, node_location

aten = torch.ops.aten
META = ("stack_trace", "nn_module_stack", "from_node", "source_fn_stack")
"""Node metadata every emitted op copies from the node it translates (module paths, lines)."""


@dataclass(frozen=True)
class Index:
    """The (2, E) index tensor of an edge set."""

    s: EdgeSet


@dataclass(frozen=True)
class Side:
    """Row 0 (sources, j) or row 1 (targets, i) of an edge set, possibly viewed or expanded."""

    s: EdgeSet
    side: int


@dataclass(frozen=True)
class SelfLoopMask:
    """``edge_index[0] != edge_index[1]``."""

    s: EdgeSet


@dataclass(frozen=True)
class LoopMask:
    """``edge_index[0] == edge_index[1]``: the self loops of an edge set."""

    s: EdgeSet


@dataclass(frozen=True)
class LoopNodes:
    """``edge_index[0][edge_index[0] == edge_index[1]]``: the nodes that have a self loop in an
    edge set that may hold none or one per node (the given list), in edge order."""

    s: EdgeSet


@dataclass(frozen=True)
class LoopValues:
    """``e[edge_index[0] == edge_index[1]]`` on such a set: the existing loops' values, in edge
    order. Read only as what ``x[LoopNodes] = ...`` writes (PyG's ``add_remaining_self_loops``
    keeping the weights of the loops a graph has), where both orders pair up."""

    e: Edge


@dataclass(frozen=True)
class Count:
    """The number of edges of a set (a SymInt in the export)."""

    s: EdgeSet


@dataclass(frozen=True)
class SizeExpr:
    """Arithmetic on edge counts that only shape assertions read (``Mod(6 u0 + 204, 2 u0 + 68) == 0``)."""


@dataclass(frozen=True)
class NodeRange:
    """``arange(N)``, viewed (1, N) or repeated (2, N): the self loops' index tensor."""

    n: int


@dataclass(frozen=True)
class Zeros:
    """A zero tensor a scatter writes into."""

    shape: tuple[int, ...]


@dataclass(frozen=True)
class Alloc:
    """An uninitialised tensor (``empty_strided``), filled by a ``full_like``."""

    shape: tuple


@dataclass
class Edge:
    """An edge tensor: `node` (in the new graph) has shape (N, N, *trailing), zero off the pattern."""

    s: EdgeSet
    node: fx.Node
    trailing: tuple[int, ...]
    ones: bool = False  # the pattern itself (torch.ones(E))
    length: int | None = None  # the example's edge count, for a constant made by length alone
    gathered: tuple[Real, Side] | None = None  # x[edge_index[side]]: what was gathered, and along which side
    finite: bool = False  # provably never inf (built from finite values by +, -, x, and / by a positive value)
    positive_entry: bool = False  # some entry is provably > 0 (a self loop appended with a positive fill)


@dataclass
class Real:
    """A node-space value: `node` in the new graph. `positive`: provably > 0 (a degree with self loops)."""

    node: Any
    positive: bool = False
    inverse: tuple[Real, str] | None = None  # (x, "rsqrt") when this is x ** -0.5; (x, "reciprocal"): 1 / x
    finite: bool = False  # provably never inf
    diag_of: EdgeSet | None = None  # the self-loop values of an edge set (`e[edge_index[0] == edge_index[1]]`)


@dataclass(frozen=True)
class InfTest:
    """``y == inf``, for GCN's ``masked_fill(deg_inv_sqrt, deg_inv_sqrt == inf, 0)`` (and its form
    on edge values, ChebConv's scaled Laplacian)."""

    y: Real | Edge


SYMBOLIC = (Index, Side, SelfLoopMask, LoopMask, LoopNodes, LoopValues, Count, SizeExpr, NodeRange, Zeros, Alloc)


class Rewriter:
    """Emits the new graph: ops carrying the translated node's metadata, the pattern matrices of
    the edge sets, gathers, divisions by gathered values and scatters."""

    def __init__(self, graph: fx.Graph, n_nodes: int):
        self.g = graph
        self.n = n_nodes
        self.patterns: dict[EdgeSet, fx.Node] = {}
        self.max_over: list[tuple[EdgeSet, int]] = []
        self.src: fx.Node | None = None  # the original node being translated (for meta and errors)
        self.counts: dict[EdgeSet, int] = {}  # each edge set's length on the example (`_set_sizes`)

    def call(self, target, *args) -> fx.Node:
        """A call of `target` in the new graph, with the translated node's metadata."""
        node = self.g.call_function(target, args)
        if self.src is not None:
            node.meta.update({k: self.src.meta[k] for k in META if k in self.src.meta})
        return node

    def fail(self, what: str) -> UnsupportedError:
        """An error at the node being translated (`src` is set while a node is translated)."""
        assert self.src is not None
        return UnsupportedError(f"{what} (message passing: {graph_name(self.src.target)})", node_location(self.src))

    def pattern(self, s: EdgeSet, trailing: int = 0) -> fx.Node:
        """Edge set `s`'s 0/1 pattern matrix, with `trailing` unit dimensions to broadcast."""
        p = self.patterns[s]
        for _ in range(trailing):
            p = self.call(aten.unsqueeze.default, p, -1)
        return p

    def gather(self, x: Real, side: Side, n_dims: int) -> Edge:
        """x[edge_index[side]]: P * x broadcast along the other end of each edge."""
        trailing = n_dims - 1
        xv = self.call(aten.unsqueeze.default, x.node, 0 if side.side == 0 else 1)
        out = self.call(aten.mul.Tensor, self.pattern(side.s, trailing), xv)
        return Edge(side.s, out, self._trail(x.node), gathered=(x, side), finite=x.finite)

    def on_diagonal(self, arg: str, v: Real, trailing: tuple[int, ...]) -> fx.Node:
        """The (N, N, *trailing) tensor holding node value v(i) at (i, i) and zero elsewhere: the
        identity pattern (edge list `arg`'s set ``diag``) times v along the rows."""
        eye = self.pattern(EdgeSet(arg, "diag"), len(trailing))
        return self.call(aten.mul.Tensor, eye, self.call(aten.unsqueeze.default, v.node, 1))

    def diagonal_of(self, e: Edge) -> Real:
        """The self-loop values of edge tensor `e` as a node value (N, *trailing): e(i, i)."""
        eye = self.pattern(replace(e.s, kind="diag"), len(e.trailing))
        out = self.call(aten.sum.dim_IntList, self.call(aten.mul.Tensor, e.node, eye), [1])
        if self.src is not None and "val" in self.src.meta:
            out.meta["val"] = self.src.meta["val"].new_zeros((self.n, *e.trailing))
        return Real(out, finite=e.finite, diag_of=e.s)

    def divide(self, e: Edge, by: Edge) -> Edge:
        """e / y[edge_index[side]] as e * (1/y)[edge_index[side]]: the quotient's values on the
        pattern, and zero off it (a quotient of the two zero-extended tensors would be 0/0 there)."""
        assert by.gathered is not None
        y, side = by.gathered
        recip = self.call(aten.reciprocal.default, y.node)
        if "val" in y.node.meta:
            recip.meta["val"] = y.node.meta["val"]
        inv = self.gather(Real(recip), side, len(by.trailing) + 1)
        return Edge(e.s, self.call(aten.mul.Tensor, e.node, inv.node), max(e.trailing, inv.trailing, key=len))

    @staticmethod
    def _trail(node: fx.Node) -> tuple[int, ...]:
        return tuple(node.meta["val"].shape[1:]) if "val" in node.meta else ()

    def scatter(self, base: Any, side: Side, e: Edge, reduce: str) -> Real:
        """scatter(reduce) of edge values into nodes indexed by `side`: reduce over the other end."""
        if side.s != e.s and e.ones and e.s.arg == side.s.arg and e.length == self.counts.get(side.s):
            e = Edge(side.s, self.pattern(side.s), (), ones=True)  # ones(k): the index's set, as long as another
        if side.s != e.s:
            raise self.fail("a scatter whose index and values come from different edge lists")
        dim = 1 if side.side == 1 else 0
        if reduce == "sum" and e.ones and dim == 0 and not e.trailing:  # a count per source: read by rows
            out = self.call(aten.sum.dim_IntList, self.pattern(replace(e.s, transposed=not e.s.transposed)), [1])
        elif reduce == "sum":
            out = self.call(aten.sum.dim_IntList, e.node, [dim])
        elif reduce == "mean":
            total = self.call(aten.sum.dim_IntList, e.node, [dim])
            count = self.call(aten.sum.dim_IntList, self.patterns[e.s], [dim])
            count = self.call(aten.clamp.default, count, 1.0)
            for _ in e.trailing:
                count = self.call(aten.unsqueeze.default, count, -1)
            out = self.call(aten.div.Tensor, total, count)
        elif reduce in ("amax", "amin"):  # min(e) = -max(-e): the lowering has a max reduction only
            mask = self.pattern(e.s, len(e.trailing))
            keep = self.call(aten.ne.Scalar, mask, 0)
            v = e.node if reduce == "amax" else self.call(aten.neg.default, e.node)
            masked = self.call(aten.where.self, keep, v, self.call(aten.scalar_tensor.default, -math.inf))
            out = self.call(aten.amax.default, masked, [dim])
            if reduce == "amin":
                out = self.call(aten.neg.default, out)
            self.max_over.append((e.s, side.side))
        else:
            raise self.fail(f"scatter_reduce '{reduce}' (supported: sum, mean, amax, amin)")
        if isinstance(base, Zeros):  # a count over a set holding every self loop is >= 1
            positive = reduce == "sum" and e.ones and e.s.kind in ("loops", "plus_loops")
            return Real(out, positive=positive, finite=e.finite and reduce in ("sum", "mean"))
        if isinstance(base, Real) and reduce == "sum":
            return Real(self.call(aten.add.Tensor, base.node, out), finite=e.finite and base.finite)
        raise self.fail("a scatter into a non-zero tensor other than a sum")


def flat(xs: list) -> list:
    """Nested lists and tuples flattened (the values an op's arguments hold)."""
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(flat(list(x)))
        else:
            out.append(x)
    return out
