"""Lower a partitioned linalg module to a sam module: one ``sam.graph`` per fusion region.

Tensors crossing a region boundary are materialised: the producer region writes them (format
inferred from its iteration: a level is dense when it covers the full range) and the consumer
region scans them by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from fuseflow import views
from fuseflow.analysis.index_notation import Access, Assign, Const, Reduce, render
from fuseflow.conversion.index_to_sam import SamLowering, TensorInfo
from fuseflow.conversion.linalg_to_index import COMPUTE_OPS, VIEW_OPS, RegionParser, derives, is_inlined
from fuseflow.dialects.sam_ir import module_text
from fuseflow.formats import Format, parse_format
from fuseflow.mlir import ir
from fuseflow.planning.ordering import DEFAULT_CAP, DEFAULT_DENSITY, Candidate, RegionVars, choose, estimate_density
from fuseflow.planning.rank import OrderRanker
from fuseflow.schedule.regions import FORMAT_ATTR, REGION_ATTR, Partition, body_ops, main_func, region_order


def _format_of(t: ir.RankedTensorType) -> Format:
    from fuseflow.mlir import sparse_tensor

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


BLOCK_ATTR = "fuseflow.block"
"""Function attribute the block pass writes: {region name or "*": block size}."""
ORDERS_ATTR = "fuseflow.orders"
"""Function attribute the ordering pass writes: {region name: "i,k,j"}; lower-to-sam follows it."""


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


def lower_module(
    module: ir.Module,
    node_budget: int = 100_000,
    order_spec: str | Mapping[str, str] | None = None,
    cap: int = DEFAULT_CAP,
    ranker: OrderRanker | None = None,
    typed: list | None = None,
    distinct: list | None = None,
) -> tuple[str, dict, dict[str, Candidate], dict[str, list[Assign]]]:
    """Return the sam module text, a summary {region: [expressions]}, the chosen orders and each
    region's outputs in index notation (what `sim/values.py` evaluates). `typed`, when given,
    receives each region's typed graph (`SamGraph`, as reading the text back would give it);
    `distinct` the text of each graph that is not a renamed copy of an earlier one.

    Each region's dataflow order comes from the function's ``fuseflow.orders`` attribute (the
    ordering pass) when it names the region, else from `order_spec` (``auto``, ``K`` or ``i,k,j``,
    see `ordering.choose`; a mapping gives one per region name), else from the default heuristic
    order. Each chosen `Candidate` carries the region's enumerated alternatives. With a `ranker`,
    ``auto`` lowers the most promising candidates and keeps the one the cycle model predicts
    fastest (`planning/rank.py`).
    """
    func = main_func(module)
    fixed = {k: ir.StringAttr(v).value for k, v in _dict_attr(func, ORDERS_ATTR).items()}
    blocks = {k: ir.IntegerAttr(v).value for k, v in _dict_attr(func, BLOCK_ATTR).items()}
    Partition.of(func)
    t = _function_tensors(func)
    graphs, summary, chosen, assigns = [], {}, {}, {}
    # structure of a region -> its order (identical decoders, heads; the planner's compiles share it)
    picked: dict[tuple, Candidate] = ranker.picks if ranker is not None else {}
    lowered: dict[tuple, tuple[SamLowering, list[str]]] = {}  # structure -> its first lowering, names
    if ranker is not None:
        ranker.begin(t.density, {n: info.fmt for n, info in t.tensors.items()})
    for region in t.order:
        asgs = _parse_region(region, t, node_budget)
        assigns[region] = asgs
        spec = fixed.get(region, order_spec.get(region) if isinstance(order_spec, Mapping) else order_spec)
        lowering, pick, rv = _lower_region(
            region, asgs, t, blocks.get(region, blocks.get("*", 0)), spec, cap, ranker, picked, node_budget, lowered
        )
        text = lowering.text()
        if ranker is not None:
            ranker.commit(text, asgs, lowering.typed)
        exprs = []
        for asg in asgs:
            exprs.append(f"{asg.out}({','.join(asg.vars)}) = {render(asg.expr)}")
            t.density[asg.out] = estimate_density(rv, asg)
        if pick is not None:
            chosen[region] = pick
            verified = sum(1 for c in pick.alternatives if c.simulated is not None)
            exprs.append(f"order: {pick.name}" + (f" (fastest of {verified} simulated)" if verified else ""))
        t.tensors.update(lowering.outputs)
        graphs.append(text)
        if distinct is not None and lowering.copy_of is None:
            distinct.append(text)
        if typed is not None:
            typed.append(lowering.typed())
        summary[region] = exprs + [f"note: {n}" for n in lowering.notes]
    return module_text(graphs, t.out_names), summary, chosen, assigns


def _dict_attr(func, name: str) -> dict[str, ir.Attribute]:
    """A dictionary attribute of the function as {key: attribute} ({} when absent)."""
    if name not in func.attributes:
        return {}
    return {k.name: k.attr for k in ir.DictAttr(func.attributes[name])}


def _function_tensors(func) -> _Tensors:
    """Phase 1: name the function's inputs, outputs and region-crossing values."""
    block = func.regions[0].blocks[0]
    names: dict = {}
    tensors: dict[str, TensorInfo] = {}
    density: dict[str, float] = {}
    # MLIR's attribute map has no .get()
    arg_attrs = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None  # noqa: SIM401
    res_attrs = func.attributes["res_attrs"] if "res_attrs" in func.attributes else None  # noqa: SIM401
    for i, arg in enumerate(block.arguments):
        name = f"arg{i}"
        attrs = ir.DictAttr(arg_attrs[i]) if arg_attrs is not None else None
        if attrs is not None and "fuseflow.name" in attrs:
            name = ir.StringAttr(attrs["fuseflow.name"]).value
        names[arg] = name
        rt = ir.RankedTensorType(arg.type)
        tensors[name] = TensorInfo(name, tuple(rt.shape), _format_of(rt), "input")
        if attrs is not None and "fuseflow.density" in attrs:
            density[name] = ir.FloatAttr(attrs["fuseflow.density"]).value
        elif "compressed" in tensors[name].fmt.levels:
            density[name] = DEFAULT_DENSITY
    ret = [op for op in body_ops(func) if op.name == "func.return"][0]
    out_names = []
    copies: dict[str, ir.Value] = {}  # copy regions: outputs that are inputs (or views of inputs)
    for i, v in enumerate(ret.operands):
        name = f"out{i}"
        if res_attrs is not None and "fuseflow.name" in ir.DictAttr(res_attrs[i]):
            name = ir.StringAttr(ir.DictAttr(res_attrs[i])["fuseflow.name"]).value
        out_names.append(name)
        if v in names or _view_of_argument(v) or _splits_or_merges(v):  # an input, a view of one, a reshape: a copy
            copies[f"copy_{name}"] = v
            continue
        names[v] = name
    ops = [op for op in body_ops(func) if op.name in COMPUTE_OPS and not is_inlined(op)]
    region_of = {op: ir.StringAttr(op.attributes[REGION_ATTR]).value for op in ops}
    order = region_order(func) + list(copies)
    outputs_of = _crossing_values(ops, region_of, ret, names, order)
    sparse_results: dict[str, Format] = {}
    for op in ops:
        if FORMAT_ATTR in op.attributes:
            for res in op.results:
                if res in names:
                    rank = len(ir.RankedTensorType(res.type).shape)
                    spec = ir.StringAttr(op.attributes[FORMAT_ATTR]).value
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


