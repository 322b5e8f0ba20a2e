"""The statistics the cycle model reads for a graph's inputs (docs/architecture.md, "Design: planning").

Measured from the example data where a region's input is known (`level_counts`), predicted
where an earlier region writes it (its estimate, re-levelled when read in another order), and
uniform from a recorded density otherwise; and the cost of a run-time relayout of a stored
tensor (`relayout_cycles`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fuseflow import views
from fuseflow.cost.streams import union_fraction
from fuseflow.cost.tensor_stats import TensorStats, level_counts

if TYPE_CHECKING:
    from fuseflow.sim.graph import GraphSpec


def relayout_cycles(st: TensorStats) -> float:
    """Converting a stored tensor to another level order by a counting-sort transpose: one pass
    over its entries to count per new outer coordinate, a prefix sum over that dimension, one pass
    to scatter (docs/architecture.md, "Design: planning")."""
    return 2.0 * st.nnz + float(max(st.dims, default=1))


def stats_for_inputs(
    spec: GraphSpec,
    data: Mapping[str, Any],
    known: Mapping[str, TensorStats] | None = None,
    density: Mapping[str, float] | None = None,
    cache: dict | None = None,
) -> dict[str, TensorStats]:
    """Statistics of every input tensor of `spec`: predicted ones from `known` (tensors written
    by earlier regions, in the format they were written), exact ones counted from `data`, and
    uniform-random ones from a recorded `density` when there is no data. `cache` memoises the
    measured ones across graphs that read the same tensor in the same format."""

    known = known or {}
    out: dict[str, TensorStats] = {}
    for name, t in spec.tensors.items():
        if t.role != "input":
            continue
        source = t.copy_of or name
        b = t.block or 0
        if source in known:
            st = known[source]
            dims = tuple((max(1, -(-t.shape[m] // b)) if b else t.shape[m]) for m in t.fmt.mode_order)
            out[name] = st if st.dims == dims else relaid(st, dims, t.fmt.levels)
        elif views.has(data, source):
            key = (source, t.fmt.levels, t.fmt.mode_order, b)
            measured: TensorStats | None = cache.get(key) if cache is not None else None
            if measured is None:
                measured = level_counts(views.lookup(data, source), t.fmt.levels, t.fmt.mode_order, b)
                if cache is not None:
                    cache[key] = measured
            out[name] = measured
        elif all(k == "dense" for k in t.fmt.levels):  # its extents say it all (`level_counts`)
            out[name] = TensorStats.dense(
                tuple((max(1, -(-t.shape[m] // b)) if b else t.shape[m]) for m in t.fmt.mode_order)
            )
        elif density and source in density:
            dims = tuple((max(1, -(-t.shape[m] // b)) if b else t.shape[m]) for m in t.fmt.mode_order)
            out[name] = relaid(TensorStats(dims, (density[source] * math.prod(dims),), exact=False), dims, t.fmt.levels)
    return out


def relaid(st: TensorStats, dims: Sequence[int], levels: Sequence[str]) -> TensorStats:
    """A predicted tensor read in another level order: same nnz, levels filled at random."""
    nnz = st.nnz
    counts, acc = [], 1.0
    for lvl, kind in enumerate(levels):
        space = acc * dims[lvl]
        if kind == "dense":
            acc = space
        elif lvl == len(levels) - 1:
            acc = nnz
        else:
            below = math.prod(dims[lvl + 1 :])
            acc = space * union_fraction(nnz / max(space * below, 1e-9), below)
        counts.append(acc)
    return TensorStats(tuple(dims), tuple(counts), exact=False)
