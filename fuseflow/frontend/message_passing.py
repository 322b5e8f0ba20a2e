"""Edge-list message passing (PyTorch Geometric as written) → sparse algebra over adjacency patterns.

A GNN written over an ``edge_index`` (2 x E integers) gathers node rows per edge
(``x.index_select(0, edge_index[0])``), computes per-edge values and scatters them back to nodes
(``scatter_add`` / ``scatter_reduce``). Index arithmetic is not sparse algebra, and torch-mlir
crashes on it. This module rewrites the exported graph so that an edge tensor of shape (E, F...)
becomes an (N, N, F...) tensor indexed (target i, source j) that is zero off the edge pattern,
and the edge list becomes a 0/1 *pattern matrix* P (CSR) that the model takes instead:

- gather by source / target: ``P[:, :, None] * x[None, :, :]`` / ``P[:, :, None] * x[:, None, :]``;
- ``scatter_add`` / ``scatter_reduce(sum|mean|amax)`` over targets: a sum (max) over j;
  over sources: over i; ``mean`` divides by the pattern's row sums;
- elementwise ops on edge values stay elementwise; an op with f(0) != 0 is multiplied by P;
- ``add_remaining_self_loops`` (drop self loops, append one per node) is a second pattern built
  with the first; the GCN normalisation's ``deg ** -0.5`` is ``rsqrt``.

Fused, ``sum_j P(i,j) d(i) d(j) x(j,f)`` lowers to an SpMM over P. The pattern matrices are built
on the host from the edge list each run (`EdgeAdapter`), with the checks PyG does not do
(node ids in range, no duplicate edges). The rewritten graph is re-exported through
``fx.Interpreter`` under ``preserve_node_meta``, so every op keeps its module path and source
line (schedules and error messages see the user's model, not this rewrite).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from fuseflow.errors import UnsupportedError
from fuseflow.frontend.edge_lists import EdgeAdapter, EdgeSet, edge_index_of, edge_positions, weight_positions
from fuseflow.frontend.lifted import Lifted
from fuseflow.frontend.ops import graph_name, node_location
from fuseflow.primitives import ALU

aten = torch.ops.aten
_META = ("stack_trace", "nn_module_stack", "from_node", "source_fn_stack")


# --- what a value of the original graph is, abstractly ------------------------------------------
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
class Count:
    """The number of edges of a set (a SymInt in the export)."""

    s: EdgeSet


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


@dataclass
class Real:
    """A node-space value: `node` in the new graph. `positive`: provably > 0 (a degree with self loops)."""

    node: Any
    positive: bool = False
    rsqrt_of_positive: bool = False
    rsqrt_of: Real | None = None  # x, when this is x ** -0.5


@dataclass(frozen=True)
class InfTest:
    """``y == inf``, for GCN's ``masked_fill(deg_inv_sqrt, deg_inv_sqrt == inf, 0)``."""

    y: Real


_SYMBOLIC = (Index, Side, SelfLoopMask, Count, NodeRange, Zeros, Alloc)


@dataclass
class Translation:
    """The rewritten module, the arguments it takes instead of the user's, and how to build them."""

    module: torch.nn.Module
    input_names: list[str]
    adapter: EdgeAdapter


