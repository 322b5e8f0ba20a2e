"""Share reductions that differ only in the names of their bound variables.

The parser names every reduction's variables afresh, so a softmax's row max appears twice
(``max_m`` for the numerator, ``max_r`` inside the denominator's sum) and would be lowered
twice. Renaming the second to the first's names makes the two subtrees equal, so the builder's
hash-consing emits one subgraph and both consumers read it.
"""

from __future__ import annotations

from fuseflow.analysis.index_notation import Access, Call, Expr, Reduce


def _key(e: Expr, env: dict[str, str]) -> tuple:
    """Structure of `e` with bound variables numbered by binding depth (free ones kept)."""
    if isinstance(e, Access):
        return ("A", e.tensor, tuple(env.get(v, v) for v in e.vars))  # uses are views of one tensor
    if isinstance(e, Call):
        return ("C", e.op, tuple(_key(a, env) for a in e.args))
    if isinstance(e, Reduce):
        inner = dict(env)
        for v in e.vars:
            inner[v] = f"#{len(inner)}"
        return ("R", e.kind, tuple(inner[v] for v in e.vars), _key(e.body, inner))
    return ("K", e)


def alpha_key(r: Reduce) -> tuple:
    """A reduction's identity up to the names of its bound variables."""
    return _key(r, {})


def share_equivalent(e: Expr, apart: frozenset[tuple] = frozenset()) -> Expr:
    """`e` with every reduction replaced by the first alpha-equivalent one met (bottom-up);
    `e` itself when nothing is shared. Reductions whose `alpha_key` is in `apart` keep one copy
    per use. The caller must check that each shared reduction is evaluated in one loop nest
    (`nests.SharedInTwoNests`)."""
    seen: dict[tuple, Reduce] = {}
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
            r = Reduce(x.kind, x.vars, walk(x.body))
            k = _key(r, {})
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
