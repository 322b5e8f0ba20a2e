"""Edge-list message passing (PyTorch Geometric as written) → sparse algebra over adjacency patterns.

A GNN written over an ``edge_index`` (2 x E integers) gathers node rows per edge
(``x.index_select(0, edge_index[0])``), computes per-edge values and scatters them back to nodes
(``scatter_add`` / ``scatter_reduce``). Index arithmetic is not sparse algebra, and torch-mlir
crashes on it. This module rewrites the exported graph so that an edge tensor of shape (E, F...)
becomes an (N, N, F...) tensor indexed (target i, source j) that is zero off the edge pattern,
and the edge list becomes a 0/1 *pattern matrix* P (CSR) that the model takes instead:

- gather by source / target: ``P[:, :, None] * x[None, :, :]`` / ``P[:, :, None] * x[:, None, :]``;
- ``scatter_add`` / ``scatter_reduce(sum|mean|amax|amin)`` over targets: a sum (max, min) over j;
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
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.fx as fx

from fuseflow.errors import UnsupportedError
from fuseflow.frontend import decompositions
from fuseflow.frontend.edge_lists import EdgeAdapter, EdgeSet, edge_index_of, edge_positions, weight_positions
from fuseflow.frontend.edge_ops import edge_op, real_op
from fuseflow.frontend.edge_values import (
    SYMBOLIC,
    Alloc,
    Count,
    Edge,
    Index,
    LoopMask,
    LoopNodes,
    LoopValues,
    NodeRange,
    Real,
    Rewriter,
    SelfLoopMask,
    Side,
    SizeExpr,
    Zeros,
    aten,
    flat,
)
from fuseflow.frontend.lifted import Lifted
from fuseflow.frontend.ops import graph_name


@dataclass
class Translation:
    """The rewritten module, the arguments it takes instead of the user's, and how to build them."""

    module: torch.nn.Module
    input_names: list[str]
    adapter: EdgeAdapter


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
        ep = ep.run_decompositions(decompositions.table(get_decomposition_table(), edges=True))
    except Exception as e:
        raise UnsupportedError(f"torch.export failed on the message-passing model: {str(e).splitlines()[0]}") from None
    g = fx.Graph()
    rw = Rewriter(g, n_nodes)
    env: dict[fx.Node, Any] = {}
    user = set(ep.graph_signature.user_inputs)  # the model's own parameters come first, unused (functional_call)
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]
    sets_of: dict[int, list[EdgeSet]] = {p: [] for p in positions}
    user_inputs: list[tuple[str, fx.Node]] = []  # the rewritten model's arguments, in order
    # Pattern placeholders are created up front for every set an edge list can give; unused ones are dropped.
    for pos, ph in enumerate(placeholders):
        if pos in example_ei:
            env[ph] = Index(EdgeSet(names[pos]))
            for kind in ("base", "offdiag", "loops", "plus_loops", "diag"):
                for transposed in (False, True):
                    s = EdgeSet(names[pos], kind, transposed)
                    node = g.placeholder(s.name)
                    rw.patterns[s] = node
                    sets_of[pos].append(s)
                    user_inputs.append((s.name, node))
        elif pos in weights:  # edge weights: a matrix on the edge list's pattern, its values the weights
            node = g.placeholder(names[pos])
            trailing = tuple(int(d) for d in args[pos].shape[1:])
            env[ph] = Edge(EdgeSet(names[weights[pos]]), node, trailing, finite=True)  # checked each run (`weighted`)
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
        out[EdgeSet(names[p], "diag")] = n
    for s, c in list(out.items()):  # the reversed lists (`flip(0)`) last: a tie prefers the list as given
        out[replace(s, transposed=True)] = c
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


def _translate_node(rw: Rewriter, node: fx.Node, env: dict, counts: dict) -> Any:
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
    edges = [x for x in flat(a) if isinstance(x, Edge)]
    if edges:
        return edge_op(rw, node, name, a, kw, edges)
    if any(isinstance(x, SYMBOLIC) for x in flat(a) + flat(list(kw.values()))):
        raise rw.fail(f"{name} on an edge list is not supported")
    return real_op(rw, node, name, a, kw)


