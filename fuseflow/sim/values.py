"""A region's values from its index notation, with numpy: what a region returns when its cycles
come from the memo (`sim/memo.py`) or when its simulation runs elsewhere (`simulate(jobs=)`).

The simulator computes values and cycles together, token by token. A region structurally
identical to one already simulated has the same cycles and counters, but different values (other
weights); recomputing them here takes a BLAS call where the simulator takes millions of events.
Semantics are the dense ones PyTorch has (absent entries of sparse inputs are zeros) and the ALU's
(`primitives.ALU`, checked against `alu_ops.h`): NaN propagates through max/min, ``mask(x, m)``
is ``-inf`` where ``m == 0``.
Every subexpression is evaluated once, over its own free variables only; a sum of products is one
``einsum``, so a fused matmul chain never materialises its full iteration space.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import scipy.sparse

from fuseflow import views
from fuseflow.analysis.alpha import AlphaKeys
from fuseflow.analysis.index_notation import UNIT, Access, Assign, Call, Const, Expr, Reduce
from fuseflow.primitives import ALU

MAX_DENSE_ELEMENTS = 1 << 28
"""Largest array (elements) the evaluator builds: 1 GiB of float32. Beyond it, simulate instead."""


class Unevaluable(Exception):
    """This region's values cannot be computed here (too large); the caller simulates it."""


Term = tuple[np.ndarray, tuple[str, ...]]  # an array with one axis per variable, in that order

ESTIMATE_ELEMENTS = 1 << 24
"""Largest array the cycle model's evaluation of intermediates builds (64 MiB of float32): an
estimate must stay far cheaper than a simulation."""

BLAS_SPEEDUP = 50.0
"""How much faster a point of a sum of products runs in einsum's BLAS call than an element of a
numpy elementwise op (57x measured: a 1024 x 768 x 3072 matmul against an add of 1024 x 768)."""

ESTIMATE_WORK = 2e9
"""Most element operations (`work`) the cycle model's evaluation of a region spends (a few
seconds of numpy): a fused decoder at GPT-3 Small's size is thousands of arrays of a million elements each,
minutes to evaluate, for statistics its dense outputs do not need."""


def region_values(
    assigns: list[Assign], env: Mapping[str, object], limit: int = MAX_DENSE_ELEMENTS
) -> dict[str, np.ndarray]:
    """Every output of a region (`assigns`), as dense float32 arrays in mode order; raises
    `Unevaluable` when an array would exceed `limit` elements."""
    dims: dict[str, int] = {}
    for a in assigns:
        dims.update(a.dims)
    ev = _Evaluator(env, dims, limit)
    ev.count_uses(assigns)
    return {a.out: ev.output(a) for a in assigns}


def evaluate_into(env: dict, assigns: list[Assign], limit: int = ESTIMATE_ELEMENTS) -> bool:
    """Add a region's outputs to `env` when they are cheap to compute; False when they are not
    (the caller predicts them instead). The cycle model reads tensors passed between regions
    from these values: the simulator packs them from values too, so a ReLU's or a masked max's
    zeros are dropped there, which no structural prediction sees."""
    if any(not views.has(env, name) for name in tensors_read(assigns)):
        return False  # no data for an input (a hand-written .mlir): nothing to evaluate on
    if work(assigns) > ESTIMATE_WORK:
        return False
    try:
        env.update(region_values(assigns, env, limit))
    except Unevaluable:
        return False
    return True


def work(assigns: list[Assign], keys: AlphaKeys | None = None) -> float:
    """Element operations evaluating a region takes (each distinct subexpression once): an
    elementwise op or a max its array's elements, a sum of products its iteration space over
    `BLAS_SPEEDUP` (einsum's contractions run on BLAS)."""
    keys = AlphaKeys() if keys is None else keys
    dims: dict[str, int] = {}
    for a in assigns:
        dims.update(a.dims)
    free: dict[Expr, tuple[str, ...]] = {}

    def vars_of(e: Expr) -> tuple[str, ...]:
        hit = free.get(e)
        if hit is None:
            if isinstance(e, Access):
                hit = tuple(v for v in dict.fromkeys(e.vars) if v != UNIT)
            elif isinstance(e, Reduce):
                hit = tuple(v for v in _union(vars_of(c) for c in _children(e)) if v not in e.vars)
            else:
                hit = _union(vars_of(c) for c in _children(e))
            free[e] = hit
        return hit

    total = 0.0
    for e in _classes([a.expr for a in assigns], keys):
        kids = _children(e)
        if isinstance(e, Reduce):
            space = _union([e.vars, *(vars_of(c) for c in kids)])
        elif isinstance(e, Call):
            space = vars_of(e)
        else:
            continue
        size = float(np.prod([dims.get(v, 1) for v in space], dtype=np.float64))
        total += size / BLAS_SPEEDUP if isinstance(e, Reduce) and e.kind == "sum" else size
    return total