# --- the rewrite ---------------------------------------------------------------------------------
class _Rewriter:
    def __init__(self, graph: fx.Graph, n_nodes: int):
        self.g = graph
        self.n = n_nodes
        self.patterns: dict[EdgeSet, fx.Node] = {}
        self.max_over: list[tuple[EdgeSet, int]] = []
        self.src: fx.Node | None = None  # the original node being translated (for meta and errors)
        self.counts: dict[EdgeSet, int] = {}  # each edge set's length on the example (`_set_sizes`)

    def call(self, target, *args) -> fx.Node:
        node = self.g.call_function(target, args)
        if self.src is not None:
            node.meta.update({k: self.src.meta[k] for k in _META if k in self.src.meta})
        return node

    def fail(self, what: str) -> UnsupportedError:
        """An error at the node being translated (`src` is set while a node is translated)."""
        assert self.src is not None
        return UnsupportedError(f"{what} (message passing: {graph_name(self.src.target)})", node_location(self.src))

    def pattern(self, s: EdgeSet, trailing: int = 0) -> fx.Node:
        p = self.patterns[s]
        for _ in range(trailing):
            p = self.call(aten.unsqueeze.default, p, -1)
        return p

    def gather(self, x: Real, side: Side, n_dims: int) -> Edge:
        """x[edge_index[side]]: P * x broadcast along the other end of each edge."""
        trailing = n_dims - 1
        xv = self.call(aten.unsqueeze.default, x.node, 0 if side.side == 0 else 1)
        out = self.call(aten.mul.Tensor, self.pattern(side.s, trailing), xv)
        return Edge(side.s, out, self._trail(x.node), gathered=(x, side))

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
        if reduce == "sum":
            out = self.call(aten.sum.dim_IntList, e.node, [dim])
        elif reduce == "mean":
            total = self.call(aten.sum.dim_IntList, e.node, [dim])
            count = self.call(aten.sum.dim_IntList, self.patterns[e.s], [dim])
            count = self.call(aten.clamp.default, count, 1.0)
            for _ in e.trailing:
                count = self.call(aten.unsqueeze.default, count, -1)
            out = self.call(aten.div.Tensor, total, count)
        elif reduce == "amax":
            mask = self.pattern(e.s, len(e.trailing))
            keep = self.call(aten.ne.Scalar, mask, 0)
            masked = self.call(aten.where.self, keep, e.node, self.call(aten.scalar_tensor.default, -math.inf))
            out = self.call(aten.amax.default, masked, [dim])
            self.max_over.append((e.s, side.side))
        else:
            raise self.fail(f"scatter_reduce '{reduce}' (supported: sum, mean, amax)")
        if isinstance(base, Zeros):  # a count over a set holding every self loop is >= 1
            return Real(out, positive=reduce == "sum" and e.ones and e.s.kind in ("loops", "plus_loops"))
        if isinstance(base, Real) and reduce == "sum":
            return Real(self.call(aten.add.Tensor, base.node, out))
        raise self.fail("a scatter into a non-zero tensor other than a sum")


_UNARY_ALU = {f"aten.{op}": op for op in ("neg", "exp", "relu", "tanh", "abs", "sqrt", "rsqrt")}
"""Unary aten ops on edge values and the ALU op each lowers to."""
ZERO_PRESERVING = {"aten.mul.Tensor"} | {name for name, op in _UNARY_ALU.items() if ALU[op].preserves_zero}
"""Ops on edge values whose result is zero off the edge pattern when their operand is (from the
ALU's semantics, `primitives.ALU`)."""


