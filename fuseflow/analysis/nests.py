"""Loop nests of a fused expression: which index variables each subexpression iterates.

Every node of an index-notation expression is evaluated inside a *nest*: the output variables
(in dataflow order) plus the reduction variables of the reductions around it. A nested sum with
one reduced variable is *accumulated* (Gustavson, a spacc keyed by its last free variable) inside
the consumer's loops above that variable, so an intermediate consumed under a loop it does not
have (H(l,·) under A's (i, l) in ``A @ H``) is regenerated once per iteration of that loop,
FuseFlow's cost of fusing across a reduction, and no more. Other reductions are *hoisted* to the
shortest nest prefix holding their free variables (LayerNorm and softmax statistics: once per
row, values repeated along the rest).
The nests of all nodes share prefixes and form a trie: each variable is iterated once, at one
trie node, so streams that meet are aligned by construction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx

from fuseflow.analysis.index_notation import UNIT, Access, Call, Const, Expr, Reduce
from fuseflow.analysis.storage_order import default_order
from fuseflow.errors import DiscordantError, UnsupportedError

_FREE: dict[int, tuple[Expr, frozenset]] = {}
_ALL: dict[int, tuple[Expr, frozenset]] = {}


def _memoised(table: dict[int, tuple[Expr, frozenset]], e: Expr, compute) -> frozenset:
    """`compute(e)`, remembered by the identity of `e`: the entry keeps `e` alive, so its id
    cannot be reused while cached (a table past a million entries starts again)."""
    hit = table.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    r = compute(e)
    if len(table) > 1_000_000:
        table.clear()
    table[id(e)] = (e, r)
    return r


def free_vars(e: Expr) -> frozenset:
    """The index variables `e` reads that no reduction inside it binds (memoised by identity)."""
    return _memoised(_FREE, e, _free_vars)


def _free_vars(e: Expr) -> frozenset:
    if isinstance(e, Access):
        return frozenset(e.vars) - {UNIT}
    if isinstance(e, Call):
        return frozenset().union(*(free_vars(a) for a in e.args)) if e.args else frozenset()
    if isinstance(e, Reduce):
        return free_vars(e.body) - set(e.vars)
    return frozenset()


def all_vars(e: Expr) -> frozenset:
    """Every index variable `e` reads or binds (memoised by identity, as `free_vars`)."""
    return _memoised(_ALL, e, _all_vars)


def _all_vars(e: Expr) -> frozenset:
    if isinstance(e, Access):
        return frozenset(e.vars)
    if isinstance(e, Call):
        return frozenset().union(*(all_vars(a) for a in e.args)) if e.args else frozenset()
    if isinstance(e, Reduce):
        return all_vars(e.body) | set(e.vars)
    return frozenset()


def binds(e: Expr, v: str) -> bool:
    """Whether a reduction inside `e` binds variable `v`."""
    if isinstance(e, Reduce):
        return v in e.vars or binds(e.body, v)
    if isinstance(e, Call):
        return any(binds(a, v) for a in e.args)
    return False


@dataclass
class NestPlan:
    """Nests of every node (keyed by id) and the owner expression of every variable."""

    root_nest: tuple[str, ...]
    value_nest: dict[int, tuple[str, ...]] = field(default_factory=dict)  # where a node's value lives
    body_nest: dict[int, tuple[str, ...]] = field(default_factory=dict)  # reductions: their body's nest
    owner: dict[str, Expr] = field(default_factory=dict)  # variable -> expression iterating it
    access_nest: dict[Access, tuple[str, ...]] = field(default_factory=dict)
    spacc: dict[int, tuple[str, str]] = field(default_factory=dict)  # id(reduction) -> (out var, inner copy)
    spacc_nests: dict[int, list] = field(default_factory=dict)  # nests of everything inside it
    bound: dict[int, frozenset] = field(default_factory=dict)  # id(node) -> variables reduced inside
    renamed: dict[str, str] = field(default_factory=dict)  # inner copy -> original (root) variable
    expr: Expr | None = None  # the (rewritten) expression planned
    # every node whose id keys a table above, kept alive with the plan: a node built while
    # planning and then dropped would free its id for a later node, which would then find the
    # dropped node's entries (a spacc read where none was built: a KeyError, on some runs only)
    keep: list = field(default_factory=list, repr=False)

    def prefixes(self) -> list[tuple[str, ...]]:
        """Every trie node (a nest prefix ending in a variable), parents first; the loops of a
        sparse-accumulated reduction come before the node that consumes its output."""

        seen: dict[tuple[str, ...], None] = {}  # insertion-ordered: the text must not depend on hashing
        for n in [self.root_nest, *self.body_nest.values(), *self.access_nest.values()]:
            for k in range(1, len(n) + 1):
                seen.setdefault(n[:k], None)
        g = nx.DiGraph()
        g.add_nodes_from(seen)
        for n in seen:
            if len(n) > 1:
                g.add_edge(n[:-1], n)
        for rid, (_a, _) in self.spacc.items():
            consumer = self.value_nest[rid]
            # everything the accumulated body reads (incl. hoisted statistics elsewhere in the
            # trie) must be built before the node that consumes the spacc's output
            for nest in self.spacc_nests[rid]:
                for k in range(1, len(nest) + 1):
                    n = nest[:k]
                    if n != consumer[: len(n)] and consumer in seen:
                        g.add_edge(n, consumer)
        rank = {n: i for i, n in enumerate(sorted(seen, key=len))}
        return list(nx.lexicographical_topological_sort(g, key=lambda n: rank[n]))


def rename(e: Expr, m: dict[str, str], memo: dict | None = None) -> Expr:
    """`e` with variables renamed; shared subexpressions (the parser builds a DAG) are renamed
    once and stay shared, and a subexpression without the variables is returned as it is."""
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    if m.keys().isdisjoint(all_vars(e)):
        return e  # nothing to rename: the subexpression itself, still shared
    out: Expr
    if isinstance(e, Access):
        out = Access(e.tensor, tuple(m.get(v, v) for v in e.vars), e.use)
    elif isinstance(e, Call):
        out = Call(e.op, tuple(rename(a, m, memo) for a in e.args))
    elif isinstance(e, Reduce):
        out = Reduce(e.kind, tuple(m.get(v, v) for v in e.vars), rename(e.body, m, memo))
    else:
        out = e
    memo[id(e)] = out
    return out


def _inner_reductions(e: Expr) -> list[Reduce]:
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Reduce):
            out.append(x)
            stack.append(x.body)
        elif isinstance(x, Call):
            stack.extend(x.args)
    return out


def chains_of(e: Expr, storage_vars) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Access):
            out[f"{x.tensor}#{x.use}"] = storage_vars(x)
        elif isinstance(x, Call):
            stack.extend(x.args)
        elif isinstance(x, Reduce):
            stack.append(x.body)
    return out


def plan(
    expr: Expr, out_vars: tuple[str, ...], storage_vars, loc: str | None, order: Sequence[str] | None = None
) -> NestPlan:
    """Choose the root order and every node's nest; checks concordance of every access.

    `order` is a dataflow order over all the expression's variables (the ordering pass's
    choice). Each reduction then follows its restriction: a reduced variable after all the free
    ones is an inner product (hoisted when its free variables lead the consumer's nest), a
    single reduced variable just before the last free one is Gustavson (spacc); anything else
    raises `UnrealisableOrder`. Without `order`, the default order and the Gustavson heuristic
    of `_spacc_candidate` decide.
    """
    chains = chains_of(expr, storage_vars)
    given = list(order) if order is not None else None
    if given is not None:
        placed = set(given)
        missing = [v for v in _first_use(expr) if v not in placed]
        if missing:
            raise UnrealisableOrder(f"order {_shown(given)} does not place variable(s) {', '.join(missing)}", loc)
    p = NestPlan(tuple(_root_order(expr, out_vars, chains, given, loc)))
    for v in p.root_nest:
        p.owner[v] = expr
    p.expr = _Nests(p, chains, storage_vars, given, loc).assign(expr, p.root_nest, top=True)
    _bound(p)
    for v in p.root_nest:
        p.owner[v] = p.expr
    return p


def _restricted(chains: dict[str, list[str]], vs: set[str]) -> dict[str, list[str]]:
    """The storage chains over the variables `vs` (those with an order to keep)."""
    return {t: r for t, c in chains.items() if len(r := [v for v in c if v in vs]) > 1}


def _root_order(
    expr: Expr, out_vars: tuple[str, ...], chains: dict[str, list[str]], given: list[str] | None, loc: str | None
) -> list[str]:
    """Phase 1: the root nest: the given order over the root's variables (checked: a root
    reduction needs a spacc of order 1 or 2), else the default order, with Gustavson at the root
    when `_spacc_candidate` asks for it."""
    root_vars = set(out_vars) | (set(expr.vars) if isinstance(expr, Reduce) else set())
    root_list = [v for v in _first_use(expr) if v in root_vars]
    try:
        order = (
            [v for v in given if v in root_vars]
            if given is not None
            else default_order(out_vars, root_list, _restricted(chains, root_vars), loc)
        )
    except UnsupportedError:
        # Storage orders conflict: pick the default order and let the conflicting tensor be re-laid
        # out (DiscordantError below), rather than giving up.
        order = default_order(out_vars, root_list, {}, loc)
    if given is None and isinstance(expr, Reduce) and len(expr.vars) == 1 and len(out_vars) >= 2:
        outs = [v for v in order if v != expr.vars[0]]
        if _spacc_candidate(expr, outs) is not None:
            # Gustavson at the root: the reduced variable before the last output variable.
            order = outs[:-1] + [expr.vars[0], outs[-1]]
    if given is not None and isinstance(expr, Reduce):
        for v in expr.vars:
            rest = order[order.index(v) + 1 :]
            after = [u for u in rest if u not in expr.vars]  # only reduced variables inside: reduce twice
            if after and (len(after) > 2 or any(u in expr.vars for u in rest)):
                raise UnrealisableOrder(
                    f"order {_shown(given)}: the reduction over {v} would need a sparse "
                    f"accumulator over {len(after)} inner variables (spacc has order 1 or 2)",
                    loc,
                )
    return order


class _Nests:
    """Phase 2: every node's nest, walking the expression DAG from the root (`assign`)."""

    def __init__(self, p: NestPlan, chains, storage_vars, given: list[str] | None, loc: str | None):
        self.p, self.chains, self.storage_vars, self.given, self.loc = p, chains, storage_vars, given, loc
        self._place: dict[str, int] | None = None
        # Every nest recorded, in walk order; a revisited DAG node adds the number of the log span
        # its first visit recorded instead of copying it. A spacc reads its body's span back as a
        # set (`_recorded`): appending to every open body's list was quadratic in the depth.
        self.log: list[tuple[str, ...] | int] = []
        self.spans: list[tuple[int, int]] = []  # span number -> (start, end) in the log
        self.memo: dict[tuple[int, tuple[str, ...], bool], tuple[Expr, int]] = {}

    @property
    def place(self) -> dict[str, int]:
        """Each variable's place in the given order (a fused decoder's order has thousands)."""
        if self._place is None:
            self._place = _positions(tuple(self.given or ()))
        return self._place

    def record(self, nest: tuple[str, ...]) -> None:
        self.log.append(nest)

    def _recorded(self, start: int, end: int) -> list[tuple[str, ...]]:
        """The distinct nests recorded in log[start:end], spans of revisited nodes expanded."""
        out: dict[tuple[str, ...], None] = {}
        seen: set[int] = set()
        stack = [(start, end)]
        while stack:
            a, b = stack.pop()
            for x in self.log[a:b]:
                if isinstance(x, int):
                    if x not in seen:
                        seen.add(x)
                        stack.append(self.spans[x])
                else:
                    out[x] = None
        return list(out)

    def assign(self, e: Expr, ctx: tuple[str, ...], top: bool = False, masked: bool = False) -> Expr:
        """`assign_once`, once per DAG node and nest: the parser shares subexpressions (a
        softmax reads its row statistics twice), and walking the tree instead grows
        exponentially with the depth of a fused decoder."""
        keep = self.p.keep
        keep.append(e)
        if top or isinstance(e, (Access, Const)):
            out = self.assign_once(e, ctx, top, masked)
            keep.append(out)
            return out
        key = (id(e), ctx, masked)
        hit = self.memo.get(key)
        if hit is None:
            start = len(self.log)
            out = self.assign_once(e, ctx, top, masked)
            keep.append(out)
            self.spans.append((start, len(self.log)))
            self.memo[key] = (out, len(self.spans) - 1)
            return out
        self.log.append(hit[1])  # what the first visit recorded, for the spaccs around this one
        return hit[0]

    def assign_once(self, e: Expr, ctx: tuple[str, ...], top: bool = False, masked: bool = False) -> Expr:
        if isinstance(e, Access):
            return self._access(e, ctx)
        if isinstance(e, Call):
            # under a mask the consumer visits only the mask's nonzeros: keep inner-product order
            out: Expr = Call(
                e.op,
                tuple(self.assign(a, ctx, masked=masked or (e.op == "mask" and i == 0)) for i, a in enumerate(e.args)),
            )
            self.p.value_nest[id(out)] = ctx
            return out
        if isinstance(e, Reduce):
            if top:
                return self._root_reduction(e, ctx)
            fv = free_vars(e)
            ordered = [v for v in ctx if v in fv]
            if self.given is not None:
                spacc = _follow_order(e, ordered, self.given, self.place, masked, self.loc, self.p.renamed)
            else:
                spacc = None if masked else _spacc_candidate(e, ordered)
            if spacc is not None:
                return self._gustavson(e, ctx, ordered, masked)
            return self._hoisted(e, ctx, fv, masked)
        self.p.value_nest[id(e)] = ctx
        return e

    def _access(self, e: Access, ctx: tuple[str, ...]) -> Access:
        """A tensor read in nest `ctx`: its storage order must follow the nest."""
        p, loc = self.p, self.loc
        p.value_nest[id(e)] = ctx
        missing = [v for v in e.vars if v not in ctx and v != UNIT]
        if missing:
            raise UnsupportedError(f"internal: {e.tensor} uses {missing} outside their loops", loc)
        pos = {v: i for i, v in enumerate(ctx)}
        sv = self.storage_vars(e)
        if any(pos[a] > pos[b] for a, b in zip(sv, sv[1:])):
            wanted = tuple(sorted(range(len(e.vars)), key=lambda m: pos.get(e.vars[m], -1)))
            raise DiscordantError(
                f"tensor {e.tensor} would be traversed against its storage order ({', '.join(sv)}) in the "
                f"loop nest ({', '.join(ctx)}); store it in another mode order or split the region here",
                loc,
                e.tensor,
                wanted,
                e.use,
            )
        if p.access_nest.get(e, ctx) != ctx:
            raise SharedInTwoNests(f"{e.tensor} read in loop nests {p.access_nest[e]} and {ctx}", loc)
        p.access_nest[e] = ctx
        self.record(ctx)
        return e

    def _root_reduction(self, e: Reduce, ctx: tuple[str, ...]) -> Reduce:
        body = self.assign(e.body, ctx)
        out = Reduce(e.kind, e.vars, body)
        self.p.value_nest[id(out)] = tuple(v for v in ctx if v not in e.vars)
        self.p.body_nest[id(out)] = ctx
        return out

    def _gustavson(self, e: Reduce, ctx: tuple[str, ...], ordered: list[str], masked: bool) -> Reduce:
        """Iterate the reduced variable outside the last free one and merge with a sparse
        accumulator, so reductions inside stay hoisted instead of recomputed."""
        p = self.p
        a = ordered[-1]
        a2 = f"{a}_{e.vars[0]}"
        p.renamed[a2] = p.renamed.get(a, a)  # always the original variable
        e2 = Reduce(e.kind, e.vars, rename(e.body, {a: a2}))
        prefix = ctx[: ctx.index(a)]
        body_nest = prefix + (e.vars[0], a2)
        start = len(self.log)
        body = self.assign(e2.body, body_nest, masked=masked)
        inside = [body_nest, *self._recorded(start, len(self.log))]
        self.record(body_nest)
        out = Reduce(e.kind, e.vars, body)
        p.spacc_nests[id(out)] = inside
        p.value_nest[id(out)] = prefix + (a,)
        p.body_nest[id(out)] = body_nest
        p.spacc[id(out)] = (a, a2)
        p.owner[e.vars[0]] = out
        p.owner[a2] = out
        return out

    def _hoisted(self, e: Reduce, ctx: tuple[str, ...], fv: frozenset, masked: bool) -> Reduce:
        """Hoist to the shortest prefix of the nest holding every free variable: computed once
        there and repeated along the loops inside (a degree under a feature loop)."""
        p, given = self.p, self.given
        inner = ctx[: max((ctx.index(v) + 1 for v in fv), default=0)]
        rv = (
            list(e.vars)
            if len(e.vars) == 1
            else [v for v in given if v in e.vars]
            if given is not None
            else default_order([], list(e.vars), _restricted(self.chains, set(e.vars)), self.loc)
        )
        body_nest = inner + tuple(rv)
        self.record(body_nest)
        body = self.assign(e.body, body_nest, masked=masked)
        out = Reduce(e.kind, e.vars, body)
        p.value_nest[id(out)] = inner
        p.body_nest[id(out)] = body_nest
        for v in e.vars:
            p.owner[v] = out
        return out