def tensors_read(assigns: list[Assign]) -> set[str]:
    """The tensors a region reads (its expressions are DAGs: each node visited once)."""
    names: set[str] = set()
    seen: set[int] = set()
    stack: list[Expr] = [a.expr for a in assigns]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Access):
            names.add(e.tensor)
        elif isinstance(e, Call):
            stack.extend(e.args)
        elif isinstance(e, Reduce):
            stack.append(e.body)
    return names


class _Evaluator:
    def __init__(self, env: Mapping[str, object], dims: Mapping[str, int], limit: int = MAX_DENSE_ELEMENTS):
        self.env = env
        self.dims = dims  # every variable's extent (the parser's)
        self.limit = limit
        self.dense: dict[str, np.ndarray] = {}
        # values by alpha class: the parser names each copy of a recomputed intermediate's
        # reductions afresh (a fused decoder reads its FFN once per projection after it)
        self.keys = AlphaKeys()
        self.memo: dict[int, Term] = {}
        # uses of each class not yet evaluated (`count_uses`): an intermediate is dropped
        # after its last consumer, so a fused decoder at paper size holds its live arrays
        # only, not every one it computed
        self.uses: dict[int, int] = {}
        # the node of each class whose children `count_uses` counted: alpha-equivalent nodes
        # name their bound variables apart, so their children are other classes; evaluating a
        # class always through this node consumes exactly the uses counted (else thousands of
        # counted children are never consumed and stay live: GPT-3 Small's fused decoder)
        self.rep: dict[int, Expr] = {}

    def count_uses(self, assigns: list[Assign]) -> None:
        """Count each subexpression's consumers, as `eval` will meet them (a sum's product tree
        is one einsum: its factors are the consumed nodes)."""
        keys, uses = self.keys, self.uses
        for a in assigns:
            k = keys.of(a.expr)
            uses[k] = uses.get(k, 0) + 1  # its output's
        for e in _classes([a.expr for a in assigns], keys):
            self.rep[keys.of(e)] = e
            for c in _children(e):
                kc = keys.of(c)
                uses[kc] = uses.get(kc, 0) + 1

    def _used(self, e: Expr) -> None:
        k = self.keys.of(e)
        left = self.uses.get(k)
        if left is not None:
            if left <= 1:
                del self.uses[k]
                self.memo.pop(k, None)
            else:
                self.uses[k] = left - 1

    def output(self, asg: Assign) -> np.ndarray:
        arr, vs = self.eval(asg.expr)
        self._used(asg.expr)
        real = tuple(v for v in asg.vars if v != UNIT)
        arr = _align(arr, vs, real)
        full = tuple(self.dims[v] for v in real)
        shape = tuple(1 if v == UNIT else self.dims[v] for v in asg.vars)
        out = np.require(np.broadcast_to(arr, full), dtype=np.float32, requirements=["C", "W", "O"])
        return out.reshape(shape)

    def eval(self, e: Expr) -> Term:
        k = self.keys.of(e)
        hit = self.memo.get(k)
        if hit is None:
            hit = self.memo[k] = self._eval(self.rep.get(k, e))
        return hit

    def _eval(self, e: Expr) -> Term:
        if isinstance(e, Access):
            return self._access(e)
        if isinstance(e, Const):
            return np.asarray(e.value, dtype=np.float32), ()
        if isinstance(e, Call):
            terms = [self.eval(a) for a in e.args]
            for a in e.args:
                self._used(a)
            vs = _union(t[1] for t in terms)
            _budget(vs, self.dims, self.limit)
            args = [_align(a, v, vs) for a, v in terms]
            with np.errstate(all="ignore"):
                out = ALU[e.op].array(*args)
            return np.asarray(out, dtype=np.float32), vs
        if isinstance(e, Reduce):
            return self._reduce(e)
        raise TypeError(f"not an index-notation expression: {e!r}")

    def _access(self, e: Access) -> Term:
        arr = self._tensor(e.tensor)
        if arr.ndim != len(e.vars):
            raise ValueError(f"{e.tensor} has {arr.ndim} modes, read with {len(e.vars)} variables")
        index = tuple(0 if v == UNIT else slice(None) for v in e.vars)
        arr, vs = arr[index], tuple(v for v in e.vars if v != UNIT)
        if len(set(vs)) != len(vs):  # a variable on two modes: the diagonal
            kept = tuple(dict.fromkeys(vs))
            letters = {v: chr(97 + i) for i, v in enumerate(kept)}
            arr = np.einsum("".join(letters[v] for v in vs) + "->" + "".join(letters[v] for v in kept), arr)
            vs = kept
        return arr, vs

    def _tensor(self, name: str) -> np.ndarray:
        if name not in self.dense:
            value = views.lookup(self.env, name)
            size = int(np.prod(value.shape)) if value.shape else 1
            if size > self.limit:
                raise Unevaluable(f"{name} has {size:,} elements")
            if scipy.sparse.issparse(value):
                value = value.toarray()
            self.dense[name] = np.asarray(value, dtype=np.float32)
        return self.dense[name]

    def _reduce(self, e: Reduce) -> Term:
        factors = _children(e)
        terms = [self.eval(f) for f in factors]
        for f in factors:
            self._used(f)
        inner = _union(t[1] for t in terms)
        free = tuple(v for v in inner if v not in e.vars)
        dims = self.dims
        _budget(free, dims, self.limit)
        if e.kind == "sum":
            letters = {v: _letter(i) for i, v in enumerate(inner)}
            spec = ",".join("".join(letters[v] for v in vs) for _, vs in terms)
            out = np.einsum(spec + "->" + "".join(letters[v] for v in free), *[a for a, _ in terms], optimize=True)
            for v in e.vars:  # summing over a variable the body does not depend on
                if v not in inner:
                    out = out * np.float32(dims[v])
            return np.asarray(out, dtype=np.float32), free
        (arr, vs), axes = terms[0], tuple(i for i, v in enumerate(terms[0][1]) if v in e.vars)
        _budget(vs, dims, self.limit)
        if e.kind == "max":
            out = arr.max(axis=axes) if axes else arr  # NaN propagates, as the ALU's max
        elif e.kind == "min":
            out = arr.min(axis=axes) if axes else arr
        else:
            raise ValueError(f"unknown reduction {e.kind!r}")
        return np.asarray(out, dtype=np.float32), free


