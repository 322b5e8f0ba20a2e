"""Lower a partitioned linalg module to a sam module: one ``sam.graph`` per fusion region, each
in a given dataflow order (which order is the search's choice: `fuseflow.search.orders`).

Tensors crossing a region boundary are materialised: the producer region writes them (format
inferred from its iteration: a level is dense when it covers the full range) and the consumer
region scans them by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from fuseflow import views
from fuseflow.analysis.index_notation import Access, Assign, Const, Reduce, accesses, render
from fuseflow.conversion import linalg_attrs
from fuseflow.conversion.index_to_sam import SamLowering, TensorInfo
from fuseflow.conversion.linalg_attrs import (
    DEFAULT_DENSITY,
    body_ops,
    compute_ops,
    main_func,
    region_order,
    require_regions,
)
from fuseflow.conversion.linalg_to_index import COMPUTE_OPS, VIEW_OPS, RegionParser, derives, is_inlined
from fuseflow.dialects.sam_ir import module_text
from fuseflow.formats import Format, parse_format
from fuseflow.mlir import ir


def _format_of(t: ir.RankedTensorType) -> Format:
    from fuseflow.mlir import sparse_tensor  # loaded with MLIR or torch.export, when first needed

    rank = len(t.shape)
    if t.encoding is None:
        return Format(("dense",) * rank, tuple(range(rank)))
    enc = sparse_tensor.EncodingAttr(t.encoding)
    blocked = re.findall(r"d(\d+) floordiv (\d+)", str(enc.dim_to_lvl))
    if blocked:  # MLIR's BSR encoding: bcsr<b> (the block levels, then dense levels inside a block)
        kinds = ["dense" if lt == enc.lvl_types[-1] else "compressed" for lt in enc.lvl_types[:rank]]
        return Format(tuple(kinds), tuple(int(d) for d, _ in blocked), int(blocked[0][1]))
    levels = []
    for lt in enc.lvl_types:
        s = str(
            sparse_tensor.EncodingAttr.get_lvl_fmt(lt) if hasattr(sparse_tensor.EncodingAttr, "get_lvl_fmt") else lt
        )
        levels.append("dense" if "dense" in s.lower() or s in ("65536", "LevelFormat.dense") else "compressed")
    dim_to_lvl = enc.dim_to_lvl
    order = tuple(ir.AffineDimExpr(e).position for e in dim_to_lvl.results) if dim_to_lvl else tuple(range(rank))
    return Format(tuple(levels), order)


def _consumers(value: ir.Value) -> list[ir.Operation]:
    """Compute ops / returns that read `value`, looking through views."""
    out: list[ir.Operation] = []
    for use in value.uses:
        op = use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner
        if op.name in VIEW_OPS or is_inlined(op):
            out.extend(c for r in op.results for c in _consumers(r))
        else:
            out.append(op)
    return out


@dataclass
class _Tensors:
    """What `lower_module` knows of the function before lowering a region: every value's tensor
    name, the model inputs' formats and densities, the returned names, the copy regions, and
    each region's values that cross its boundary."""

    names: dict  # ir.Value -> tensor name
    tensors: dict[str, TensorInfo]
    density: dict[str, float]
    out_names: list[str]
    copies: dict[str, ir.Value]  # copy region -> the input (or a view of it) it writes
    ops: list  # compute ops
    region_of: dict  # compute op -> region name
    order: list[str]  # regions in program order, copy regions last
    outputs_of: dict[str, list[ir.Value]]
    sparse_results: dict[str, Format]  # results declared sparse (fuseflow.format): written so
    _ops_of: dict[str, set] | None = None

    def ops_of(self, region: str) -> set:
        """The compute ops of `region` (grouped once: a model has thousands of regions)."""
        if self._ops_of is None:
            self._ops_of = {}
            for op in self.ops:
                self._ops_of.setdefault(self.region_of[op], set()).add(op)
        return self._ops_of.get(region, set())


@dataclass
class LoweredModule:
    """A linalg function lowered to sam: the module's text, each region's expressions and notes
    (`summary`), its outputs in index notation (`assigns`, what `sim/values.py` evaluates), each
    region's typed graph (as reading the text back would give it) and the text of each graph
    that is not a renamed copy of an earlier one (`distinct`: what verifying the module parses)."""

    text: str
    summary: dict[str, list[str]]
    assigns: dict[str, list[Assign]]
    typed: list
    distinct: list[str]


Order = Sequence[str]
"""A region's dataflow order: its index variables, outermost first."""