def _bound(p: NestPlan) -> None:
    """Phase 3: the variables reduced inside every node (`NestPlan.bound`)."""

    def bound_of(e: Expr) -> frozenset:
        if id(e) in p.bound:
            return p.bound[id(e)]
        if isinstance(e, Reduce):
            b = frozenset(e.vars) | bound_of(e.body)
        elif isinstance(e, Call):
            b = frozenset().union(*(bound_of(a) for a in e.args))
        else:
            b = frozenset()
        p.bound[id(e)] = b
        p.keep.append(e)
        return b

    assert p.expr is not None
    bound_of(p.expr)


class SharedInTwoNests(UnsupportedError):
    """A shared (alpha-equivalent) subexpression would be evaluated in two different loop nests."""


def _shown(order: Sequence[str], most: int = 12) -> str:
    """An order for a message: its first variables, and how many there are when it is long."""
    if len(order) <= most:
        return ",".join(order)
    return f"{','.join(order[:most])},... ({len(order)} variables)"


class UnrealisableOrder(UnsupportedError):
    """A dataflow order this lowering cannot build (e.g. an outer-product spacc nested in a region)."""


@functools.lru_cache(maxsize=16)
def _positions(order: tuple[str, ...]) -> dict[str, int]:
    """Each variable's place in `order` (shared by the plans of one order search: read only)."""
    return {v: k for k, v in enumerate(order)}


