"""The sam dialect: one op per Sparse Abstract Machine primitive, defined with ``dialects.ext``.

Streams are SSA values of type ``!sam.ref``, ``!sam.crd``, ``!sam.val<f32>`` (or a dense tile
``!sam.val<tensor<16x16xf32>>``) and ``!sam.rsig``. A ``sam.graph`` holds one fused dataflow
graph; tensors are bound by name through the ``tensor`` attribute of scanners, loads and writers
and are described in the graph's ``tensors`` attribute. The pinned bindings print Python-defined
ops only in the generic form, e.g.::

    "sam.graph"() ({
      %0 = "sam.root"() {tensor = "A"} : () -> !sam.ref
      %1, %2 = "sam.scan"(%0) {dim = 4 : i64, format = "dense", index_var = "i", level = 0 : i64,
                               mode = 0 : i64, tensor = "A"} : (!sam.ref) -> (!sam.ref, !sam.crd)
      ...
    }) {sym_name = "spmv", tensors = [...]} : () -> ()
"""
# No `from __future__ import annotations`: dialects.ext reads the annotations as live types.

import sys
from collections.abc import Sequence
from typing import Any

from fuseflow.mlir import ext, ir
from fuseflow.primitives import ALU_BINARY, ALU_UNARY  # the simulator's table

Operand, Result, Pure, result, Region = ext.Operand, ext.Result, ext.Pure, ext.result, ext.Region

LEVEL_FORMATS = ("dense", "compressed")
"""Level formats a scan iterates (the simulator has no singleton scanner; COO is stored as DCSR)."""
REDUCE_KINDS = ("sum", "max")


class Sam(ext.Dialect, name="sam"):
    """Sparse streaming dataflow (SAM) primitives."""


class RefStream(Sam.Type, name="ref"):
    """A stream of references (positions into a tensor level) with stop/empty/done tokens."""


class CrdStream(Sam.Type, name="crd"):
    """A stream of coordinates of one index variable."""


class ValStream(Sam.Type, name="val"):
    """A stream of values; `elem` is f32 or a dense tile type such as tensor<16x16xf32>."""

    elem: Any


class RsigStream(Sam.Type, name="rsig"):
    """A repeat signal: R per coordinate, a stop per stop, D."""


def _val() -> ir.Type:
    return ir.Type.parse("!sam.val<f32>")


def _err(op, message: str) -> bool:
    op.operation.location.emit_error(f"'{op.operation.name}' op {message}")
    return False


def _attr(op, name: str):
    """Defensive attribute read: verifiers may run before IRDL attribute checks."""
    try:
        return op.operation.attributes[name]
    except KeyError:
        return None


def _int(op, name: str) -> int | None:
    a = _attr(op, name)
    return a.value if isinstance(a, ir.IntegerAttr) else None


def _str(op, name: str) -> str | None:
    a = _attr(op, name)
    return a.value if isinstance(a, ir.StringAttr) else None


def _segments(op, results: bool = False) -> bool:
    """Ops with variadic operands/results need segment sizes (the generic form spells them out)."""
    name = "resultSegmentSizes" if results else "operandSegmentSizes"
    if _attr(op, name) is None:
        return _err(op, f"requires the '{name}' attribute")
    return True


def _check_level(op) -> bool:
    level, mode = _int(op, "level"), _int(op, "mode")
    if level is None or level < 0:
        return _err(op, "requires a non-negative integer 'level'")
    if mode is None or mode < 0:
        return _err(op, "requires a non-negative integer 'mode'")
    return True


class GraphOp(Sam.Operation, name="graph", traits=[ir.NoTerminatorTrait, ir.IsIsolatedFromAboveTrait]):
    """One fused dataflow graph (a fusion region) with its tensor bindings.

    ``tensors`` is an array of dictionaries ``{name, role = "input"|"output", shape, levels,
    mode_order}`` describing every tensor the graph's scanners, loads and writers name.
    """

    sym_name: ir.StringAttr
    tensors: ir.ArrayAttr
    body: Region

    def verify_invariants(self) -> bool:
        """A graph carries a well-formed 'tensors' schema (TensorEntry)."""
        tensors = _attr(self, "tensors")
        if tensors is None:
            return _err(self, "requires a 'tensors' array")
        if not isinstance(tensors, ir.ArrayAttr):
            return _err(self, "requires 'tensors' to be an array")
        for i, t in enumerate(tensors):
            problem = _tensor_entry_problem(t)
            if problem:
                return _err(self, f"'tensors' entry {i}: {problem}")
        return True


