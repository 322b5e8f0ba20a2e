"""Per-level structure of a stored tensor: how many entries each storage level holds.

The cycle model needs, for every tensor a graph scans, the number of entries at each level of
its format (level 0's coordinates, level 1's coordinates under them, ...). For model inputs these
are counted exactly from the data; for intermediates the model predicts them from the writers of
the region that produces them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

PATTERN_ENTRIES = 20_000_000
"""Largest matrix (stored entries) whose pattern `TensorStats` keeps: 20M entries are ~100 MB."""


@dataclass(frozen=True)
class TensorStats:
    """Entries per storage level (`level_counts[L]`, level 0 first) of one tensor in one format.

    `dims` are the level extents (block counts for a blocked tensor); a dense level holds its
    parent's count times its extent. `exact` is False for predicted (intermediate) tensors.
    A predicted tensor may also say where each level's coordinates come from (`patterns`, the
    cycle model's atoms with level variables written ``@m`` for the tensor's own level m, each
    with its density), valid when it is read in `pattern_order`.
    """

    dims: tuple[int, ...]
    level_counts: tuple[float, ...]
    exact: bool = True
    patterns: tuple[frozenset | None, ...] | None = None
    pattern_order: tuple[int, ...] | None = None
    fiber_lengths: np.ndarray | None = field(default=None, compare=False, repr=False)
    """Matrices: entries of each level-1 fiber, by level-0 coordinate."""
    frequencies: dict[tuple[int, int], np.ndarray] | None = field(default=None, compare=False, repr=False)
    """Matrices: (level, m) -> how many entries of that level have each value of the coordinate
    of level m (m <= level), by value: (1, 1) the column counts of CSR, (1, 0) its row lengths."""
    level_frequencies: dict = field(default_factory=dict, compare=False, repr=False)
    """Predicted tensors: the `frequencies` of the stored levels their `patterns` name, by
    (identity, level, m)."""
    structure: tuple[bytes | None, ...] | None = field(default=None, compare=False, repr=False)
    """Exact tensors: a digest per compressed level of the coordinate prefixes stored there
    (levels 0..L), so that two tensors with one pattern (a graph's edge values and its
    normalisation, both on the adjacency) are intersected as one coordinate set."""
    pattern: scipy.sparse.csr_array | np.ndarray | None = field(default=None, compare=False, repr=False)
    """Matrices up to `PATTERN_ENTRIES` entries (or mask elements): the stored nonzeros in storage
    order, a boolean CSR or, for an array, its boolean mask (made sparse only when used), so that
    the model can count what merging rows selected by another matrix keeps
    (`coordinates.row_unions`): real features are correlated, which no per-level count says."""

    def weighted_fiber(self, level: int, weights: np.ndarray) -> float | None:
        """Mean entries of a `level` fiber when fibers are visited `weights[c]` times each for
        parent coordinate c: the neighbours of a node are more often the well-connected ones."""
        if level != 1 or self.fiber_lengths is None or len(weights) != len(self.fiber_lengths):
            return None
        total = float(weights.sum())
        return float(weights @ self.fiber_lengths) / total if total > 0 else None

    @property
    def nnz(self) -> float:
        """Stored entries: the count at the last level."""
        return self.level_counts[-1] if self.level_counts else 1.0

    def mean_fiber(self, level: int) -> float:
        """Average entries of one fiber of `level` (per entry of the level above)."""
        parent = self.level_counts[level - 1] if level > 0 else 1.0
        return self.level_counts[level] / parent if parent > 0 else 0.0

    @staticmethod
    def dense(dims: Sequence[int]) -> TensorStats:
        """The statistics of an all-dense tensor of extents `dims`."""
        counts, acc = [], 1.0
        for d in dims:
            acc *= d
            counts.append(acc)
        return TensorStats(tuple(int(d) for d in dims), tuple(counts))


def level_counts(data, levels: Sequence[str], mode_order: Sequence[int], block: int = 0) -> TensorStats:
    """Exact entries per level of `data` (numpy array or scipy sparse matrix) stored as
    (`levels`, `mode_order`); with `block` > 0 the levels range over b x b blocks.

    A compressed level holds one entry per distinct coordinate prefix (through that level) of
    the nonzeros; a dense level holds its parent's count times its extent."""
    shape = tuple(int(s) for s in data.shape)
    if block:
        shape = tuple(max(1, -(-s // block)) for s in shape)
    dims = tuple(shape[m] for m in mode_order)
    if all(k == "dense" for k in levels):
        return TensorStats.dense(dims)
    prefixes: list[np.ndarray | None] | None = None  # linear indices of each level's stored prefixes
    if scipy.sparse.issparse(data) and data.ndim != 2:
        prefix_counts = _coordinate_prefix_counts(data, mode_order)
    elif scipy.sparse.issparse(data) and not block:
        prefix_counts = _sparse_prefix_counts(data, mode_order)
        prefixes = _sparse_prefixes(data, mode_order, dims)
    else:
        prefix_counts, prefixes = _dense_prefixes(_nonzero_mask(data, block), mode_order, levels)
    counts: list[float] = []
    parent = 1.0
    for lvl, kind in enumerate(levels):
        parent = parent * dims[lvl] if kind == "dense" else float(prefix_counts[lvl])
        counts.append(parent)
    structure = None if prefixes is None else _digests(prefixes, levels, dims)
    if len(dims) == 2 and not block:
        lengths, frequencies, pattern = _matrix_profile(data, mode_order)
        return TensorStats(
            dims,
            tuple(counts),
            fiber_lengths=lengths,
            frequencies=frequencies,
            structure=structure,
            pattern=pattern,
        )
    return TensorStats(dims, tuple(counts), structure=structure)


def _sparse_prefixes(data, mode_order: Sequence[int], dims: tuple[int, ...]) -> list[np.ndarray | None]:
    """A stored matrix's prefixes: its nonempty outer fibers, and its entries as row * cols + col."""
    m = scipy.sparse.csr_array(data if tuple(mode_order) == (0, 1) else data.T)
    m.sum_duplicates()
    m.eliminate_zeros()
    m.sort_indices()
    rows = np.diff(m.indptr)
    return [np.flatnonzero(rows), np.repeat(np.arange(len(rows), dtype=np.int64), rows) * dims[1] + m.indices]


def _digests(prefixes: Sequence[np.ndarray | None], levels: Sequence[str], dims: tuple[int, ...]):
    """`TensorStats.structure`: per compressed level, a digest of the sorted linear indices (over
    the storage-order extents down to that level) of the stored coordinate prefixes. The same
    pattern gives the same digest whether the data is a scipy matrix or an array."""
    out: list[bytes | None] = []
    for lvl, kind in enumerate(levels):
        found = prefixes[lvl]
        if kind != "compressed" or found is None:
            out.append(None)
            continue
        h = hashlib.blake2b(np.asarray(dims[: lvl + 1], dtype=np.int64).tobytes(), digest_size=16)
        h.update(np.ascontiguousarray(found, dtype=np.int64).tobytes())
        out.append(h.digest())
    return tuple(out)


def _matrix_profile(
    data, mode_order: Sequence[int]
) -> tuple[np.ndarray, dict[tuple[int, int], np.ndarray], scipy.sparse.csr_array | np.ndarray | None]:
    """A stored matrix's fiber lengths by outer coordinate, `TensorStats.frequencies`, and its
    pattern (`TensorStats.pattern`; None above `PATTERN_ENTRIES`)."""
    if not scipy.sparse.issparse(data):  # counted on the array: a 768 x 3072 weight took 25 ms through scipy
        mask = np.asarray(data) != 0
        if tuple(mode_order) != (0, 1):
            mask = mask.T
        lengths = np.count_nonzero(mask, axis=1).astype(np.float64)
        inner = np.count_nonzero(mask, axis=0).astype(np.float64)
        pattern: scipy.sparse.csr_array | np.ndarray | None = None
        if mask.size <= PATTERN_ENTRIES:
            pattern = mask  # already built: kept, not copied
        elif lengths.sum() <= PATTERN_ENTRIES:
            pattern = scipy.sparse.csr_array(mask)
        return lengths, {(0, 0): (lengths > 0).astype(np.float64), (1, 0): lengths, (1, 1): inner}, pattern
    m = scipy.sparse.csr_array(data)
    if tuple(mode_order) != (0, 1):
        m = scipy.sparse.csr_array(m.T)
    m.sum_duplicates()
    m.eliminate_zeros()
    lengths = np.diff(m.indptr).astype(np.float64)
    inner = np.bincount(m.indices, minlength=m.shape[1]).astype(np.float64)
    pattern = None
    if m.nnz <= PATTERN_ENTRIES:
        pattern = scipy.sparse.csr_array((np.ones(m.nnz, dtype=bool), m.indices, m.indptr), shape=m.shape)
    return lengths, {(0, 0): (lengths > 0).astype(np.float64), (1, 0): lengths, (1, 1): inner}, pattern


def _nonzero_mask(data, block: int) -> np.ndarray:
    mask = (data.toarray() if scipy.sparse.issparse(data) else np.asarray(data)) != 0
    if not block:
        return mask
    padded = [(-s) % block for s in mask.shape]
    if any(padded):
        mask = np.pad(mask, [(0, p) for p in padded])
    shape = [x for s in mask.shape for x in (s // block, block)]
    return mask.reshape(shape).any(axis=tuple(range(1, len(shape), 2)))


def _dense_prefixes(
    mask: np.ndarray, mode_order: Sequence[int], levels: Sequence[str]
) -> tuple[list[int], list[np.ndarray | None]]:
    """Distinct nonzero coordinate prefixes per level (any() over the inner levels, counted) and,
    for each compressed level, their linear indices (for `TensorStats.structure`)."""
    m = np.transpose(mask, list(mode_order)) if mask.ndim else mask
    counts = [0] * m.ndim
    found: list[np.ndarray | None] = [None] * m.ndim
    for lvl in range(m.ndim - 1, -1, -1):
        counts[lvl] = int(np.count_nonzero(m))
        if levels[lvl] == "compressed":
            found[lvl] = np.flatnonzero(m)
        if lvl:
            m = np.asarray(m.any(axis=-1))
    return counts, found


def _coordinate_prefix_counts(entries, mode_order: Sequence[int]) -> list[int]:
    """Distinct nonzero coordinate prefixes per level of an N-D COO array, in O(nnz log nnz)."""
    coo = scipy.sparse.coo_array(entries)
    coo.sum_duplicates()
    keep = coo.data != 0
    nz = np.stack([np.asarray(coo.coords[m])[keep] for m in mode_order], axis=1).reshape(-1, len(mode_order))
    if not len(nz):
        return [0] * len(mode_order)
    nz = nz[np.lexsort(nz.T[::-1])]
    new = np.zeros(len(nz), dtype=bool)  # a row starts a new prefix at level l when any coordinate
    out = []  # up to l differs from the previous row's
    for lvl in range(nz.shape[1]):
        new[1:] |= nz[1:, lvl] != nz[:-1, lvl]
        out.append(int(np.count_nonzero(new[1:])) + 1)
    return out


def _sparse_prefix_counts(matrix, mode_order: Sequence[int]) -> list[int]:
    """Nonempty outer fibers and nonzeros, in O(nnz): the compressed form of the storage order
    with duplicates summed (no sort or hash over the entries: a 2.6M-entry graph took 1.2 s per
    count through np.unique, and the order search counts every candidate)."""
    rowwise = tuple(mode_order) == (0, 1)
    m = scipy.sparse.csr_matrix(matrix) if rowwise else scipy.sparse.csc_matrix(matrix)
    if not m.has_canonical_format:
        m = m.copy()
        m.sum_duplicates()
    nz = m.data != 0
    seen = np.concatenate([[0], np.cumsum(nz, dtype=np.int64)])
    per_fiber = seen[m.indptr[1:]] - seen[m.indptr[:-1]]
    return [int(np.count_nonzero(per_fiber)), int(seen[-1])]
