"""Conversion: from a fusion region of linalg ops to one index-notation expression per region output.

Index-variable unification (docs/architecture.md, "Design: lowering") happens by substitution:
walking from a region output
backwards, each op's loop dimensions are bound to the variables its consumer uses for the result,
and its other (reduction) dimensions get fresh variables. A producer inside the region is inlined
into its consumer (streamed, recomputed per use); a value from outside the region is a named
tensor access. Views (transpose, broadcast, cast) permute variables; they are never tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from fuseflow.analysis.index_notation import (
    UNIT,
    Access,
    Assign,
    Call,
    Const,
    Expr,
    Reduce,
    call,
)
from fuseflow.errors import UnsupportedError
from fuseflow.mlir import ir, location_str
from fuseflow.views import cat_name, gather_name, perm_name, slice_name, view_name

UNARY = {
    "arith.negf": "neg",
    "math.exp": "exp",
    "math.sqrt": "sqrt",
    "math.rsqrt": "rsqrt",
    "math.tanh": "tanh",
    "math.absf": "abs",
    "math.erf": "erf",
    "math.log": "log",
}
BINARY = {
    "arith.addf": "add",
    "arith.subf": "sub",
    "arith.mulf": "mul",
    "arith.divf": "div",
    "arith.maximumf": "max",
    "arith.maxnumf": "max",
    "arith.minimumf": "min",
    "arith.minnumf": "min",
}
PASS_THROUGH = ("arith.extf", "arith.truncf")


def renames_only(op: ir.Operation) -> bool:
    """Does an expand/collapse_shape only add or drop size-1 dimensions (a renaming of loop
    variables), rather than split or merge dimensions?"""
    groups = [[ir.IntegerAttr(x).value for x in ir.ArrayAttr(g)] for g in op.attributes["reassociation"]]
    src = list(ir.RankedTensorType(op.operands[0].type).shape)
    dst = list(ir.RankedTensorType(op.results[0].type).shape)
    wide = dst if op.name == "tensor.expand_shape" else src
    return all(len([d for d in g if wide[d] != 1]) <= 1 for g in groups)


def _owner_op(v: ir.Value) -> ir.Operation | None:
    o = v.owner.operation if isinstance(v.owner, ir.OpView) else v.owner
    return o if isinstance(o, ir.Operation) else None


VIEW_OPS = (
    "tensor.cast",
    "linalg.transpose",
    "linalg.broadcast",
    "tensor.expand_shape",
    "tensor.collapse_shape",
    "tensor.extract_slice",
    "tensor.concat",
)


def derives(op: ir.Operation) -> bool:
    """Does `op` make a tensor of its own (`fuseflow.views`): a slice, a concatenation, a
    reshape that splits or merges dimensions, a gather? Its sources end their region."""
    if op.name in ("tensor.extract_slice", "tensor.concat"):
        return True
    if op.name == "linalg.generic":
        return gather_of(op) is not None
    return op.name in ("tensor.expand_shape", "tensor.collapse_shape") and not renames_only(op)


COMPUTE_OPS = ("linalg.generic", "linalg.matmul", "linalg.batch_matmul")
IGNORED_OPS = ("tensor.empty", "linalg.fill", "arith.constant", "func.return")

_ACC = object()  # marker: the accumulator block argument of a reduction


def is_inlined(op) -> bool:
    """Comparisons producing bool tensors (masks) belong to no region: every consumer
    recomputes them, so a mask shared by several heads stays a mask in each. Gathers
    (`gather_of`) belong to none either: they make a derived tensor (`fuseflow.views`)."""
    return op.name == "linalg.generic" and (
        all(
            isinstance(r.type, ir.RankedTensorType) and str(ir.RankedTensorType(r.type).element_type) == "i1"
            for r in op.results
        )
        or gather_of(op) is not None
    )


def gather_of(op) -> tuple[ir.Value, ir.Value, int] | None:
    """(table, index, dim) when a linalg.generic is a gather (``index_select``, ``embedding``):
    it reads one integer tensor and yields ``tensor.extract %table[..., index_cast(%in), ...]``
    with ``linalg.index`` loops elsewhere, its result being ``take(table, index, axis=dim)``."""
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.operands) != 2:  # one input, one init
        return None
    ins, _ = _segments(op)
    if len(ins) != 1 or not isinstance(ins[0].type, ir.RankedTensorType):
        return None
    if not str(ir.RankedTensorType(ins[0].type).element_type).startswith("i"):
        return None
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    ex = _owner_op(ops[-1].operands[0]) if ops and ops[-1].operands else None
    if ex is None or ex.name != "tensor.extract":
        return None
    maps, _ = _maps(op)
    idx_dims = _dim_positions(maps[0], op, "index")
    if _dim_positions(maps[1], op, "result") != list(range(len(ir.RankedTensorType(op.results[0].type).shape))):
        return None
    table, dim, rank = ex.operands[0], None, len(idx_dims)
    for p, v in enumerate(list(ex.operands)[1:]):
        o = _owner_op(v)
        if o is not None and o.name == "arith.index_cast" and o.operands[0] == block.arguments[0]:
            if dim is not None:
                return None
            dim = p
        elif o is not None and o.name == "linalg.index":
            d = ir.IntegerAttr(o.attributes["dim"]).value
            if d != (p if dim is None else p - 1 + rank):
                return None
        else:
            return None
    if dim is None or idx_dims != list(range(dim, dim + rank)):
        return None
    return table, ins[0], dim


def op_location(op) -> str | None:
    """The op's source location as `file:line:col`, when it has one."""
    return location_str(op.location)


