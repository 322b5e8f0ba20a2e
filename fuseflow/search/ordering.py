"""Dataflow-order search of a fusion region (docs/architecture.md, "Design: lowering"): enumerate, estimate, choose.

A region's dataflow order is one total order of all its index variables; every reduction
follows its restriction (see `nests.plan`). The search space is every order the lowering can
build: first those concordant with the tensors' storage orders (the topological orders of the
partial order they impose), then the discordant ones, each naming the tensors it re-lays out.
Orders that lead to the same loop nests are listed once. The static estimate needs no
simulation: it counts coordinates visited per loop level under a uniform-random model of each
tensor's density, plus the cost of re-laying out a tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import networkx as nx

from fuseflow.analysis.index_notation import (
    UNIT,
    Access,
    Assign,
    Call,
    Const,
    Expr,
    Reduce,
    accesses,
)
from fuseflow.analysis.nests import NestPlan, free_vars, plan, rename
from fuseflow.analysis.storage_order import storage_vars
from fuseflow.errors import FuseflowError, UnsupportedError
from fuseflow.primitives import ALU

DEFAULT_CAP = 64
"""Orders listed per region unless the caller asks for more."""
SCAN_LIMIT = 50
"""Permutations examined per listed order before giving up (large regions have n! orders)."""
MAX_SEARCH_VARS = 48
"""A region with more index variables is not searched: its only candidate is the default order."""


@dataclass(frozen=True)
class Estimate:
    """Static cost of one order: coordinates visited, ALU ops, bytes read, re-layout moves."""

    visits: float
    flops: float
    bytes: float
    relayout: float

    @property
    def cost(self) -> float:
        """One number to rank orders: every visited coordinate and re-laid entry costs a cycle."""
        return self.visits + self.relayout


@dataclass(frozen=True)
class Candidate:
    """One enumerated order of a region."""

    index: int
    order: tuple[str, ...]
    relayouts: tuple[str, ...]  # tensors stored against this order (re-laid out, cost counted)
    estimate: Estimate
    alternatives: tuple[Candidate, ...] = ()  # set on a choice: every enumerated order of the region
    cycles: float | None = None  # the cycle model's prediction, when the ranker lowered this order
    simulated: int | None = None  # simulated cycles, when the ranker verified this order (rank.py)

    @property
    def name(self) -> str:
        """The order as users write it, ``i,k,j``."""
        return ",".join(self.order)


@dataclass
class RegionVars:
    """What the search needs of a region: its assignments, and each tensor's format and density."""

    name: str
    assigns: list[Assign]
    mode_order: Callable[[str], Sequence[int]]
    levels: Callable[[str], Sequence[str]]
    density: Mapping[str, float] = field(default_factory=dict)

    @property
    def loc(self) -> str | None:
        """The source location of the region's first assignment that has one (for diagnostics)."""
        return next((a.loc for a in self.assigns if a.loc), None)

    @property
    def variables(self) -> list[str]:
        """Every index variable of the region, in first-use order."""
        out: dict[str, None] = {}
        reduced: set[int] = set()  # DAG nodes walked (a node met again adds no new variable)
        read: set[int] = set()
        for a in self.assigns:
            out.update(dict.fromkeys(a.vars))
            out.update(dict.fromkeys(_reduced(a.expr, reduced)))
            out.update(dict.fromkeys(u for acc in accesses(a.expr, read) for u in acc.vars))
        out.pop(UNIT, None)
        return list(out)

    def dims(self) -> dict[str, int]:
        """Each index variable's extent."""
        d: dict[str, int] = {}
        for a in self.assigns:
            d.update(a.dims)
        return d

    def edges(self) -> list[tuple[str, str, str]]:
        """(before, after, tensor) for consecutive storage levels of every access."""
        out: list[tuple[str, str, str]] = []
        for a in self.assigns:
            for acc in accesses(a.expr):
                chain = [v for v in storage_vars(acc.vars, self.mode_order(acc.tensor)) if v != UNIT]
                out.extend((x, y, acc.tensor) for x, y in zip(chain, chain[1:]))
        return out


def _reduced(e: Expr, seen: set[int] | None = None) -> list[str]:
    """Reduced variables of `e` in preorder; with `seen`, each DAG node is walked once."""
    if seen is not None:
        if id(e) in seen:
            return []
        seen.add(id(e))
    if isinstance(e, Reduce):
        return list(e.vars) + _reduced(e.body, seen)
    if isinstance(e, Call):
        return [v for x in e.args for v in _reduced(x, seen)]
    return []