def translate(model: torch.nn.Module, args: Sequence[Any], names: Sequence[str]) -> Translation:
    """Rewrite `model` (whose arguments at `edge_positions` are edge lists) into one over pattern matrices."""
    from torch_mlir.extras.fx_decomp_util import (  # loaded with MLIR or torch.export, when first needed
        get_decomposition_table,  # loaded with MLIR or torch.export, when first needed
    )

    positions = edge_positions(model, args)
    state: dict[str, torch.Tensor] = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    n_nodes = _node_count(model, args, positions)
    example_ei = {p: edge_index_of(args[p], names[p], n_nodes) for p in positions}
    weights = weight_positions(args, positions, n_nodes)
    call_args = [example_ei[i] if i in example_ei else _plain(a) for i, a in enumerate(args)]
    lifted = Lifted(model, len(args), list(state)).eval()
    try:
        ep = torch.export.export(lifted, tuple(call_args) + tuple(v.detach() for v in state.values()))
        ep = ep.run_decompositions(get_decomposition_table())
    except Exception as e:
        raise UnsupportedError(f"torch.export failed on the message-passing model: {str(e).splitlines()[0]}") from None
    g = fx.Graph()
    rw = _Rewriter(g, n_nodes)
    env: dict[fx.Node, Any] = {}
    user = set(ep.graph_signature.user_inputs)  # the model's own parameters come first, unused (functional_call)
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]
    sets_of: dict[int, list[EdgeSet]] = {p: [] for p in positions}
    user_inputs: list[tuple[str, fx.Node]] = []  # the rewritten model's arguments, in order
    # Pattern placeholders are created up front for every set an edge list can give; unused ones are dropped.
    for pos, ph in enumerate(placeholders):
        if pos in example_ei:
            env[ph] = Index(EdgeSet(names[pos]))
            for kind in ("base", "offdiag", "loops", "plus_loops"):
                s = EdgeSet(names[pos], kind)
                node = g.placeholder(s.name)
                rw.patterns[s] = node
                sets_of[pos].append(s)
                user_inputs.append((s.name, node))
        elif pos in weights:  # edge weights: a matrix on the edge list's pattern, its values the weights
            node = g.placeholder(names[pos])
            env[ph] = Edge(EdgeSet(names[weights[pos]]), node, tuple(int(d) for d in args[pos].shape[1:]))
            user_inputs.append((names[pos], node))
        else:
            node = g.placeholder(names[pos] if pos < len(args) else f"state_{pos}")
            node.meta.update({k: ph.meta[k] for k in ("val",) if k in ph.meta})
            env[ph] = Real(node)
            if pos < len(args):
                user_inputs.append((names[pos], node))
    counts = rw.counts = _set_sizes(example_ei, names, n_nodes)
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        rw.src = node
        env[node] = _translate_node(rw, node, env, counts)
    out = next(n for n in ep.graph.nodes if n.op == "output")
    results = []
    for v in out.args[0]:
        r = env.get(v)
        if not isinstance(r, Real):
            raise UnsupportedError("a model output that is an edge tensor or an edge list is not supported")
        results.append(r.node)
    g.output(tuple(results))
    used = {s for s, p in rw.patterns.items() if p.users}
    for s, p in list(rw.patterns.items()):
        if s not in used:
            g.erase_node(p)
    sets = [s for p in positions for s in sets_of[p] if s in used]
    if not sets:
        raise UnsupportedError(f"{names[positions[0]]}: the model never gathers or scatters along its edges")
    g.lint()
    gm = fx.GraphModule(torch.nn.Module(), g)
    input_names = [n for n, node in user_inputs if n not in {s.name for s in rw.patterns if s not in used}]
    module = _Rewritten(model, gm, list(state), len(input_names))
    adapter = EdgeAdapter(n_nodes, {p: names[p] for p in positions}, sets, rw.max_over, weights)
    return Translation(module, input_names, adapter)


def _set_sizes(example_ei: dict[int, torch.Tensor], names: Sequence[str], n: int) -> dict[EdgeSet, int]:
    """Each edge set's length on the example (the given list first, so a tie prefers it): a
    constant sized by a concrete length, not a symbolic count, belongs to the set as long."""
    out: dict[EdgeSet, int] = {}
    for p, ei in example_ei.items():
        e, loops = int(ei.shape[1]), int((ei[0] == ei[1]).sum())
        out[EdgeSet(names[p])] = e
        out[EdgeSet(names[p], "offdiag")] = e - loops
        out[EdgeSet(names[p], "loops")] = e - loops + n
        out[EdgeSet(names[p], "plus_loops")] = e + n
    return out


def _plain(a: Any) -> Any:
    return a.to_dense() if isinstance(a, torch.Tensor) and a.layout != torch.strided else a


def _node_count(model: torch.nn.Module, args: Sequence[Any], positions: list[int]) -> int:
    """N: the first dimension of the node features (the first floating-point argument), which
    is what PyTorch Geometric takes too; else one more than the largest node id."""
    for i, a in enumerate(args):
        if i not in positions and isinstance(a, torch.Tensor) and a.is_floating_point() and a.dim() >= 2:
            return int(a.shape[0])
    for p in positions:
        a = args[p]
        if a.layout != torch.strided:
            return int(a.shape[0])
    return int(max(int(args[p].max()) for p in positions)) + 1


