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

from dataclasses import dataclass, field

from fuseflow.errors import FuseflowError
from fuseflow.mlir import ir

WRITERS = {"write_crd", "write_val"}


@dataclass
class Options:
    level: str = ""  # an index variable, or several (comma-separated) for multi-output regions
    factor: int = 2
    region: str = ""


@dataclass
class OpRec:
    """One sam op as the rewrite sees it: operands are (producer index, result number)."""

    kind: str
    operands: list[tuple[int, int]]
    attrs: list[tuple[str, str]]
    result_types: list[str]

    def attr(self, name: str) -> str | None:
        return next((v for k, v in self.attrs if k == name), None)

    @property
    def index_var(self) -> str | None:
        v = self.attr("index_var")
        return v.strip('"') if v is not None else None


@dataclass
class GraphRec:
    name: str
    ops: list[OpRec]
    graph_attrs: str
    lines: list[str] = field(default_factory=list)


def _named_attrs(op) -> list[tuple[str, str]]:
    attrs = op.attributes
    return [(attrs[j].name, str(attrs[j].attr)) for j in range(len(attrs))]


def read_graph(g: ir.Operation) -> GraphRec:
    where: dict = {}
    ops = []
    for i, op in enumerate(g.regions[0].blocks[0].operations):
        op = op.operation
        rec = OpRec(
            op.name.split(".", 1)[1],
            [where[v] for v in op.operands],
            _named_attrs(op),
            [str(r.type) for r in op.results],
        )
        for r in op.results:
            where[r] = (i, r.result_number)
        ops.append(rec)
    attrs = ", ".join(f"{k} = {v}" for k, v in _named_attrs(g))
    return GraphRec(ir.StringAttr(g.attributes["sym_name"]).value, ops, attrs)


class _Emitter:
    """Generic-form text of a graph body with fresh SSA names."""

    def __init__(self):
        self.lines: list[str] = []
        self.types: dict[str, str] = {}
        self.n = 0

    def op(self, kind: str, operands: list[str], attrs: list[tuple[str, str]], result_types: list[str]) -> list[str]:
        names = []
        for t in result_types:
            names.append(f"%{self.n}")
            self.types[names[-1]] = t
            self.n += 1
        lhs = ", ".join(names) + " = " if names else ""
        outs = ", ".join(result_types)
        outs = outs if len(result_types) == 1 else f"({outs})"
        attr_text = ", ".join(f"{k} = {v}" for k, v in attrs)
        ins = ", ".join(self.types[o] for o in operands)
        self.lines.append(f'    {lhs}"sam.{kind}"({", ".join(operands)}) {{{attr_text}}} : ({ins}) -> {outs}')
        return names


def _depths(g: GraphRec, lane: set[int], level_nodes: set[int]) -> dict[tuple[int, int], int]:
    """Levels below the parallel variable of every stream the lane body produces."""
    depth: dict[tuple[int, int], int] = {}
    for i, op in enumerate(g.ops):
        if i in level_nodes:
            for r in range(len(op.result_types)):
                depth[(i, r)] = 0
    for i, op in enumerate(g.ops):
        if i not in lane:
            continue
        ins = [depth.get(o, -1) for o in op.operands]  # -1: a stream above the level (broadcast)
        n = len(op.result_types)
        if op.kind == "scan":
            out = [ins[0] + 1] * n
        elif op.kind == "repeat":
            out = [ins[1]] * n
        elif op.kind == "reduce":
            out = [ins[0] - 1]
        elif op.kind == "spacc":
            order = int(op.attr("order").split(":")[0])
            outer = ins[order]  # operands: inner crds (order of them), the outer crd, the values
            if outer < 0:  # accumulating over a variable above the level: inner levels keep their depth
                out = ins[:order] + [ins[order - 1]]
            else:
                out = [outer + k for k in range(order)] + [outer + order - 1]
        elif op.kind in ("crd_drop", "val_drop"):
            out = ins[:n]
        else:  # locate, joiners, repsiggen, load, alu: aligned with their first operand
            out = [ins[0]] * n
        for r, d in enumerate(out):
            depth[(i, r)] = d
    return depth