def unsupported(op, what: str) -> UnsupportedError:
    """An UnsupportedError located at `op`."""
    return UnsupportedError(what, location_str(op.location))


def _cast(cls, e):
    try:
        return cls(e)
    except (ValueError, TypeError):
        return None


def _dim_positions(amap: ir.AffineMap, op, what: str) -> list[int | None]:
    """Loop dimension of each map result; None for the constant 0 of a size-1 dimension."""
    out: list[int | None] = []
    for e in amap.results:
        d = _cast(ir.AffineDimExpr, e)
        if d is not None:
            out.append(d.position)
            continue
        c = _cast(ir.AffineConstantExpr, e)
        if c is not None and c.value == 0:
            out.append(None)
            continue
        raise unsupported(
            op,
            f"'{op.name}' {what} uses index expression '{e}'; only loop dimensions and "
            "the constant 0 of a size-1 dimension are supported",
        )
    return out


def _maps(op) -> tuple[list[ir.AffineMap], list[str]]:
    name = op.name
    if name == "linalg.generic":
        maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
        iters = ["reduction" if "reduction" in str(a) else "parallel" for a in op.attributes["iterator_types"]]
        return maps, iters
    if name == "linalg.matmul":
        text = ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"]
        iters = ["parallel", "parallel", "reduction"]
    else:  # linalg.batch_matmul
        text = [
            "(d0, d1, d2, d3) -> (d0, d1, d3)",
            "(d0, d1, d2, d3) -> (d0, d3, d2)",
            "(d0, d1, d2, d3) -> (d0, d1, d2)",
        ]
        iters = ["parallel", "parallel", "parallel", "reduction"]
    if "indexing_maps" in op.attributes:
        return [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]], iters
    return [
        ir.AffineMap.parse(f"affine_map<{t}>")
        if hasattr(ir.AffineMap, "parse")
        else ir.Attribute.parse(f"affine_map<{t}>").value
        for t in text
    ], iters


def _segments(op) -> tuple[list[ir.Value], list[ir.Value]]:
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    ops = list(op.operands)
    return ops[: sizes[0]], ops[sizes[0] : sizes[0] + sizes[1]]


def _float_constant(value: ir.Value) -> float | None:
    owner = value.owner
    if not isinstance(owner, ir.OpView) and not isinstance(owner, ir.Operation):
        return None
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    if op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    if isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat:
        return ir.FloatAttr(attr.get_splat_value()).value
    return None