def _symbolic_sizes(rw: Rewriter, node: fx.Node, name: str, a: list, kw: dict, counts: dict) -> Any:
    """Sizes, counts and shape assertions: edge counts stay symbolic (`Count`)."""
    if isinstance(node.target, type(operator.add)) and node.target in (operator.add, operator.ge, operator.le):
        if node.target is operator.add and any(isinstance(x, Count) for x in a):
            c = next(x for x in a if isinstance(x, Count))
            if c.s.kind in ("offdiag", "base"):
                return Count(replace(c.s, kind="loops" if c.s.kind == "offdiag" else "plus_loops"))
        return SizeExpr() if any(isinstance(x, (Count, SizeExpr)) for x in a) else None
    if node.target in (operator.mul, operator.mod, operator.eq, operator.sub, operator.floordiv):
        return SizeExpr() if any(isinstance(x, (Count, SizeExpr)) for x in a) else _PASS
    if name in ("sym_size.int", "aten.sym_size.int"):
        if isinstance(a[0], Index) and a[1] == 1:
            return Count(a[0].s)
        if isinstance(a[0], Real) and a[0].diag_of is not None and a[1] == 0:
            return rw.n  # e[edge_index[0] == edge_index[1]]: one self loop per node
        return None
    if name.endswith("_assert_scalar") or name.endswith("_assert_tensor_metadata"):
        return None
    return _PASS


def _index_structure(rw: Rewriter, node: fx.Node, name: str, a: list, kw: dict, counts: dict) -> Any:
    """The edge index's structure: its sides, self-loop masks and added loops, node ranges,
    and gathers of node features along a side."""
    if name == "aten.select.int" and isinstance(a[0], Index) and a[1] == 0:
        return Side(a[0].s, int(a[2]))
    if name == "aten.bitwise_not" and isinstance(a[0], (LoopMask, SelfLoopMask)):  # ~(src == dst)
        return SelfLoopMask(a[0].s) if isinstance(a[0], LoopMask) else LoopMask(a[0].s)
    if name in ("aten.ne.Tensor",) and all(isinstance(x, Side) for x in a) and {a[0].side, a[1].side} == {0, 1}:
        return SelfLoopMask(a[0].s)
    if name in ("aten.eq.Tensor",) and all(isinstance(x, Side) for x in a) and {a[0].side, a[1].side} == {0, 1}:
        return LoopMask(a[0].s)
    if name == "aten.index.Tensor":
        out = _indexed(rw, node, a[0], a[1])
        if out is not _PASS:
            return out
    put = name in ("aten.index_put", "aten.index_put_") and isinstance(a[0], Edge) and len(a[1]) == 1
    if put and isinstance(a[1][0], LoopMask) and isinstance(a[2], Real):
        return _put_on_loops(rw, _loops_only(rw, a[0], a[1][0]), a[2])
    if name in ("aten.index_put", "aten.index_put_") and len(a[1]) == 1 and isinstance(a[1][0], LoopNodes):
        return _keep_existing_loops(rw, a[0], a[1][0], a[2], bool(a[3]) if len(a) > 3 else False)
    if name == "aten.flip" and isinstance(a[0], Index) and [int(d) % 2 for d in a[1]] == [0]:
        return Index(replace(a[0].s, transposed=not a[0].s.transposed))  # the reversed edges: P's transpose
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
        return Index(replace(a[0][0].s, kind="loops" if a[0][0].s.kind == "offdiag" else "plus_loops"))
    if name in ("aten.view", "aten.expand", "aten.expand_as", "aten.clone", "aten._unsafe_view") and isinstance(
        a[0], Side
    ):
        return a[0]
    return _PASS


def _indexed(rw: Rewriter, node: fx.Node, src: Any, idx: list) -> Any:
    """``src[idx]`` on the edge index's structure: loops dropped from a list or its values, a
    gather along a side, the self loops' values or nodes; `_PASS` for any other indexing."""
    if isinstance(src, Index) and len(idx) == 2 and idx[0] is None and isinstance(idx[1], SelfLoopMask):
        return Index(replace(src.s, kind="offdiag"))
    if isinstance(src, Edge) and len(idx) == 1 and isinstance(idx[0], SelfLoopMask):  # remove_self_loops
        if src.s != idx[0].s or src.s.kind != "base":
            raise rw.fail("dropping the self loops of edge values of another edge list, or dropped twice")
        off = replace(src.s, kind="offdiag")
        kept = rw.call(aten.mul.Tensor, src.node, rw.pattern(off, len(src.trailing)))
        return Edge(off, kept, src.trailing, finite=src.finite)
    if isinstance(src, Real) and len(idx) == 1 and isinstance(idx[0], Side):
        return rw.gather(src, idx[0], node.meta["val"].dim())
    if isinstance(src, Edge) and len(idx) == 1 and isinstance(idx[0], LoopMask):
        if src.s == idx[0].s and src.s.kind == "base":  # the loops a graph has: none or one per node
            return LoopValues(src)
        return rw.diagonal_of(_loops_only(rw, src, idx[0]))
    if isinstance(src, Side) and len(idx) == 1 and isinstance(idx[0], LoopMask) and src.s == idx[0].s:
        return LoopNodes(src.s)
    return _PASS


