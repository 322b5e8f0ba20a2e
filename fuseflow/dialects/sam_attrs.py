"""Typed attributes of each sam op kind: what `SamOp.typed` gives instead of string keys.

One frozen dataclass per kind (kinds with the same attributes share one), with the dialect's
declared attributes as fields (`tests/unit/test_sam_attrs.py` checks that they agree with
`dialects/sam.py`) and, for the ops that carry tiles, their optional ``axes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class NoAttrs:
    """``sam.repsiggen``, ``sam.crd_drop``, ``sam.val_drop``: no attributes."""


@dataclass(frozen=True)
class RootAttrs:
    """``sam.root``: the tensor whose root reference it emits."""

    tensor: str


@dataclass(frozen=True)
class ScanAttrs:
    """``sam.scan``: one stored level of a tensor iterated at an index variable."""

    tensor: str
    mode: int
    level: int
    format: str
    dim: int
    index_var: str


@dataclass(frozen=True)
class LocateAttrs:
    """``sam.locate``: a level's positions looked up by coordinate."""

    tensor: str
    mode: int
    level: int
    dim: int
    index_var: str


@dataclass(frozen=True)
class VarAttrs:
    """``sam.intersect``, ``sam.union``, ``sam.concat``: the index variable they join at."""

    index_var: str


@dataclass(frozen=True)
class RepeatAttrs:
    """``sam.repeat``: a reference repeated along an index variable."""

    tensor: str
    index_var: str


@dataclass(frozen=True)
class LoadAttrs:
    """``sam.load``: a tensor's values (tiles of `axes` in a blocked region)."""

    tensor: str
    axes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class AluAttrs:
    """``sam.alu``: an ALU op with its scalar operand."""

    op: str
    scalar: float
    axes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ReduceAttrs:
    """``sam.reduce``: a reduction over an index variable."""

    kind: str
    index_var: str
    axes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SpaccAttrs:
    """``sam.spacc``: a sparse accumulator of `order` inner levels."""

    order: int
    kind: str
    index_var: str
    axes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WriteCrdAttrs:
    """``sam.write_crd``: one level of a result written."""

    tensor: str
    mode: int
    level: int
    format: str


@dataclass(frozen=True)
class WriteValAttrs:
    """``sam.write_val``: a result's values written."""

    tensor: str


@dataclass(frozen=True)
class LaneAttrs:
    """``sam.fork``, ``sam.join``: `factor` lanes at an index variable, `depth` levels below it."""

    index_var: str
    factor: int
    depth: int


ATTRS: dict[str, type] = {
    "root": RootAttrs,
    "scan": ScanAttrs,
    "locate": LocateAttrs,
    "intersect": VarAttrs,
    "union": VarAttrs,
    "concat": VarAttrs,
    "repsiggen": NoAttrs,
    "repeat": RepeatAttrs,
    "load": LoadAttrs,
    "alu": AluAttrs,
    "reduce": ReduceAttrs,
    "spacc": SpaccAttrs,
    "crd_drop": NoAttrs,
    "val_drop": NoAttrs,
    "write_crd": WriteCrdAttrs,
    "write_val": WriteValAttrs,
    "fork": LaneAttrs,
    "join": LaneAttrs,
}
"""Each sam op kind's typed attributes."""

Attrs = (
    NoAttrs
    | RootAttrs
    | ScanAttrs
    | LocateAttrs
    | VarAttrs
    | RepeatAttrs
    | LoadAttrs
    | AluAttrs
    | ReduceAttrs
    | SpaccAttrs
    | WriteCrdAttrs
    | WriteValAttrs
    | LaneAttrs
)


def typed_attrs(kind: str, attrs: Mapping[str, Any]) -> Attrs:
    """The typed attributes of a `kind` op whose decoded attributes are `attrs`."""
    cls = ATTRS.get(kind)
    if cls is None:
        raise KeyError(f"sam.{kind}: no typed attributes")
    kw: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in attrs:
            v = attrs[f.name]
            kw[f.name] = tuple(v) if isinstance(v, list) else v
    return cls(**kw)