class RegionLowering:
    """One region's lowering at any order: what an order search asks of a region.

    `at(order)` lowers the region's outputs in that order (None: the lowering's own default
    order), once per order; with a `cache` (lowerings shared across compiles, keyed by structure)
    a region lowered before under the same structure and names is reused."""

    def __init__(self, module: ModuleLowering, name: str, asgs: list[Assign]) -> None:
        self.module = module
        self.name = name
        self.asgs = asgs
        self.block = module.block_of(name)
        self.declared = self._fresh().tensors
        self.names: list[str] = []  # the tensors' names in slot order (`structure`)
        self._built: dict[tuple | None, SamLowering] = {}
        self._shared_as: tuple | None = None

    def _fresh(self) -> SamLowering:
        """A lowering of this region with its input tensors registered, nothing lowered yet."""
        t = self.module.t
        tensors = t.tensors
        lw = SamLowering(self.name, {}, self.module.node_budget, self.block)
        lw.declared = t.sparse_results
        for asg in self.asgs:
            used = dict.fromkeys(a.tensor for a in accesses(asg.expr))  # first use: deterministic text
            for n in used:
                if n not in tensors and views.parse(n) is not None:  # a derived tensor, read by name
                    shape = views.shape_of(n, lambda b: tensors[b].shape)
                    tensors[n] = TensorInfo(
                        n, shape, Format(("dense",) * len(shape), tuple(range(len(shape)))), "input"
                    )
            lw.tensors.update({n: replace(tensors[n], role="input") for n in used if n not in lw.tensors})
        return lw

    def structure(self, tag: tuple | None, costly: Callable[[str], bool] | None = None) -> tuple | None:
        """The region's structure key (`_structure_key`) with `tag` (what else the caller's choice
        depends on); fills `names`. None for a region reading derived tensors."""
        self.names.clear()
        return _structure_key(
            self.asgs, self.declared, self.module.t.sparse_results, self.block, tag, costly, self.names
        )

    def share_as(self, key: tuple | None) -> None:
        """Share this region's lowerings in the module's cache under structure `key`."""
        if key is not None and self.module.cache is not None:
            self._shared_as = (
                self.name,
                self.module.node_budget,
                tuple(self.names),
                tuple(a.loc for a in self.asgs),
                key,
            )

    def at(self, order: Order | None) -> SamLowering:
        """The region lowered in `order` (built once per order)."""
        key = tuple(order) if order is not None else None
        if key not in self._built:
            cache, same = self.module.cache, self._shared_as
            hit = cache.get((same, key)) if cache is not None and same is not None else None
            if hit is None:
                hit = self._fresh()
                for asg in self.asgs:
                    hit.lower(asg, list(order) if order is not None else None)
                if cache is not None and same is not None:
                    cache[(same, key)] = hit
            self._built[key] = hit
        return self._built[key]


class ModuleLowering:
    """A partitioned linalg function lowered region by region, in program order.

    Phase 1 (here) names the function's inputs, outputs and region-crossing values; then, per
    region, `parse` gives its outputs in index notation, `region` its lowering at any order, and
    `add` takes the lowering chosen. `lower_module` lowers every region at given orders; an order
    search (``fuseflow-order``) asks `RegionLowering.at` for the orders it weighs first.
    `cache`: lowerings shared across compiles (the planner's), keyed by region structure."""

    def __init__(self, module: ir.Module, node_budget: int = 100_000, cache: dict | None = None) -> None:
        func = main_func(module)
        self.fixed_orders = linalg_attrs.orders(func)
        self.blocks = linalg_attrs.blocks(func)
        require_regions(func)
        self.t = _function_tensors(func)
        self.node_budget = node_budget
        self.cache = cache
        self._copies: dict[tuple, tuple[SamLowering, list[str]]] = {}  # structure -> first lowering, names
        self._graphs: list[str] = []
        self._summary: dict[str, list[str]] = {}
        self._assigns: dict[str, list[Assign]] = {}
        self._typed: list = []
        self._distinct: list[str] = []

    @property
    def regions(self) -> list[str]:
        """Regions in program order, copy regions last."""
        return self.t.order

    @property
    def density(self) -> dict[str, float]:
        """Densities of the inputs (recorded, or the default of a compressed one); an order
        search adds each region's outputs as it goes."""
        return self.t.density

    @property
    def declared_formats(self) -> dict[str, Format]:
        """Every known tensor's format."""
        return {n: info.fmt for n, info in self.t.tensors.items()}

    def block_of(self, region: str) -> int:
        """The block size recorded for `region` (0: not blocked)."""
        return self.blocks.get(region, self.blocks.get("*", 0))

    def parse(self, region: str) -> list[Assign]:
        """Phase 2: a region's outputs in index notation."""
        asgs = _parse_region(region, self.t, self.node_budget)
        self._assigns[region] = asgs
        return asgs

    def region(self, name: str, asgs: list[Assign]) -> RegionLowering:
        """Phase 3: the region's lowering at any order."""
        return RegionLowering(self, name, asgs)

    def lower_like(self, region: RegionLowering, key: tuple | None, order: Order | None) -> SamLowering:
        """The region in `order`: a renamed copy of the first region with structure `key` (the
        heads of an attention, the blocks of a decoder), else lowered."""
        first = self._copies.get(key) if key is not None else None
        if first is not None:
            copy = first[0].renamed(region.name, dict(zip(first[1], region.names)))
            if copy is not None:
                return copy
        lowering = region.at(order)
        if key is not None:
            self._copies.setdefault(key, (lowering, list(region.names)))
        return lowering

    def add(self, region: RegionLowering, lowering: SamLowering, notes: Sequence[str] = ()) -> str:
        """Take `lowering` as the region's; `notes` go to its summary after its expressions.
        Returns the graph's text."""
        text = lowering.text()
        exprs = [f"{asg.out}({','.join(asg.vars)}) = {render(asg.expr)}" for asg in region.asgs]
        self.t.tensors.update(lowering.outputs)
        self._graphs.append(text)
        if lowering.copy_of is None:
            self._distinct.append(text)
        self._typed.append(lowering.typed())
        self._summary[region.name] = exprs + list(notes) + [f"note: {n}" for n in lowering.notes]
        return text

    def result(self) -> LoweredModule:
        """The sam module of every region added."""
        return LoweredModule(
            module_text(self._graphs, self.t.out_names), self._summary, self._assigns, self._typed, self._distinct
        )


