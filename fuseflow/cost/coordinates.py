"""Where a stream's coordinates come from, for the cycle model (`cycle_model.CycleModel`).

A coordinate set met twice (GCN's adjacency read for the degree and again for the edges) must be
intersected with itself as itself, not as an independent set of the same density, and a fiber
reached through a neighbour list has a neighbour's length, not the mean. Streams therefore name
their coordinates' *atoms* (stored levels) and references their origin; `CoordinateOrigins`, the
model's collaborator, holds the rules that create, translate and carry them across regions
(docs/cycle-model.md, "Streams").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import scipy.sparse

from fuseflow.cost.streams import Stream
from fuseflow.cost.tensor_stats import TensorStats

if TYPE_CHECKING:
    from fuseflow.sim.graph import GraphSpec, NodeSpec

Atom = tuple
"""One stored level's coordinate pattern: (tensor identity, level, index variable of each level
down to it). Two streams whose innermost coordinates come from the same atom hold the same
coordinates in every fiber, whatever primitives lie between them."""


class CoordinateOrigins:
    """Atoms, their densities and frequencies, and what each written level's coordinates are,
    for one graph (`spec`) on its inputs' statistics (`stats`): the cycle model's collaborator
    (`CycleModel.coords`), which records what each scan and writer finds."""

    def __init__(self, spec: GraphSpec, stats: Mapping[str, TensorStats]) -> None:
        self.spec, self.stats = spec, stats
        self.atom_p: dict[Atom, float] = {}  # an atom's coordinates per fiber / the fiber's extent
        self.level_freq: dict[tuple, np.ndarray] = {}  # (identity, level, m) -> TensorStats.frequencies
        self.wpatterns: dict[str, dict[int, tuple[frozenset | None, tuple[str, ...]]]] = {}
        self.atom_rows: dict[tuple, scipy.sparse.csr_array | np.ndarray] = {}  # (identity, 1) -> its pattern

    def identity(self, tensor: str | None) -> tuple | None:
        """A stored tensor's identity across regions: its source name and level order."""
        t = self.spec.tensors.get(tensor or "")
        if t is None or t.block or self.spec.block:
            return None
        return (t.copy_of or t.name, tuple(t.fmt.mode_order))

    def deeper(self, ref: tuple | None, node: NodeSpec) -> tuple | None:
        """The reference a scan or locate of `node`'s level emits, given its input reference."""
        if ref is None or node.var is None:
            return None
        ident, level, vs = ref
        if ident is None or ident != self.identity(node.tensor) or level != node.level - 1:
            return None
        return (ident, node.level, vs + (node.var,))

    def level_pattern(self, node: NodeSpec, ref: tuple, p: float) -> frozenset:
        """The atoms of the coordinates a compressed scan emits: the level itself, or, for a
        tensor an earlier region wrote, the atoms its writer's coordinates came from."""
        _ident, level, vs = ref
        st = self.stats.get(node.tensor or "")
        t = self.spec.tensors[node.tensor or ""]
        carried = self.carried(st, tuple(t.fmt.mode_order), level)
        if carried is not None and st is not None:
            out = set()
            for (ident, lvl, placeholders), ap in carried:
                atom = (ident, lvl, tuple(vs[int(v[1:])] for v in placeholders))
                self.atom_p[atom] = ap
                for m in range(lvl + 1):
                    if (ident, lvl, m) in st.level_frequencies:
                        self.level_freq[(ident, lvl, m)] = st.level_frequencies[(ident, lvl, m)]
                out.add(atom)
            return frozenset(out)
        if p >= 1.0 - 1e-9:
            return frozenset()  # every fiber full: no constraint
        atom = ref
        if st is not None and st.structure is not None and st.structure[level] is not None:
            atom = (("structure", st.structure[level]), level, vs)  # one pattern, one atom
        self.atom_p[atom] = p
        for (lvl, m), f in (st.frequencies or {}).items() if st is not None else ():
            self.level_freq[(atom[0], lvl, m)] = f
        if st is not None and st.pattern is not None and level == 1:
            self.atom_rows[(atom[0], 1)] = st.pattern
        return frozenset({atom})

    @staticmethod
    def carried(st: TensorStats | None, order: tuple[int, ...], level: int) -> frozenset | None:
        """A predicted tensor's atoms for `level` as read in `order`, with ``@m`` naming the
        reader's level m. Read as written, each level keeps its own. Read in another order, a
        level holds the stored entries projected onto the reader's levels down to it: the
        conjunction of every atom, when every atom constrains only those levels (the rest of
        the stored levels dense); otherwise unknown."""
        if st is None or not st.patterns or st.pattern_order is None or len(order) != len(st.patterns):
            return None
        if order == st.pattern_order:
            return st.patterns[level]
        if any(p is None for p in st.patterns):
            return None
        where = {f"@{m}": order.index(mode) for m, mode in enumerate(st.pattern_order)}
        atoms = [(ident, lvl, tuple(where[v] for v in vs), ap) for p in st.patterns for (ident, lvl, vs), ap in p or ()]
        if any(m > level for *_, ms, _ap in atoms for m in ms):
            return None
        return frozenset(((ident, lvl, tuple(f"@{m}" for m in ms)), ap) for ident, lvl, ms, ap in atoms)

    def visits(self, s: Stream, n: int) -> np.ndarray | None:
        """How often each of `n` values of the coordinate that selected reference stream `s`'s
        references occurs (its atoms' frequencies, independent ones multiplied), or None when
        no atom of it has them."""
        out = None
        if s.ref is None or not s.ref[2]:
            return None
        var = s.ref[2][-1]
        for ident, lvl, vs in s.ref_pattern or ():
            f = self.level_freq.get((ident, lvl, vs.index(var))) if var in vs else None
            if f is not None and len(f) == n:
                out = f if out is None else out * f
        return out

    def merged_rows(self, inner: Stream, outer: Stream) -> float | None:
        """Distinct coordinates of a sparse accumulator's output, counted on the data, or None.

        When the fibers it merges (`inner`, at variables ``u, t``) are the rows of a stored matrix
        P picked by the coordinates (`outer`, at ``r, u``) of a stored matrix Q's rows, output fiber
        r holds the entries of row r of the pattern Q @ P: the aggregation of neighbours' features.
        Real neighbours share features (the words of citing papers), so the independent union
        overstates it (GraphSAGE full fusion on Cora by 1.7x, docs/cycle-model.md)."""
        if not inner.pattern or not outer.pattern or len(inner.pattern) != 1 or len(outer.pattern) != 1:
            return None
        (q_atom,) = tuple(outer.pattern)
        (p_atom,) = tuple(inner.pattern)
        if q_atom[1] != 1 or p_atom[1] != 1 or len(outer.vars) < 2 or not inner.vars:
            return None
        r, u = q_atom[2][-2:] if len(q_atom[2]) >= 2 else (None, None)
        if tuple(outer.vars[-2:]) != (r, u) or tuple(p_atom[2][-2:]) != (u, inner.vars[-1]):
            return None
        if abs(inner.fibers - outer.data) > 1e-6 * max(outer.data, 1.0):
            return None  # some selected rows were dropped before the merge
        Q, P = self.atom_rows.get((q_atom[0], 1)), self.atom_rows.get((p_atom[0], 1))
        if Q is None or P is None or Q.shape[1] != P.shape[0]:
            return None
        per_row = row_unions(q_atom[0], Q, p_atom[0], P)
        if per_row is None:
            return None
        w = outer.parent_visits
        if w is None or len(w) != len(per_row) or float(w.sum()) <= 0:
            w = np.ones(len(per_row))
        return outer.fibers * float(w @ per_row) / float(w.sum())

    def carried_patterns(self, tensor: str, levels: Sequence[str]) -> tuple[frozenset | None, ...]:
        """Each written level's atoms with the level variables of `tensor` as ``@m`` placeholders,
        each with its density; None for a level whose atoms use a variable the tensor lacks."""
        out: list[frozenset | None] = []
        for lvl, kind in enumerate(levels):
            pattern, vs = self.wpatterns.get(tensor, {}).get(lvl, (None, ()))
            if kind == "dense":
                out.append(frozenset())
                continue
            if pattern is None or len(vs) != lvl + 1 or len(set(vs)) != len(vs):
                out.append(None)
                continue
            try:
                out.append(
                    frozenset(
                        ((ident, al, tuple(f"@{vs.index(v)}" for v in avs)), self.atom_p.get((ident, al, avs), 1.0))
                        for ident, al, avs in pattern
                        if self.atom_p.get((ident, al, avs), 1.0) < 1.0 - 1e-9
                    )
                )
            except ValueError:  # an atom over a variable this tensor does not store
                out.append(None)
        return tuple(out)


