"""Sparse tensor formats: names ↔ per-level storage, MLIR encodings, and CSF packing.

A format is a list of storage levels (``dense`` or ``compressed``) plus a mode order
(which tensor dimension each level stores). Packing turns a dense numpy array into the
per-level ``seg``/``crd`` arrays and values the simulator's scanners read; unpacking turns
written levels back into a dense array.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse
import scipy.sparse as sp

from fuseflow.errors import FormatError

LEVEL_KINDS = ("dense", "compressed")
NAMED_2D = {
    "csr": (("dense", "compressed"), (0, 1)),
    "csc": (("dense", "compressed"), (1, 0)),
    "dcsr": (("compressed", "compressed"), (0, 1)),
    "dcsc": (("compressed", "compressed"), (1, 0)),
    # COO is accepted and stored as DCSR: the simulator has no singleton scanner.
    "coo": (("compressed", "compressed"), (0, 1)),
}
FORMAT_NAMES = ("dense", "compressed", *NAMED_2D, "bcsr<b>", "bcsc<b>")
FORMAT_DOCS = (
    ("dense", "every level dense, row-major (any rank)"),
    ("compressed", "a 1-D sparse vector"),
    ("csr", "dense rows, compressed columns"),
    ("csc", "dense columns, compressed rows (the lowering re-lays it out when an order needs rows)"),
    ("dcsr", "compressed rows, compressed columns"),
    ("dcsc", "compressed columns, compressed rows"),
    ("coo", "accepted and stored as DCSR (the simulator has no singleton scanner); torch COO inputs imply it"),
    ("bcsr<b>", "CSR over b x b blocks with dense tiles as values; torch BSR inputs with square blocks imply it"),
    ("bcsc<b>", "CSC over b x b blocks (tiles stored column-major); torch BSC inputs with square blocks imply it"),
    ("[dense, compressed, ...]", "a per-level list, one entry per dimension, in dimension order"),
)
"""What `fuseflow ops` and docs/ops.md say about each format name."""
_BCSR = re.compile(r"bcs([rc])\s*<?\s*(\d+)\s*>?")


@dataclass(frozen=True)
class Format:
    """Storage of one tensor: level kinds in storage order and the mode each level stores."""

    levels: tuple[str, ...]
    mode_order: tuple[int, ...]
    block: int = 0  # bcsr<b>: the levels range over b x b blocks; values are dense tiles

    @property
    def rank(self) -> int:
        """The number of levels."""
        return len(self.levels)

    @property
    def is_dense(self) -> bool:
        """Whether every level is dense and stored in natural order."""
        return all(k == "dense" for k in self.levels) and self.mode_order == tuple(range(self.rank))

    def __str__(self) -> str:
        return describe(self)


def describe(fmt: Format) -> str:
    """The format's name as users write it (``csr``, ``bcsr<16>``, a level list)."""
    if fmt.block:
        return f"bcsc<{fmt.block}>" if fmt.mode_order == (1, 0) else f"bcsr<{fmt.block}>"
    for name, (levels, order) in NAMED_2D.items():
        if name != "coo" and fmt.levels == levels and fmt.mode_order == order:
            return name
    if fmt.is_dense:
        return "dense"
    lv = ",".join(fmt.levels)
    return f"[{lv}]" if fmt.mode_order == tuple(range(fmt.rank)) else f"[{lv}] order {list(fmt.mode_order)}"