def parallelize_graph(g: GraphRec, levels: set[str], factor: int) -> str:
    """The graph's text with the work under `levels` in `factor` lanes (several names when a
    region computes several outputs with their own variables; the rest stays as it is).

    Level nodes iterate the variable; the lane body is everything downstream of them up to the
    *exits*: writers, joins of an earlier parallelization, and reductions over the variable
    itself (they need every element, so their inputs are joined first). Everything downstream of
    an exit follows the joins. Raises FuseflowError when no name is a variable of the region, or
    a lane (or the level itself) would read a stream the fork cannot split."""
    have = sorted({op.index_var for op in g.ops} - {None, ""})
    if not levels & set(have):
        raise FuseflowError(
            f"region {g.name}: cannot parallelize at {', '.join(sorted(levels))}: no such "
            f"index variable (variables: {', '.join(have)})"
        )
    levels = levels & set(have)
    level = ",".join(sorted(levels))
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
    dense = all(
        g.ops[i].kind != "scan" or (g.ops[i].attr("format") or "").strip('"') == "dense" for i in level_nodes
    ) and not any(g.ops[i].kind in ("intersect", "union") for i in level_nodes)
    for i in sorted(lane):
        for src, _ in g.ops[i].operands:
            if src not in lane and src not in level_nodes and not dense:
                raise FuseflowError(
                    f"region {g.name}: cannot parallelize at {level!r}: sam.{g.ops[i].kind} #{i} "
                    f"also reads sam.{g.ops[src].kind} #{src}, which is not iterated along it "
                    f"(and {level!r} is sparse, so its lanes cannot share that stream)"
                )
    if not lane:
        raise FuseflowError(f"region {g.name}: nothing runs under {level!r}; parallelizing it has no effect")
    depth = _depths(g, lane, level_nodes)
    em = _Emitter()
    names: dict[tuple[int, int], str] = {}
    for i, op in enumerate(g.ops):  # the level's nodes and everything above, in order
        if i in lane or i in after:
            continue
        for r, nm in enumerate(em.op(op.kind, [names[o] for o in op.operands], op.attrs, op.result_types)):
            names[(i, r)] = nm
    forks: dict[tuple[int, int], list[str]] = {}
    for i in sorted(lane):
        for o in g.ops[i].operands:
            if o[0] not in lane and o not in forks:
                t = g.ops[o[0]].result_types[o[1]]
                deal = o[0] in level_nodes  # else: a stream from above, copied to every lane
                attrs = [
                    ("depth", f"{0 if deal else -1} : i64"),
                    ("factor", f"{factor} : i64"),
                    ("index_var", f'"{(g.ops[o[0]].index_var if deal else None) or level}"'),
                    ("resultSegmentSizes", f"array<i32: {factor}>"),
                ]
                forks[o] = em.op("fork", [names[o]], attrs, [t] * factor)
    lanes: list[dict[tuple[int, int], str]] = []
    for p in range(factor):
        mine: dict[tuple[int, int], str] = {}
        for i in sorted(lane):
            op = g.ops[i]
            ins = [forks[o][p] if o in forks else mine[o] for o in op.operands]
            for r, nm in enumerate(em.op(op.kind, ins, op.attrs, op.result_types)):
                mine[(i, r)] = nm
        lanes.append(mine)
    joined: dict[tuple[int, int], str] = {}
    for i in sorted(after):
        op = g.ops[i]
        ins = []
        for o in op.operands:
            if o[0] in lane:
                if o not in joined:
                    attrs = [
                        ("depth", f"{depth[o]} : i64"),
                        ("factor", f"{factor} : i64"),
                        ("index_var", f'"{_lane_var(g, o, level_nodes, lane)}"'),
                        ("operandSegmentSizes", f"array<i32: {factor}>"),
                    ]
                    joined[o] = em.op(
                        "join", [lanes[p][o] for p in range(factor)], attrs, [g.ops[o[0]].result_types[o[1]]]
                    )[0]
                ins.append(joined[o])
            else:
                ins.append(names[o])
        for r, nm in enumerate(em.op(op.kind, ins, op.attrs, op.result_types)):
            names[(i, r)] = nm
    body = "\n".join(em.lines)
    return f'  "sam.graph"() ({{\n{body}\n  }}) {{{g.graph_attrs}}} : () -> ()'


def _lane_var(g: GraphRec, o: tuple[int, int], level_nodes: set[int], lane: set[int]) -> str:
    """The parallel variable a lane stream descends from (for the join's index_var)."""
    stack, seen = [o[0]], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        for src, _ in g.ops[i].operands:
            if src in level_nodes and g.ops[src].kind != "root" and g.ops[src].index_var:
                return g.ops[src].index_var
            if src in lane:
                stack.append(src)
    return ""


def parallelize_module(module: ir.Module, level: str, factor: int, region: str = "") -> tuple[str, list[str]]:
    """Text of `module` with the regions that have index variable `level` (or just `region`)
    parallelized; also the names of the regions changed. Several comma-separated names are
    applied one after another (the lanes of a later one span all lanes of the earlier ones);
    each name must apply to at least one region."""
    names = [v.strip() for v in level.split(",") if v.strip()]
    if not names:
        raise FuseflowError("sam-parallelize: give level=<index variable> (e.g. level=i)")
    if factor < 1:
        raise FuseflowError(f"sam-parallelize: factor must be a positive integer, got {factor}")
    changed_all: list[str] = []
    text = str(module)
    for k, name in enumerate(names):
        if k:
            module = ir.Module.parse(text, context=module.context)
        text, changed = _parallelize_once(module, name, factor, region)
        changed_all += [c for c in changed if c not in changed_all]
    return text, changed_all


def _parallelize_once(module: ir.Module, level: str, factor: int, region: str) -> tuple[str, list[str]]:
    graphs = [read_graph(op.operation) for op in module.body.operations]
    if region and region not in {g.name for g in graphs}:
        raise FuseflowError(f"sam-parallelize: no region {region!r}; regions: {', '.join(g.name for g in graphs)}")
    texts, changed, errors = [], [], []
    for g, op in zip(graphs, module.body.operations):
        if (region and g.name != region) or factor == 1:
            texts.append(str(op))
            continue
        try:
            texts.append(parallelize_graph(g, {level}, factor))
            changed.append(g.name)
        except FuseflowError as e:
            if region:
                raise
            errors.append(str(e))
            texts.append(str(op))
    if not changed and factor > 1:
        raise FuseflowError(
            errors[0]
            if len(errors) == 1
            else f"sam-parallelize: no region can be parallelized at {level!r} (" + "; ".join(errors[:3]) + ")"
        )
    outs = module.operation.attributes["sam.outputs"] if "sam.outputs" in module.operation.attributes else None
    head = "module" + (f" attributes {{sam.outputs = {outs}}}" if outs is not None else "")
    return head + " {\n" + "\n".join(texts) + "\n}\n", changed


def run(module, options: Options):
    """Split the streams under index variable `level` into `factor` lanes with sam.fork/sam.join.

    Works on sam graphs (after ``lower-to-sam``). Applies to every region with index variable
    `level` (or only `region=`); elements are dealt round-robin, so `factor` need not divide the
    dimension. Outputs are identical for every factor. Two levels: run the pass twice.
    """
    with module.context:
        text, _ = parallelize_module(module, options.level, options.factor, options.region)
        return ir.Module.parse(text)
