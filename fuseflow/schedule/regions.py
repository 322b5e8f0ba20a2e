"""Fusion regions of a linalg function: which compute ops form one dataflow graph.

A region is named by the ``fuseflow.region`` attribute its compute ops carry (set by the
``fuseflow-partition`` pass or by ``fuseflow.compile``'s schedule). Views (transpose, broadcast,
cast, reshapes) and initialisers (empty, fill, constants) belong to no region: they fold into
whichever op consumes them. The frontend names every op's location ``"fx node|module path"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fuseflow.conversion.linalg_attrs import (
    body_ops,
    check_supported,
    declared_format,
    name_loc,
    producers,
    region_order,
    set_region,
)
from fuseflow.conversion.linalg_to_index import COMPUTE_OPS, VIEW_OPS, derives, is_inlined
from fuseflow.mlir import ir, location_str
from fuseflow.schedule.rules import OpView, Resolution, Schedule, as_schedule, resolve


def fx_node_name(op: ir.Operation) -> str | None:
    """The FX node an op was imported from (its NameLoc), if any."""
    return name_loc(op)[0]


def _is_mask_producer(op: ir.Operation) -> bool:
    """A comparison producing a bool tensor, or a select reading one (masked_fill / where)."""

    def is_bool(t) -> bool:
        return isinstance(t, ir.RankedTensorType) and str(ir.RankedTensorType(t).element_type) == "i1"

    if any(is_bool(r.type) for r in op.results):
        return True
    return any(is_bool(v.type) for v in op.operands)


def module_path(op: ir.Operation) -> str:
    """The module path of the PyTorch module an op was imported from (from its NameLoc)."""
    return name_loc(op)[1]


@dataclass
class OpInfo:
    """One PyTorch-level op (the ops imported from one FX node): what ``prog.ops()`` lists."""

    index: int
    node: str
    path: str
    kinds: list[str] = field(default_factory=list)
    location: str | None = None


@dataclass
class Listing:
    """A function's compute ops (`check_supported`), their PyTorch-level ops (`op_listing`) and
    each compute op's NameLoc parts: read once, used by the listing and the partition."""

    ops: list[ir.Operation]
    infos: list[OpInfo]
    index_of: list[int]
    locs: list[tuple[str | None, str, str | None]]


def op_listing(func, ops: list[ir.Operation] | None = None) -> tuple[list[OpInfo], list[int]]:
    """PyTorch-level ops in program order, and the listing index of every compute op (`ops`:
    `check_supported(func)` when the caller has it)."""
    listed = listing(func, ops)
    return listed.infos, listed.index_of


def listing(func, ops: list[ir.Operation] | None = None) -> Listing:
    """`op_listing` with the ops and locations it read (printing 15k locations is 0.4 s)."""
    infos: list[OpInfo] = []
    by_node: dict[str, int] = {}
    index_of = []
    ops = check_supported(func) if ops is None else ops
    locs = [name_loc(op) for op in ops]
    keys = [(loc[2] or f"op{i}") for i, loc in enumerate(locs)]
    # A masked softmax is one PyTorch-level op: the mask comparison and the masked_fill join
    # the op that consumes them.
    compute = set(ops)
    pos = {op: i for i, op in enumerate(ops)}
    for i in reversed(range(len(ops))):
        if _is_mask_producer(ops[i]):
            users = [c for r in ops[i].results for c in _consumers_of(r, compute)]
            if users:  # the first consumer in program order (a mask CSE'd between layers feeds both)
                keys[i] = keys[min(pos[u] for u in users)]
    for i, op in enumerate(ops):
        path = locs[i][1]
        key = keys[i]
        if key not in by_node:
            by_node[key] = len(infos)
            infos.append(OpInfo(len(infos), key, path, [], location_str(op.location)))
        infos[by_node[key]].kinds.append(op.name.split(".", 1)[1])
        index_of.append(by_node[key])
    return Listing(ops, infos, index_of, locs)


def _consumers_of(value: ir.Value, compute: set) -> list[ir.Operation]:
    out = []
    for use in value.uses:
        o = use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner
        if o in compute:
            out.append(o)
        elif o.name in VIEW_OPS or is_inlined(o):
            out.extend(c for r in o.results for c in _consumers_of(r, compute))
    return out


def layer_of(path: str, containers: set[str]) -> str:
    """The top-level layer a module path belongs to, descending through `containers`
    (``layers.2.attn`` -> ``layers.2`` when ``layers`` is a container)."""
    parts = path.split(".")
    prefix = parts[0]
    for p in parts[1:]:
        if prefix not in containers:
            break
        prefix = f"{prefix}.{p}"
    return prefix


def assign_regions(
    func,
    schedule: str | Schedule,
    containers: set[str] | None = None,
    classes: dict[str, str] | None = None,
    listed: Listing | None = None,
) -> Resolution:
    """Annotate compute ops with the region names of a schedule (a built-in name, a schedule file
    or a `Schedule` of rules); returns the resolution (names in program order, per-region
    options, rules that matched nothing). `listed`: the function's `listing`, when the caller has it."""
    sched = as_schedule(schedule)
    listed = listing(func) if listed is None else listed
    ops, infos, index_of = listed.ops, listed.infos, listed.index_of
    compute = set(ops)
    pos = {op: i for i, op in enumerate(ops)}
    reshaped = reshaped_sources(func)
    views = [OpView(o.index, o.node, o.path, classes or {}) for o in infos]
    res = resolve(
        sched,
        ops,
        index_of,
        views,
        [f"r{i}_{listed.locs[i][0] or op.name.split('.')[-1]}" for i, op in enumerate(ops)],
        [[pos[p] for p in producers(op, compute)] for op in ops],
        lambda path: layer_of(path, containers or set()),
        strict_groups=sched.groups is not None,
        materialized=frozenset(
            index_of[i] for i, op in enumerate(ops) if declared_format(op) is not None or op in reshaped
        ),
        ends_region=frozenset(i for i, op in enumerate(ops) if op in reshaped),
    )
    for op, name in zip(ops, res.names):
        set_region(op, name)
    region_order(func)  # reject schedules whose regions depend on each other cyclically
    return res


def reshaped_sources(func) -> set:
    """Compute ops whose result a slice, concatenation or splitting/merging reshape reads
    (`linalg_to_index.derives`): they end their region, so the derived tensor is read by name,
    made from the source's data (`fuseflow.views`)."""
    out = set()
    for op in body_ops(func):
        if not derives(op):
            continue
        stack = list(op.operands)
        while stack:
            o = _op_of_value(stack.pop())
            if isinstance(o, ir.Operation) and o.name in COMPUTE_OPS:
                out.add(o)
            elif isinstance(o, ir.Operation) and o.name in VIEW_OPS:
                stack.extend(o.operands)
    return out


def _op_of_value(v: ir.Value):
    return v.owner.operation if isinstance(v.owner, ir.OpView) else v.owner