def parse_format(spec: str | Sequence[str] | Format, rank: int, what: str = "tensor") -> Format:
    """Parse a user format (a name or a per-level list) for a tensor of the given rank."""
    if isinstance(spec, Format):
        if spec.rank != rank:
            raise FormatError(f"format {spec} has {spec.rank} levels but {what} has rank {rank}")
        return spec
    if isinstance(spec, (list, tuple)):
        levels = tuple(str(s) for s in spec)
        bad = [s for s in levels if s not in LEVEL_KINDS]
        if bad:
            raise FormatError(f"unknown level format {bad[0]!r} for {what}; expected one of {', '.join(LEVEL_KINDS)}")
        if len(levels) != rank:
            raise FormatError(f"{what} has rank {rank} but its format lists {len(levels)} levels")
        return Format(levels, tuple(range(rank)))
    if not isinstance(spec, str):
        raise FormatError(f"format of {what} must be a name or a list of level formats, got {type(spec).__name__}")
    name = spec.strip().lower()
    m = _BCSR.fullmatch(name)
    if m:
        b = int(m.group(2))
        if rank != 2 or b < 1:
            raise FormatError(f"format {spec!r} is for 2-D tensors with a positive block size; {what} has rank {rank}")
        return Format(("dense", "compressed"), (0, 1) if m.group(1) == "r" else (1, 0), b)
    if name == "dense":
        return Format(("dense",) * rank, tuple(range(rank)))
    if name == "compressed":
        if rank != 1:
            raise FormatError(f"format 'compressed' is for 1-D tensors; {what} has rank {rank}")
        return Format(("compressed",), (0,))
    if name in NAMED_2D:
        if rank < 2:
            raise FormatError(f"format {name!r} needs a tensor of rank >= 2; {what} has rank {rank}")
        levels, order = NAMED_2D[name]
        lead = rank - 2  # a named 2-D format applies to the trailing two dimensions
        return Format(("dense",) * lead + levels, tuple(range(lead)) + tuple(lead + o for o in order))
    raise FormatError(
        f"unknown format {spec!r} for {what}; expected one of {', '.join(FORMAT_NAMES)} or a list of level formats"
    )


def encoding_attr(fmt: Format) -> str | None:
    """The ``#sparse_tensor.encoding`` text for a format (``None`` for plain dense)."""
    if fmt.is_dense and not fmt.block:
        return None
    dims = ", ".join(f"d{i}" for i in range(fmt.rank))
    if fmt.block:  # MLIR's BSR: block levels, then the dense levels inside a block
        outer = ", ".join(f"d{m} floordiv {fmt.block} : {k}" for m, k in zip(fmt.mode_order, fmt.levels))
        inner = ", ".join(f"d{m} mod {fmt.block} : dense" for m in fmt.mode_order)
        return f"#sparse_tensor.encoding<{{map = ({dims}) -> ({outer}, {inner})}}>"
    lv = ", ".join(f"d{m} : {k}" for m, k in zip(fmt.mode_order, fmt.levels))
    return f"#sparse_tensor.encoding<{{map = ({dims}) -> ({lv})}}>"


@dataclass
class Packed:
    """A tensor in CSF form: per storage level ``seg``/``crd`` (compressed) or a dim (dense)."""

    fmt: Format
    shape: tuple[int, ...]
    segs: list[np.ndarray | None]
    crds: list[np.ndarray | None]
    vals: np.ndarray


def pack(dense: np.ndarray, fmt: Format) -> Packed:
    """Encode a dense array in `fmt`; zeros are absent from compressed levels."""
    dense = np.asarray(dense, dtype=np.float32)
    arr = np.transpose(dense, fmt.mode_order) if fmt.rank else dense
    if all(kind == "dense" for kind in fmt.levels):  # every coordinate, in storage order: no search
        return Packed(fmt, tuple(dense.shape), [None] * fmt.rank, [None] * fmt.rank, _flat(arr))
    if fmt.rank == 2:
        return _pack_matrix(arr, fmt, tuple(dense.shape))
    return _pack_general(arr, fmt, tuple(dense.shape))


def _pack_matrix(arr: np.ndarray, fmt: Format, shape: tuple[int, ...]) -> Packed:
    """A matrix (in storage order) through scipy's CSR conversion: linear in its size, where the
    general path sorts every nonzero coordinate (2 s of a 4 s GCN simulation on DBLP)."""
    csr = scipy.sparse.csr_matrix(arr)
    indptr, indices = csr.indptr.astype(np.int64), csr.indices.astype(np.int64)
    kinds = tuple(fmt.levels)
    if kinds == ("dense", "compressed"):
        return Packed(fmt, shape, [None, indptr], [None, indices], _flat(csr.data))
    rows = np.flatnonzero(np.diff(indptr)).astype(np.int64)  # a compressed outer level: nonempty rows
    top = np.array([0, len(rows)], dtype=np.int64)
    if kinds == ("compressed", "compressed"):
        return Packed(fmt, shape, [top, np.concatenate([[0], indptr[rows + 1]])], [rows, indices], _flat(csr.data))
    return Packed(fmt, shape, [top, None], [rows, None], _flat(arr[rows]))  # compressed, dense