TENSOR_FIELDS = ("name", "role", "shape", "levels", "mode_order")
"""Required fields of a `sam.graph` tensors entry; `copy_of` (string) and `block` (int) are optional."""


def _tensor_entry_problem(t) -> str | None:
    """What is wrong with one entry of a graph's `tensors` attribute (None: nothing)."""
    if not isinstance(t, ir.DictAttr):
        return "expected a dictionary"
    keys = [t[i].name for i in range(len(t))]
    for k in TENSOR_FIELDS:
        if k not in keys:
            return f"missing field '{k}'"
    unknown = [k for k in keys if k not in TENSOR_FIELDS + ("copy_of", "block")]
    if unknown:
        return f"unknown field '{unknown[0]}'"
    if not isinstance(t["name"], ir.StringAttr):
        return "'name' must be a string"
    name = t["name"].value
    if not isinstance(t["role"], ir.StringAttr) or t["role"].value not in ("input", "output"):
        return f'tensor {name}: \'role\' must be "input" or "output"'

    def ints(a):
        ok = isinstance(a, ir.ArrayAttr) and all(isinstance(x, ir.IntegerAttr) for x in a)
        return [x.value for x in a] if ok else None

    shape, order = ints(t["shape"]), ints(t["mode_order"])
    if shape is None or any(d < 0 for d in shape):
        return f"tensor {name}: 'shape' must be an array of non-negative integers"
    levels = t["levels"]
    if not isinstance(levels, ir.ArrayAttr) or not all(isinstance(x, ir.StringAttr) for x in levels):
        return f"tensor {name}: 'levels' must be an array of strings"
    bad = [x.value for x in levels if x.value not in ("dense", "compressed")]
    if bad:
        return f"tensor {name}: unknown level format '{bad[0]}' (dense or compressed)"
    if len(levels) != len(shape):
        return f"tensor {name}: {len(levels)} levels for a rank-{len(shape)} shape"
    if order is None or sorted(order) != list(range(len(shape))):
        return f"tensor {name}: 'mode_order' must be a permutation of 0..{len(shape) - 1}"
    if "copy_of" in keys and not isinstance(t["copy_of"], ir.StringAttr):
        return f"tensor {name}: 'copy_of' must be a string"
    if "block" in keys and (not isinstance(t["block"], ir.IntegerAttr) or t["block"].value < 1):
        return f"tensor {name}: 'block' must be a positive integer"
    return None


class RootOp(Sam.Operation, name="root", traits=[Pure]):
    """The root reference stream ``0 D`` of one tensor."""

    tensor: ir.StringAttr
    out_ref: Result[RefStream] = result(default_factory=RefStream.get)


class ScanOp(Sam.Operation, name="scan", traits=[Pure]):
    """Level scanner: each input ref becomes one fiber of (ref, crd) closed by a stop token."""

    in_ref: Operand[RefStream]
    tensor: ir.StringAttr
    mode: ir.IntegerAttr
    level: ir.IntegerAttr
    format: ir.StringAttr
    dim: ir.IntegerAttr
    index_var: ir.StringAttr
    out_ref: Result[RefStream] = result(default_factory=RefStream.get)
    out_crd: Result[CrdStream] = result(default_factory=CrdStream.get)

    def verify_invariants(self) -> bool:
        """A scan has a known level format and a dense level a non-negative 'dim'."""
        fmt = _str(self, "format")
        if fmt not in LEVEL_FORMATS:
            return _err(self, f"has unknown level format '{fmt}'; expected one of {', '.join(LEVEL_FORMATS)}")
        dim = _int(self, "dim")
        if dim is None or dim < 0:
            return _err(self, "requires a non-negative 'dim'")
        return _check_level(self)