class _Rewritten(torch.nn.Module):
    """The user's model with its forward replaced by the rewritten graph. It holds the user's
    children under their own names, so parameters keep their paths (``conv1.lin.weight``)."""

    def __init__(self, model: torch.nn.Module, gm: fx.GraphModule, state_names: list[str], n_args: int):
        super().__init__()
        for name, child in model.named_children():
            self.add_module(name, child)
        for name, p in model.named_parameters(recurse=False):
            self.register_parameter(name, p)
        for name, b in model.named_buffers(recurse=False):
            self.register_buffer(name, b)
        self.__dict__["_gm"] = gm  # not a child: its module path would replace the user's
        self.__dict__["_user_class"] = type(model).__name__
        self.state_names = state_names
        self.n_args = n_args

    def forward(self, *args):
        state = [_lookup(self, n) for n in self.state_names]
        with fx.traceback.preserve_node_meta():
            out = fx.Interpreter(self._gm).run(*args, *state)
        return out[0] if len(out) == 1 else out


def _lookup(module: torch.nn.Module, path: str):
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


_PASS = object()
"""What a phase of `_translate_node` returns for a node it does not handle (None is a value)."""


def _translate_node(rw: _Rewriter, node: fx.Node, env: dict, counts: dict) -> Any:
    """One FX node of a message-passing forward: tracked symbolically (sizes and counts, the
    edge index's structure, allocations and scatters), or emitted as a real op on the edges or
    on ordinary tensors."""
    name = graph_name(node.target)
    a = [_val(env, x) for x in node.args]
    kw = {k: _val(env, v) for k, v in node.kwargs.items()}
    for phase in (_symbolic_sizes, _index_structure, _allocation_or_scatter):
        out = phase(rw, node, name, a, kw, counts)
        if out is not _PASS:
            return out
    edges = [x for x in _flat(a) if isinstance(x, Edge)]
    if edges:
        return _edge_op(rw, node, name, a, kw, edges)
    if any(isinstance(x, _SYMBOLIC) for x in _flat(a) + _flat(list(kw.values()))):
        raise rw.fail(f"{name} on an edge list is not supported")
    return _real_op(rw, node, name, a, kw)


def _symbolic_sizes(rw: _Rewriter, node: fx.Node, name: str, a: list, kw: dict, counts: dict) -> Any:
    """Sizes, counts and shape assertions: edge counts stay symbolic (`Count`)."""
    if isinstance(node.target, type(operator.add)) and node.target in (operator.add, operator.ge, operator.le):
        if node.target is operator.add and any(isinstance(x, Count) for x in a):
            c = next(x for x in a if isinstance(x, Count))
            if c.s.kind in ("offdiag", "base"):
                return Count(EdgeSet(c.s.arg, "loops" if c.s.kind == "offdiag" else "plus_loops"))
        return None
    if name in ("sym_size.int", "aten.sym_size.int"):
        if isinstance(a[0], Index) and a[1] == 1:
            return Count(a[0].s)
        return None
    if name.endswith("_assert_scalar") or name.endswith("_assert_tensor_metadata"):
        return None
    return _PASS


