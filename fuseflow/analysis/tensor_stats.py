"""Per-level structure of a stored tensor: how many entries each storage level holds.

The cycle model needs, for every tensor a graph scans, the number of entries at each level of
its format (level 0's coordinates, level 1's coordinates under them, ...). For model inputs these
are counted exactly from the data; for intermediates the model predicts them from the writers of
the region that produces them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse


@dataclass(frozen=True)
class TensorStats:
    """Entries per storage level (`level_counts[L]`, level 0 first) of one tensor in one format.

    `dims` are the level extents (block counts for a blocked tensor); a dense level holds its
    parent's count times its extent. `exact` is False for predicted (intermediate) tensors.
    """

    dims: tuple[int, ...]
    level_counts: tuple[float, ...]
    exact: bool = True

    @property
    def nnz(self) -> float:
        return self.level_counts[-1] if self.level_counts else 1.0

    def mean_fiber(self, level: int) -> float:
        """Average entries of one fiber of `level` (per entry of the level above)."""
        parent = self.level_counts[level - 1] if level > 0 else 1.0
        return self.level_counts[level] / parent if parent > 0 else 0.0

    @staticmethod
    def dense(dims: Sequence[int]) -> "TensorStats":
        counts, acc = [], 1.0
        for d in dims:
            acc *= d
            counts.append(acc)
        return TensorStats(tuple(int(d) for d in dims), tuple(counts))


def level_counts(data, levels: Sequence[str], mode_order: Sequence[int], block: int = 0) -> TensorStats:
    """Exact entries per level of `data` (numpy array or scipy sparse matrix) stored as
    (`levels`, `mode_order`); with `block` > 0 the levels range over b x b blocks."""
    shape = tuple(int(s) for s in data.shape)
    if block:
        shape = tuple(max(1, -(-s // block)) for s in shape)
    dims = tuple(shape[m] for m in mode_order)
    if all(k == "dense" for k in levels):
        return TensorStats.dense(dims)
    coords = _nonzero_coords(data, block)  # (nnz, rank) in mode order of the data
    coords = coords[:, list(mode_order)] if coords.size else coords.reshape(0, len(dims))
    counts: list[float] = []
    parent = 1.0
    for lvl, kind in enumerate(levels):
        if kind == "dense":
            parent = parent * dims[lvl]
        else:
            prefix = coords[:, : lvl + 1]
            parent = float(_distinct_rows(prefix, dims[: lvl + 1]))
        counts.append(parent)
    return TensorStats(dims, tuple(counts))


def _nonzero_coords(data, block: int) -> np.ndarray:
    if scipy.sparse.issparse(data):
        m = data.tocoo()
        keep = m.data != 0
        c = np.stack([m.row[keep], m.col[keep]], axis=1).astype(np.int64)
    else:
        arr = np.asarray(data)
        c = np.argwhere(arr != 0).astype(np.int64)
    if block and c.size:
        c = c // block
        c = np.unique(c, axis=0)
    return c


def _distinct_rows(prefix: np.ndarray, dims: Sequence[int]) -> int:
    if prefix.shape[0] == 0:
        return 0
    if math.prod(int(d) for d in dims) < 2**62:
        key = np.zeros(prefix.shape[0], dtype=np.int64)
        for j, d in enumerate(dims):
            key = key * int(d) + prefix[:, j]
        return int(np.unique(key).size)
    return int(np.unique(prefix, axis=0).shape[0])
