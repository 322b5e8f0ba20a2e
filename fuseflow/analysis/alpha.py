"""Share reductions that differ only in the names of their bound variables.

The parser names every reduction's variables afresh, so a softmax's row max appears twice
(``max_m`` for the numerator, ``max_r`` inside the denominator's sum) and would be lowered
twice. Renaming the second to the first's names makes the two subtrees equal, so the builder's
hash-consing emits one subgraph and both consumers read it.

Keys are built bottom-up once per distinct subexpression (`AlphaKeys`): a bound variable is
named by how many binders up its own binder sits and its place there (de Bruijn indices), so
a subexpression's key does not depend on the binders around it, and a fused decoder's
reductions, nested hundreds deep, are not keyed again under each enclosing one.
"""

from __future__ import annotations

from fuseflow.analysis.index_notation import Access, Call, Expr, Reduce


class AlphaKeys:
    """Alpha-equivalence classes of reductions, as small integers: two reductions get the same
    number exactly when they are equal up to the names of the variables they bind (free
    variables keep their names). One instance numbers consistently across calls."""

    def __init__(self) -> None:
        self._shapes: dict[tuple, int] = {}  # a node's structure (children as numbers) -> number
        self._keys: dict[tuple, int] = {}  # a node's alpha key (children as numbers) -> number
        # id(node) -> (node, structure number, free variables sorted); the node keeps its id unique
        self._nodes: dict[int, tuple[Expr, int, tuple[str, ...]]] = {}
        self._memo: dict[tuple[int, tuple], int] = {}  # (structure, binders of its free variables) -> key

    def of(self, e: Expr) -> int:
        """The alpha-equivalence class of `e` (a reduction, or any subexpression: its free
        variables keep their names, so one class is one value over the same axes)."""
        return self._key(e, {}, 0)

    def _shape(self, e: Expr) -> tuple[int, tuple[str, ...]]:
        """A number for `e`'s structure (equal subtrees, distinct objects: one number) and its
        free variables."""
        hit = self._nodes.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1], hit[2]
        if isinstance(e, Access):
            shape: tuple = ("A", e.tensor, e.vars)  # uses are views of one tensor
            free: tuple[str, ...] = tuple(sorted(set(e.vars)))
        elif isinstance(e, Call):
            parts = [self._shape(a) for a in e.args]
            shape = ("C", e.op, tuple(n for n, _ in parts))
            free = tuple(sorted({v for _, f in parts for v in f}))
        elif isinstance(e, Reduce):
            n, f = self._shape(e.body)
            shape = ("R", e.kind, e.vars, n)
            free = tuple(v for v in f if v not in e.vars)
        else:
            shape, free = ("K", e), ()
        number = self._shapes.setdefault(shape, len(self._shapes))
        self._nodes[id(e)] = (e, number, free)
        return number, free

    def _key(self, e: Expr, env: dict[str, tuple[int, int]], depth: int) -> int:
        """`e`'s key under binders `env` (variable -> (depth of its binder's body, place)) at
        binder depth `depth`; memoised on `e`'s structure and its free variables' binders
        relative to `e`."""
        shape, free = self._shape(e)
        around = tuple((depth - env[v][0], env[v][1]) if v in env else None for v in free)
        hit = self._memo.get((shape, around))
        if hit is not None:
            return hit
        if isinstance(e, Access):
            key: tuple = ("A", e.tensor, tuple((depth - env[v][0], env[v][1]) if v in env else v for v in e.vars))
        elif isinstance(e, Call):
            key = ("C", e.op, tuple(self._key(a, env, depth) for a in e.args))
        elif isinstance(e, Reduce):
            inner = dict(env)
            for place, v in enumerate(e.vars):
                inner[v] = (depth + 1, place)
            key = ("R", e.kind, tuple(inner[v][1] for v in e.vars), self._key(e.body, inner, depth + 1))
        else:
            key = ("K", e)
        number = self._keys.setdefault(key, len(self._keys))
        self._memo[(shape, around)] = number
        return number


def share_equivalent(e: Expr, apart: frozenset[int] = frozenset(), keys: AlphaKeys | None = None) -> Expr:
    """`e` with every reduction replaced by the first alpha-equivalent one met (bottom-up);
    `e` itself when nothing is shared. Reductions whose class (`keys.of`) is in `apart` keep
    one copy per use. The caller must check that each shared reduction is evaluated in one loop
    nest (`nests.SharedInTwoNests`)."""
    keys = AlphaKeys() if keys is None else keys
    seen: dict[int, Reduce] = {}
    shared = [False]
    met: dict[int, Reduce] = {}  # id(reduction of `e`) -> what it became, unless kept apart

    def walk(x: Expr) -> Expr:
        if isinstance(x, Call):
            return Call(x.op, tuple(walk(a) for a in x.args))
        if isinstance(x, Reduce):
            again = met.get(id(x))
            if again is not None:  # one object read twice: its first visit's result, shared
                shared[0] = True
                return again
            k = keys.of(x)  # sharing inside x swaps equivalents: x's class is its result's
            r = Reduce(x.kind, x.vars, walk(x.body))
            if k in apart:
                return r
            if k in seen:
                shared[0] = True
                r = seen[k]
            else:
                seen[k] = r
            met[id(x)] = r
            return r
        return x

    out = walk(e)
    return out if shared[0] else e