def _index_structure(rw: _Rewriter, node: fx.Node, name: str, a: list, kw: dict, counts: dict) -> Any:
    """The edge index's structure: its sides, self-loop masks and added loops, node ranges,
    and gathers of node features along a side."""
    if name == "aten.select.int" and isinstance(a[0], Index) and a[1] == 0:
        return Side(a[0].s, int(a[2]))
    if name in ("aten.ne.Tensor",) and all(isinstance(x, Side) for x in a) and {a[0].side, a[1].side} == {0, 1}:
        return SelfLoopMask(a[0].s)
    if name == "aten.index.Tensor":
        src, idx = a[0], a[1]
        if isinstance(src, Index) and len(idx) == 2 and idx[0] is None and isinstance(idx[1], SelfLoopMask):
            return Index(EdgeSet(src.s.arg, "offdiag"))
        if isinstance(src, Real) and len(idx) == 1 and isinstance(idx[0], Side):
            return rw.gather(src, idx[0], node.meta["val"].dim())
    if name == "aten.index_select" and isinstance(a[0], Real) and isinstance(a[2], Side):
        if a[1] not in (0, -a[0].node.meta["val"].dim() if "val" in a[0].node.meta else -2):
            raise rw.fail("a gather along a dimension other than the node dimension")
        return rw.gather(a[0], a[2], node.meta["val"].dim())
    if name in ("aten.arange.start", "aten.arange.start_step") and a[0] == 0 and (len(a) < 3 or a[2] == 1):
        return NodeRange(int(a[1]))
    if name in ("aten.view", "aten.repeat") and isinstance(a[0], NodeRange):
        return a[0]
    if (
        name == "aten.cat"
        and len(a[0]) == 2
        and isinstance(a[0][0], Index)
        and isinstance(a[0][1], NodeRange)
        and a[0][0].s.kind in ("offdiag", "base")
        and a[1] in (1, -1)
    ):  # add_remaining_self_loops (loops dropped first), or add_self_loops on the list as given
        return Index(EdgeSet(a[0][0].s.arg, "loops" if a[0][0].s.kind == "offdiag" else "plus_loops"))
    if name in ("aten.view", "aten.expand", "aten.expand_as", "aten.clone", "aten._unsafe_view") and isinstance(
        a[0], Side
    ):
        return a[0]
    return _PASS


def _allocation_or_scatter(rw: _Rewriter, node: fx.Node, name: str, a: list, kw: dict, counts: dict) -> Any:
    """Constant tensors (over edges, zeros over nodes, or ordinary) and scatters of edge values
    into nodes."""
    if name in (
        "aten.ones",
        "aten.full",
        "aten.zeros",
        "aten.new_zeros",
        "aten.new_ones",
        "aten.empty_strided",
        "aten.empty.memory_format",
    ):
        shape = tuple(a[1] if name in ("aten.new_zeros", "aten.new_ones") else a[0])
        fill = a[1] if name == "aten.full" else FILLS.get(name)  # None: uninitialised (empty)
        return _alloc(rw, node, shape, fill, counts)
    if name in ("aten.full_like", "aten.zeros_like") and isinstance(a[0], (Alloc, Zeros)):
        return _alloc(rw, node, a[0].shape, float(a[1]) if name == "aten.full_like" else 0.0, counts)
    if name in ("aten.scatter_add", "aten.scatter_add_") and isinstance(a[2], Side) and isinstance(a[3], Edge):
        if a[1] != 0:
            raise rw.fail("a scatter along a dimension other than the node dimension")
        return rw.scatter(a[0], a[2], a[3], "sum")
    if name == "aten.scatter_reduce.two" and isinstance(a[2], Side) and isinstance(a[3], Edge):
        include_self = kw.get("include_self", a[5] if len(a) > 5 else True)
        if include_self and not isinstance(a[0], Zeros):
            raise rw.fail("scatter_reduce with include_self into a non-zero tensor")
        if include_self and a[4] != "sum":
            raise rw.fail(f"scatter_reduce '{a[4]}' with include_self=True")
        return rw.scatter(a[0], a[2], a[3], {"mean": "mean", "amax": "amax", "sum": "sum"}.get(a[4], a[4]))
    return _PASS


FILLS = {"aten.ones": 1.0, "aten.zeros": 0.0, "aten.new_zeros": 0.0, "aten.new_ones": 1.0}
"""The value each constant-making op fills with (``aten.full`` says its own)."""


def _alloc(rw: _Rewriter, node: fx.Node, shape: tuple, fill: float | None, counts: dict) -> Any:
    """A constant tensor: over the edges of a set (its pattern times the fill), zeros over nodes
    (what a scatter writes into), or an ordinary constant."""
    edge_set = None
    if len(shape) == 1 and isinstance(shape[0], Count):
        edge_set = shape[0].s
    elif len(shape) == 1 and isinstance(shape[0], int) and shape[0] != rw.n:
        matching = [s for s, c in counts.items() if c == shape[0]]
        if len({s.arg for s in matching}) == 1:  # one edge list; a scatter names the set (`scatter`)
            edge_set = matching[0]
    if edge_set is not None:
        if fill is None:
            return Alloc(shape)
        e = _pattern_value(rw, edge_set, float(fill))
        e.length = counts.get(edge_set)
        return e
    if any(not isinstance(d, int) for d in shape):
        raise rw.fail("a tensor sized by an edge count that fuseflow cannot tie to an edge list")
    if fill is None:
        return Alloc(shape)
    if fill == 0.0 and shape and shape[0] == rw.n:
        return Zeros(tuple(shape))
    out = rw.call(aten.full.default, list(shape), float(fill))
    out.meta["val"] = node.meta.get("val")
    return Real(out)