def lower_module(
    module: ir.Module, orders: Mapping[str, Order] | None = None, node_budget: int = 100_000
) -> LoweredModule:
    """Lower every region of a partitioned linalg function, each in its order from `orders`
    (the lowering's own default order for a region not named). No order is searched: that is
    ``fuseflow-order``'s job (`fuseflow.search.orders`)."""
    ml = ModuleLowering(module, node_budget)
    for name in ml.regions:
        region = ml.region(name, ml.parse(name))
        ml.add(region, region.at((orders or {}).get(name)))
    return ml.result()


def _function_tensors(func) -> _Tensors:
    """Phase 1: name the function's inputs, outputs and region-crossing values."""
    block = func.regions[0].blocks[0]
    names: dict = {}
    tensors: dict[str, TensorInfo] = {}
    density: dict[str, float] = {}
    sig = linalg_attrs.signature(func)
    for i, arg in enumerate(block.arguments):
        name = sig.args[i] or f"arg{i}"
        names[arg] = name
        rt = ir.RankedTensorType(arg.type)
        tensors[name] = TensorInfo(name, tuple(rt.shape), _format_of(rt), "input")
        recorded = sig.densities[i]
        if recorded is not None:
            density[name] = recorded
        elif "compressed" in tensors[name].fmt.levels:
            density[name] = DEFAULT_DENSITY
    ret = [op for op in body_ops(func) if op.name == "func.return"][0]
    out_names = []
    copies: dict[str, ir.Value] = {}  # copy regions: outputs that are inputs (or views of inputs)
    for i, v in enumerate(ret.operands):
        name = sig.results[i] or f"out{i}"
        out_names.append(name)
        if v in names or _view_of_argument(v) or _splits_or_merges(v):  # an input, a view of one, a reshape: a copy
            copies[f"copy_{name}"] = v
            continue
        names[v] = name
    ops = compute_ops(func)
    region_of: dict = {op: linalg_attrs.region_of(op) for op in ops}  # every op has one (require_regions)
    order = region_order(func) + list(copies)
    outputs_of = _crossing_values(ops, region_of, ret, names, order)
    sparse_results: dict[str, Format] = {}
    for op in ops:
        spec = linalg_attrs.declared_format(op)
        if spec is not None:
            for res in op.results:
                if res in names:
                    rank = len(ir.RankedTensorType(res.type).shape)
                    sparse_results[names[res]] = parse_format(
                        spec, rank, what=f"the result of {op.name} ({names[res]})"
                    )
    # A returned view of a result (a transpose, a squeeze) is written by the region computing the
    # result, as the view: the expression reads through it.
    for v in ret.operands:
        src = _view_source(v)
        if src is not None and v not in copies.values():
            outputs_of[region_of[_op_of(src)]].append(v)
    return _Tensors(names, tensors, density, out_names, copies, ops, region_of, order, outputs_of, sparse_results)