def _pack_general(arr: np.ndarray, fmt: Format, shape: tuple[int, ...]) -> Packed:
    nz = np.stack(np.nonzero(arr), axis=1)
    return _pack_entries(nz, arr[tuple(nz.T)], arr.shape, fmt, shape)


def pack_coo(entries, fmt: Format) -> Packed:
    """Encode an N-D ``scipy.sparse.coo_array`` (or 2-D sparse matrix) in `fmt` from its
    coordinates: what `pack` gives for its dense form, without building that form."""
    coo = scipy.sparse.coo_array(entries)
    coo.sum_duplicates()
    keep = coo.data != 0
    nz = np.stack([np.asarray(c, dtype=np.int64)[keep] for c in coo.coords], axis=1).reshape(-1, coo.ndim)
    nz = nz[:, list(fmt.mode_order)]
    order = np.lexsort(nz.T[::-1]) if len(nz) else np.zeros(0, np.int64)
    shape = tuple(int(s) for s in coo.shape)
    dims = tuple(shape[m] for m in fmt.mode_order)
    if fmt.block:
        raise FormatError(f"blocked format {fmt} needs a 2-D matrix, got shape {shape}")
    return _pack_entries(nz[order], np.asarray(coo.data, np.float32)[keep][order], dims, fmt, shape)


def _pack_entries(
    nz: np.ndarray, nz_vals: np.ndarray, dims: Sequence[int], fmt: Format, shape: tuple[int, ...]
) -> Packed:
    """CSF levels of the nonzeros `nz` (storage-order coordinates, sorted lexicographically)."""
    prefixes = np.zeros((1, 0), dtype=np.int64)
    segs: list[np.ndarray | None] = []
    crds: list[np.ndarray | None] = []
    for lvl, kind in enumerate(fmt.levels):
        d = dims[lvl]
        if kind == "dense":
            segs.append(None)
            crds.append(None)
            rep = np.repeat(prefixes, d, axis=0)
            col = np.tile(np.arange(d, dtype=np.int64), len(prefixes))
            prefixes = np.concatenate([rep, col[:, None]], axis=1)
            continue
        cand = np.unique(nz[:, : lvl + 1], axis=0) if len(nz) else np.zeros((0, lvl + 1), np.int64)
        parent_keys = _keys(prefixes, dims[:lvl])
        cand_parent = np.searchsorted(parent_keys, _keys(cand[:, :lvl], dims[:lvl]))
        seg = np.searchsorted(cand_parent, np.arange(len(prefixes) + 1), side="left").astype(np.int64)
        segs.append(seg)
        crds.append(cand[:, lvl].astype(np.int64))
        prefixes = cand.astype(np.int64)
    # every stored position's value: the nonzero at that coordinate, 0 for a dense level's filler
    keys, where = _keys(nz, dims), _keys(prefixes, dims)
    pos = np.minimum(np.searchsorted(keys, where), max(len(keys) - 1, 0))
    found = (keys[pos] == where) if len(keys) else np.zeros(len(where), bool)
    vals = np.where(found, nz_vals[pos] if len(keys) else 0.0, 0.0)
    return Packed(fmt, shape, segs, crds, np.ascontiguousarray(vals, dtype=np.float32))


def _flat(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr, dtype=np.float32).reshape(-1)