def _pattern_value(rw: _Rewriter, s: EdgeSet, fill: float) -> Edge:
    p = rw.pattern(s)
    node = p if fill == 1.0 else rw.call(aten.mul.Tensor, p, fill)
    return Edge(s, node, (), ones=fill == 1.0)


def _edge_op(rw: _Rewriter, node: fx.Node, name: str, a: list, kw: dict, edges: list[Edge]) -> Edge:
    s = edges[0].s
    if any(e.s != s for e in edges):
        raise rw.fail("an op mixing values of two different edge lists")
    if name in ("aten.view", "aten._unsafe_view", "aten.reshape"):
        e = a[0]
        shape = list(a[1])
        trailing = tuple(int(d) for d in shape[1:])
        if any(d < 0 for d in trailing):
            raise rw.fail("a view of an edge tensor with an inferred trailing dimension")
        return Edge(s, rw.call(aten.view.default, e.node, [rw.n, rw.n, *trailing]), trailing)
    if name == "aten.unsqueeze" and a[1] in (-1, node.meta["val"].dim() - 1):
        e = a[0]
        return Edge(s, rw.call(aten.unsqueeze.default, e.node, -1), e.trailing + (1,))
    if name in ("aten.clone", "aten.alias", "aten.detach"):
        return a[0]
    if name == "aten.cat":
        return _edge_cat(rw, a, s)
    if any(isinstance(x, (list, tuple)) and any(isinstance(y, Edge) for y in _flat(list(x))) for x in a):
        raise rw.fail(f"{name} of a list holding edge values is not supported")
    if name == "aten.leaky_relu":  # max(x, s x) for 0 <= s <= 1: zero where x is (the ALU's max and mul)
        slope = float(a[1]) if len(a) > 1 else 0.01
        if not 0.0 <= slope <= 1.0:
            raise rw.fail(f"leaky_relu with negative_slope {slope} (supported: 0 to 1)")
        e = a[0]
        scaled = rw.call(aten.mul.Tensor, e.node, slope)
        return Edge(s, rw.call(aten.maximum.default, e.node, scaled), e.trailing)
    if name == "aten.sigmoid":  # 1 / (1 + exp(-x)), then zero off the pattern (sigmoid(0) = 1/2)
        e = a[0]
        denom = rw.call(aten.add.Tensor, rw.call(aten.exp.default, rw.call(aten.neg.default, e.node)), 1.0)
        out = rw.call(aten.mul.Tensor, rw.call(aten.reciprocal.default, denom), rw.pattern(s, len(e.trailing)))
        return Edge(s, out, e.trailing)
    if name == "aten.sum.dim_IntList" and isinstance(a[0], Edge):
        return _edge_sum(rw, a[0], list(a[1]), bool(a[2]) if len(a) > 2 else bool(kw.get("keepdim", False)))
    if name == "aten.div.Tensor" and isinstance(a[0], Edge) and isinstance(a[1], Edge) and a[1].gathered is not None:
        return rw.divide(a[0], a[1])
    if name in ("aten.mm", "aten.addmm"):
        linear = _edge_linear(rw, node, name, a)
        if linear is not None:
            return linear
    widest = max((e.trailing for e in edges), key=len)
    if any(isinstance(x, Real) and not _same_on_every_edge(x, widest) for x in a):
        raise rw.fail(f"{name} mixing an edge tensor with a node tensor (gather it by edge_index first)")
    if name not in _ELEMENTWISE:
        raise rw.fail(f"{name} on edge values is not supported")
    if name == "aten.mul.Tensor" and len(edges) == 2 and any(e.ones for e in edges):
        other = edges[0] if edges[1].ones else edges[1]  # P * e = e: e is already zero off the pattern
        return Edge(s, other.node, other.trailing)
    mapped = [x.node if isinstance(x, (Edge, Real)) else x for x in a]
    out = rw.call(node.target, *mapped)
    trailing = max((e.trailing for e in edges), key=len)
    zero_kept = name in ZERO_PRESERVING or (name == "aten.div.Tensor" and isinstance(a[0], Edge))
    if name in ("aten.add.Tensor", "aten.sub.Tensor") and all(isinstance(x, Edge) for x in a[:2]):
        zero_kept = True
    if not zero_kept:
        out = rw.call(aten.mul.Tensor, out, rw.pattern(s, len(trailing)))
    return Edge(s, out, trailing)


