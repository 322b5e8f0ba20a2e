"""``sam-parallelize{level=i factor=4}``: run the work under one index variable in P lanes.

The graph splits into the nodes that iterate the parallel variable `level` (its scanners,
joiners, locates, repeats), everything downstream of them up to the exits (the *lane body*:
the inner levels and the computation), the exits (writers, joins of an earlier
parallelization, reductions over `level` itself) with what follows them, and the rest. The
lane body is copied P times; every stream from the level's nodes into the body goes through a
``sam.fork`` (coordinates of `level` dealt round-robin per fiber, so remainders need no policy:
lanes differ by at most one element), every stream from the body to an exit through a
``sam.join`` that restores element order. Outputs are identical to the unparallelized graph.
Run the pass twice for two levels (the second level's lanes span all the first level's lanes).
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.dialects.sam_attrs import ScanAttrs, SpaccAttrs
from fuseflow.dialects.sam_ir import GraphBuilder, SamGraph, SamOp, module_text, parse_module, read_graph
from fuseflow.errors import FuseflowError
from fuseflow.mlir import ir
from fuseflow.passes.context import PassContext
from fuseflow.primitives import PRIMITIVES

WRITERS = {"write_crd", "write_val"}


@dataclass(frozen=True)
class Options:
    """``sam-parallelize{level= factor= region=}``: the index variable(s) to split, the lanes, the region."""

    level: str = ""  # an index variable, or several (comma-separated) for multi-output regions
    factor: int = 2
    region: str = ""


def _aligned(g: SamGraph, level_nodes: set[int], lane: set[int]) -> set[tuple[int, int]]:
    """Streams outside the level's nodes that hold one element per element of the level: the
    values of a sparse accumulator whose coordinates the level iterates (GCN's ``X W`` summed
    over l, then walked at k). They are dealt like the level's own streams; copying them to
    every lane would pair each lane's coordinates with every value."""
    out: set[tuple[int, int]] = set()
    for i in level_nodes:
        for src, r in g.ops[i].operands:
            op = g.ops[src]
            if src not in level_nodes and src not in lane and op.kind == "spacc" and r == 0:
                out.add((src, op.n_results - 1))
    return out


def _depths(g: SamGraph, lane: set[int], level_nodes: set[int]) -> dict[tuple[int, int], int]:
    """Levels below the parallel variable of every stream the lane body produces."""
    depth: dict[tuple[int, int], int] = dict.fromkeys(_aligned(g, level_nodes, lane), 0)
    for i, op in enumerate(g.ops):
        if i in level_nodes:
            for r in range(len(op.result_types)):
                depth[(i, r)] = 0
    for i, op in enumerate(g.ops):
        if i not in lane:
            continue
        ins = [depth.get(o, -1) for o in op.operands]  # -1: a stream above the level (broadcast)
        n = len(op.result_types)
        rule = PRIMITIVES[op.kind].lanes if op.kind in PRIMITIVES else "aligned"
        if rule == "deeper":
            out = [ins[0] + 1] * n
        elif rule == "signal":
            out = [ins[1]] * n
        elif rule == "shallower":
            out = [ins[0] - 1]
        elif rule == "spacc":
            acc = op.typed
            assert isinstance(acc, SpaccAttrs)  # the rule names the kind
            order = acc.order
            outer = ins[order]  # operands: inner crds (order of them), the outer crd, the values
            if outer < 0:  # accumulating over a variable above the level: inner levels keep their depth
                out = ins[:order] + [ins[order - 1]]
            else:
                out = [outer + k for k in range(order)] + [outer + order - 1]
        elif rule == "each":
            out = ins[:n]
        else:  # aligned with the first operand: locate, joiners, repsiggen, load, alu, concat
            out = [ins[0]] * n
        for r, d in enumerate(out):
            depth[(i, r)] = d
    return depth


def parallelize_graph(g: SamGraph, levels: set[str], factor: int) -> str:
    """The text of `parallelized_graph`."""
    return _lanes_builder(g, levels, factor).graph(g.name, g.tensors, g.extra_attrs)


