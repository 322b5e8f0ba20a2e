"""Loop nests of a fused expression: which index variables each subexpression iterates.

Every node of an index-notation expression is evaluated inside a *nest*: the output variables
(in dataflow order) plus the reduction variables of the reductions around it. A nested reduction
whose free variables are a prefix of its consumer's nest is *hoisted*: computed once per prefix
and its values repeated along the rest (LayerNorm and softmax statistics, no blow-up). Otherwise
it is *recomputed* inside the consumer's nest (an intermediate consumed under a loop it does not
have, e.g. H(j,·) under A's i loop in ``A @ H``: FuseFlow's cost of fusing across a reduction).
The nests of all nodes share prefixes and form a trie: each variable is iterated once, at one
trie node, so streams that meet are aligned by construction.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from fuseflow.errors import DiscordantError, UnsupportedError
from fuseflow.lowering.index_notation import UNIT, Access, Call, Const, Expr, Reduce
from fuseflow.lowering.order import default_order


def free_vars(e: Expr) -> set[str]:
    if isinstance(e, Access):
        return set(e.vars) - {UNIT}
    if isinstance(e, Call):
        return set().union(*(free_vars(a) for a in e.args)) if e.args else set()
    if isinstance(e, Reduce):
        return free_vars(e.body) - set(e.vars)
    return set()


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
    body_nest: dict[int, tuple[str, ...]] = field(default_factory=dict)   # reductions: their body's nest
    owner: dict[str, Expr] = field(default_factory=dict)                  # variable -> expression iterating it
    access_nest: dict[Access, tuple[str, ...]] = field(default_factory=dict)

    def prefixes(self) -> list[tuple[str, ...]]:
        """Every trie node (a nest prefix ending in a variable), parents first."""
        seen: set[tuple[str, ...]] = set()
        for n in [self.root_nest, *self.body_nest.values(), *self.access_nest.values()]:
            for k in range(1, len(n) + 1):
                seen.add(n[:k])
        return sorted(seen, key=len)


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


def plan(expr: Expr, out_vars: tuple[str, ...], storage_vars, loc: str | None,
         root_order: list[str] | None = None) -> NestPlan:
    """Choose the root order and every node's nest; checks concordance of every access."""
    chains = chains_of(expr, storage_vars)

    def restricted(vs: set[str]) -> dict[str, list[str]]:
        return {t: [v for v in c if v in vs] for t, c in chains.items()}

    root_vars = set(out_vars) | (set(expr.vars) if isinstance(expr, Reduce) else set())
    order = root_order or default_order(out_vars, [v for v in _first_use(expr) if v in root_vars],
                                        restricted(root_vars), loc)
    p = NestPlan(tuple(order))
    for v in order:
        p.owner[v] = expr

    def assign(e: Expr, ctx: tuple[str, ...], top: bool = False) -> None:
        p.value_nest[id(e)] = ctx
        if isinstance(e, Access):
            missing = [v for v in e.vars if v not in ctx and v != UNIT]
            if missing:
                raise UnsupportedError(f"internal: {e.tensor} uses {missing} outside their loops", loc)
            pos = {v: i for i, v in enumerate(ctx)}
            sv = storage_vars(e)
            if any(pos[a] > pos[b] for a, b in zip(sv, sv[1:])):
                wanted = tuple(sorted(range(len(e.vars)), key=lambda m: pos.get(e.vars[m], -1)))
                raise DiscordantError(
                    f"tensor {e.tensor} would be traversed against its storage order ({', '.join(sv)}) in the "
                    f"loop nest ({', '.join(ctx)}); store it in another mode order or split the region here",
                    loc, e.tensor, wanted)
            p.access_nest[e] = ctx
        elif isinstance(e, Call):
            for a in e.args:
                assign(a, ctx)
        elif isinstance(e, Reduce):
            if top:
                p.value_nest[id(e)] = tuple(v for v in ctx if v not in e.vars)
                p.body_nest[id(e)] = ctx
                assign(e.body, ctx)
                return
            fv = free_vars(e)
            k = len(fv)
            inner = ctx[:k] if set(ctx[:k]) == fv else ctx  # hoist when free vars are a prefix
            rv = default_order([], list(e.vars), restricted(set(e.vars)), loc)
            body = inner + tuple(rv)
            p.value_nest[id(e)] = inner
            p.body_nest[id(e)] = body
            for v in e.vars:
                p.owner[v] = e
            assign(e.body, body)

    assign(expr, p.root_nest, top=True)
    return p


def _first_use(e: Expr) -> list[str]:
    out: list[str] = []

    def walk(x):
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


__all__ = ["NestPlan", "plan", "free_vars", "binds", "Const"]