def _same_on_every_edge(x: Real, trailing: tuple[int, ...]) -> bool:
    """A node-space value that broadcasts along an edge tensor's trailing dimensions only (a
    scalar, a bias shaped like the trailing dimensions' tail, or GATv2's attention vector
    (1, H, C)): the same on every edge."""
    val = x.node.meta.get("val")
    if val is None or val.dim() == 0:
        return True
    shape = tuple(int(d) for d in val.shape)
    if len(shape) == len(trailing) + 1 and shape[0] == 1:  # (1, H, C): broadcast along the edges
        shape = shape[1:]
    return len(shape) <= len(trailing) and shape == trailing[len(trailing) - len(shape) :]


def _edge_linear(rw: _Rewriter, node: fx.Node, name: str, a: list) -> Edge | None:
    """A linear layer on edge features (``edge_dim`` of GINEConv, GATConv): (E, d) @ (d, f) as
    ``sum_d e(i, j, d) w(d, f)``, zero off the pattern; the bias is added on the pattern only."""
    bias, e, w = (a[0], a[1], a[2]) if name == "aten.addmm" else (None, a[0], a[1])
    if not (isinstance(e, Edge) and isinstance(w, Real) and len(e.trailing) == 1):
        return None
    if bias is not None and not isinstance(bias, Real):
        return None
    prod = rw.call(aten.mul.Tensor, rw.call(aten.unsqueeze.default, e.node, -1), w.node)
    out = rw.call(aten.sum.dim_IntList, prod, [2])
    if bias is not None:
        out = rw.call(aten.mul.Tensor, rw.call(aten.add.Tensor, out, bias.node), rw.pattern(e.s, 1))
    return Edge(e.s, out, tuple(int(d) for d in node.meta["val"].shape[1:]))


def _edge_cat(rw: _Rewriter, a: list, s: EdgeSet) -> Edge:
    """``cat`` of edge values along a trailing dimension (EdgeConv's ``[x_i, x_j - x_i]``):
    dimension d of the (E, *trailing) values is d + 1 of the (N, N, *trailing) ones."""
    parts, dim = list(a[0]), int(a[1]) if len(a) > 1 else 0
    if not all(isinstance(p, Edge) and p.s == s for p in parts):
        raise rw.fail("cat of edge values with other tensors (gather node values by edge_index first)")
    rank = 1 + len(parts[0].trailing)
    if any(len(p.trailing) != rank - 1 for p in parts) or dim % rank == 0:
        raise rw.fail("cat of edge values along the edges, or of different ranks, is not supported")
    d = dim % rank
    out = rw.call(aten.cat.default, [p.node for p in parts], d + 1)
    trailing = list(parts[0].trailing)
    trailing[d - 1] = sum(p.trailing[d - 1] for p in parts)
    return Edge(s, out, tuple(trailing))


def _edge_sum(rw: _Rewriter, e: Edge, dims: list[int], keepdim: bool) -> Edge:
    """A sum over trailing dimensions of an edge tensor (a per-head dot product): dimension d of
    the (E, *trailing) value is d + 1 of the (N, N, *trailing) one."""
    rank = 1 + len(e.trailing)
    own = sorted({d % rank for d in dims})
    if 0 in own:
        raise rw.fail("a sum over the edges of an edge tensor (scatter it to nodes instead)")
    out = rw.call(aten.sum.dim_IntList, e.node, [d + 1 for d in own], keepdim)
    trailing = tuple(1 if i + 1 in own else n for i, n in enumerate(e.trailing) if keepdim or i + 1 not in own)
    return Edge(e.s, out, trailing)


