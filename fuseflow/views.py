"""Derived tensors read by name at region boundaries: reshapes, transposes, slices, concatenations.

A reshape that splits or merges dimensions (``(seq, d) -> (seq, heads, d / heads)``, a batched
matmul's ``(b, n, k) -> (b * n, k)``), a slice (``narrow``, ``select``, ``chunk``) and a
concatenation (``cat``, ``stack``) are no loop-index renamings: the lowering reads the result as
a tensor of its own, a `Derived` object (kind, sources, parameters) whose `Derived.name` is how
the IR's ``tensor`` attributes spell it, and `parse` reads back:

- ``t3@view2x4x3``: t3 reshaped (row-major) to 2 x 4 x 3;
- ``t3@perm1x0x2``: t3 transposed (dimension i is t3's ``perm[i]``);
- ``x@slice0:4:1,2:3:1``: x[0:4:1, 2:5:1] (offset:size:stride per dimension);
- ``cat1[a;b@slice0:4:1,0:2:1]``: a and that slice of b concatenated along dimension 1;
- ``gather0[emb.weight;ids]``: rows ``ids`` of emb.weight (``index_select``, ``embedding``).

The sources are model inputs or regions' outputs (the partition ends a region before every
such op), so their data exist when a region reads the derived tensor, and `lookup` derives it
on the host. Everything that reads tensors by name (packing, the values evaluator, the tensor
statistics, releasing intermediates) goes through `lookup`, `has` and `bases_of`. The data
movement itself costs no cycles (docs/architecture.md, "Derived tensors").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse

from fuseflow.errors import FuseflowError

_SUFFIX = re.compile(r"(?P<kind>view|perm)(?P<dims>\d+(?:x\d+)*)|slice(?P<slices>\d+:\d+:\d+(?:,\d+:\d+:\d+)*)")
_CAT = re.compile(r"(?P<kind>cat|gather)(?P<dim>\d+)\[(?P<inner>.*)\]")


@dataclass(frozen=True)
class Derived:
    """How a derived tensor is made: `kind` of `sources` with `params` (see the module doc). The
    IR names a tensor by a string; `name` is this object's spelling there and `parse` reads it
    back, so code builds and reads derived tensors as objects and the name is only their
    serialisation (the `tensor` attributes of sam ops, kept byte for byte)."""

    kind: str  # view | perm | slice | cat | gather
    sources: tuple[str, ...]
    params: tuple  # view: shape; perm: permutation; slice: ((offset, size, stride), ...); cat: (dim,)

    @property
    def name(self) -> str:
        """The tensor's name in the IR (``t3@view2x4x3``, ``cat1[a;b]``, ...)."""
        if self.kind in ("view", "perm"):
            return f"{self.sources[0]}@{self.kind}{'x'.join(str(int(d)) for d in self.params)}"
        if self.kind == "slice":
            return f"{self.sources[0]}@slice{','.join(f'{o}:{s}:{st}' for o, s, st in self.params)}"
        return f"{self.kind}{int(self.params[0])}[{';'.join(self.sources)}]"


def view_name(base: str, shape: Sequence[int]) -> str:
    """The name of `base` viewed as `shape`."""
    return Derived("view", (base,), tuple(int(d) for d in shape)).name


def perm_name(base: str, perm: Sequence[int]) -> str:
    """The name of `base` permuted by `perm`."""
    return Derived("perm", (base,), tuple(int(p) for p in perm)).name


def slice_name(base: str, slices: Sequence[tuple[int, int, int]]) -> str:
    """The name of a slice of `base` (offset, size, stride per axis)."""
    return Derived("slice", (base,), tuple(tuple(int(x) for x in sl) for sl in slices)).name


def cat_name(sources: Sequence[str], dim: int) -> str:
    """The name of the concatenation of `sources` along `dim`."""
    return Derived("cat", tuple(sources), (int(dim),)).name


def gather_name(table: str, index: str, dim: int) -> str:
    """The name of `table` gathered by `index` along `dim`."""
    return Derived("gather", (table, index), (int(dim),)).name