class LocateOp(Sam.Operation, name="locate", traits=[Pure]):
    """Iterate-locate into a dense level: ref = parent_ref * dim + crd for each coordinate."""

    in_crd: Operand[CrdStream]
    in_ref: Operand[RefStream]
    tensor: ir.StringAttr
    mode: ir.IntegerAttr
    level: ir.IntegerAttr
    dim: ir.IntegerAttr
    index_var: ir.StringAttr
    out_ref: Result[RefStream] = result(default_factory=RefStream.get)

    def verify_invariants(self) -> bool:
        """A locate has a positive 'dim'."""
        dim = _int(self, "dim")
        if dim is None or dim <= 0:
            return _err(self, "requires a positive 'dim'")
        return _check_level(self)


def _check_joiner(op) -> bool:
    if not (_segments(op) and _segments(op, results=True)):
        return False
    n_crd, n_ref, n_val = len(op.in_crds), len(op.in_refs), len(op.in_vals)
    if n_crd < 1:
        return _err(op, "needs at least one operand")
    if n_crd != n_ref + n_val:
        return _err(op, f"has {n_crd} coordinate streams but {n_ref + n_val} payload streams")
    if len(op.out_refs) != n_ref or len(op.out_vals) != n_val:
        return _err(
            op, f"has {n_ref} ref and {n_val} value payloads but {len(op.out_refs)} and {len(op.out_vals)} outputs"
        )
    return True


class _Joiner(Sam.Operation):
    """Operands and results shared by the joiners (no name: not an op of its own)."""

    in_crds: Sequence[Operand[CrdStream]]
    in_refs: Sequence[Operand[RefStream]]
    in_vals: Sequence[Operand[ValStream]]
    index_var: ir.StringAttr
    out_crd: Result[CrdStream]
    out_refs: Sequence[Result[RefStream]]
    out_vals: Sequence[Result[ValStream]]

    def verify_invariants(self) -> bool:
        return _check_joiner(self)


class IntersectOp(_Joiner, name="intersect", traits=[Pure]):
    """Co-iterate N (crd, payload) pairs; emit the coordinates present in all of them.

    Payloads are refs, or values where an intermediate's value stream travels instead of a ref
    (`in_crds` lists the ref payloads' coordinates first, then the value payloads'). IRDL binds
    one type per variadic group, hence the two payload groups.
    """


class UnionOp(_Joiner, name="union", traits=[Pure]):
    """Co-iterate N (crd, payload) pairs; emit every coordinate, N for absent operands.

    Payload groups as for ``sam.intersect``: refs first, then values.
    """


class RepSigGenOp(Sam.Operation, name="repsiggen", traits=[Pure]):
    """Repeat signal from a coordinate stream: R per coordinate, a stop per stop, D."""

    in_crd: Operand[CrdStream]
    out_sig: Result[RsigStream] = result(default_factory=RsigStream.get)


class RepeatOp(Sam.Operation, name="repeat", traits=[Pure]):
    """Broadcast a ref (or value) along an index variable the tensor lacks."""

    in_ref: Operand[RefStream | ValStream]
    in_sig: Operand[RsigStream]
    tensor: ir.StringAttr
    index_var: ir.StringAttr
    out_ref: Result[RefStream | ValStream]

    def verify_invariants(self) -> bool:
        """A repeat's result has the repeated stream's type."""
        if self.in_ref.type != self.out_ref.type:
            return _err(self, "result type must match the repeated stream's type")
        return True


class LoadOp(Sam.Operation, name="load", traits=[Pure]):
    """Read a tensor's values (scalars or tiles) at the incoming refs; N loads 0."""

    in_ref: Operand[RefStream]
    tensor: ir.StringAttr
    out_val: Result[ValStream] = result(default_factory=_val)


class AluOp(Sam.Operation, name="alu", traits=[Pure]):
    """Elementwise arithmetic on aligned value streams.

    Binary ops take two streams, or one stream and the ``scalar`` attribute as second operand
    (``rsub`` and ``rdiv`` put the scalar first). Unary ops take one stream and ignore ``scalar``.
    The operands are two groups (``in_lhs``, optional ``in_rhs``) so that tile streams of
    different ranks can meet: the smaller broadcasts along the result's other axes.
    """

    in_lhs: Operand[ValStream]
    in_rhs: Sequence[Operand[ValStream]]
    op: ir.StringAttr
    scalar: ir.FloatAttr
    out_val: Result[ValStream] = result(default_factory=_val)

    def verify_invariants(self) -> bool:
        """An ALU names a known op and gets as many value streams as the op takes (a scalar may stand for one)."""
        if not _segments(self):
            return False
        name, n = _str(self, "op"), 1 + len(self.in_rhs)
        if len(self.in_rhs) > 1:
            return _err(self, f"takes at most two value streams, got {n}")
        if name in ALU_UNARY:
            if n != 1:
                return _err(self, f"'{name}' expects 1 value stream, got {n}")
        elif name in ALU_BINARY:
            if n not in (1, 2):
                return _err(self, f"'{name}' expects 2 value streams (or 1 and the scalar), got {n}")
        else:
            return _err(self, f"has unknown ALU op '{name}'")
        return True