def parallelized_graph(g: SamGraph, levels: set[str], factor: int) -> SamGraph:
    """`g` with the work under `levels` in `factor` lanes, as a typed graph (the planner's lane
    menus estimate hundreds of these: printing and parsing each was a tenth of planning)."""
    em = _lanes_builder(g, levels, factor)
    out = em.typed(g.name, g.tensors)
    out.extra_attrs = list(g.extra_attrs)
    return out


def _lanes_builder(g: SamGraph, levels: set[str], factor: int) -> GraphBuilder:
    """The graph with the work under `levels` in `factor` lanes (several names when a
    region computes several outputs with their own variables; the rest stays as it is).

    Level nodes iterate the variable; the lane body is everything downstream of them up to the
    *exits*: writers, joins of an earlier parallelization, and reductions over the variable
    itself (they need every element, so their inputs are joined first). Everything downstream of
    an exit follows the joins. Raises FuseflowError when no name is a variable of the region, or
    a lane (or the level itself) would read a stream the fork cannot split."""
    levels = _known_levels(g, levels)
    level = ",".join(sorted(levels))
    level_nodes, lane, after = _partition(g, levels)
    _check_lanes(g, level, level_nodes, lane, after)
    _check_joins(g, level, level_nodes, lane, after)
    return _emit_lanes(g, level, factor, level_nodes, lane, after)


def _known_levels(g: SamGraph, levels: set[str]) -> set[str]:
    """The names in `levels` that are index variables of the region (at least one must be)."""
    have = sorted({op.index_var for op in g.ops if op.index_var})
    if not levels & set(have):
        raise FuseflowError(
            f"region {g.name}: cannot parallelize at {', '.join(sorted(levels))}: no such "
            f"index variable (variables: {', '.join(have)})"
        )
    return levels & set(have)


def _partition(g: SamGraph, levels: set[str]) -> tuple[set[int], set[int], set[int]]:
    """The level's nodes, the lane body under them, and what follows the lanes' exits."""
    level_nodes: set[int] = set()
    for i, op in enumerate(g.ops):
        if (op.index_var in levels and op.kind not in ("reduce", "spacc")) or (
            op.kind == "repsiggen" and op.operands[0][0] in level_nodes
        ):
            level_nodes.add(i)
    lane: set[int] = set()
    after: set[int] = set()
    for i, op in enumerate(g.ops):
        if i in level_nodes:
            continue
        reads_lane = any(src in lane or src in level_nodes for src, _ in op.operands)
        reads_after = any(src in after for src, _ in op.operands)
        exit_ = op.kind in WRITERS or op.kind == "join" or (op.kind in ("reduce", "spacc") and op.index_var in levels)
        if reads_after or (exit_ and reads_lane):
            after.add(i)
        elif reads_lane:
            lane.add(i)
    return level_nodes, lane, after


def _check_lanes(g: SamGraph, level: str, level_nodes: set[int], lane: set[int], after: set[int]) -> None:
    """Refuse a level that reads its own lanes, or lanes that read a stream a fork cannot split."""
    for i in sorted(level_nodes):
        bad = next((src for src, _ in g.ops[i].operands if src in lane or src in after), None)
        if bad is not None:
            raise FuseflowError(
                f"region {g.name}: cannot parallelize at {level!r}: sam.{g.ops[i].kind} #{i} at that "
                f"level reads sam.{g.ops[bad].kind} #{bad}, computed from the level itself"
            )
    # A lane may read a stream from above the level (e.g. a spacc over an outer variable reads
    # its coordinates) when the level is dense: every fiber then holds every coordinate, dealing
    # by position is dealing by coordinate, and each lane gets the whole outer stream.
    dense = all(_scan_format(g.ops[i]) in (None, "dense") for i in level_nodes) and not any(
        g.ops[i].kind in ("intersect", "union") for i in level_nodes
    )
    aligned = _aligned(g, level_nodes, lane)
    for i in sorted(lane):
        for src, r in g.ops[i].operands:
            if src not in lane and src not in level_nodes and (src, r) not in aligned and not dense:
                raise FuseflowError(
                    f"region {g.name}: cannot parallelize at {level!r}: sam.{g.ops[i].kind} #{i} "
                    f"also reads sam.{g.ops[src].kind} #{src}, which is not iterated along it "
                    f"(and {level!r} is sparse, so its lanes cannot share that stream)"
                )
    if not lane:
        raise FuseflowError(f"region {g.name}: nothing runs under {level!r}; parallelizing it has no effect")