def _keys(prefixes: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    if prefixes.shape[1] == 0:
        return np.zeros(len(prefixes), dtype=np.int64)
    return np.ravel_multi_index(tuple(prefixes.T), tuple(dims)).astype(np.int64)


def unpack(
    segs: Sequence[np.ndarray],
    crds: Sequence[np.ndarray],
    vals: np.ndarray,
    level_dims: Sequence[int],
    mode_order: Sequence[int],
) -> np.ndarray:
    """Decode written levels (all stored as seg/crd) into a dense array in mode order."""
    prefixes = np.zeros((1, 0), dtype=np.int64)
    for lvl, (seg, crd) in enumerate(zip(segs, crds)):
        seg = np.asarray(seg, dtype=np.int64)
        crd = np.asarray(crd, dtype=np.int64)
        if len(seg) != len(prefixes) + 1:
            raise FormatError(f"level {lvl} has {len(seg) - 1} fibers but its parent has {len(prefixes)} coordinates")
        counts = np.diff(seg)
        prefixes = np.concatenate([np.repeat(prefixes, counts, axis=0), crd[seg[0] : seg[-1], None]], axis=1)
    while prefixes.shape[1] < len(level_dims):  # trailing size-1 levels have no writer
        if level_dims[prefixes.shape[1]] != 1:
            raise FormatError(f"level {prefixes.shape[1]} has no written coordinates")
        prefixes = np.concatenate([prefixes, np.zeros((len(prefixes), 1), np.int64)], axis=1)
    vals = np.asarray(vals, dtype=np.float32)
    if len(vals) != len(prefixes):
        raise FormatError(f"{len(vals)} values written for {len(prefixes)} coordinates")
    out = np.zeros(tuple(level_dims), dtype=np.float32)
    if len(level_dims) == 0:
        return vals.reshape(())
    out[tuple(prefixes.T)] = vals
    return np.transpose(out, np.argsort(mode_order))


def block_dims(shape: Sequence[int], b: int) -> tuple[int, ...]:
    """Extent of each dimension's block grid (size-1 dimensions are not blocked)."""
    return tuple(1 if d == 1 else d // b for d in shape)


def tile_dims(shape: Sequence[int], b: int) -> tuple[int, ...]:
    """A tile's extents for a tensor of `shape` blocked by `b` (size-1 axes stay 1)."""
    return tuple(1 if d == 1 else b for d in shape)


def pack_blocked(dense: np.ndarray, fmt: Format, b: int) -> Packed:
    """Encode a dense array as blocks: `fmt`'s levels range over the b x b block grid (a block
    is present in a compressed level when any of its entries is nonzero) and the values are the
    stored blocks' tiles back to back, each laid out in the storage (mode) order."""
    dense = np.asarray(dense, dtype=np.float32)
    grid, tile = block_dims(dense.shape, b), tile_dims(dense.shape, b)
    r = dense.ndim
    blocks = dense.reshape([x for pair in zip(grid, tile) for x in pair]).transpose(
        list(range(0, 2 * r, 2)) + list(range(1, 2 * r, 2))
    )  # (grid..., tile...)
    present = np.abs(blocks).reshape(grid + (-1,)).max(axis=-1) if r else np.abs(blocks)
    structure = pack(np.where(present > 0, 1.0, 0.0).astype(np.float32), fmt)
    order = list(fmt.mode_order)
    stored = blocks.transpose(order + [r + m for m in order])
    coords = _stored_coords(structure, stored.shape[:r])
    tiles = stored[tuple(coords.T)] if r else stored.reshape(1, -1)
    return Packed(
        fmt,
        tuple(dense.shape),
        structure.segs,
        structure.crds,
        np.ascontiguousarray(tiles.reshape(-1), dtype=np.float32),
    )


def _stored_coords(p: Packed, dims: Sequence[int]) -> np.ndarray:
    """Storage-order coordinates of every stored value of a packed tensor."""
    prefixes = np.zeros((1, 0), dtype=np.int64)
    for lvl, kind in enumerate(p.fmt.levels):
        if kind == "dense":
            d = dims[lvl]
            prefixes = np.concatenate(
                [np.repeat(prefixes, d, axis=0), np.tile(np.arange(d, dtype=np.int64), len(prefixes))[:, None]], axis=1
            )
        else:
            seg, crd = p.segs[lvl], p.crds[lvl]
            assert seg is not None and crd is not None  # a compressed level has both
            prefixes = np.concatenate([np.repeat(prefixes, np.diff(seg), axis=0), crd[:, None]], axis=1)
    return prefixes


def unpack_blocked(segs, crds, vals: np.ndarray, shape: Sequence[int], mode_order: Sequence[int], b: int) -> np.ndarray:
    """Decode written block levels and tiles (storage layout) into a dense array."""
    r = len(shape)
    grid, tile = block_dims(shape, b), tile_dims(shape, b)
    order = list(mode_order)
    level_grid = [grid[m] for m in order]
    level_tile = [tile[m] for m in order]
    n_tile = int(np.prod(level_tile)) if r else 1
    vals = np.asarray(vals, dtype=np.float32).reshape(-1, n_tile)
    index = unpack(segs, crds, np.arange(1, len(vals) + 1, dtype=np.float32), level_grid, list(range(r)))
    out = np.zeros(level_grid + level_tile, dtype=np.float32)
    where = np.nonzero(index)
    out[where] = vals[index[where].astype(np.int64) - 1].reshape((-1, *level_tile))
    inv = np.argsort(order)
    out = out.transpose(list(inv) + [r + i for i in inv])  # (grid..., tile...) in mode order
    return out.transpose([x for i in range(r) for x in (i, r + i)]).reshape(tuple(shape))


def pack_bsr(matrix, fmt: Format, b: int) -> Packed:
    """Encode a scipy BSR matrix whose blocks are `fmt`'s (b x b, row-major storage) without
    densifying: block CSR (or DCSR) straight from its arrays, tiles row-major as `pack_blocked`
    lays them out; all-zero stored blocks are dropped, as `pack_blocked` would."""
    if fmt.mode_order == (1, 0):  # bcsc<b>: the transpose's BSR (scipy transposes blocks, no dense copy)
        p = pack_bsr(matrix.T.tobsr(blocksize=(b, b)), Format(fmt.levels, (0, 1)), b)
        return Packed(fmt, tuple(matrix.shape), p.segs, p.crds, p.vals)
    m = matrix.copy()
    m.sort_indices()
    keep = np.abs(m.data).reshape(len(m.data), -1).max(axis=1) > 0 if len(m.data) else np.zeros(0, bool)
    row_of = np.repeat(np.arange(len(m.indptr) - 1), np.diff(m.indptr))[keep]
    indices = m.indices[keep].astype(np.int64)
    tiles = np.ascontiguousarray(m.data[keep].reshape(-1), dtype=np.float32)
    n_rows = m.shape[0] // b
    counts = np.bincount(row_of, minlength=n_rows)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if fmt.levels == ("dense", "compressed"):
        return Packed(fmt, tuple(m.shape), [None, indptr], [None, indices], tiles)
    rows = np.flatnonzero(counts).astype(np.int64)
    seg1 = np.concatenate([[0], np.cumsum(counts[rows])]).astype(np.int64)
    return Packed(fmt, tuple(m.shape), [np.array([0, len(rows)], np.int64), seg1], [rows, indices], tiles)


def packs_as_bsr(matrix, fmt: Format, b: int) -> bool:
    """Can `pack_bsr` encode `matrix` in `fmt` over b x b blocks (same blocks, row-major, 2 levels)?"""
    return (
        getattr(matrix, "format", None) == "bsr"
        and b > 0
        and tuple(matrix.blocksize) == (b, b)
        and fmt.mode_order in ((0, 1), (1, 0))
        and fmt.levels in (("dense", "compressed"), ("compressed", "compressed"))
    )


def pack_sparse(matrix, fmt: Format) -> Packed:
    """Encode a 2-D scipy sparse matrix without densifying it (large graphs): CSR/CSC/DCSR/DCSC
    straight from scipy's compressed arrays; explicit zeros are dropped, as `pack` would."""

    if matrix.ndim != 2:
        return pack_coo(matrix, fmt)
    m = sp.csr_matrix(matrix, dtype=np.float32)
    if fmt.block or fmt.levels not in (("dense", "compressed"), ("compressed", "compressed")):
        return pack(m.toarray(), fmt)
    stored = (m.T if fmt.mode_order == (1, 0) else m).tocsr()
    stored.eliminate_zeros()
    stored.sort_indices()
    indptr, indices = stored.indptr.astype(np.int64), stored.indices.astype(np.int64)
    vals = np.ascontiguousarray(stored.data, dtype=np.float32)
    if fmt.levels == ("dense", "compressed"):
        return Packed(fmt, tuple(m.shape), [None, indptr], [None, indices], vals)
    rows = np.flatnonzero(np.diff(indptr)).astype(np.int64)  # doubly compressed: non-empty rows only
    seg1 = np.concatenate([[0], np.cumsum(np.diff(indptr)[rows])]).astype(np.int64)
    return Packed(fmt, tuple(m.shape), [np.array([0, len(rows)], np.int64), seg1], [rows, indices], vals)
