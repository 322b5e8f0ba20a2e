"""The value an expression takes where its operands at one index variable are absent.

Sparsity is never guessed from data (docs/architecture.md, "Design: lowering"): a variable may
be iterated sparsely only where
every skipped coordinate has a value the consumer can reconstruct, 0 for written outputs and
sums, -inf for max reductions (masked attention: ``masked_fill(mask == 0, -inf)`` is -inf
outside the mask, ``exp`` of that is 0). `absent(e, v)` computes that value: a tensor with `v`
is 0 where absent, a tensor without `v` is unknown (None) but assumed finite, constants are
themselves. None means "not a constant": the variable must be iterated over its full range.
"""

from __future__ import annotations

import math

from fuseflow.analysis.index_notation import Access, Const, Expr, Reduce, fold

INF = math.inf


def absent(e: Expr, v: str, virtual: dict[int, str] | None = None, memo: dict | None = None) -> float | None:
    """`virtual` maps sparse-accumulated sums (by id) to the variable they output: 0 where absent.
    `memo` caches results by (id(node), v) across calls on one tree."""
    if memo is not None:
        key = (id(e), v)
        if key not in memo:
            memo[key] = _absent(e, v, virtual, memo)
        return memo[key]
    return _absent(e, v, virtual, None)


def _absent(e: Expr, v: str, virtual, memo) -> float | None:
    if isinstance(e, Access):
        return 0.0 if v in e.vars else None
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Reduce) and virtual and virtual.get(id(e)) == v:
        return 0.0
    if isinstance(e, Reduce):
        b = absent(e.body, v, virtual, memo)
        if b is None:
            return None
        if e.kind == "max":
            return b
        return b if b == 0.0 or math.isinf(b) else None  # a sum of a nonzero constant depends on the range
    vals = [absent(a, v, virtual, memo) for a in e.args]
    return _apply(e.op, vals)


def _apply(op: str, vals: list[float | None]) -> float | None:
    if op == "mask":  # mask(s, m): s where m != 0, else -inf
        s, m = vals
        if m is None:
            return None
        return -INF if m == 0.0 else s
    known = [x for x in vals if x is not None]
    if len(known) == len(vals):
        try:
            r = fold(op, tuple(known))
        except (ValueError, OverflowError, ZeroDivisionError):
            return None
        return None if isinstance(r, float) and math.isnan(r) else r
    a = vals[0]
    b = vals[1] if len(vals) > 1 else None
    if op == "mul" and any(x == 0.0 for x in vals):
        return 0.0  # unknown operands are finite
    if op == "div" and a == 0.0:
        return 0.0  # unknown denominators are nonzero
    if op == "add" and -INF in vals and INF not in vals:
        return -INF
    if op == "sub" and a == -INF and b != -INF:
        return -INF
    if op == "min" and -INF in vals:
        return -INF
    if op == "max" and INF in vals:
        return INF
    return None


def identity(kind: str) -> float:
    """The reduction's identity: what an empty fiber reduces to (0 for sum, -inf for max)."""
    return 0.0 if kind == "sum" else -INF