PatternLike: TypeAlias = scipy.sparse.csr_array | np.ndarray  # `TensorStats.pattern`: CSR, or an array's mask


def _sparse(x: PatternLike) -> scipy.sparse.csr_array:
    return x if scipy.sparse.issparse(x) else scipy.sparse.csr_array(x)


ROW_UNION_WORK = 100_000_000
"""Most multiply-adds `row_unions` spends on one pattern product (scipy: about a second)."""

_ROW_UNIONS: dict[tuple, np.ndarray | None] = {}


def row_unions(q_key: object, Q: PatternLike, p_key: object, P: PatternLike) -> np.ndarray | None:
    """Entries per row of the pattern Q @ P, or None when the product costs more than
    `ROW_UNION_WORK`; memoised when both are named by structure digests (which name content)."""
    named = all(isinstance(k, tuple) and k[:1] == ("structure",) for k in (q_key, p_key))
    key = (q_key, p_key)
    if named and key in _ROW_UNIONS:
        return _ROW_UNIONS[key]
    q, p = _sparse(Q), _sparse(P)
    work = float(np.bincount(q.indices, minlength=q.shape[1]) @ np.diff(p.indptr))
    out = None if work > ROW_UNION_WORK else np.diff((q @ p).tocsr().indptr).astype(np.float64)
    if named:
        if len(_ROW_UNIONS) > 64:
            _ROW_UNIONS.clear()
        _ROW_UNIONS[key] = out
    return out