class ReduceOp(Sam.Operation, name="reduce", traits=[Pure]):
    """Innermost reduction: one value per fiber (sum from 0, max from -inf), stop level - 1.

    `in_parent` (optional) is the coordinate stream of the level above: with it, a stop that
    closes an empty parent fiber emits no value (the value stream alone is ambiguous there).
    """

    in_val: Operand[ValStream]
    in_parent: Sequence[Operand[CrdStream]]
    kind: ir.StringAttr
    index_var: ir.StringAttr
    out_val: Result[ValStream] = result(default_factory=_val)

    def verify_invariants(self) -> bool:
        """A reduce takes at most one parent coordinate stream and a known reduction kind."""
        if not _segments(self):
            return False
        if len(self.in_parent) > 1:
            return _err(self, "takes at most one parent coordinate stream")
        kind = _str(self, "kind")
        if kind not in REDUCE_KINDS:
            return _err(self, f"has unknown reduction kind '{kind}'; expected sum or max")
        return True


class SpaccOp(Sam.Operation, name="spacc", traits=[Pure]):
    """Sparse accumulator of order 1 or 2 for a reduction over a non-innermost variable.

    Accumulates values keyed by the inner coordinate(s) across the fibers of the reduced
    variable (`in_outer`) and emits, per enclosing fiber, the sorted inner fiber(s).
    """

    in_inner: Sequence[Operand[CrdStream]]
    in_outer: Operand[CrdStream]
    in_val: Operand[ValStream]
    order: ir.IntegerAttr
    kind: ir.StringAttr
    index_var: ir.StringAttr
    out_crds: Sequence[Result[CrdStream]]
    out_val: Result[ValStream]

    def verify_invariants(self) -> bool:
        """A spacc has order 1 or 2, that many inner coordinate streams and results, and a known kind."""
        if not (_segments(self) and _segments(self, results=True)):
            return False
        order = _int(self, "order")
        if order not in (1, 2):
            return _err(self, f"has order {order}; only orders 1 and 2 are supported")
        if len(self.in_inner) != order or len(self.out_crds) != order:
            return _err(self, f"of order {order} needs {order} inner coordinate streams and {order} results")
        if _str(self, "kind") not in REDUCE_KINDS:
            return _err(self, "has unknown reduction kind")
        return True


class CrdDropOp(Sam.Operation, name="crd_drop", traits=[Pure]):
    """Drop outer coordinates whose inner fiber is empty."""

    in_outer: Operand[CrdStream]
    in_inner: Operand[CrdStream]
    out_outer: Result[CrdStream] = result(default_factory=CrdStream.get)
    out_inner: Result[CrdStream] = result(default_factory=CrdStream.get)


class ValDropOp(Sam.Operation, name="val_drop", traits=[Pure]):
    """Drop (coordinate, value) pairs whose value is zero."""

    in_crd: Operand[CrdStream]
    in_val: Operand[ValStream]
    out_crd: Result[CrdStream] = result(default_factory=CrdStream.get)
    out_val: Result[ValStream] = result(default_factory=_val)


class WriteCrdOp(Sam.Operation, name="write_crd"):
    """Level writer: seg/crd of one output level; `in_parent` is the level above (if any).

    Not Pure: writers are the graph's side effects and must survive canonicalization.
    """

    in_crd: Operand[CrdStream]
    in_parent: Sequence[Operand[CrdStream]]
    tensor: ir.StringAttr
    mode: ir.IntegerAttr
    level: ir.IntegerAttr
    format: ir.StringAttr

    def verify_invariants(self) -> bool:
        """A coordinate writer takes at most one parent stream and a known level format."""
        if not _segments(self):
            return False
        if len(self.in_parent) > 1:
            return _err(self, "takes at most one parent coordinate stream")
        if _str(self, "format") not in LEVEL_FORMATS:
            return _err(
                self, f"has unknown level format '{_str(self, 'format')}'; expected one of {', '.join(LEVEL_FORMATS)}"
            )
        return _check_level(self)