def _loops_only(rw: Rewriter, e: Edge, mask: LoopMask) -> Edge:
    """`e`, checked to be on the set whose self loops `mask` selects, with exactly one self
    loop per node (``add_remaining_self_loops``, ``remove_self_loops`` then ``add_self_loops``,
    or ``add_self_loops`` on a list the adapter checks holds none): then ``e[mask]`` is e's
    diagonal in node order."""
    if e.s != mask.s:
        raise rw.fail("a self-loop mask of one edge list applied to the values of another")
    if e.s.kind not in ("loops", "plus_loops"):  # plus_loops: the adapter refuses a given self loop
        raise rw.fail(
            "selecting the self loops of an edge list that may hold none or several per node "
            "(add_remaining_self_loops first)"
        )
    return e


def _keep_existing_loops(rw: Rewriter, fill: Any, nodes: LoopNodes, vals: Any, accumulate: bool) -> Real:
    """``loop_attr[edge_index[0][loops]] = e[loops]`` (PyG's ``add_remaining_self_loops`` with
    edge values): each node's loop value is the weight of the loop it has, else the fill:
    ``fill * (1 - has_loop) + e(i, i)``, `has_loop` the given set's diagonal."""
    if accumulate or not isinstance(fill, Real) or not isinstance(vals, LoopValues) or vals.e.s != nodes.s:
        raise rw.fail("writing node values at the self loops' nodes other than add_remaining_self_loops does")
    e = vals.e
    has = rw.diagonal_of(Edge(e.s, rw.pattern(e.s), (), ones=True)).node
    for _ in e.trailing:
        has = rw.call(aten.unsqueeze.default, has, -1)
    kept = rw.call(aten.mul.Tensor, fill.node, rw.call(aten.rsub.Scalar, has, 1.0))
    out = rw.call(aten.add.Tensor, kept, rw.diagonal_of(e).node)
    if "val" in fill.node.meta:
        out.meta["val"] = fill.node.meta["val"]
    return Real(out, finite=fill.finite and e.finite)


def _put_on_loops(rw: Rewriter, e: Edge, v: Real) -> Edge:
    """``e[edge_index[0] == edge_index[1]] = v`` on a set with one self loop per node: e off the
    diagonal (times the set without loops) plus v on it."""
    val = v.node.meta.get("val") if hasattr(v.node, "meta") else None
    if val is None or val.dim() != 1 + len(e.trailing) or int(val.shape[0]) != rw.n:
        raise rw.fail("writing the self loops of an edge tensor with other than one value per node")
    off = rw.call(aten.mul.Tensor, e.node, rw.pattern(replace(e.s, kind="offdiag"), len(e.trailing)))
    out = rw.call(aten.add.Tensor, off, rw.on_diagonal(e.s.arg, v, e.trailing))
    return Edge(e.s, out, e.trailing, finite=e.finite and v.finite)


def _allocation_or_scatter(rw: Rewriter, node: fx.Node, name: str, a: list, kw: dict, counts: dict) -> Any:
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


def _alloc(rw: Rewriter, node: fx.Node, shape: tuple, fill: float | None, counts: dict) -> Any:
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
    return Real(out, positive=float(fill) > 0.0, finite=math.isfinite(float(fill)))


def _pattern_value(rw: Rewriter, s: EdgeSet, fill: float) -> Edge:
    p = rw.pattern(s)
    node = p if fill == 1.0 else rw.call(aten.mul.Tensor, p, fill)
    return Edge(s, node, (), ones=fill == 1.0, finite=math.isfinite(fill))


def _val(env: dict, x: Any) -> Any:
    if isinstance(x, fx.Node):
        return env.get(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_val(env, v) for v in x)
    return x
