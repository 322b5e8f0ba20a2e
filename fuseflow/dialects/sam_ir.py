"""The one way sam IR is built and read: typed builders and typed op views over the dialect.

Every module that produces sam (the lowering, ``sam-parallelize``) builds graphs through
`GraphBuilder`, one method per primitive returning its result streams; every module that
consumes sam (the simulator front end, passes, the ranker) reads it through `read_module`,
whose `SamOp` views decode attributes to Python values. The builder emits the dialect's generic
form as text and the module is parsed (and verified by the dialect) once at the end: building
ops one by one through the pinned bindings costs ~40 us per op, text ~2 us, and large fused
graphs have 10^4-10^5 ops. The generic-form text is an interchange format between this
module and its callers: the lowering keeps each region's text (a renamed copy is spliced as
text, `module_text`), ``sam-parallelize`` splices the texts of the graphs it rewrites, and the
compile driver parses only the distinct graphs to verify them. Reading always goes through
`read_module`.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from fuseflow.dialects.sam_attrs import Attrs, typed_attrs
from fuseflow.errors import VerificationError
from fuseflow.mlir import ir

REF, CRD, SIG = "!sam.ref", "!sam.crd", "!sam.rsig"
VAL = "!sam.val<f32>"


def val_type(tile: Sequence[int] = ()) -> str:
    """The value-stream type of scalars (no `tile`) or of dense tiles of that shape."""
    return f"!sam.val<tensor<{'x'.join(map(str, tile))}xf32>>" if tile else VAL


def tile_type(block: int, rank: int) -> str:
    """A value stream of rank-`rank` b x ... x b tiles (rank 0: a 0-d tile of a blocked region)."""
    return f"!sam.val<tensor<{''.join(f'{block}x' for _ in range(rank))}f32>>"


def attr_text(v: Any) -> str:
    """A Python value as an MLIR attribute (ints are i64, floats f32, bit-exact for inf/nan)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v} : i64"
    if isinstance(v, float):
        if math.isnan(v):
            return "0x7FC00000 : f32"
        if math.isinf(v):
            return ("0x7F800000" if v > 0 else "0xFF800000") + " : f32"
        return f"{v:.9e} : f32"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(attr_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {attr_text(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


_TENSOR_ATTR = re.compile(r'tensor = "([^"\\]*)"')


def _as_read(v: Any) -> Any:
    """A Python attribute value as `_decode` reads it back from `attr_text`'s text: floats are
    f32 (NaN canonical), tuples lists."""
    if isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return v if math.isinf(v) else math.nan
        return struct.unpack("<f", struct.pack("<f", float(f"{v:.9e}")))[0]  # the text's f32
    if isinstance(v, (list, tuple)):
        return [_as_read(x) for x in v]
    if isinstance(v, dict):
        return {k: _as_read(x) for k, x in v.items()}
    raise TypeError(type(v))


def _decode(a: ir.Attribute) -> Any:
    """An attribute as a Python value (strings, ints, floats, bools, lists, dicts)."""
    if isinstance(a, (ir.StringAttr, ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr)):
        return a.value
    if isinstance(a, ir.ArrayAttr):
        return [_decode(x) for x in a]
    if isinstance(a, ir.DictAttr):
        return {a[i].name: _decode(a[i].attr) for i in range(len(a))}
    if isinstance(a, ir.DenseI32ArrayAttr):
        return list(a)
    return a


# --- the graph's tensors schema ------------------------------------------------------------------
@dataclass(frozen=True)
class TensorEntry:
    """One entry of a ``sam.graph``'s ``tensors`` attribute (verified by the dialect)."""

    name: str
    role: str  # "input" | "output"
    shape: tuple[int, ...]
    levels: tuple[str, ...]
    mode_order: tuple[int, ...]
    copy_of: str | None = None  # a re-laid copy of another tensor's data
    block: int = 0  # > 0: levels over b x b blocks, values are tiles

    def as_dict(self) -> dict[str, Any]:
        """The entry as the graph's 'tensors' attribute stores it."""
        d: dict[str, Any] = {
            "name": self.name,
            "role": self.role,
            "shape": [int(s) for s in self.shape],
            "levels": list(self.levels),
            "mode_order": [int(m) for m in self.mode_order],
        }
        if self.copy_of is not None:
            d["copy_of"] = self.copy_of
        if self.block:
            d["block"] = self.block
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TensorEntry:
        """The entry from its 'tensors' attribute form."""
        return cls(
            d["name"],
            d["role"],
            tuple(d["shape"]),
            tuple(d["levels"]),
            tuple(d["mode_order"]),
            d.get("copy_of"),
            d.get("block", 0),
        )


# --- building --------------------------------------------------------------------------------------
class GraphBuilder:
    """Builds one ``sam.graph``: a method per primitive, each returning its result streams.

    Streams are opaque handles (SSA names); `type_of` gives a stream's type. With `cse`, pure ops
    with equal operands and attributes are built once (hash-consing), as the lowering wants;
    a pass that copies ops (lanes) turns it off.
    """

    def __init__(self, cse: bool = True):
        self.cse = cse
        self._lines: list[str] = []
        self._types: dict[str, str] = {}
        self._memo: dict = {}
        self._n = 0
        self.nodes = 0  # ops built so far (a node budget reads it)
        self._ops: list[SamOp] = []  # the same ops, typed: what `read_graph` reads back from the text
        self._where: dict[str, tuple[int, int]] = {}  # SSA name -> (op index, result number)

    def type_of(self, stream: str) -> str:
        """The stream type (``!sam.ref`` ...) of SSA value `stream`."""
        return self._types[stream]

    def _emit(
        self,
        kind: str,
        operands: Sequence[str],
        attrs: dict[str, Any],
        results: Sequence[str],
        segments: Sequence[int] | None = None,
        result_segments: Sequence[int] | None = None,
        pure: bool = True,
        raw: Sequence[tuple[str, str]] = (),
        raw_attrs: Mapping[str, Any] | None = None,
    ) -> list[str]:
        pure = pure and self.cse
        key = None
        if pure:
            key = (kind, tuple(operands), tuple(sorted((k, repr(v)) for k, v in attrs.items())))
            if key in self._memo:
                return self._memo[key]
        parts = [f"{k} = {attr_text(x)}" for k, x in sorted(attrs.items())] + [f"{k} = {t}" for k, t in raw]
        if segments is not None:
            parts.append(f"operandSegmentSizes = array<i32: {', '.join(map(str, segments))}>")
        if result_segments is not None:
            parts.append(f"resultSegmentSizes = array<i32: {', '.join(map(str, result_segments))}>")
        names = []
        for t in results:
            nm = f"%{self._n}"
            self._n += 1
            self._types[nm] = t
            names.append(nm)
        self._ops.append(
            SamOp(
                kind,
                [self._where[o] for o in operands],
                {k: _as_read(x) for k, x in sorted(attrs.items())} if not raw else dict(raw_attrs or {}),
                list(results),
            )
        )
        for r, nm in enumerate(names):
            self._where[nm] = (len(self._ops) - 1, r)
        lhs = (", ".join(names) + " = ") if names else ""
        in_types = ", ".join(self._types[o] for o in operands)
        out_types = ", ".join(results)
        out_types = f"({out_types})" if len(results) != 1 else out_types
        self._lines.append(
            f'    {lhs}"sam.{kind}"({", ".join(operands)}) {{{", ".join(parts)}}} : ({in_types}) -> {out_types}'
        )
        self.nodes += 1
        if key is not None:
            self._memo[key] = names
        return names

    @staticmethod
    def _axes(axes: Sequence[str] | None) -> dict[str, Any]:
        return {} if axes is None else {"axes": list(axes)}

    # -- sources and level iteration --
    def root(self, tensor: str) -> str:
        """The root reference ``0 D`` of `tensor` ("" for a dense range generator)."""
        return self._emit("root", [], {"tensor": tensor}, [REF])[0]

    def scan(
        self, ref: str, *, tensor: str, mode: int, level: int, format: str, dim: int, index_var: str
    ) -> tuple[str, str]:
        """Scan one level: (ref, crd) streams of `index_var`."""
        attrs = {"tensor": tensor, "mode": mode, "level": level, "format": format, "dim": dim, "index_var": index_var}
        ref_out, crd = self._emit("scan", [ref], attrs, [REF, CRD])
        return ref_out, crd

    def locate(self, crd: str, ref: str, *, tensor: str, mode: int, level: int, dim: int, index_var: str) -> str:
        """Locate into a dense level at the coordinates `crd`."""
        attrs = {"tensor": tensor, "mode": mode, "level": level, "dim": dim, "index_var": index_var}
        return self._emit("locate", [crd, ref], attrs, [REF])[0]

    def _joiner(self, kind: str, crds: Sequence[str], payloads: Sequence[str], index_var: str) -> tuple[str, list[str]]:
        n_ref = sum(self._types[p] == REF for p in payloads)
        if any(self._types[p] != REF for p in payloads[:n_ref]):
            raise ValueError(f"sam.{kind}: ref payloads must precede value payloads")
        n = len(crds)
        outs = self._emit(
            kind,
            list(crds) + list(payloads),
            {"index_var": index_var},
            [CRD] + [self._types[p] for p in payloads],
            segments=[n, n_ref, n - n_ref],
            result_segments=[1, n_ref, n - n_ref],
        )
        return outs[0], outs[1:]

    def intersect(self, crds: Sequence[str], payloads: Sequence[str], *, index_var: str) -> tuple[str, list[str]]:
        """Co-iterate (crd, payload) pairs, keep common coordinates: (crd, payloads)."""
        return self._joiner("intersect", crds, payloads, index_var)

    def union(self, crds: Sequence[str], payloads: Sequence[str], *, index_var: str) -> tuple[str, list[str]]:
        """Co-iterate (crd, payload) pairs, keep every coordinate: (crd, payloads)."""
        return self._joiner("union", crds, payloads, index_var)

    def repsiggen(self, crd: str) -> str:
        """A repeat-signal generator over `crd`; returns the signal stream."""
        return self._emit("repsiggen", [crd], {}, [SIG])[0]

    def repeat(self, stream: str, sig: str, *, tensor: str = "", index_var: str = "") -> str:
        """Repeat a ref or value stream along the coordinates behind `sig`."""
        attrs = {"tensor": tensor, "index_var": index_var}
        return self._emit("repeat", [stream, sig], attrs, [self._types[stream]])[0]

    # -- values --
    def load(self, ref: str, *, tensor: str, axes: Sequence[str] | None = None, type: str = VAL) -> str:
        """A load of `tensor`'s values at `ref`; returns the value stream."""
        return self._emit("load", [ref], {"tensor": tensor, **self._axes(axes)}, [type])[0]

    def alu(
        self,
        lhs: str,
        rhs: str | None = None,
        *,
        op: str,
        scalar: float = 0.0,
        axes: Sequence[str] | None = None,
        type: str = VAL,
    ) -> str:
        """An ALU applying `op` to `lhs` and `rhs` (or `scalar`); returns the value stream."""
        operands = [lhs] + ([rhs] if rhs is not None else [])
        attrs = {"op": op, "scalar": float(scalar), **self._axes(axes)}
        return self._emit("alu", operands, attrs, [type], segments=[1, len(operands) - 1])[0]

    def reduce(
        self,
        val: str,
        parent: str | None = None,
        *,
        kind: str,
        index_var: str,
        axes: Sequence[str] | None = None,
        type: str = VAL,
    ) -> str:
        """An innermost reduction of `val` over `index_var` (`parent`: the level above's coordinates)."""
        operands = [val] + ([parent] if parent is not None else [])
        attrs = {"kind": kind, "index_var": index_var, **self._axes(axes)}
        return self._emit("reduce", operands, attrs, [type], segments=[1, len(operands) - 1])[0]

    def spacc(
        self,
        inner: Sequence[str],
        outer: str,
        val: str,
        *,
        kind: str,
        index_var: str,
        axes: Sequence[str] | None = None,
        type: str = VAL,
    ) -> tuple[list[str], str]:
        """Sparse accumulator of order len(inner): (inner coordinate streams, values)."""
        order = len(inner)
        outs = self._emit(
            "spacc",
            list(inner) + [outer, val],
            {"order": order, "kind": kind, "index_var": index_var, **self._axes(axes)},
            [CRD] * order + [type],
            segments=[order, 1, 1],
            result_segments=[order, 1],
        )
        return outs[:-1], outs[-1]

    # -- droppers (a declared-sparse result keeps only its nonzeros) --
    def val_drop(self, crd: str, val: str) -> tuple[str, str]:
        """Drop (coordinate, value) pairs whose value is exactly zero."""
        c, v = self._emit("val_drop", [crd, val], {}, [CRD, self._types[val]])
        return c, v

    def crd_drop(self, outer: str, inner: str) -> tuple[str, str]:
        """Drop outer coordinates whose inner fiber is empty (and those fibers' stops)."""
        o, i = self._emit("crd_drop", [outer, inner], {}, [CRD, CRD])
        return o, i

    # -- writers (never CSE'd: they are the graph's effects) --
    def write_crd(
        self, crd: str, parent: str | None = None, *, tensor: str, mode: int, level: int, format: str
    ) -> None:
        """A writer of one coordinate level of output `tensor`."""
        operands = [crd] + ([parent] if parent is not None else [])
        attrs = {"tensor": tensor, "mode": mode, "level": level, "format": format}
        self._emit("write_crd", operands, attrs, [], segments=[1, len(operands) - 1], pure=False)

    def write_val(self, val: str, *, tensor: str, axes: Sequence[str] | None = None) -> None:
        """The writer of output `tensor`'s values."""
        self._emit("write_val", [val], {"tensor": tensor, **self._axes(axes)}, [], pure=False)

    # -- lanes --
    def fork(self, stream: str, *, index_var: str, factor: int, depth: int) -> list[str]:
        """Split `stream` into `factor` lanes at `index_var`; returns one stream per lane."""
        attrs = {"depth": depth, "factor": factor, "index_var": index_var}
        t = self._types[stream]
        return self._emit("fork", [stream], attrs, [t] * factor, result_segments=[factor], pure=False)

    def join(self, lanes: Sequence[str], *, index_var: str, depth: int) -> str:
        """Merge the lanes of a fork back into one stream."""
        attrs = {"depth": depth, "factor": len(lanes), "index_var": index_var}
        t = self._types[lanes[0]]
        return self._emit("join", list(lanes), attrs, [t], segments=[len(lanes)], pure=False)[0]

    def copy(self, op: SamOp, operands: Sequence[str]) -> list[str]:
        """Build another instance of a read op on new operands (attributes and types kept)."""
        return self._emit(op.kind, operands, {}, op.result_types, pure=False, raw=op.attr_texts, raw_attrs=op.attrs)

    def renamed(self, names: Mapping[str, str]) -> GraphBuilder:
        """A finished graph's copy whose ops read and write other tensors (`names`: old -> new);
        what building the same ops with the new names gives (a structurally identical region
        lowered once, `lower_module`)."""
        out = GraphBuilder(self.cse)
        out._types, out._n, out.nodes, out._where = self._types, self._n, self.nodes, self._where

        def line(m: re.Match) -> str:
            return f"tensor = {attr_text(names.get(m.group(1), m.group(1)))}"

        out._lines = [_TENSOR_ATTR.sub(line, t) if 'tensor = "' in t else t for t in self._lines]
        out._ops = [
            SamOp(
                op.kind,
                op.operands,
                {**op.attrs, "tensor": names.get(op.attrs["tensor"], op.attrs["tensor"])},
                op.result_types,
            )
            if "tensor" in op.attrs and not op.attr_texts
            else op
            for op in self._ops
        ]  # built directly: `dataclasses.replace` is most of the renaming's time on a 1,380-region model
        if any(op.attr_texts and "tensor" in op.attrs for op in self._ops):
            raise ValueError("a copied op's attribute texts cannot be renamed")
        return out

    def typed(self, name: str, tensors: Iterable[TensorEntry]) -> SamGraph:
        """The finished graph as `read_graph` would read its text back, without printing and
        parsing it (the order ranker estimates many candidate graphs of one region)."""
        return SamGraph(name, list(tensors), list(self._ops))

    def graph(self, name: str, tensors: Iterable[TensorEntry], extra: Sequence[tuple[str, str]] = ()) -> str:
        """The finished ``sam.graph`` (text for `module_text`)."""
        attrs = [f"sym_name = {attr_text(name)}", f"tensors = {attr_text([t.as_dict() for t in tensors])}"]
        attrs += [f"{k} = {t}" for k, t in extra]
        body = "\n".join(self._lines)
        return f'  "sam.graph"() ({{\n{body}\n  }}) {{{", ".join(attrs)}}} : () -> ()'


def module_text(graphs: Sequence[str], outputs: Sequence[str] | None = None) -> str:
    """A sam module from finished graphs; `outputs` names the program's results (``sam.outputs``)."""
    head = "module" if outputs is None else f"module attributes {{sam.outputs = {attr_text(list(outputs))}}}"
    return head + " {\n" + "\n".join(graphs) + "\n}\n"


def with_graphs(module: str, graphs: Sequence[str]) -> str:
    """`module` (a `module_text`) holding `graphs` instead of its own, its attributes kept."""
    return module.split("\n", 1)[0] + "\n" + "\n".join(graphs) + "\n}\n"


def parse_module(text: str, context: ir.Context | None = None) -> ir.Module:
    """Parse (and verify) a sam module built by `module_text`."""
    return ir.Module.parse(text, context=context)


# --- reading ---------------------------------------------------------------------------------------
_SEGMENT_ATTRS = ("operandSegmentSizes", "resultSegmentSizes")


@dataclass
class SamOp:
    """A read-only view of one sam op: its kind, operands as (producer op index, result number),
    attributes decoded to Python values, and result types."""

    kind: str
    operands: list[tuple[int, int]]
    attrs: dict[str, Any]
    result_types: list[str]
    attr_texts: list[tuple[str, str]] = field(default_factory=list, repr=False)  # for `GraphBuilder.copy`

    def get(self, name: str, default: Any = None) -> Any:
        """Attribute `name`, decoded to a Python value (by name: the simulator's parameter table
        reads them so; code that knows the kind reads `typed`)."""
        return self.attrs.get(name, default)

    @cached_property
    def typed(self) -> Attrs:
        """The op's attributes as its kind's dataclass (`sam_attrs`): ``op.typed.format`` of a
        `ScanAttrs`, ``op.typed.order`` of a `SpaccAttrs`."""
        return typed_attrs(self.kind, self.attrs)

    @property
    def tensor(self) -> str | None:
        """The tensor the op reads or writes, if any."""
        return self.attrs.get("tensor") or None

    @property
    def index_var(self) -> str | None:
        """The index variable the op works at, if any."""
        return self.attrs.get("index_var") or None

    @property
    def axes(self) -> list[str] | None:
        """A tile op's axes (blocked value streams), if any."""
        return self.attrs.get("axes")

    @property
    def n_results(self) -> int:
        """How many results the op has."""
        return len(self.result_types)


@dataclass
class SamGraph:
    """A read ``sam.graph``: name, tensors schema, ops in order, other graph attributes."""

    name: str
    tensors: list[TensorEntry]
    ops: list[SamOp]
    extra_attrs: list[tuple[str, str]] = field(default_factory=list)
    # built as a copy of the graph named [0] with its tensors renamed by [1] (old -> new)
    renamed_from: tuple[str, Mapping[str, str]] | None = field(default=None, compare=False, repr=False)

    def digest(self, renamed: Callable[[str], bool] = lambda _name: True) -> str:
        """A hash of the graph's structure: its tensors schema and its ops (kinds, operands,
        attributes, result types), up to the graph's name and the tensor names `renamed` selects,
        which are numbered in order of first appearance. Two regions that a schedule cuts alike
        out of a model hash alike when only their intermediates' names differ."""
        numbers: dict[str, str] = {}

        def name(n: Any) -> Any:
            if isinstance(n, str) and renamed(n):
                return numbers.setdefault(n, f"#{len(numbers)}")
            return n

        h = hashlib.sha1()
        for te in self.tensors:
            h.update(
                repr((name(te.name), te.role, te.shape, te.levels, te.mode_order, name(te.copy_of), te.block)).encode()
            )
        for op in self.ops:
            attrs = sorted((k, name(v) if k == "tensor" else v) for k, v in op.attrs.items())
            h.update(repr((op.kind, op.operands, attrs, op.result_types)).encode())
        h.update(repr(self.extra_attrs).encode())
        return h.hexdigest()


@dataclass
class SamModule:
    """A sam module read back: its graphs and the program outputs it names."""

    graphs: list[SamGraph]
    outputs: list[str] | None  # sam.outputs, when the module names them


def read_graph(g: ir.Operation, texts: bool = True) -> SamGraph:
    """The typed view of one ``sam.graph`` op (the dialect has verified it); `texts`: keep each
    attribute's text (printing them is a third of reading a large graph)."""
    where: dict = {}
    ops: list[SamOp] = []
    type_text: dict = {}  # a graph has few distinct stream types: print each once
    for i, op in enumerate(g.regions[0].blocks[0].operations):
        op = op.operation
        kind = op.name.split(".", 1)[1]
        operands = []
        for v in op.operands:
            if v not in where:
                raise VerificationError(f"sam.{kind}: operand defined outside the graph")
            operands.append(where[v])
        attrs, attr_texts = {}, []
        named = op.attributes
        for j in range(len(named)):
            na = named[j]
            if texts:
                attr_texts.append((na.name, str(na.attr)))
            if na.name not in _SEGMENT_ATTRS:
                attrs[na.name] = _decode(na.attr)
        result_types = []
        for r in op.results:
            where[r] = (i, r.result_number)
            t = r.type
            if t not in type_text:
                type_text[t] = str(t)
            result_types.append(type_text[t])
        ops.append(SamOp(kind, operands, attrs, result_types, attr_texts))
    ga = g.attributes
    extra = [(ga[j].name, str(ga[j].attr)) for j in range(len(ga)) if ga[j].name not in ("sym_name", "tensors")]
    tensors = [TensorEntry.from_dict(t) for t in _decode(ga["tensors"])]
    return SamGraph(ir.StringAttr(ga["sym_name"]).value, tensors, ops, extra)


def read_module(module: ir.Module, texts: bool = True) -> SamModule:
    """Typed views of every ``sam.graph`` in `module` and its ``sam.outputs`` (`texts`: keep each
    attribute's text, which `GraphBuilder.copy` needs)."""
    graphs = []
    for g in module.body.operations:
        g = g.operation
        if g.name != "sam.graph":
            raise VerificationError(f"expected only sam.graph ops at the top level, found '{g.name}'")
        graphs.append(read_graph(g, texts))
    return SamModule(graphs, module_outputs(module))


def module_outputs(module: ir.Module) -> list[str] | None:
    """The program outputs a sam module names (``sam.outputs``), if it names them."""
    attrs = module.operation.attributes
    return _decode(attrs["sam.outputs"]) if "sam.outputs" in attrs else None