def _crossing_values(ops, region_of, ret, names: dict, order: list[str]) -> dict[str, list[ir.Value]]:
    """Each region's results read by another region or returned, named ``t0``, ``t1``, ... in
    program order (`names` gains them)."""
    k = 0
    outputs_of: dict[str, list[ir.Value]] = {r: [] for r in order}
    returned_values = list(ret.operands)
    for op in ops:
        for res in op.results:
            cons = _consumers(res)
            returned = res in returned_values  # through views it is returned as the view (above)
            crossing = [c for c in cons if (returned if c.name == "func.return" else region_of.get(c) != region_of[op])]
            if crossing or _feeds_reshape(res):  # a reshaped result is read by name (fuseflow.views)
                if res not in names:
                    names[res] = f"t{k}"
                    k += 1
                outputs_of[region_of[op]].append(res)
    return outputs_of


def _parse_region(region: str, t: _Tensors, node_budget: int) -> list[Assign]:
    """Phase 2: a region's outputs in index notation."""
    in_region = t.ops_of(region)
    own = set(t.outputs_of[region])  # a returned view is computed here, not read by name

    def external(v):
        return None if _produced_in(v, in_region) or v in own else t.names.get(v)

    parser = RegionParser(in_region, external, max_ops=2 * node_budget)
    if region in t.copies:  # out(vs) = input(vs): scanned and written in the output's format
        return [parser.output(t.copies[region], region[len("copy_") :])]
    return [parser.output(res, t.names[res]) for res in t.outputs_of[region]]


def _structure_key(
    asgs: list[Assign],
    declared: Mapping[str, TensorInfo],
    written: Mapping[str, Format],
    block: int,
    spec: tuple | None,
    costly: Callable[[str], bool] | None,
    names: list[str] | None = None,
) -> tuple | None:
    """What a region's order choice depends on, up to the names of its tensors: its index
    notation with each tensor replaced by its first-use position, each tensor's shape and
    format, and whether a re-layout of it would cost cycles. Regions with equal keys (the heads
    of an attention, the blocks of a decoder) take the first one's order: the search and the
    ranking run once. Regions reading derived tensors (views) are not keyed. `names`, when
    given, receives the tensors' names in slot order."""
    slots: dict[str, int] = {}

    def slot(name: str) -> int:
        return slots.setdefault(name, len(slots))

    def shape(e) -> tuple:
        if isinstance(e, Access):
            return ("a", slot(e.tensor), e.vars, e.use)
        if isinstance(e, Const):
            return ("c", e.value)
        if isinstance(e, Reduce):
            return ("r", e.kind, e.vars, shape(e.body))
        return ("f", e.op, tuple(shape(a) for a in e.args))

    body = tuple((slot(a.out), a.vars, tuple(sorted(a.dims.items())), shape(a.expr)) for a in asgs)
    tensors = []
    for name in slots:
        if views.parse(name) is not None:
            return None
        info = declared.get(name)
        fmt = written.get(name)
        relaid = costly is not None and costly(name)
        tensors.append(
            (info.shape if info else None, (info.fmt.levels, info.fmt.mode_order) if info else None, fmt, relaid)
        )
    if names is not None:
        names.extend(slots)
    return (body, tuple(tensors), block, spec)


def _view_of_argument(v: ir.Value) -> bool:
    """Is `v` a function argument seen through views only (a transpose of an input, say)?"""
    while True:
        owner = v.owner
        if isinstance(owner, ir.Block):
            return True
        op = owner.operation if isinstance(owner, ir.OpView) else owner
        if op.name not in VIEW_OPS:
            return False
        v = op.operands[0]


def _feeds_reshape(value: ir.Value) -> bool:
    """Does `value` reach, through views, a reshape that splits or merges dimensions?"""
    for use in value.uses:
        op = use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner
        if derives(op):
            return True
        if op.name in VIEW_OPS and any(_feeds_reshape(r) for r in op.results):
            return True
    return False


def _splits_or_merges(v: ir.Value) -> bool:
    """Is `v` seen through views one of which reshapes (splits or merges dimensions)? Its data are
    then its source's reshaped (`fuseflow.views`), written by a copy region of its own."""
    while True:
        op = _op_of(v)
        if not isinstance(op, ir.Operation) or op.name not in VIEW_OPS:
            return False
        if derives(op):
            return True
        v = op.operands[0]


def _view_source(v: ir.Value) -> ir.Value | None:
    """The compute result a returned view (one or more view ops) reads; None if `v` is no view."""
    op = _op_of(v)
    if not isinstance(op, ir.Operation) or op.name not in VIEW_OPS:
        return None
    while isinstance(op, ir.Operation) and op.name in VIEW_OPS:
        v = op.operands[0]
        op = _op_of(v)
    return v if isinstance(op, ir.Operation) and op.name in COMPUTE_OPS and not is_inlined(op) else None


def _op_of(v: ir.Value):
    return v.owner.operation if isinstance(v.owner, ir.OpView) else v.owner


def _produced_in(v: ir.Value, region_ops: set) -> bool:
    owner = v.owner
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    return isinstance(op, ir.Operation) and op in region_ops