def _reduced_set(e: Expr, memo: dict | None = None) -> frozenset[str]:
    """Every variable reduced somewhere in `e` (a DAG: each shared node is visited once)."""
    memo = {} if memo is None else memo
    key = id(e)
    if key not in memo:
        if isinstance(e, Reduce):
            memo[key] = frozenset(e.vars) | _reduced_set(e.body, memo)
        elif isinstance(e, Call):
            memo[key] = frozenset().union(*(_reduced_set(x, memo) for x in e.args))
        else:
            memo[key] = frozenset()
    return memo[key]


_REDUCED: dict[int, tuple[Expr, frozenset[str]]] = {}


def _reduced_of(a: Assign) -> frozenset[str]:
    """`_reduced_set` of an assignment's expression, computed once per expression object."""
    hit = _REDUCED.get(id(a.expr))
    if hit is None or hit[0] is not a.expr:
        hit = _REDUCED[id(a.expr)] = (a.expr, _reduced_set(a.expr))
    return hit[1]


def linear_extensions(items: Sequence[str], edges: Sequence[tuple[str, str]]) -> Iterator[tuple[str, ...]]:
    """Every total order of `items` respecting `edges`, lexicographic in the order of `items`.

    Cyclic edges (two storage orders that disagree: x(i,j) and its transpose x(j,i)) have no
    extension; they are detected first, since the search below would otherwise try every prefix
    of the other variables (factorial time) before finding none."""
    preds = {v: {a for a, b in edges if b == v and a in items} for v in items}
    if not _acyclic(items, preds):
        return

    def rec(prefix: list[str], left: list[str]):
        if not left:
            yield tuple(prefix)
            return
        placed = set(prefix)
        for v in left:
            if preds[v] <= placed:
                prefix.append(v)
                yield from rec(prefix, [u for u in left if u != v])
                prefix.pop()

    yield from rec([], list(items))


def _acyclic(items: Sequence[str], preds: dict[str, set[str]]) -> bool:
    placed: set[str] = set()
    left = list(items)
    while left:
        ready = [v for v in left if preds[v] <= placed]
        if not ready:
            return False
        placed.update(ready)
        left = [v for v in left if v not in placed]
    return True


def _order_views(a: Assign) -> list[frozenset[str]]:
    """The variable sets whose relative order `nests.plan` reads from a given order: the root
    nest's variables, and each reduction's free and reduced variables (`_follow_order`, the
    order of a hoisted reduction's variables). Two orders that agree on each of these sets
    have the same plan, so the order search plans one of them only."""
    root = frozenset(v for v in a.vars if v != UNIT)
    if isinstance(a.expr, Reduce):
        root |= frozenset(a.expr.vars)
    out = {root}
    seen: set[int] = set()
    stack: list[Expr] = [a.expr]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Reduce):
            out.add(free_vars(x) | frozenset(x.vars))
            stack.append(x.body)
        elif isinstance(x, Call):
            stack.extend(x.args)
    return sorted(out, key=sorted)


def _plans(rv: RegionVars, order: Sequence[str], cache: dict | None = None) -> list[NestPlan]:
    """Loop nests of every assignment under `order`, ignoring storage orders (re-layouts are
    counted separately); raises UnsupportedError when the order cannot be built. `cache` keeps
    each assignment's plan under the restrictions of the order that decide it (`_order_views`):
    many orders of a region agree on them (the order of two variables that never meet in one
    nest or reduction does not matter), and a region with several outputs agrees on most."""
    out = []
    for i, a in enumerate(rv.assigns):
        red = _reduced_of(a)
        sub = tuple(v for v in order if v in a.dims or v in red)
        key = None
        hit = None
        if cache is not None:
            views = cache.get(("views", i))
            if views is None:
                views = cache[("views", i)] = _order_views(a)
            at = {v: k for k, v in enumerate(sub)}
            key = (i, tuple([tuple(sorted([v for v in s if v in at], key=at.__getitem__)) for s in views]))
            hit = cache.get(key)
        if hit is None:
            try:
                hit = plan(a.expr, tuple(v for v in a.vars if v != UNIT), lambda acc: [], a.loc, list(sub))
            except UnsupportedError as e:
                hit = e
            if cache is not None:
                cache[key] = hit
        if isinstance(hit, UnsupportedError):
            raise hit.with_traceback(None)
        out.append(hit)
    return out


