"""Ops on the values of a message-passing graph (`edge_values`): on edge tensors, elementwise ops
keep the zero-off-pattern rule (an op with f(0) != 0 is multiplied by the pattern), sums over
trailing dimensions, `cat` along features, linear maps of features, and the attention idioms
(leaky_relu, sigmoid, a division by a gathered value); on node tensors, the degree
normalisation idioms (`deg ** -0.5` and its zero-degree guard). docs/architecture.md,
"Message passing over edge lists".
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch.fx as fx

from fuseflow.errors import UnsupportedError
from fuseflow.frontend.edge_lists import EdgeSet
from fuseflow.frontend.edge_values import META, Edge, InfTest, Real, Rewriter, aten, flat
from fuseflow.primitives import ALU

_UNARY_ALU = {f"aten.{op}": op for op in ("neg", "exp", "relu", "tanh", "abs", "sqrt", "rsqrt")}
"""Unary aten ops on edge values and the ALU op each lowers to."""
ZERO_PRESERVING = {"aten.mul.Tensor"} | {name for name, op in _UNARY_ALU.items() if ALU[op].preserves_zero}
"""Ops on edge values whose result is zero off the edge pattern when their operand is (from the
ALU's semantics, `primitives.ALU`)."""


def edge_op(rw: Rewriter, node: fx.Node, name: str, a: list, kw: dict, edges: list[Edge]) -> Edge | Real | InfTest:
    """An op with edge values among its operands (`edges`): the new graph's op, as an edge value
    of the same edge set, zero off its pattern; refused, naming the op, where it cannot be."""
    a, edges = _rebind_ones(rw, a, edges)
    s = edges[0].s
    if any(e.s != s for e in edges):
        raise rw.fail("an op mixing values of two different edge lists")
    shaped = _shape_op(rw, node, name, a, s)
    if shaped is not None:
        return shaped
    if name == "aten.cat":
        return _edge_cat(rw, a, s)
    special = _maxima_and_inf(rw, node, name, a)
    if special is not None:
        return special
    if any(isinstance(x, (list, tuple)) and any(isinstance(y, Edge) for y in flat(list(x))) for x in a):
        raise rw.fail(f"{name} of a list holding edge values is not supported")
    rewritten = _rewritten_unary(rw, name, a, s)
    if rewritten is not None:
        return rewritten
    if name == "aten._softmax" and isinstance(a[0], Edge):
        return _trailing_softmax(rw, a[0], int(a[1]))
    if name == "aten.sum.dim_IntList" and isinstance(a[0], Edge):
        return _edge_sum(rw, a[0], list(a[1]), bool(a[2]) if len(a) > 2 else bool(kw.get("keepdim", False)))
    if name == "aten.div.Tensor" and isinstance(a[0], Edge) and isinstance(a[1], Edge) and a[1].gathered is not None:
        return rw.divide(a[0], a[1])
    if name == "aten.bmm" and all(isinstance(x, Edge) for x in a[:2]):
        return _edge_bmm(rw, a[0], a[1])
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
        return Edge(s, other.node, other.trailing, finite=other.finite, positive_entry=other.positive_entry)
    mapped = [x.node if isinstance(x, (Edge, Real)) else x for x in a]
    out = rw.call(node.target, *mapped)
    val = node.meta.get("val")
    trailing = tuple(int(d) for d in val.shape[1:]) if val is not None else max((e.trailing for e in edges), key=len)
    zero_kept = name in ZERO_PRESERVING or (name == "aten.div.Tensor" and isinstance(a[0], Edge))
    if name in ("aten.add.Tensor", "aten.sub.Tensor") and all(isinstance(x, Edge) for x in a[:2]):
        zero_kept = True
    if not zero_kept:
        out = rw.call(aten.mul.Tensor, out, rw.pattern(s, len(trailing)))
    return Edge(s, out, trailing, finite=_finite(name, a), positive_entry=_keeps_positive_entry(name, a))


def _rebind_ones(rw: Rewriter, a: list, edges: list[Edge]) -> tuple[list, list[Edge]]:
    """``torch.ones(E)`` made from a concrete length belongs to the first set that long
    (`_alloc`); met with values of another set of the same list and length (the reversed list of
    ``edge_index.flip(0)``), it is that set's pattern."""
    sets = {e.s for e in edges if not e.ones}
    if len(sets) != 1 or all(e.s in sets for e in edges):
        return a, edges
    (t,) = sets
    if any(e.ones and (e.s.arg != t.arg or e.length is None or e.length != rw.counts.get(t)) for e in edges):
        return a, edges

    def rebound(x):
        return Edge(t, rw.pattern(t), (), ones=True, length=x.length) if isinstance(x, Edge) and x.ones else x

    a = [rebound(x) for x in a]
    return a, [rebound(e) for e in edges]


def _rewritten_unary(rw: Rewriter, name: str, a: list, s: EdgeSet) -> Edge | None:
    """Unary ops with f(0) != 0 or no ALU op of their own, rewritten to keep edge values zero off
    the pattern: leaky_relu, sigmoid, log1p; None for any other op."""
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
    if name == "aten.log1p":  # log(1 + x): zero where x is
        e = a[0]
        out = rw.call(aten.log.default, rw.call(aten.add.Tensor, e.node, 1.0))
        return Edge(s, rw.call(aten.mul.Tensor, out, rw.pattern(s, len(e.trailing))), e.trailing)
    return None


_FINITE_OPS = {"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.neg"}
"""Ops whose result is finite when their operands are (overflow aside)."""


def _is_finite(x) -> bool:
    if isinstance(x, (Edge, Real)):
        return x.finite
    return isinstance(x, (int, float)) and math.isfinite(x)


def _finite(name: str, a: list) -> bool:
    """Whether an elementwise op's result on edges is provably never inf: finite operands under
    +, -, x, or a finite value divided by a provably positive node value (a scalar)."""
    if name in _FINITE_OPS:
        return all(_is_finite(x) for x in a)
    if name == "aten.div.Tensor" and len(a) == 2:
        d = a[1]
        positive = (isinstance(d, Real) and d.positive and d.finite) or (isinstance(d, (int, float)) and d > 0)
        return _is_finite(a[0]) and bool(positive)
    return False


def _keeps_positive_entry(name: str, a: list) -> bool:
    """Whether some entry stays provably > 0: scaled by a positive constant."""
    if name == "aten.mul.Tensor" and len(a) == 2:
        e, k = (a[0], a[1]) if isinstance(a[0], Edge) else (a[1], a[0])
        return isinstance(e, Edge) and e.positive_entry and isinstance(k, (int, float)) and k > 0
    return False


def _maxima_and_inf(rw: Rewriter, node: fx.Node, name: str, a: list) -> Edge | Real | InfTest | None:
    """The largest edge value, an ``e == inf`` test, and ``masked_fill(e, e == inf, 0)`` (or its
    ``where`` form) on edge values, which must be provably finite (then the fill is a no-op:
    there is no ALU test for inf); None for any other op."""
    if name in ("aten.max", "aten.amax") and isinstance(a[0], Edge) and (name == "aten.max" or not a[1:2] or not a[1]):
        return _edge_max(rw, node, a[0])
    if name == "aten.eq.Scalar" and isinstance(a[0], Edge) and a[1] == math.inf:
        return InfTest(a[0])
    e = None
    fill = name in ("aten.masked_fill_.Scalar", "aten.masked_fill.Scalar") and isinstance(a[1], InfTest) and a[2] == 0
    if fill and isinstance(a[0], Edge) and a[1].y is a[0]:
        e = a[0]
    if name == "aten.where.self" and isinstance(a[0], InfTest) and isinstance(a[2], Edge) and a[0].y is a[2]:
        e = a[2] if isinstance(a[1], (int, float)) and a[1] == 0 or _is_zero(a[1]) else None
    if e is None:
        return None
    if not e.finite:
        raise rw.fail("masked_fill(e, e == inf, 0) on edge values that may be inf is not supported")
    return e


def _is_zero(x) -> bool:
    """A constant zero (``scalar_tensor(0.0)``, copied as a node value)."""
    node = x.node if isinstance(x, Real) else None
    return node is not None and getattr(node, "target", None) is aten.scalar_tensor.default and node.args[0] == 0


def _edge_max(rw: Rewriter, node: fx.Node, e: Edge) -> Real:
    """The largest value on an edge set's pattern (PyG's ``lambda_max = 2 * edge_weight.max()``):
    the values off the pattern become -inf, then the max over every dimension. Provably positive
    where some entry is (a self loop appended with a positive fill)."""
    keep = rw.call(aten.ne.Scalar, rw.pattern(e.s, len(e.trailing)), 0)
    masked = rw.call(aten.where.self, keep, e.node, rw.call(aten.scalar_tensor.default, -math.inf))
    out = rw.call(aten.amax.default, masked, list(range(2 + len(e.trailing))))
    out.meta["val"] = node.meta.get("val")
    return Real(out, positive=e.positive_entry, finite=e.finite)


def _shape_op(rw: Rewriter, node: fx.Node, name: str, a: list, s: EdgeSet) -> Edge | None:
    """Views of an edge tensor's trailing dimensions, and copies; None for any other op."""
    if name in ("aten.view", "aten._unsafe_view", "aten.reshape"):
        e = a[0]
        trailing = _inferred(rw, tuple(int(d) for d in list(a[1])[1:]), e.trailing)
        node_ = rw.call(aten.view.default, e.node, [rw.n, rw.n, *trailing])
        return Edge(s, node_, trailing, finite=e.finite, positive_entry=e.positive_entry)
    if name == "aten.unsqueeze" and isinstance(a[0], Edge):
        e, d = a[0], int(a[1]) % node.meta["val"].dim()
        if d == 0:
            raise rw.fail("unsqueeze before an edge tensor's edge dimension")
        node_ = rw.call(aten.unsqueeze.default, e.node, d + 1)  # (E, *t) dimension d is (N, N, *t)'s d + 1
        trailing = e.trailing[: d - 1] + (1,) + e.trailing[d - 1 :]
        return Edge(s, node_, trailing, finite=e.finite, positive_entry=e.positive_entry)
    if name in ("prims.squeeze", "aten.squeeze.dim", "aten.squeeze.dims") and isinstance(a[0], Edge):
        e = a[0]
        dims = a[1] if isinstance(a[1], (list, tuple)) else [a[1]]
        drop = {int(d) % (len(e.trailing) + 1) for d in dims}
        if 0 in drop:
            raise rw.fail("squeeze of an edge tensor's edge dimension")
        drop = {d for d in drop if e.trailing[d - 1] == 1}  # squeeze leaves a dimension of another size
        trailing = tuple(t for k, t in enumerate(e.trailing, 1) if k not in drop)
        node_ = rw.call(aten.view.default, e.node, [rw.n, rw.n, *trailing])
        return Edge(s, node_, trailing, finite=e.finite, positive_entry=e.positive_entry)
    if name in ("aten.clone", "aten.alias", "aten.detach"):
        return a[0]
    if name in ("aten.expand", "aten.expand_as") and isinstance(a[0], Edge):
        if tuple(int(d) for d in node.meta["val"].shape[1:]) == a[0].trailing:
            return a[0]  # a no-op expand (torch.matmul's broadcast of equal batch dimensions)
        raise rw.fail("expanding an edge tensor's trailing dimensions")
    if name in ("aten.select.int", "aten.slice.Tensor") and isinstance(a[0], Edge):
        return _trailing_part(rw, node, name, a[0], a)
    return None


def _trailing_part(rw: Rewriter, node: fx.Node, name: str, e: Edge, a: list) -> Edge:
    """``e[:, k]`` or ``e[:, a:b:s]`` along a trailing dimension (PNAConv's towers): the same op
    one dimension further in, on the (N, N, *trailing) values."""
    d = int(a[1]) % (len(e.trailing) + 1)
    if d == 0:
        raise rw.fail(f"{name} along an edge tensor's edge dimension")
    out = rw.call(node.target, e.node, d + 1, *a[2:])
    return Edge(e.s, out, tuple(int(x) for x in node.meta["val"].shape[1:]), finite=e.finite)


def _edge_bmm(rw: Rewriter, x: Edge, y: Edge) -> Edge:
    """A matrix product per edge, (E, m, k) @ (E, k, n) (NNConv's ``x_j.unsqueeze(1) @ W(e)``):
    ``sum_k x(.., m, k, 1) y(.., 1, k, n)``, zero off the pattern as both factors are."""
    if len(x.trailing) != 2 or len(y.trailing) != 2 or x.trailing[1] != y.trailing[0]:
        raise rw.fail(f"a batched product of edge tensors shaped {x.trailing} and {y.trailing}")
    prod = rw.call(
        aten.mul.Tensor, rw.call(aten.unsqueeze.default, x.node, -1), rw.call(aten.unsqueeze.default, y.node, 2)
    )
    out = rw.call(aten.sum.dim_IntList, prod, [3])
    return Edge(x.s, out, (x.trailing[0], y.trailing[1]), finite=x.finite and y.finite)


def _inferred(rw: Rewriter, trailing: tuple[int, ...], have: tuple[int, ...]) -> tuple[int, ...]:
    """A view's trailing dimensions with one -1 filled in from the edge tensor's own (`have`)."""
    if trailing.count(-1) > 1 or any(d < -1 for d in trailing):
        raise rw.fail("a view of an edge tensor with more than one inferred trailing dimension")
    if -1 not in trailing:
        return trailing
    known = math.prod(d for d in trailing if d != -1)
    total = math.prod(have)
    if known == 0 or total % known:
        raise rw.fail(f"a view of an edge tensor's {total} values per edge as {trailing}")
    return tuple(total // known if d == -1 else d for d in trailing)


def _same_on_every_edge(x: Real, trailing: tuple[int, ...]) -> bool:
    """A node-space value that broadcasts along an edge tensor's trailing dimensions only (a
    scalar, a bias shaped like the trailing dimensions' tail, GATv2's attention vector
    (1, H, C), or GMMConv's kernel means (1, K, D) against pseudo-coordinates (E, 1, D)): the
    same on every edge."""
    val = x.node.meta.get("val")
    if val is None or val.dim() == 0:
        return True
    shape = tuple(int(d) for d in val.shape)
    if len(shape) == len(trailing) + 1 and shape[0] == 1:  # (1, H, C): broadcast along the edges
        shape = shape[1:]
    if len(shape) > len(trailing):
        return False
    return all(a == b or a == 1 or b == 1 for a, b in zip(reversed(shape), reversed(trailing)))


def _edge_linear(rw: Rewriter, node: fx.Node, name: str, a: list) -> Edge | None:
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


def _edge_cat(rw: Rewriter, a: list, s: EdgeSet) -> Edge:
    """``cat`` of edge values along a trailing dimension (EdgeConv's ``[x_i, x_j - x_i]``):
    dimension d of the (E, *trailing) values is d + 1 of the (N, N, *trailing) ones."""
    parts, dim = list(a[0]), int(a[1]) if len(a) > 1 else 0
    if len(parts) == 2 and isinstance(parts[0], Edge) and isinstance(parts[1], Real) and dim == 0:
        return _with_loops(rw, parts[0], parts[1])
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


def _with_loops(rw: Rewriter, e: Edge, v: Real) -> Edge:
    """``cat([e, v])`` along the edges, `v` holding one value per node: PyG's ``add_self_loops``
    with fill values (``get_laplacian``), whose edge list is the set with a self loop appended
    per node. The values are e's off the diagonal and v(i) at (i, i)."""
    kinds = {"offdiag": "loops", "base": "plus_loops"}
    val = v.node.meta.get("val") if hasattr(v.node, "meta") else None
    if e.s.kind not in kinds or val is None or val.dim() != 1 + len(e.trailing) or int(val.shape[0]) != rw.n:
        raise rw.fail("cat of edge values with other tensors (gather node values by edge_index first)")
    s = replace(e.s, kind=kinds[e.s.kind])
    out = rw.call(aten.add.Tensor, e.node, rw.on_diagonal(e.s.arg, v, e.trailing))
    return Edge(s, out, e.trailing, finite=e.finite and v.finite, positive_entry=v.positive)


def _trailing_softmax(rw: Rewriter, e: Edge, dim: int) -> Edge:
    """softmax along a trailing dimension of edge values (FeaStConv's attention over heads):
    within each edge, so the (N, N, ...) tensor's softmax along that dimension, times the
    pattern (off it the softmax of zeros is 1/size, not zero)."""
    rank = 1 + len(e.trailing)
    d = dim % rank
    if d == 0:
        raise rw.fail("a softmax over the edges of an edge tensor (use torch_geometric.utils.softmax)")
    out = rw.call(aten._softmax.default, e.node, d + 1, False)
    return Edge(e.s, rw.call(aten.mul.Tensor, out, rw.pattern(e.s, len(e.trailing))), e.trailing, finite=True)


def _edge_sum(rw: Rewriter, e: Edge, dims: list[int], keepdim: bool) -> Edge:
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


def real_op(rw: Rewriter, node: fx.Node, name: str, a: list, kw: dict) -> Real | InfTest:
    """An op on node tensors only: copied into the new graph, except the degree normalisation
    idioms (`deg ** -0.5` as rsqrt, its `== inf` test and zero-degree guard)."""
    if name in ("aten.pow_.Scalar", "aten.pow.Tensor_Scalar") and isinstance(a[0], Real) and a[1] == -0.5:
        return Real(
            rw.call(aten.rsqrt.default, a[0].node), inverse=(a[0], "rsqrt"), finite=a[0].positive and a[0].finite
        )
    if name == "aten.reciprocal" and isinstance(a[0], Real):  # 1 / deg (WLConvContinuous)
        finite = a[0].positive and a[0].finite
        return Real(rw.call(aten.reciprocal.default, a[0].node), inverse=(a[0], "reciprocal"), finite=finite)
    if name == "aten.mul.Tensor" and isinstance(a[0], Real) and a[0].inverse is not None and a[1] == 1.0:
        return a[0]  # 1. / deg exports as reciprocal(deg) * 1.0
    if name == "aten.eq.Scalar" and isinstance(a[0], Real) and a[1] == math.inf:
        return InfTest(a[0])
    masked = None
    if name in ("aten.masked_fill_.Scalar", "aten.masked_fill.Scalar") and isinstance(a[1], InfTest):
        masked = (a[0], a[1])
    if name == "aten.where.self" and isinstance(a[0], InfTest):
        masked = (a[2], a[0])
    if masked is not None:
        y, test = masked
        if not isinstance(y, Real) or test.y is not y or y.inverse is None:
            raise rw.fail("masked_fill(x, x == inf, 0) is supported only on x = deg ** -0.5 or 1 / deg")
        deg, op = y.inverse
        if deg.positive:
            return y  # the inverse of a degree counted with self loops: never inf, the fill is a no-op
        return _guarded_inverse(rw, deg, op)
    new_args = _map_real(a)
    new_kw = _map_real(kw)
    assert callable(node.target)  # a call_function node
    out = rw.g.call_function(node.target, tuple(new_args), dict(new_kw))
    out.meta.update({k: node.meta[k] for k in META + ("val",) if k in node.meta})
    positive = name == "aten.mul.Tensor" and all(
        (isinstance(x, Real) and x.positive) or (isinstance(x, (int, float)) and x > 0) for x in a
    )
    diag = next((x for x in a if isinstance(x, Real) and x.diag_of is not None), None)
    if diag is not None and name in _FINITE_OPS | {"aten.div.Tensor"}:  # per self loop: one value per node
        out.meta["val"] = diag.node.meta.get("val")  # its length is N, not the export's unbacked count
    return Real(
        out,
        positive=positive,
        finite=name in _FINITE_OPS and all(_is_finite(x) for x in a),
        diag_of=diag.diag_of if diag is not None else None,
    )


def _guarded_inverse(rw: Rewriter, deg: Real, op: str) -> Real:
    """``deg ** -0.5`` (`op` rsqrt) or ``1 / deg`` (reciprocal) with 0 where deg is 0 (GCN's
    ``masked_fill(inf, 0)`` without self loops): ``op(deg + [deg == 0]) * [deg != 0]``, the
    indicators being the ALU's eqz / nez; an isolated node's weight is 0, never inf times 0."""
    cond = rw.call(aten.eq.Scalar, deg.node, 0.0)
    one = rw.call(aten.scalar_tensor.default, 1.0)
    zero = rw.call(aten.scalar_tensor.default, 0.0)
    isolated = rw.call(aten.where.self, cond, one, zero)
    inverse = aten.rsqrt.default if op == "rsqrt" else aten.reciprocal.default
    safe = rw.call(inverse, rw.call(aten.add.Tensor, deg.node, isolated))
    out = rw.call(aten.mul.Tensor, safe, rw.call(aten.where.self, cond, zero, one))
    if "val" in deg.node.meta:
        for n in (cond, isolated, safe, out):
            n.meta["val"] = deg.node.meta["val"] if n is not cond else deg.node.meta["val"] == 0
    return Real(out, finite=deg.finite)  # a degree's rsqrt with 0 for 0: finite where the degree is


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
