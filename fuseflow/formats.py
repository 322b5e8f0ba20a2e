"""Sparse tensor formats: names ↔ per-level storage, MLIR encodings, and CSF packing.

A format is a list of storage levels (``dense`` or ``compressed``) plus a mode order
(which tensor dimension each level stores). Packing turns a dense numpy array into the
per-level ``seg``/``crd`` arrays and values the simulator's scanners read; unpacking turns
written levels back into a dense array.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

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
FORMAT_NAMES = ("dense", "compressed", *NAMED_2D)


@dataclass(frozen=True)
class Format:
    """Storage of one tensor: level kinds in storage order and the mode each level stores."""

    levels: tuple[str, ...]
    mode_order: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.levels)

    @property
    def is_dense(self) -> bool:
        return all(k == "dense" for k in self.levels) and self.mode_order == tuple(range(self.rank))

    def __str__(self) -> str:
        return describe(self)


def describe(fmt: Format) -> str:
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
    raise FormatError(f"unknown format {spec!r} for {what}; expected one of {', '.join(FORMAT_NAMES)} "
                      "or a list of level formats")


def encoding_attr(fmt: Format) -> str | None:
    """The ``#sparse_tensor.encoding`` text for a format (``None`` for plain dense)."""
    if fmt.is_dense:
        return None
    dims = ", ".join(f"d{i}" for i in range(fmt.rank))
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
    dims = arr.shape
    nz = np.stack(np.nonzero(arr), axis=1) if fmt.rank else np.zeros((1, 0), np.int64)
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
    vals = arr[tuple(prefixes.T)] if fmt.rank else arr.reshape(1)
    return Packed(fmt, tuple(dense.shape), segs, crds, np.ascontiguousarray(vals, dtype=np.float32))


def _keys(prefixes: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    if prefixes.shape[1] == 0:
        return np.zeros(len(prefixes), dtype=np.int64)
    return np.ravel_multi_index(tuple(prefixes.T), tuple(dims)).astype(np.int64)


def unpack(segs: Sequence[np.ndarray], crds: Sequence[np.ndarray], vals: np.ndarray,
           level_dims: Sequence[int], mode_order: Sequence[int]) -> np.ndarray:
    """Decode written levels (all stored as seg/crd) into a dense array in mode order."""
    prefixes = np.zeros((1, 0), dtype=np.int64)
    for lvl, (seg, crd) in enumerate(zip(segs, crds)):
        seg = np.asarray(seg, dtype=np.int64)
        crd = np.asarray(crd, dtype=np.int64)
        if len(seg) != len(prefixes) + 1:
            raise FormatError(f"level {lvl} has {len(seg) - 1} fibers but its parent has {len(prefixes)} coordinates")
        counts = np.diff(seg)
        prefixes = np.concatenate([np.repeat(prefixes, counts, axis=0), crd[seg[0]:seg[-1], None]], axis=1)
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