def _signature(plans: list[NestPlan]) -> tuple:
    return tuple(
        (p.root_nest, tuple(sorted(p.body_nest.values())), tuple(sorted(set(p.access_nest.values())))) for p in plans
    )


def _relayouts(rv: RegionVars, plans: list[NestPlan]) -> tuple[str, ...]:
    out: list[str] = []
    for p in plans:
        for acc, nest in p.access_nest.items():
            pos = {v: i for i, v in enumerate(nest)}
            chain = [v for v in storage_vars(acc.vars, rv.mode_order(acc.tensor)) if v != UNIT]
            if any(pos[x] > pos[y] for x, y in zip(chain, chain[1:])) and acc.tensor not in out:
                out.append(acc.tensor)
    return tuple(out)


class _Density:
    """P(an expression is nonzero at a point whose bound variables are `bound`), uniform-random model."""

    def __init__(self, rv: RegionVars, dims: Mapping[str, int]):
        self.rv, self.dims = rv, dims
        self.memo: dict[tuple[int, frozenset], tuple[Expr, float]] = {}  # the expressions are DAGs

    def dim(self, v: str) -> int:
        return self.dims.get(v, 1)

    def of(self, e: Expr, bound: frozenset) -> float:
        """The density of `e` (memoised per node and bound variables)."""
        if isinstance(e, (Call, Reduce)):
            hit = self.memo.get((id(e), bound))
            if hit is not None and hit[0] is e:
                return hit[1]
            out = self._of(e, bound)
            self.memo[(id(e), bound)] = (e, out)
            return out
        return self._of(e, bound)

    def _of(self, e: Expr, bound: frozenset) -> float:
        if isinstance(e, Access):
            d = self.rv.density.get(e.tensor, 1.0)
            free = math.prod(self.dim(v) for v in e.vars if v != UNIT and v not in bound)
            return min(1.0, d * free)
        if isinstance(e, Const):
            return 0.0 if e.value == 0 else 1.0
        if isinstance(e, Call):
            fs = [self.of(a, bound) for a in e.args]
            zeros = ALU[e.op].zeros if e.op in ALU else "dense"
            if zeros == "product":
                return math.prod(fs)
            if zeros == "first":
                return fs[0]
            if zeros == "union":
                return 1.0 - math.prod(1.0 - f for f in fs)
            return 1.0
        if isinstance(e, Reduce):
            return self.of(e.body, bound - set(e.vars))
        return 1.0


def estimate(rv: RegionVars, plans: list[NestPlan], relayouts: Sequence[str]) -> Estimate:
    """Coordinates visited at every loop level of every nest (shared prefixes counted once),
    one ALU op per operator per innermost point, bytes of every value and coordinate read."""
    dims = rv.dims()
    visits = flops = nbytes = 0.0
    ops: dict[int, tuple[Expr, int]] = {}
    for _, p in zip(rv.assigns, plans):
        dens = _Density(rv, {**dims, **{k: dims[v] for k, v in p.renamed.items() if v in dims}})
        nests: dict[tuple[str, ...], Expr] = {}
        assert p.expr is not None  # a plan always holds its expression
        _collect(p.expr, p, nests)
        seen: dict[tuple[str, ...], float] = {}
        renamed: dict = {}  # one renaming per plan: nests share bodies, and `dens` memoises by node
        for nest, body in nests.items():
            plain = _unrename(body, p, renamed)
            for k in range(1, len(nest) + 1):
                pre = nest[:k]
                bound = frozenset(p.renamed.get(v, v) for v in pre) | frozenset(pre)
                pts = math.prod(dens.dim(v) for v in pre) * dens.of(plain, bound)
                seen[pre] = max(seen.get(pre, 0.0), pts)
            full = seen.get(nest, 1.0)  # an empty nest (a scalar) is one point
            flops += full * max(1, _ops(body, ops))
        visits += sum(seen.values())
        for _, nest in p.access_nest.items():
            nbytes += 8.0 * seen.get(nest, 0.0)
    moved = 0.0
    shapes = _shapes(rv, dims) if relayouts else {}
    for t in relayouts:
        nnz = rv.density.get(t, 1.0) * math.prod(shapes.get(t, [1]))
        moved += 2.0 * nnz * max(1.0, math.log2(max(nnz, 2.0)))
    return Estimate(visits, flops, nbytes, moved)


