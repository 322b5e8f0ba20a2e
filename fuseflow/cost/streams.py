"""What the cycle model propagates from node to node: a `Stream`'s elements per depth, and the
union rule a sparse accumulator's merge follows (docs/cycle-model.md, "Streams")."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from fuseflow.cost.memory_walk import UNKNOWN_WALK, Walk

DEFAULT_FIBER_DENSITY = 0.1
"""Fraction of a compressed level's extent a fiber is assumed to hold when no statistics exist."""


class Stream(NamedTuple):
    """Elements per depth (`counts[0]` = 1 for a root's reference), each depth's extent, and the
    fraction of elements that are real (a union's payload carries N where its operand is absent).

    `vars` names each depth's index variable (where known). `pattern` is the set of atoms whose
    intersection the innermost coordinates are (empty: every coordinate; None: unknown, treated
    as independent of everything); `ref` says which stored level a reference stream points into,
    as (identity, level, variables), and `ref_pattern` the pattern of the coordinates that
    selected those references (a neighbour list picks well-connected rows more often). They
    exist so that a coordinate set met twice (GCN's adjacency read for the degree and again for
    the edges) is intersected with itself as itself, not as an independent set of the same
    density, and a fiber reached through a neighbour list has a neighbour's length."""

    counts: tuple[float, ...]
    dims: tuple[int, ...]
    present: float = 1.0
    vars: tuple[str, ...] = ()
    pattern: frozenset | None = None
    ref: tuple | None = None
    ref_pattern: frozenset | None = None  # the pattern of the coordinates the references sit at
    walk: Walk = UNKNOWN_WALK  # how a reference stream walks memory (unknown: a line per token)
    parent_visits: Any = None  # a scan's output: visits of each parent coordinate (numpy), if known

    @property
    def depth(self) -> int:
        """Levels above the stream's last one (0: a stream of one fiber)."""
        return len(self.counts) - 1

    @property
    def data(self) -> float:
        """Data tokens: the count at the last level."""
        return self.counts[-1]

    @property
    def fibers(self) -> float:
        """Fibers of the last level, one stop token each."""
        return self.counts[-2] if self.depth >= 1 else 1.0

    @property
    def tokens(self) -> float:
        """Data tokens, one stop per innermost fiber (outer stops merge into it), and D. With no
        innermost fiber at all (an empty tensor) the outer stop still arrives, raised: one stop."""
        return self.data + (max(self.counts[-2], 1.0) if self.depth >= 1 else 0.0) + 1.0

    def with_last(self, n: float, present: float = 1.0) -> Stream:
        """The same stream with `n` data tokens at its last level (present with probability `present`)."""
        return Stream(self.counts[:-1] + (n,), self.dims, present, self.vars)


def union_fraction(p: float, m: float) -> float:
    """P(a coordinate is in at least one of the fibers merged, each holding it with prob. p), where
    their number is Poisson with mean `m`: ``1 - exp(-p m)``. The fixed-count form ``1 - (1 - p)^m``
    agrees for small p but counts a merge of dense fibers as full even where most outputs merge
    none (an SpMM of an 8 x 28 matrix at density 0.02: 274 accumulated tokens for 178 simulated,
    153 with this one; docs/cycle-model.md, the spacc row of "Streams")."""
    p = min(max(p, 0.0), 1.0)
    return 1.0 - math.exp(-p * max(m, 0.0))
