"""Iteration trees: how an index-notation expression co-iterates one index variable
(docs/architecture.md, "Design: lowering").

A product intersects its operands' coordinates, a sum unions them, and an expression that is not
zero where its operands are absent iterates the variable's full range. The lowering
(`index_to_sam`) turns each tree into scans, joins and locates; the tree alone decides which
coordinates are visited, so every rule here is about never skipping one PyTorch computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from fuseflow.analysis.absent import absent, identity
from fuseflow.analysis.alpha import AlphaKeys
from fuseflow.analysis.index_notation import Access, Call, Const, Expr, Reduce
from fuseflow.analysis.nests import free_vars


@dataclass(frozen=True)
class Leaf:
    """An iteration tree's leaf: one tensor access iterated at a level."""

    access: Access


@dataclass(frozen=True)
class VLeaf:
    """A sparse-accumulated sum seen by its consumer: coordinates and values from a spacc."""

    reduce: Reduce


@dataclass(frozen=True)
class Inter:
    """Iteration trees whose coordinates are intersected (a product)."""

    parts: tuple


@dataclass(frozen=True)
class Union_:
    """Iteration trees whose coordinates are unioned (a sum)."""

    parts: tuple


@dataclass(frozen=True)
class Full:
    """Every coordinate of a dense range (an expression that is not zero where its part is absent)."""

    part: object  # an iteration tree or None


def join(kind, parts):
    """`kind(parts)` of the parts that iterate (None: none does; a lone part stands alone)."""
    parts = tuple(p for p in parts if p is not None)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else kind(parts)


@dataclass
class IterCtx:
    """Per-assignment facts `iteration` needs, with memoised absent values."""

    virtual: dict[int, str]
    bound: dict[int, frozenset]
    memo: dict = field(default_factory=dict)
    compressed_at: Callable[[Access, str], bool] = lambda a, v: True  # can a skip coordinates of v?
    accumulated: dict[int, str] = field(default_factory=dict)  # spacc'd sum (by id) -> its variable a'

    def absent(self, e: Expr, v: str) -> float | None:
        """What `e` is where variable `v`'s iterated tensors are absent (None: it depends)."""
        return absent(e, v, self.virtual, self.memo)


def iteration(e: Expr, v: str, cx: IterCtx, summed: bool = False):
    """How `e` must iterate variable `v` so that every coordinate where `e` differs from its
    absent value (see absent.py) is visited: a product intersects, other ops union their
    operands when the absent value is a constant, and iterate the full range otherwise.
    `summed`: `e` is (a factor of) the body of a sum over `v`, whose skipped coordinates are
    dropped, never rebuilt.
    Sparse-accumulated sums (``cx.virtual``) are leaves at the variable their spacc outputs."""
    if isinstance(e, Access):
        return Leaf(e) if v in e.vars else None
    if isinstance(e, Const):
        return None
    if isinstance(e, Reduce):
        if cx.virtual.get(id(e)) == v:
            return VLeaf(e)
        t = iteration(e.body, v, cx, summed=v in e.vars and e.kind == "sum")
        if v in e.vars and reduced_absent(e, v, cx) != identity(e.kind):
            return Full(t)  # e.g. a max over entries that are 0 where absent
        if cx.accumulated.get(id(e)) == v and cx.absent(e.body, v) != 0.0:
            # a Gustavson sum whose body is not 0 where its operands are absent (sum_l(x + 1)):
            # the spacc must see every coordinate it accumulates into, or the consumer reads 0
            # for the rows it skipped (found by fuseflow.fuzz on 3-D inputs)
            return Full(t)
        return t
    bound = [a for a in e.args if v in cx.bound.get(id(a), ())]
    if bound:  # v is a reduction variable inside that argument: the others do not iterate it
        return iteration(bound[0], v, cx)
    subs = [iteration(a, v, cx, summed=summed and e.op == "mul") for a in e.args]
    if all(t is None for t in subs):
        return None  # constant along v: its value is repeated, not iterated
    if e.op == "mask" and subs[0] is not None and may_skip(subs[0], cx, v):
        # mask(s, m) is s (0 where s is absent) wherever m is present: intersecting with a
        # compressed s would drop m's coordinates where s is 0. A union visits them; where only
        # s is present the mask gives -inf, the absent value, so the extra visits are harmless.
        return join(Union_, subs)
    if e.op == "mul":
        # A product skips a coordinate only where a factor is 0. A factor that is not 0 where its
        # operands are absent (exp(T), 1 + x) covers v's whole range: intersecting with its
        # operands' coordinates would drop products it contributes to (found by fuseflow.fuzz).
        absent = [cx.absent(a, v) if t is not None else 0.0 for a, t in zip(e.args, subs)]
        if not summed and any(x is None or math.isinf(x) for x in absent):
            # A skipped coordinate's value is rebuilt from absent operands (a dense writer, a
            # union): 0 x (that factor there). A factor that is not finite there (mask(x, m) is
            # -inf where m is absent, a softmax of an absent row is NaN) would make it NaN where
            # PyTorch, reading the factor's real value, has 0: every coordinate is computed
            # instead (found by fuseflow.fuzz). A sum drops skipped coordinates: no rebuild.
            return Full(join(Union_, subs))
        subs = [t if t is None or x == 0.0 else Full(t) for x, t in zip(absent, subs)]
        return join(Inter, subs)
    if e.op == "mask":
        return join(Inter, subs)
    if cx.absent(e, v) is None:
        return Full(join(Union_, subs))
    return join(Union_, subs)


def reduced_absent(e: Reduce, v: str, cx: IterCtx) -> float | None:
    """The value a reduction's body takes where its operands are absent along `v`. In a sum, a
    product with a factor that is 0 there contributes 0 whatever the other factors would be
    rebuilt to (a softmax over a row whose Gustavson denominator is absent is 1/0): the real
    factors are finite, so the skipped coordinates add nothing."""
    if e.kind == "sum" and any(cx.absent(f, v) == 0.0 for f in product_factors(e.body)):
        return 0.0
    return cx.absent(e.body, v)


def product_factors(e: Expr) -> list[Expr]:
    """The factors of a (nested) product; `[e]` for anything else."""
    if isinstance(e, Call) and e.op == "mul":
        return [f for a in e.args for f in product_factors(a)]
    return [e]


def shared_over_renamed(e: Expr, renamed: dict[str, str], keys: AlphaKeys) -> set[int]:
    """The reductions occurring twice in `e` (alpha sharing) with a free variable that a
    Gustavson body renames (``j`` -> ``j_k``), as their `keys` classes. A copy inside that body reads
    other coordinates than the one outside, and one subgraph cannot serve both (a stream
    protocol violation, found by fuseflow.fuzz)."""
    originals = set(renamed.values())
    seen: dict[int, int] = {}
    bad: set[int] = set()

    def walk(x: Expr) -> None:
        if isinstance(x, Reduce):
            seen[id(x)] = seen.get(id(x), 0) + 1
            if seen[id(x)] == 2 and free_vars(x) & originals:
                bad.add(keys.of(x))
            if seen[id(x)] == 1:
                walk(x.body)
        elif isinstance(x, Call):
            for a in x.args:
                walk(a)

    if originals:
        walk(e)
    return bad


def may_skip(t, cx: IterCtx, v: str) -> bool:
    """Can iteration tree `t` skip a coordinate of v's range (a compressed level or a spacc in it)?"""
    if isinstance(t, Leaf):
        return cx.compressed_at(t.access, v)
    if isinstance(t, Full):
        return False
    if isinstance(t, (Inter, Union_)):
        return any(may_skip(p, cx, v) for p in t.parts)
    return True