def _lower_region(
    region: str,
    asgs: list[Assign],
    t: _Tensors,
    region_block: int,
    spec: str | None,
    cap: int,
    ranker: OrderRanker | None,
    picked: dict[tuple, Candidate],
    node_budget: int,
    lowered: dict[tuple, tuple[SamLowering, list[str]]],
) -> tuple[SamLowering, Candidate | None, RegionVars]:
    """Phase 3: choose a region's order (searched, ranked, or taken from an identical region)
    and lower it; returns the lowering, the chosen candidate and the region's variables. A
    region identical to one lowered before up to its tensors' names (`lowered`, by structure
    key) is that lowering renamed: a decoder's heads, the decoders of a model."""
    tensors = t.tensors

    def fresh() -> SamLowering:
        """A lowering of this region with its input tensors registered, nothing lowered yet."""
        lw = SamLowering(region, {}, node_budget, region_block)
        lw.declared = t.sparse_results
        for asg in asgs:
            used = dict.fromkeys(a.tensor for a in _accs(asg.expr))  # first use: deterministic text
            for n in used:
                if n not in tensors and views.parse(n) is not None:  # a derived tensor, read by name
                    shape = views.shape_of(n, lambda b: tensors[b].shape)
                    tensors[n] = TensorInfo(
                        n, shape, Format(("dense",) * len(shape), tuple(range(len(shape)))), "input"
                    )
            lw.tensors.update({n: replace(tensors[n], role="input") for n in used if n not in lw.tensors})
        return lw

    built: dict[tuple | None, SamLowering] = {}  # the ranker's lowerings, reused for the choice
    declared = fresh().tensors
    # the same region lowered in another compile (the planner's candidates share regions): its
    # structure key (the picks' one when the order is searched) with the tensors' names
    shared = ranker.lowerings if ranker is not None else None
    names: list[str] = []
    key = (
        _structure_key(asgs, declared, t.sparse_results, region_block, (spec, cap), ranker, names)
        if spec is not None
        else None
    )
    same = key
    if shared is not None and same is None and spec is None:
        same = _structure_key(asgs, declared, t.sparse_results, region_block, None, None, names)
    if same is not None:
        same = (region, node_budget, tuple(names), tuple(a.loc for a in asgs), same)

    def build(order_vars: list[str] | None) -> SamLowering:
        key = tuple(order_vars) if order_vars is not None else None
        if key not in built:
            hit = shared.get((same, key)) if shared is not None and same is not None else None
            if hit is None:
                hit = fresh()
                for asg in asgs:
                    hit.lower(asg, order_vars)
                if shared is not None and same is not None:
                    shared[(same, key)] = hit
            built[key] = hit
        return built[key]

    rv = RegionVars(
        region,
        asgs,
        lambda n: declared[n].fmt.mode_order,
        lambda n: declared[n].fmt.levels,
        t.density,
    )
    pick = picked.get(key) if key is not None else None
    if pick is None and spec is not None:
        pick = choose(rv, spec, cap)
        if ranker is not None and spec.strip() == "auto":
            pick = ranker.rank(region, pick, build)
        if key is not None:
            picked[key] = pick
    first = lowered.get(key) if key is not None else None
    if first is not None:
        copy = first[0].renamed(region, dict(zip(first[1], names)))
        if copy is not None:
            return copy, pick, rv
    lowering = build(list(pick.order) if pick is not None else None)
    if key is not None:
        lowered.setdefault(key, (lowering, names))
    return lowering, pick, rv


def _structure_key(
    asgs: list[Assign],
    declared: Mapping[str, TensorInfo],
    written: Mapping[str, Format],
    block: int,
    spec: tuple | None,
    ranker: OrderRanker | None,
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
        costly = ranker is not None and ranker.relayout_costs(name)
        tensors.append(
            (info.shape if info else None, (info.fmt.levels, info.fmt.mode_order) if info else None, fmt, costly)
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


def _accs(e):
    from fuseflow.analysis.index_notation import accesses

    return accesses(e)