class WriteValOp(Sam.Operation, name="write_val"):
    """Value writer of an output tensor."""

    in_val: Operand[ValStream]
    tensor: ir.StringAttr


class ConcatOp(Sam.Operation, name="concat", traits=[Pure]):
    """Concatenate streams along a level (tensor.concat inside a region)."""

    inputs: Sequence[Operand[RefStream | CrdStream | ValStream]]
    index_var: ir.StringAttr
    output: Result[RefStream | CrdStream | ValStream]

    def verify_invariants(self) -> bool:
        """A concat has inputs, all of one stream type with its result."""
        if not _segments(self):
            return False
        if len(self.inputs) < 1:
            return _err(self, "needs at least one input")
        if any(v.type != self.output.type for v in self.inputs):
            return _err(self, "inputs and result must have one stream type")
        return True


class ForkOp(Sam.Operation, name="fork", traits=[Pure]):
    """Split a stream into `factor` parallel lanes at one index-variable level: its elements
    (one per coordinate of `index_var`) go round-robin to the lanes, stops and D to every lane.
    `depth` is how many levels the stream lies below `index_var` (0: the level's own stream);
    -1 marks a stream from above the level, copied whole to every lane."""

    input: Operand[RefStream | CrdStream | ValStream]
    index_var: ir.StringAttr
    factor: ir.IntegerAttr
    depth: ir.IntegerAttr
    outputs: Sequence[Result[RefStream | CrdStream | ValStream]]

    def verify_invariants(self) -> bool:
        """A fork has a positive factor, one result per lane and a depth of at least -1."""
        f = _int(self, "factor")
        if f is None or f < 1:
            return _err(self, "requires a positive 'factor'")
        if (_int(self, "depth") or 0) < -1:
            return _err(self, "requires 'depth' >= -1 (-1: a stream from above the level, copied to every lane)")
        if not _segments(self, results=True):
            return False
        if len(self.outputs) != f:
            return _err(self, f"with factor {f} must have {f} results, got {len(self.outputs)}")
        return True


class JoinOp(Sam.Operation, name="join", traits=[Pure]):
    """Merge `factor` parallel lanes back into one stream in element order; `depth` as for fork
    (an element of a depth-d stream ends with S(d-1))."""

    inputs: Sequence[Operand[RefStream | CrdStream | ValStream]]
    index_var: ir.StringAttr
    factor: ir.IntegerAttr
    depth: ir.IntegerAttr
    output: Result[RefStream | CrdStream | ValStream]

    def verify_invariants(self) -> bool:
        """A join has one input per lane, a non-negative depth and one stream type."""
        f = _int(self, "factor")
        if not _segments(self):
            return False
        if f is None or f < 1 or len(self.inputs) != f:
            return _err(self, f"with factor {f} must have {f} inputs")
        if (_int(self, "depth") or 0) < 0:
            return _err(self, "requires a non-negative 'depth'")
        if any(v.type != self.output.type for v in self.inputs):
            return _err(self, "lanes and result must have one stream type")
        return True


# The bindings look for Python op classes by importing ``torch_mlir.dialects.<namespace>`` on
# every op they wrap; a failed import is not cached, so registering this module there saves
# an import-system search per op (measured: ~50% of parsing a large graph).
sys.modules.setdefault("torch_mlir.dialects.sam", sys.modules[__name__])


def load_into(ctx: ir.Context) -> None:
    """Load the dialect into `ctx` (once: loading twice raises in the pinned bindings)."""
    with ctx, ir.Location.unknown():
        if not ctx.is_dialect_loaded("sam"):
            Sam.load()


def new_context() -> ir.Context:
    """A context with every upstream dialect available and the sam dialect loaded once."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = False
    load_into(ctx)
    return ctx


def irdl_text() -> str:
    """The dialect's IRDL definition, loadable by ``torch-mlir-opt --irdl-file=``."""
    with new_context():
        return str(Sam._mlir_module)