def _shapes(rv: RegionVars, dims: Mapping[str, int]) -> dict[str, list[int]]:
    """Each tensor's shape as its first access in the region reads it."""
    out: dict[str, list[int]] = {}
    read: set[int] = set()
    for a in rv.assigns:
        for acc in accesses(a.expr, read):
            if acc.tensor not in out:
                out[acc.tensor] = [dims.get(v, 1) for v in acc.vars if v != UNIT]
    return out


def _collect(e: Expr, p: NestPlan, out: dict) -> None:
    """The root's nest and every reduction's body nest, with the expression evaluated there."""
    out.setdefault(p.root_nest, e.body if isinstance(e, Reduce) else e)
    stack = [e.body if isinstance(e, Reduce) else e]
    while stack:
        x = stack.pop()
        if isinstance(x, Reduce):
            out.setdefault(p.body_nest[id(x)], x.body)
            stack.append(x.body)
        elif isinstance(x, Call):
            stack.extend(x.args)


def _unrename(e: Expr, p: NestPlan, memo: dict) -> Expr:
    """`e` with the plan's renamed variables back to their originals (`memo`: one per plan)."""

    return rename(e, p.renamed, memo) if p.renamed else e


def _ops(e: Expr, memo: dict[int, tuple[Expr, int]]) -> int:
    """Operators of `e` as a tree (a shared subexpression counts at each use)."""
    if not isinstance(e, (Call, Reduce)):
        return 0
    hit = memo.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    n = 1 + (sum(_ops(a, memo) for a in e.args) if isinstance(e, Call) else _ops(e.body, memo))
    memo[id(e)] = (e, n)
    return n


def enumerate_orders(rv: RegionVars, cap: int = DEFAULT_CAP) -> list[Candidate]:
    """Distinct buildable orders: concordant ones first, then discordant ones; at most `cap`."""
    vars_ = rv.variables
    storage = [(a, b) for a, b, _ in rv.edges()]
    out: list[Candidate] = []
    seen: set = set()
    budget = SCAN_LIMIT * max(cap, 1)
    cache: dict = {}

    def consider(order: tuple[str, ...]) -> None:
        try:
            plans = _plans(rv, order, cache)
        except UnsupportedError:
            return
        sig = _signature(plans)
        if sig in seen:
            return
        seen.add(sig)
        rel = _relayouts(rv, plans)
        out.append(Candidate(len(out), order, rel, estimate(rv, plans, rel)))

    default = _default_order(rv)
    if default is not None:  # the lowering's own choice is always a candidate, however many variables
        consider(default)
    if len(vars_) > MAX_SEARCH_VARS:
        return out
    examined = 0
    for concordant in (True, False):
        source = linear_extensions(vars_, storage) if concordant else linear_extensions(vars_, [])
        for order in source:
            if len(out) >= cap or examined >= budget:
                return out
            examined += 1
            if not concordant and _is_concordant(order, storage):
                continue
            consider(order)
    return out


def _default_order(rv: RegionVars) -> tuple[str, ...] | None:
    """A total order reproducing the nests the lowering picks without an order (None if the
    default nests of different assignments disagree)."""
    first = {v: k for k, v in enumerate(rv.variables)}
    g = nx.DiGraph()
    g.add_nodes_from(first)
    for a in rv.assigns:
        try:
            p = plan(a.expr, tuple(v for v in a.vars if v != UNIT), lambda acc: [], a.loc, None)
        except UnsupportedError:
            return None
        for nest in [p.root_nest, *p.body_nest.values(), *p.access_nest.values()]:
            names = [p.renamed.get(v, v) for v in nest if v != UNIT]
            g.add_edges_from((x, y) for x, y in zip(names, names[1:]) if x in g and y in g)
    try:
        return tuple(nx.lexicographical_topological_sort(g, key=first.__getitem__))
    except nx.NetworkXUnfeasible:
        return None