def _split_top(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


@lru_cache(maxsize=4096)
def parse(name: str) -> Derived | None:
    """How `name` is derived (the `Derived` whose `name` it is); None for a plain tensor (``x``, a
    re-laid copy ``x@1``, ``t3``). Read once per name: every consumer goes through it."""
    pieces = _split_top(name, "@")
    if len(pieces) > 1:
        m = _SUFFIX.fullmatch(pieces[-1])
        if m is not None:
            base = "@".join(pieces[:-1])
            if m.group("slices"):
                slices = tuple(tuple(int(x) for x in s.split(":")) for s in m.group("slices").split(","))
                return Derived("slice", (base,), slices)
            return Derived(m.group("kind"), (base,), tuple(int(d) for d in m.group("dims").split("x")))
    m = _CAT.fullmatch(name)
    if m is not None:
        return Derived(m.group("kind"), tuple(_split_top(m.group("inner"), ";")), (int(m.group("dim")),))
    return None


def bases_of(name: str) -> list[str]:
    """The plain tensors whose data a derived tensor reads (itself for a plain one)."""
    d = parse(name)
    if d is None:
        return [name]
    return [b for s in d.sources for b in bases_of(s)]


def shape_of(name: str, shapes: Callable[[str], Sequence[int]]) -> tuple[int, ...]:
    """The shape of `name`, given the shapes of plain tensors."""
    d = parse(name)
    if d is None:
        return tuple(shapes(name))
    if d.kind == "view":
        return tuple(d.params)
    if d.kind == "slice":
        return tuple(s for _, s, _ in d.params)
    inner = [shape_of(s, shapes) for s in d.sources]
    if d.kind == "perm":
        return tuple(inner[0][p] for p in d.params)
    dim = d.params[0]
    if d.kind == "gather":
        return inner[0][:dim] + inner[1] + inner[0][dim + 1 :]
    return tuple(sum(sh[dim] for sh in inner) if i == dim else x for i, x in enumerate(inner[0]))


def has(data: Mapping[str, Any], name: str) -> bool:
    """Whether `data` holds `name`, or every source a derived name is computed from."""
    d = parse(name)
    return name in data or (d is not None and all(has(data, s) for s in d.sources))


def lookup(data: Mapping[str, Any], name: str) -> Any:
    """`data[name]`, or the derived tensor made from its sources' data."""
    if name in data:
        return data[name]
    d = parse(name)
    if d is None:
        raise KeyError(name)
    return derive(d, [lookup(data, s) for s in d.sources])


def derive(d: Derived, values: Sequence[Any]) -> Any:
    """Apply `d` to its sources' values (dense arrays, or scipy sparse arrays kept sparse)."""
    if d.kind == "gather":
        return _gather(d.params[0], *values)
    if any(scipy.sparse.issparse(v) for v in values):
        return _derive_sparse(d, [scipy.sparse.coo_array(v) for v in values])
    arrs = [np.asarray(v) for v in values]
    if d.kind == "view":
        return arrs[0].reshape(d.params)
    if d.kind == "perm":
        return np.ascontiguousarray(np.transpose(arrs[0], d.params))
    if d.kind == "slice":
        return np.ascontiguousarray(arrs[0][tuple(slice(o, o + s * st, st) for o, s, st in d.params)])
    return np.concatenate(arrs, axis=d.params[0])


def _derive_sparse(d: Derived, coos: list) -> Any:
    if d.kind == "view":
        return coos[0].reshape(d.params)
    if d.kind == "perm":
        return coos[0].transpose(d.params)
    if d.kind == "slice":
        c = coos[0]
        coords = [np.asarray(x) for x in c.coords]
        keep = np.ones(len(c.data), bool)
        for x, (o, s, st) in zip(coords, d.params):
            keep &= (x >= o) & (x < o + s * st) & ((x - o) % st == 0)
        new = tuple((x[keep] - o) // st for x, (o, _, st) in zip(coords, d.params))
        return scipy.sparse.coo_array((c.data[keep], new), shape=tuple(s for _, s, _ in d.params))
    dim, offset = d.params[0], 0
    datas: list = []
    parts: list[list] = [[] for _ in coos[0].shape]
    for c in coos:
        for i, x in enumerate(c.coords):
            parts[i].append(np.asarray(x) + (offset if i == dim else 0))
        datas.append(c.data)
        offset += c.shape[dim]
    shape = tuple(offset if i == dim else x for i, x in enumerate(coos[0].shape))
    return scipy.sparse.coo_array((np.concatenate(datas), tuple(np.concatenate(p) for p in parts)), shape=shape)


def _gather(dim: int, table: Any, index: Any) -> Any:
    """`table` indexed along `dim` by the integer values of `index` (rows of a sparse matrix stay sparse)."""
    idx = np.asarray(index.toarray() if scipy.sparse.issparse(index) else index)
    ids = idx.astype(np.int64)
    extent = table.shape[dim]
    if ids.size and (ids.min() < 0 or ids.max() >= extent or not np.array_equal(ids, idx)):
        raise FuseflowError(f"gather: indices must be integers in [0, {extent}); got {idx.min()}..{idx.max()}")
    if scipy.sparse.issparse(table) and table.ndim == 2 and dim == 0 and ids.ndim == 1:
        return scipy.sparse.csr_array(table)[ids]
    dense = table.toarray() if scipy.sparse.issparse(table) else np.asarray(table)
    return np.take(dense, ids, axis=dim)
