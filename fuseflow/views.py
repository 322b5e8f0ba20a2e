"""Reshaped views of tensors that cross a region boundary: ``base@view2x4x3``.

A reshape that splits or merges dimensions (``(seq, d) -> (seq, heads, d / heads)``, a batched
matmul's ``(b, n, k) -> (b * n, k)``) is no loop-index renaming: the lowering reads the reshaped
tensor as a tensor of its own, named after its source and shape. The source is a model input or
a region's output (the partition puts a boundary before every such reshape), so its data exist
when a region reads the view, and the view's data are the source's in row-major order
reshaped (`derive`). Everything that reads tensors by name (packing, the values evaluator, the
tensor statistics, releasing intermediates) goes through `lookup` / `base_of`.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse

_VIEW = re.compile(r"^(?P<base>.+)@(?P<kind>view|perm)(?P<dims>\d+(?:x\d+)*)$")


def view_name(base: str, shape: Sequence[int]) -> str:
    """The name of `base` reshaped to `shape` (row-major)."""
    return f"{base}@view{'x'.join(str(int(d)) for d in shape)}"


def perm_name(base: str, perm: Sequence[int]) -> str:
    """The name of `base` transposed by `perm` (dimension i of the result is `perm[i]` of the base)."""
    return f"{base}@perm{'x'.join(str(int(p)) for p in perm)}"


def parse(name: str) -> tuple[str, str, tuple[int, ...]] | None:
    """(source name, ``view`` or ``perm``, shape or permutation) of a derived name; None for any other."""
    m = _VIEW.match(name)
    if m is None:
        return None
    return m.group("base"), m.group("kind"), tuple(int(d) for d in m.group("dims").split("x"))


def shape_of(name: str, base_shape: Sequence[int]) -> tuple[int, ...]:
    v = parse(name)
    if v is None:
        return tuple(base_shape)
    inner = shape_of(v[0], base_shape)
    return v[2] if v[1] == "view" else tuple(inner[p] for p in v[2])


def base_of(name: str) -> str:
    """The tensor whose data a (possibly nested) derived tensor reads."""
    while (v := parse(name)) is not None:
        name = v[0]
    return name


def derive(value: Any, kind: str, dims: tuple[int, ...]) -> Any:
    """`value` (a dense array or a scipy sparse array) reshaped in row-major order, or transposed."""
    if scipy.sparse.issparse(value):
        coo = scipy.sparse.coo_array(value)
        return coo.reshape(dims) if kind == "view" else coo.transpose(dims)
    arr = np.asarray(value)
    return arr.reshape(dims) if kind == "view" else np.ascontiguousarray(np.transpose(arr, dims))


def has(data: Mapping[str, Any], name: str) -> bool:
    v = parse(name)
    return name in data or (v is not None and has(data, v[0]))


def lookup(data: Mapping[str, Any], name: str) -> Any:
    """`data[name]`, or the view's data derived from its source's."""
    if name in data:
        return data[name]
    v = parse(name)
    if v is None:
        raise KeyError(name)
    return derive(lookup(data, v[0]), v[1], v[2])