def fallback_orders(rv: RegionVars, order: Sequence[str]) -> list[tuple[str, ...]]:
    """Orders to try when `order` cannot be lowered, most natural first:

    - *nested*: the region's output variables first, and every reduction's variables before
      those of the reductions inside its body (``sum_n(sum_p(...))``: n before p), the rest in
      `order`'s sequence;
    - the output variables hoisted to the front (all but the innermost, then all).

    A large fused region (GAT's attention with its linear transform inlined: 23-39 variables,
    one enumerated order) can otherwise end with a reduction placed outside one that encloses it,
    or a head variable after the channel sums that read it."""
    outs: list[str] = []
    for a in rv.assigns:
        outs.extend(v for v in a.vars if v != UNIT and v not in outs)
    found: list[tuple[str, ...]] = []

    def add(o: tuple[str, ...] | None) -> None:
        if o is not None and o != tuple(order) and o not in found and set(o) == set(order):
            found.append(o)

    add(_nested_order(rv, order, outs))
    for head in (outs[:-1], outs):
        add(tuple(head) + tuple(v for v in order if v not in head))
    return found


def _nested_order(rv: RegionVars, order: Sequence[str], outs: list[str]) -> tuple[str, ...] | None:
    """`order` re-sorted so that outputs come first and each reduction precedes those nested in
    it (None when the constraints form a cycle)."""
    inner: dict[int, frozenset[str]] = {}
    edges: set[tuple[str, str]] = set()

    def walk(e: Expr) -> frozenset[str]:
        key = id(e)
        if key in inner:
            return inner[key]
        if isinstance(e, Reduce):
            below = walk(e.body)
            edges.update((v, w) for v in e.vars for w in below if v != w)
            got = below | frozenset(e.vars)
        elif isinstance(e, (Access, Const)):
            got = frozenset()
        else:
            got = frozenset().union(*(walk(x) for x in e.args)) if e.args else frozenset()
        inner[key] = got
        return got

    for a in rv.assigns:
        for w in walk(a.expr):
            edges.update((o, w) for o in outs if o != w)
    pos = {v: i for i, v in enumerate(order)}
    g = nx.DiGraph()
    g.add_nodes_from(order)
    g.add_edges_from((x, y) for x, y in edges if x in pos and y in pos)
    try:
        return tuple(nx.lexicographical_topological_sort(g, key=lambda v: (v not in outs, pos[v])))
    except nx.NetworkXUnfeasible:
        return None


def _is_concordant(order: Sequence[str], edges: Sequence[tuple[str, str]]) -> bool:
    pos = {v: i for i, v in enumerate(order)}
    return all(pos[a] < pos[b] for a, b in edges)


def choose(rv: RegionVars, spec: str, cap: int = DEFAULT_CAP) -> Candidate:
    """`auto` (lowest static estimate), `K` (the K-th enumerated order) or `i,k,j` (named)."""
    spec = spec.strip()
    if spec == "auto":
        cands = enumerate_orders(rv, cap)
        if not cands:
            raise UnsupportedError(f"region {rv.name}: no buildable dataflow order", rv.loc)
        best = min(cands, key=lambda c: (c.estimate.cost, c.index))
        return replace(best, alternatives=tuple(cands))
    if spec.isdigit():
        cands = enumerate_orders(rv, max(cap, int(spec) + 1))
        k = int(spec)
        if k >= len(cands):
            raise FuseflowError(
                f"region {rv.name}: order={k} but the region has {len(cands)} enumerated orders (0..{len(cands) - 1})",
                rv.loc,
            )
        return replace(cands[k], alternatives=tuple(cands))
    names = [v.strip() for v in spec.split(",") if v.strip()]
    known = rv.variables
    unknown = [v for v in names if v not in known]
    if unknown:
        raise FuseflowError(
            f"region {rv.name}: order names unknown index variable(s) {', '.join(unknown)}; "
            f"the region's variables are {', '.join(known)}",
            rv.loc,
        )
    missing = [v for v in known if v not in names]
    if missing:
        raise FuseflowError(
            f"region {rv.name}: order {spec} leaves out {', '.join(missing)}; "
            f"name every variable of {', '.join(known)}",
            rv.loc,
        )
    plans = _plans(rv, names)
    rel = _relayouts(rv, plans)
    return Candidate(-1, tuple(names), rel, estimate(rv, plans, rel))


def estimate_density(rv: RegionVars, a: Assign) -> float:
    """Expected fraction of nonzeros of an assignment's output (for the regions that read it)."""
    dims = rv.dims()
    return _Density(rv, dims).of(a.expr, frozenset(v for v in a.vars if v != UNIT))