def _check_joins(g: SamGraph, level: str, level_nodes: set[int], lane: set[int], after: set[int]) -> None:
    """Refuse a join two or more levels below the parallel variable whose stream passes a
    compressed level in between: where a lane's element has an empty fiber there, the join loses
    count of the elements (GraphSAGE's linear in order ``k,i,j`` at k with 4 lanes stopped with
    ``join: lane 2 has 0 where its fiber should end``)."""
    depth = _depths(g, lane, level_nodes)
    for i in sorted(after):
        for o in g.ops[i].operands:
            if o[0] in lane and depth.get(o, 0) < 0:
                raise FuseflowError(
                    f"region {g.name}: cannot parallelize at {level!r}: the lanes' stream into "
                    f"sam.{g.ops[i].kind} #{i} lies above the level (a copy of a stream from above "
                    f"it), which a join cannot put back in order"
                )
            if o[0] not in lane or depth.get(o, 0) < 2:
                continue
            inner = _compressed_between(g, o[0], lane, depth, depth[o])
            if inner is not None:
                raise FuseflowError(
                    f"region {g.name}: cannot parallelize at {level!r}: the lanes' stream into "
                    f"sam.{g.ops[i].kind} #{i} lies {depth[o]} levels below it, under the compressed "
                    f"sam.scan #{inner}, whose empty fibers the join cannot count yet"
                )


def _compressed_between(g: SamGraph, start: int, lane: set[int], depth: dict, below: int) -> int | None:
    """A compressed scan in the lane, above `start`, whose coordinates lie strictly between the
    parallel level and `below` levels under it."""
    stack, seen = [start], set()
    while stack:
        i = stack.pop()
        if i in seen or i not in lane:
            continue
        seen.add(i)
        op = g.ops[i]
        if _scan_format(op) == "compressed" and 0 < depth.get((i, 1), 0) < below:
            return i
        stack.extend(src for src, _ in op.operands)
    return None


def _scan_format(op: SamOp) -> str | None:
    """The level format a scan iterates; None for any other op."""
    a = op.typed
    return a.format if isinstance(a, ScanAttrs) else None


def _emit_lanes(
    g: SamGraph, level: str, factor: int, level_nodes: set[int], lane: set[int], after: set[int]
) -> GraphBuilder:
    """The new graph: the level and what is above it, forks, `factor` copies of the lane body,
    joins, then what follows."""
    depth = _depths(g, lane, level_nodes)
    em = GraphBuilder(cse=False)
    names: dict[tuple[int, int], str] = {}
    for i, op in enumerate(g.ops):  # the level's nodes and everything above, in order
        if i in lane or i in after:
            continue
        for r, nm in enumerate(em.copy(op, [names[o] for o in op.operands])):
            names[(i, r)] = nm
    forks: dict[tuple[int, int], list[str]] = {}
    aligned = _aligned(g, level_nodes, lane)
    for i in sorted(lane):
        for o in g.ops[i].operands:
            if o[0] not in lane and o not in forks:
                deal = o[0] in level_nodes or o in aligned  # else: a stream from above, copied to every lane
                var = (g.ops[o[0]].index_var if o[0] in level_nodes else None) or level
                forks[o] = em.fork(names[o], index_var=var, factor=factor, depth=0 if deal else -1)
    lanes: list[dict[tuple[int, int], str]] = []
    for p in range(factor):
        mine: dict[tuple[int, int], str] = {}
        for i in sorted(lane):
            op = g.ops[i]
            ins = [forks[o][p] if o in forks else mine[o] for o in op.operands]
            for r, nm in enumerate(em.copy(op, ins)):
                mine[(i, r)] = nm
        lanes.append(mine)
    joined: dict[tuple[int, int], str] = {}
    for i in sorted(after):
        op = g.ops[i]
        ins = []
        for o in op.operands:
            if o[0] in lane:
                if o not in joined:
                    joined[o] = em.join(
                        [lanes[p][o] for p in range(factor)],
                        index_var=_lane_var(g, o, level_nodes, lane),
                        depth=depth[o],
                    )
                ins.append(joined[o])
            else:
                ins.append(names[o])
        for r, nm in enumerate(em.copy(op, ins)):
            names[(i, r)] = nm
    return em