_ELEMENTWISE = {
    "aten.add.Tensor",
    "aten.sub.Tensor",
    "aten.mul.Tensor",
    "aten.div.Tensor",
    "aten.neg",
    "aten.exp",
    "aten.relu",
    "aten.tanh",
    "aten.abs",
    "aten.sqrt",
    "aten.rsqrt",
    "aten.pow.Tensor_Scalar",
}


def _real_op(rw: _Rewriter, node: fx.Node, name: str, a: list, kw: dict) -> Real | InfTest:
    if name in ("aten.pow_.Scalar", "aten.pow.Tensor_Scalar") and isinstance(a[0], Real) and a[1] == -0.5:
        return Real(rw.call(aten.rsqrt.default, a[0].node), rsqrt_of_positive=a[0].positive, rsqrt_of=a[0])
    if name == "aten.eq.Scalar" and isinstance(a[0], Real) and a[1] == math.inf:
        return InfTest(a[0])
    masked = None
    if name in ("aten.masked_fill_.Scalar", "aten.masked_fill.Scalar") and isinstance(a[1], InfTest):
        masked = (a[0], a[1])
    if name == "aten.where.self" and isinstance(a[0], InfTest):
        masked = (a[2], a[0])
    if masked is not None:
        y, test = masked
        if test.y is y and y.rsqrt_of_positive:
            return y  # rsqrt of a degree counted with self loops: never inf, the fill is a no-op
        if test.y is y and y.rsqrt_of is not None:
            return _guarded_rsqrt(rw, y.rsqrt_of)
        raise rw.fail("masked_fill(x, x == inf, 0) is supported only on x = deg ** -0.5")
    new_args = _map_real(a)
    new_kw = _map_real(kw)
    assert callable(node.target)  # a call_function node
    out = rw.g.call_function(node.target, tuple(new_args), dict(new_kw))
    out.meta.update({k: node.meta[k] for k in _META + ("val",) if k in node.meta})
    return Real(out)


def _guarded_rsqrt(rw: _Rewriter, deg: Real) -> Real:
    """``deg ** -0.5`` with 0 where deg is 0 (GCN's ``masked_fill(inf, 0)`` without self
    loops): ``rsqrt(deg + [deg == 0]) * [deg != 0]``, the indicators being the ALU's eqz / nez;
    an isolated node's weight is 0, never inf times 0."""
    cond = rw.call(aten.eq.Scalar, deg.node, 0.0)
    one = rw.call(aten.scalar_tensor.default, 1.0)
    zero = rw.call(aten.scalar_tensor.default, 0.0)
    isolated = rw.call(aten.where.self, cond, one, zero)
    safe = rw.call(aten.rsqrt.default, rw.call(aten.add.Tensor, deg.node, isolated))
    out = rw.call(aten.mul.Tensor, safe, rw.call(aten.where.self, cond, zero, one))
    if "val" in deg.node.meta:
        for n in (cond, isolated, safe, out):
            n.meta["val"] = deg.node.meta["val"] if n is not cond else deg.node.meta["val"] == 0
    return Real(out)


def _map_real(x):
    if isinstance(x, InfTest):
        raise UnsupportedError("a test for inf is supported only as masked_fill(deg ** -0.5, ... == inf, 0)")
    if isinstance(x, Real):
        return x.node
    if isinstance(x, (list, tuple)):
        return type(x)(_map_real(v) for v in x)
    if isinstance(x, dict):
        return {k: _map_real(v) for k, v in x.items()}
    return x


def _flat(xs: list) -> list:
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flat(list(x)))
        else:
            out.append(x)
    return out


def _val(env: dict, x: Any) -> Any:
    if isinstance(x, fx.Node):
        return env.get(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_val(env, v) for v in x)
    return x