@dataclass
class RegionParser:
    """Builds index-notation expressions for the outputs of one fusion region."""

    region_ops: set  # Operation handles of compute ops inside the region
    tensor_name: Callable[[ir.Value], str | None]  # name of an external tensor, or None
    dims: dict[str, int] = field(default_factory=dict)
    max_ops: int = 200_000  # compute ops unfolded into the expressions (lower_module: 2 x the node budget)
    _vars: int = 0
    _uses: int = 0
    _computed: int = 0

    def fresh(self, size: int) -> str:
        """A fresh index variable of extent `size`."""
        letters = "ijklmnpqrstuvwxyzabcdefgh"
        n = self._vars
        self._vars += 1
        name = letters[n % len(letters)] + (str(n // len(letters)) if n >= len(letters) else "")
        self.dims[name] = size
        return name

    def output(self, value: ir.Value, name: str) -> Assign:
        """The assignment that computes `value`, a region output named `name`."""
        shape = list(ir.RankedTensorType(value.type).shape)
        vs = tuple(UNIT if d == 1 else self.fresh(d) for d in shape)
        owner = value.owner
        expr = self.expr(value, vs)
        return Assign(
            name, vs, expr, dict(self.dims), location_str(owner.location) if hasattr(owner, "location") else None
        )

    def expr(self, value: ir.Value, vs: tuple[str, ...]) -> Expr:
        """`value` as an expression over variables `vs`: producers inside the region are inlined."""
        ext = self.tensor_name(value)
        if ext is not None:
            self._uses += 1
            return Access(ext, vs, self._uses)
        owner = value.owner
        op = owner.operation if isinstance(owner, ir.OpView) else owner
        if not isinstance(op, ir.Operation):
            raise UnsupportedError("a block argument that is not a function input cannot be a tensor operand")
        name = op.name
        if name == "tensor.cast":
            return self.expr(op.operands[0], vs)
        if name == "linalg.transpose":
            perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            src = [""] * len(perm)
            for i, p in enumerate(perm):
                src[p] = vs[i]
            return self.expr(op.operands[0], tuple(src))
        if derives(op):  # a slice, a concatenation, a reshape that splits or merges, a gather: by name
            return self._reshaped(op, vs)
        if name in ("tensor.expand_shape", "tensor.collapse_shape"):
            return self.expr(op.operands[0], self._reshape(op, vs))
        if name == "linalg.broadcast":
            added = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
            return self.expr(op.operands[0], tuple(v for i, v in enumerate(vs) if i not in added))
        if name in ("arith.constant", "linalg.fill"):
            c = _float_constant(value) if name == "arith.constant" else _float_constant(op.operands[0])
            if c is None:
                raise unsupported(
                    op,
                    "a non-splat constant tensor inside a model is not supported; "
                    "pass it as an argument or register it as a parameter",
                )
            return Const(c)
        if name in COMPUTE_OPS:
            if op not in self.region_ops and not is_inlined(op):
                raise unsupported(op, f"internal: '{name}' result crosses a region boundary unnamed")
            return self.compute(op, value.result_number, vs)
        raise unsupported(op, f"unsupported op '{name}': fuseflow cannot lower it to sam")

    def _reshaped(self, op, vs: tuple[str, ...]) -> Expr:
        """A reshape that splits or merges dimensions of a named tensor (a model input or a
        region's output: the partition puts a boundary before it) reads its view
        ``base@view...`` (`fuseflow.views`), whose data are the source's, reshaped."""
        name = self._named_view(op.results[0])
        if name is None:
            raise unsupported(
                op,
                f"internal: '{op.name}' of a value computed inside its region (the partition ends a region "
                "before every slice, concatenation and reshape)",
            )
        self._uses += 1
        return Access(name, vs, self._uses)

    def _named_view(self, v: ir.Value) -> str | None:
        """The name of `v` when it is a named tensor seen through casts, transposes and reshapes
        (``t3@perm1x0x2``), else None."""
        ext = self.tensor_name(v)
        if ext is not None:
            return ext
        o = _owner_op(v)
        if o is None:
            return None
        if o.name == "tensor.cast":
            return self._named_view(o.operands[0])
        g = gather_of(o)
        if g is not None:
            table, index = self._named_view(g[0]), self._named_view(g[1])
            return None if table is None or index is None else gather_name(table, index, g[2])
        if o.name == "tensor.concat":
            parts = [self._named_view(x) for x in o.operands]
            named = [p for p in parts if p is not None]
            if len(named) != len(parts):
                return None
            return cat_name(named, ir.IntegerAttr(o.attributes["dim"]).value)
        inner = self._named_view(o.operands[0]) if o.name in VIEW_OPS else None
        if inner is None:
            return None
        if o.name == "tensor.extract_slice":
            offs = list(ir.DenseI64ArrayAttr(o.attributes["static_offsets"]))
            sizes = list(ir.DenseI64ArrayAttr(o.attributes["static_sizes"]))
            strides = list(ir.DenseI64ArrayAttr(o.attributes["static_strides"]))
            if len(o.operands) > 1 or min(offs + sizes + strides, default=0) < 0:
                return None  # dynamic offsets, sizes or strides
            if len(sizes) != len(ir.RankedTensorType(o.results[0].type).shape):  # rank-reducing
                return None
            return slice_name(inner, list(zip(offs, sizes, strides)))
        if o.name == "linalg.transpose":
            return perm_name(inner, list(ir.DenseI64ArrayAttr(o.attributes["permutation"])))
        if o.name in ("tensor.expand_shape", "tensor.collapse_shape"):
            return view_name(inner, list(ir.RankedTensorType(o.results[0].type).shape))
        return None

    def _reshape(self, op, vs: tuple[str, ...]) -> tuple[str, ...]:
        """Source variables of an expand/collapse_shape that only adds or drops size-1 dimensions."""
        groups = [list(ir.ArrayAttr(g)) for g in op.attributes["reassociation"]]
        groups = [[ir.IntegerAttr(x).value for x in g] for g in groups]
        src = list(ir.RankedTensorType(op.operands[0].type).shape)
        dst = list(ir.RankedTensorType(op.results[0].type).shape)
        out: list[str] = [UNIT] * len(src)
        for gi, g in enumerate(groups):
            if op.name == "tensor.expand_shape":  # src dim gi -> dst dims g
                real = [d for d in g if dst[d] != 1]
                if len(real) > 1:
                    raise unsupported(op, "a reshape that splits a dimension is not supported")
                out[gi] = vs[real[0]] if real else UNIT
            else:  # collapse: src dims g -> dst dim gi
                real = [d for d in g if src[d] != 1]
                if len(real) > 1:
                    raise unsupported(op, "a reshape that merges dimensions is not supported")
                for d in g:
                    out[d] = vs[gi] if d in real else UNIT
        return tuple(out)

    def compute(self, op: ir.Operation, result: int, vs: tuple[str, ...]) -> Expr:
        """Result `result` of one linalg op at index variables `vs`: its body (or a matmul's
        multiply-add) over fresh loop variables, reduced over its reduction loops."""
        self._computed += 1
        if self._computed > self.max_ops:
            raise unsupported(
                op,
                f"the fused region's expression passes {self.max_ops:,} operations: fusing this much "
                "recomputes every use of an intermediate (a residual, a LayerNorm statistic) once per use, "
                "and the uses multiply from layer to layer; materialise an intermediate or fuse less "
                "(schedule 'layer', or rules)",
            )
        maps, iters = _maps(op)
        ins, outs = _segments(op)
        env = self._loop_env(op, maps, ins + outs, len(ins) + result, iters, vs)
        if op.name == "linalg.generic":
            block = op.regions[0].blocks[0]
            body = _Body(op, block, ins, maps, env).scalar(self, list(block.operations)[-1].operands[result])
        else:
            a = self.expr(
                ins[0], tuple(UNIT if d is None else env[d] for d in _dim_positions(maps[0], op, "operand 0"))
            )
            b = self.expr(
                ins[1], tuple(UNIT if d is None else env[d] for d in _dim_positions(maps[1], op, "operand 1"))
            )
            body = ("add", call("mul", a, b))
        red = [d for d, it in enumerate(iters) if it == "reduction"]
        if not red:
            if isinstance(body, tuple) or body is _ACC:
                raise unsupported(op, f"'{op.name}' reads its output without a reduction")
            return body
        return self._reduction(op, body, [env[d] for d in red], outs[result], vs)

    def _loop_env(self, op, maps, operands, out_index: int, iters, vs: tuple[str, ...]) -> dict[int, str]:
        """A name for every loop of the op: the result's loops take `vs`, the others fresh names
        (the unit variable for size-1 loops)."""
        env: dict[int, str] = {}
        for p, d in enumerate(_dim_positions(maps[out_index], op, "result")):
            if d is None:
                continue
            if d in env:
                raise unsupported(op, f"'{op.name}' writes a diagonal (repeated loop dimension {d})")
            env[d] = vs[p]
        bounds = self._loop_bounds(op, maps, operands)
        for d in range(len(iters)):
            if d not in env:  # a size-1 loop is the unit variable, as in outputs: one name per index 0
                env[d] = UNIT if bounds[d] == 1 else self.fresh(bounds[d])
        return env

    def _reduction(self, op, body, red_vars: list[str], init_value, vs: tuple[str, ...]) -> Expr:
        """A reduction body (``out + f(ins)`` or ``max(out, f(ins))``) over `red_vars`, added to
        its init unless the init is the reduction's identity."""
        if not isinstance(body, tuple) or body[0] not in ("add", "max"):
            raise unsupported(op, f"'{op.name}' reduction must be out + f(ins) or max(out, f(ins))")
        kind = "sum" if body[0] == "add" else "max"
        rvars = tuple(v for v in red_vars if v != UNIT)
        reduced = Reduce(kind, rvars, body[1]) if rvars else body[1]  # over size-1 dims only: the body
        init = self.expr(init_value, vs)
        identity = 0.0 if kind == "sum" else -math.inf
        if isinstance(init, Const) and init.value == identity:
            return reduced
        return call("add" if kind == "sum" else "max", init, reduced)

    def _loop_bounds(self, op, maps, operands) -> dict[int, int]:
        bounds: dict[int, int] = {}
        for m, v in zip(maps, operands):
            if not isinstance(v.type, ir.RankedTensorType):
                continue
            shape = ir.RankedTensorType(v.type).shape
            for p, e in enumerate(m.results):
                d = _cast(ir.AffineDimExpr, e)
                if d is not None:
                    bounds.setdefault(d.position, shape[p])
        return bounds


def _int_constant(value: ir.Value) -> int | None:
    owner = value.owner
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    if (
        isinstance(op, ir.Operation)
        and op.name == "arith.constant"
        and isinstance(op.attributes["value"], ir.IntegerAttr)
    ):
        return op.attributes["value"].value
    return None


def _select_compare(select: ir.Operation) -> tuple[bool, ir.Value, ir.Value, ir.Value, ir.Value] | None:
    """A select on an ordered float comparison: (greater, lhs, rhs, true value, false value),
    `greater` for > and >=, False for < and <=; None for any other select."""
    cond, t, f = select.operands
    c = cond.owner.operation if isinstance(cond.owner, ir.OpView) else cond.owner
    if not isinstance(c, ir.Operation) or c.name != "arith.cmpf":
        return None
    pred = c.attributes["predicate"]
    pv = pred.value if isinstance(pred, ir.IntegerAttr) else -1
    greater, less = pv in (2, 3, 9, 10), pv in (4, 5, 11, 12)
    if not (greater or less):
        return None
    x, y = c.operands
    return greater, x, y, t, f


def _min_max(select: ir.Operation):
    """select(x > c, x, c) is max(x, c), select(x < c, c, x) too; the mirrored forms are min
    (clamp). Returns (kind, x, c) or None."""
    cmp = _select_compare(select)
    if cmp is None:
        return None
    greater, x, bound, t, f = cmp
    k = _float_constant(bound)
    if k is None:
        return None
    if t == x and _float_constant(f) == k:
        return ("max" if greater else "min"), x, k
    if f == x and _float_constant(t) == k:
        return ("min" if greater else "max"), x, k
    return None


def _masked(cond, a, b):
    """select(mask == 0, -inf, x) and select(mask != 0, x, -inf) are x masked by mask;
    select(x == 0, 1, 0) and its mirrors are the indicators eqz(x) / nez(x)."""
    if isinstance(cond, Call) and cond.op == "eqz" and isinstance(a, Const) and a.value == -math.inf:
        return call("mask", b, cond.args[0])
    if isinstance(cond, Call) and cond.op == "nez" and isinstance(b, Const) and b.value == -math.inf:
        return call("mask", a, cond.args[0])
    if isinstance(cond, Call) and cond.op in ("eqz", "nez") and isinstance(a, Const) and isinstance(b, Const):
        flipped = {"eqz": "nez", "nez": "eqz"}[cond.op]
        if (a.value, b.value) == (1.0, 0.0):
            return call(cond.op, cond.args[0])
        if (a.value, b.value) == (0.0, 1.0):
            return call(flipped, cond.args[0])
    return None


def _select_extremum(select: ir.Operation) -> tuple[str, ir.Value, ir.Value] | None:
    """select(x > y, x, y) is max(x, y) and select(x < y, x, y) min(x, y) (torch.maximum and
    minimum, and the halves of leaky_relu); the swapped select is the other one."""
    cmp = _select_compare(select)
    if cmp is None:
        return None
    greater, x, y, t, f = cmp
    if {t, f} != {x, y} or x == y:
        return None
    same = t == x
    return ("max" if greater == same else "min"), x, y


def _relu_operand(select: ir.Operation) -> ir.Value | None:
    """select(cmpf ugt|ogt x, 0), x, 0) is ReLU; returns x."""
    cond, t, f = select.operands
    c = cond.owner.operation if isinstance(cond.owner, ir.OpView) else cond.owner
    if not isinstance(c, ir.Operation) or c.name != "arith.cmpf":
        return None
    pred = c.attributes["predicate"]
    if not isinstance(pred, ir.IntegerAttr) or pred.value not in (2, 9):  # ogt, ugt
        return None
    x, zero = c.operands
    if _float_constant(zero) != 0.0 or _float_constant(f) != 0.0 or t != x:
        return None
    return x


@dataclass
class _Body:
    """One ``linalg.generic`` body being translated to index notation: its block, input
    operands, indexing maps and loop variable names."""

    op: ir.Operation
    block: ir.Block
    ins: list
    maps: list
    env: dict[int, str]

    def scalar(self, rp: RegionParser, v: ir.Value):
        """The expression computing `v` in the body (`_ACC` for the output's running value, or
        an (op, operand) pair for an update of it)."""
        op = self.op
        if isinstance(v.owner, ir.Block) and v.owner == self.block:
            return self._argument(rp, v.arg_number)
        c = _float_constant(v)
        if c is not None:
            return Const(c)
        o = v.owner.operation if isinstance(v.owner, ir.OpView) else v.owner
        if not isinstance(o, ir.Operation):
            raise unsupported(op, "unsupported value in a linalg body")
        n = o.name
        if n in PASS_THROUGH:
            return self.scalar(rp, o.operands[0])
        if n in UNARY:
            return call(UNARY[n], self.scalar(rp, o.operands[0]))
        if n in BINARY:
            a, b = self.scalar(rp, o.operands[0]), self.scalar(rp, o.operands[1])
            if a is _ACC or b is _ACC:
                return (BINARY[n], b if a is _ACC else a)
            return call(BINARY[n], a, b)
        if n == "arith.select":
            return self._select(rp, o)
        if n == "arith.cmpf":
            return self._compare(rp, o)
        if n in ("math.fpowi", "math.powf"):
            e = _float_constant(o.operands[1]) if n == "math.powf" else _int_constant(o.operands[1])
            if e in (2, 3):
                x = self.scalar(rp, o.operands[0])
                return call("mul", x, x) if e == 2 else call("mul", x, call("mul", x, x))
            raise unsupported(o, "only squares and cubes are supported as powers")
        raise unsupported(o, f"unsupported op '{n}' in the body of '{op.name}'")

    def _argument(self, rp: RegionParser, k: int):
        """Block argument k: an input read at its map's variables, a scalar constant, or the
        output's running value."""
        if k >= len(self.ins):
            return _ACC
        tensor = self.ins[k]
        if not isinstance(tensor.type, ir.RankedTensorType):
            c = _float_constant(tensor)
            if c is None:
                raise unsupported(self.op, "a non-constant scalar operand is not supported")
            return Const(c)
        dims = _dim_positions(self.maps[k], self.op, f"operand {k}")
        return rp.expr(tensor, tuple(UNIT if d is None else self.env[d] for d in dims))

    def _select(self, rp: RegionParser, o: ir.Operation):
        """A select: ReLU, a clamp (min/max with a constant), max/min of two values, or masking."""
        relu = _relu_operand(o)
        if relu is not None:
            return call("relu", self.scalar(rp, relu))
        mm = _min_max(o)
        if mm is not None:
            kind, x, c = mm
            return call(kind, self.scalar(rp, x), Const(c))
        ext = _select_extremum(o)
        if ext is not None:
            kind, x, y = ext
            return call(kind, self.scalar(rp, x), self.scalar(rp, y))
        masked = _masked(*(self.scalar(rp, o.operands[i]) for i in range(3)))
        if masked is not None:
            return masked
        raise unsupported(
            o,
            "unsupported select: only ReLU and masking with -inf "
            "(masked_fill(mask == 0, -inf) / where(mask != 0, x, -inf)) lower to sam",
        )

    def _compare(self, rp: RegionParser, o: ir.Operation):
        """A comparison of a mask with 0 (eqz / nez)."""
        pred = o.attributes["predicate"]
        pv = pred.value if isinstance(pred, ir.IntegerAttr) else -1
        x, z = self.scalar(rp, o.operands[0]), self.scalar(rp, o.operands[1])
        if isinstance(z, Const) and z.value == 0.0 and pv in (1, 8):  # oeq, ueq
            return call("eqz", x)
        if isinstance(z, Const) and z.value == 0.0 and pv in (6, 13):  # one, une
            return call("nez", x)
        raise unsupported(o, "unsupported comparison: only comparisons of a mask with 0 lower to sam")