def _classes(roots: list[Expr], keys: AlphaKeys) -> Iterator[Expr]:
    """One node of each alpha class reachable from `roots` through `_children`."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        e = stack.pop()
        k = keys.of(e)
        if k in seen:
            continue
        seen.add(k)
        stack.extend(_children(e))
        yield e


def _children(e: Expr) -> list[Expr]:
    """What `_Evaluator.eval` evaluates to compute `e`."""
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Reduce):
        return _factors(e.body) if e.kind == "sum" else [e.body]
    return []


def _factors(e: Expr) -> list[Expr]:
    """The factors of a product tree (a sum of products is one einsum)."""
    if isinstance(e, Call) and e.op == "mul" and len(e.args) == 2:
        return _factors(e.args[0]) + _factors(e.args[1])
    return [e]


def _union(groups) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for vs in groups:
        out.update(dict.fromkeys(vs))
    return tuple(out)


def _letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[i]


def _budget(vs: tuple[str, ...], dims: Mapping[str, int], limit: int) -> None:
    size = int(np.prod([dims.get(v, 1) for v in vs], dtype=np.float64))
    if size > limit:
        raise Unevaluable(f"an intermediate over ({', '.join(vs)}) would have {size:,} elements")


def _align(arr: np.ndarray, vs: tuple[str, ...], target: tuple[str, ...]) -> np.ndarray:
    """`arr` (axes `vs`) with its axes in `target` order, size 1 where it does not vary."""
    missing = [v for v in vs if v not in target]
    if missing:
        raise ValueError(f"variables {missing} are not in {target}")
    order = [v for v in target if v in vs]
    arr = np.transpose(arr, [vs.index(v) for v in order]) if vs else arr
    sizes = dict(zip(order, arr.shape))
    return arr.reshape(tuple(sizes.get(v, 1) for v in target))