def _lane_var(g: SamGraph, o: tuple[int, int], level_nodes: set[int], lane: set[int]) -> str:
    """The parallel variable a lane stream descends from (for the join's index_var)."""
    stack, seen = [o[0]], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        for src, _ in g.ops[i].operands:
            var = g.ops[src].index_var
            if src in level_nodes and g.ops[src].kind != "root" and var:
                return var
            if src in lane:
                stack.append(src)
    return ""


def parallelize_module(module: ir.Module, level: str, factor: int, region: str = "") -> list[str]:
    """Parallelize, in place, the regions of `module` that have index variable `level` (or just
    `region`); returns the names of the regions changed. Several comma-separated names are
    applied one after another (the lanes of a later one span all lanes of the earlier ones);
    each name must apply to at least one region. Only the changed graphs are printed and parsed:
    each replaces its original op, the rest of the module is not touched."""
    names = [v.strip() for v in level.split(",") if v.strip()]
    if not names:
        raise FuseflowError("sam-parallelize: give level=<index variable> (e.g. level=i)")
    if factor < 1:
        raise FuseflowError(f"sam-parallelize: factor must be a positive integer, got {factor}")
    changed_all: list[str] = []
    for name in names:
        changed = _parallelize_once(module, name, factor, region)
        changed_all += [c for c in changed if c not in changed_all]
    return changed_all


def _parallelize_once(module: ir.Module, level: str, factor: int, region: str) -> list[str]:
    ops = [op.operation for op in module.body.operations]
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op in ops]
    if region and region not in names:
        raise FuseflowError(f"sam-parallelize: no region {region!r}; regions: {', '.join(names)}")
    if factor == 1:
        return []
    texts, targets, changed, errors = [], [], [], []
    for op, name in zip(ops, names):
        if region and name != region:
            continue
        try:
            texts.append(parallelize_graph(read_graph(op), {level}, factor))
        except FuseflowError as e:
            if region:
                raise
            errors.append(str(e))
            continue
        targets.append(op)
        changed.append(name)
    if not changed:
        raise FuseflowError(
            errors[0]
            if len(errors) == 1
            else f"sam-parallelize: no region can be parallelized at {level!r} (" + "; ".join(errors[:3]) + ")"
        )
    try:
        parsed = parse_module(module_text(texts), context=module.context)
    except ir.MLIRError as e:  # lanes the dialect's verifier refuses: a refusal, not a crash
        first = str(e).splitlines()[-1].strip()
        raise FuseflowError(f"region {', '.join(changed)}: lanes at {level!r} do not verify: {first}") from None
    for old, new in zip(targets, list(parsed.body.operations), strict=True):
        new.operation.move_before(old)
        old.erase()
    return changed


def run(module, options: Options, ctx: PassContext | None = None):
    """Split the streams under index variable `level` into `factor` lanes with sam.fork/sam.join.

    Works on sam graphs (after ``lower-to-sam``). Applies to every region with index variable
    `level` (or only `region=`); elements are dealt round-robin, so `factor` need not divide the
    dimension. Outputs are identical for every factor. Two levels: run the pass twice.
    """
    with module.context:
        parallelize_module(module, options.level, options.factor, options.region)
        return module