def _follow_order(
    e: Reduce,
    ordered: list[str],
    given: list[str],
    places: dict[str, int],
    masked: bool,
    loc: str | None,
    renamed: dict[str, str],
) -> str | None:
    """The Gustavson variable a nested reduction must use under the given order, or None for an
    inner product; raises when the order asks for a dataflow the lowering does not build. A
    variable renamed for an enclosing spacc sits where its original does in the order."""

    def place(v: str) -> int:
        return places[renamed.get(v, v)]

    local = sorted(set(ordered) | set(e.vars), key=place)
    at = {v: k for k, v in enumerate(local)}
    if all(at[r] > at[f] for r in e.vars for f in ordered):
        return None
    if masked or e.kind != "sum" or len(e.vars) != 1 or len(ordered) < 1 or local[-2] != e.vars[0]:
        raise UnrealisableOrder(
            f"order {_shown(given)}: the reduction over {','.join(e.vars)} would need an "
            "outer-product accumulation the lowering does not build here",
            loc,
        )
    if len(ordered) < 2:
        raise UnrealisableOrder(
            f"order {_shown(given)}: the sparse accumulation over {e.vars[0]} "
            "does not line up with its consumer's loop nest",
            loc,
        )
    return ordered[-1]


def _spacc_candidate(e: Reduce, ordered: list[str]):
    """Whether a nested sum is better accumulated (Gustavson) than computed per output (inner
    product): it has one reduced variable and at least two free ones, and a reduction inside it
    depends on the reduced variable but not on the last free variable a (inner-product order
    would recompute it for every output coordinate). Its output joins the consumer at a; the
    consumer's loops above a that the sum does not use (i over ``(A @ X)[l, :]`` in a second
    layer) stay outside it: it is regenerated per iteration of them, FuseFlow's cost of fusing
    across a reduction, but accumulated once there, not recomputed per output."""
    if e.kind != "sum" or len(e.vars) != 1 or len(ordered) < 2:
        return None  # a per-row statistic (one free variable) is better hoisted
    a = ordered[-1]
    k = e.vars[0]
    for r in _inner_reductions(e.body):
        fv = free_vars(r)
        if k in fv and a not in fv:
            return a
    # Without inner reductions, Gustavson still avoids an inner product per output coordinate
    # whenever the output variable is reached through the reduced one (a row of B per k).
    return a if GUSTAVSON_ALWAYS else None


GUSTAVSON_ALWAYS = True


def _first_use(e: Expr) -> list[str]:
    out: list[str] = []
    seen: set[int] = set()

    def walk(x):
        if id(x) in seen:  # a shared subexpression adds no variable the first visit did not
            return
        seen.add(id(x))
        if isinstance(x, Access):
            out.extend(v for v in x.vars if v not in out and v != UNIT)
        elif isinstance(x, Call):
            for a in x.args:
                walk(a)
        elif isinstance(x, Reduce):
            walk(x.body)
            out.extend(v for v in x.vars if v not in out)

    walk(e)
    return out


__all__ = ["NestPlan", "UnrealisableOrder", "plan", "free_vars", "binds", "Const"]
