"""Turn sam graphs (parsed MLIR) into simulator node specs, bind tensor data, run, decode outputs.

The node specs are plain Python data built once per program (cached); each run creates a fresh
C++ graph from them, so repeated ``simulate()`` calls cost one C++ construction, not a re-parse.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
import scipy.sparse

import fuseflow._simulator as _simulator
from fuseflow import views
from fuseflow.dialects.sam_ir import SamGraph, SamOp, read_module
from fuseflow.errors import SimulationError, VerificationError
from fuseflow.formats import Format, pack, pack_blocked, pack_bsr, pack_sparse, packs_as_bsr, unpack, unpack_blocked
from fuseflow.mlir import ir
from fuseflow.primitives import PRIMITIVES
from fuseflow.sim import pack_cache
from fuseflow.sim.arch import Arch


@dataclass
class NodeSpec:
    """One simulator node to build: its kind, name, (node, port) inputs and parameters."""

    kind: str
    name: str
    inputs: list[tuple[int, int]]
    params: dict[str, Any]
    tensor: str | None = None  # data-bound nodes: scan (compressed), load
    level: int = 0
    n_out: int = 1  # result streams (a joiner's payloads follow its coordinate output)
    var: str | None = None  # the index variable a scan or locate iterates (the cycle model's correlations)

    # Typed reads of the parameters (the cycle model's): one place spells their keys.
    @property
    def format(self) -> str | None:
        """A scan's level format (``dense`` / ``compressed``); None for other kinds."""
        return self.params.get("format")

    @property
    def dim(self) -> int:
        """A scan's or locate's level size (a micro-batch's rows, once cut: `fabric.split`)."""
        return int(self.params.get("dim", 1))

    @property
    def order(self) -> int:
        """A sparse accumulator's inner levels."""
        return int(self.params.get("order", 1))

    @property
    def factor(self) -> int:
        """A fork's or join's lanes."""
        return int(self.params.get("factor", 1))

    @property
    def depth(self) -> int:
        """Levels below the parallel variable a fork or join works at (-1: a stream from above it)."""
        return int(self.params.get("depth", 0))

    @property
    def tile_rank(self) -> int | None:
        """The rank of a tile op's values (its axes), None where the op carries no tiles."""
        return len(self.params["axes"]) if "axes" in self.params else None

    @property
    def in_ranks(self) -> list[int] | None:
        """The ranks of a tile op's value inputs, None where it has none."""
        return [int(x) for x in self.params["in_ranks"]] if "in_ranks" in self.params else None


@dataclass
class TensorSpec:
    """A tensor a graph reads or writes: its role, shape, format and blocking."""

    name: str
    role: str
    shape: tuple[int, ...]
    fmt: Format
    copy_of: str | None = None  # a re-laid copy of another tensor's data
    block: int = 0  # > 0: levels over b x b blocks, values are tiles (a blocked region)


@dataclass
class GraphSpec:
    """One region's graph as the simulator front end builds it from the sam module."""

    name: str
    nodes: list[NodeSpec]
    tensors: dict[str, TensorSpec]
    value_nodes: list[int] = field(default_factory=list)
    block: int = 0


_AS: dict[str, Any] = {"int": int, "float": float, "string": str}
"""A parameter's type in the simulator's table -> its Python conversion."""


def _tile_params(op: SamOp, which: str, inputs: list, axes_of, ids: dict[str, int], b: int) -> dict[str, Any]:
    """Tile layouts of a blocked value op: its axes and each value input's axes (`which` inputs
    are values: `Primitive.value_inputs`), as variable ids."""

    def id_of(v: str) -> int:
        return ids.setdefault(v, len(ids))

    axes = op.axes or []
    value_inputs = {"all": inputs, "first": inputs[:1], "last": inputs[-1:], "none": []}[which]
    ins = [axes_of(*src) for src in value_inputs]
    ints = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    return {
        "tile_b": b,
        "axes": ints([id_of(v) for v in axes]),
        "in_axes": ints([id_of(v) for a in ins for v in a]),
        "in_ranks": ints([len(a) for a in ins]),
    }


def parse_graphs(module: ir.Module) -> tuple[list[GraphSpec], list[str]]:
    """Node specs of every sam.graph in `module`, and the program outputs (sam.outputs)."""
    read = read_module(module, texts=False)
    return [_graph_spec(g) for g in read.graphs], read.outputs or []


def graph_spec(g: SamGraph) -> GraphSpec:
    """The node specs of one typed sam graph (read from MLIR, or built by `GraphBuilder.typed`)."""
    return _graph_spec(g)


def graph_specs(graphs: Sequence[SamGraph]) -> list[GraphSpec]:
    """`graph_spec` of every graph; a graph built as a renamed copy of an earlier one
    (`SamGraph.renamed_from`) takes that one's spec renamed (1,364 of GPT-3 Small's 1,380)."""
    out: list[GraphSpec] = []
    done: dict[str, GraphSpec] = {}
    for g in graphs:
        copied = g.renamed_from
        src = done.get(copied[0]) if copied is not None else None
        spec = _renamed(src, g.name, copied[1]) if src is not None and copied is not None else _graph_spec(g)
        done[g.name] = spec
        out.append(spec)
    return out


def _renamed(spec: GraphSpec, name: str, names: Mapping[str, str]) -> GraphSpec:
    """`spec` as graph `name` whose tensors are renamed (`names`: old -> new)."""

    def new(n: str | None) -> str | None:
        return None if n is None else names.get(n, n)

    tensors = {
        names.get(n, n): replace(t, name=names.get(n, n), copy_of=new(t.copy_of)) for n, t in spec.tensors.items()
    }
    # a node that names no renamed tensor is the original's (specs are not changed once built)
    nodes = [
        n
        if n.tensor is None or n.tensor not in names
        else NodeSpec(
            n.kind,
            _label(n.kind, i, names[n.tensor], n.var),
            n.inputs,
            n.params,
            names[n.tensor],
            n.level,
            n.n_out,
            n.var,
        )
        for i, n in enumerate(spec.nodes)
    ]
    return GraphSpec(name, nodes, tensors, list(spec.value_nodes), spec.block)


def _label(kind: str, idx: int, tensor: str | None, var: str | None) -> str:
    """A node's name in traces and counters: kind, position, tensor and index variable."""
    return f"{kind}{idx}" + (f"_{tensor}" if tensor else "") + (f"_{var}" if var else "")


def _graph_spec(g: SamGraph) -> GraphSpec:
    tensors = {
        t.name: TensorSpec(t.name, t.role, t.shape, Format(t.levels, t.mode_order), t.copy_of, t.block)
        for t in g.tensors
    }
    spec = GraphSpec(g.name, [], tensors, block=max((t.block for t in tensors.values()), default=0))

    def axes_of(idx: int, port: int) -> list[str]:
        """Tile axes of a value stream: its producer's `axes`, through pass-through ops."""
        while True:
            src_op, spec_node = g.ops[idx], spec.nodes[idx]
            if src_op.axes is not None:
                return src_op.axes
            if spec_node.kind in ("repeat", "fork", "join"):
                idx, port = spec_node.inputs[0]
            elif spec_node.kind in ("intersect", "union"):
                n = len(spec_node.inputs) - (src_op.n_results - 1)  # number of crd inputs
                idx, port = spec_node.inputs[n + port - 1]
            else:
                raise VerificationError(f"sam.{spec_node.kind}: no tile axes for its value output")

    ids: dict[str, int] = {}
    for idx, op in enumerate(g.ops):
        kind, inputs = op.kind, list(op.operands)
        params: dict[str, Any] = {}
        label = _label(kind, idx, op.tensor, op.index_var)
        node = NodeSpec(kind, label, inputs, params, op.tensor, int(op.get("level", 0)), op.n_results, op.index_var)
        prim = PRIMITIVES.get(kind)
        if prim is None:
            raise SimulationError(f"sam.{kind} is not supported by the simulator yet")
        for name, type_ in prim.params.items():  # what the simulator reads, from the op's attributes
            if (value := op.get(name)) is not None:
                params[name] = _AS[type_](value)
        if spec.block and prim.tile:
            params.update(_tile_params(op, prim.value_inputs, inputs, axes_of, ids, spec.block))
        if prim.emits == "values" or (prim.emits == "as_input" and inputs and inputs[0][0] in spec.value_nodes):
            spec.value_nodes.append(idx)
        spec.nodes.append(node)
    return spec


@dataclass
class GraphRun:
    """What one graph's run gives: cycles, per-node counters, the written outputs, the engine that ran it."""

    name: str
    cycles: int
    nodes: list[dict]
    outputs: dict[str, np.ndarray]
    traces: list[dict] | None = None
    engine: str = "event"  # the engine that produced the run (after any fallback)
    spill: dict | None = None  # queues kept on disk (arch spill_tokens): queues, peak_bytes, bytes_written

    @property
    def writes(self) -> list[str]:
        """The tensors the run wrote."""
        return list(self.outputs)


PROGRESS_EVERY = 1 << 20
"""Simulated cycles between two progress reports."""


ENGINES = ("auto", "event", "window")
"""Simulation engines, same results (docs/architecture.md, "Two engines, one semantics"):
``auto`` takes the window engine when the architecture allows it; a FIFO that could fill runs
in windows while its consumer is far enough behind, else the run goes to the event engine at that
window (a run's engine is then ``window+event``); and it falls back to the event engine when a
run needs it."""
WINDOW_MIN_FIFO_DEPTH = 1 << 9
"""``auto`` tries the window engine only with FIFOs this deep. A full FIFO runs in windows when its
consumer holds at least four windows' pops (it runs first, docs/simulator-performance.md); the
window shrinks with the depth (an eighth of it, 64 to 1,024 cycles), so from 512 tokens every
FIFO that could fill holds that many. In shallower ones backpressure is the event engine's."""


def pack_inputs(spec: GraphSpec, data: Mapping[str, np.ndarray]) -> dict:
    """Each input tensor in the level arrays its format needs (sparse inputs are never densified)."""
    packed = {}
    for name, t in spec.tensors.items():
        if t.role != "input":
            continue
        source = t.copy_of or name
        if not views.has(data, source):
            raise SimulationError(f"graph {spec.name}: no data for input tensor {source!r}")
        arr = views.lookup(data, source)
        sparse = scipy.sparse.issparse(arr)
        if not sparse:
            arr = np.asarray(arr, dtype=np.float32)
        if tuple(arr.shape) != t.shape:
            raise SimulationError(
                f"graph {spec.name}: tensor {name!r} has shape {tuple(arr.shape)}, the graph was compiled for {t.shape}"
            )
        packed[name] = pack_cache.packed(
            arr, (t.fmt.levels, t.fmt.mode_order, t.fmt.block, t.block), partial(_pack, arr, t)
        )
    return packed


def _pack(arr: Any, t: TensorSpec) -> Any:
    """One input in the level arrays of its format (sparse inputs are never densified)."""
    sparse = scipy.sparse.issparse(arr)
    if sparse and not t.block:
        return pack_sparse(arr, t.fmt)
    if sparse and packs_as_bsr(arr, t.fmt, t.block):  # torch BSR read as bcsr<b>: its arrays as they are
        return pack_bsr(arr, t.fmt, t.block)
    arr = arr.toarray().astype(np.float32) if sparse else arr
    return pack_blocked(arr, t.fmt, t.block) if t.block else pack(arr, t.fmt)


SimulatorFault = _simulator.SimError
"""What the simulator raises for a fault found while building or running a graph."""


def new_graph(arch: Arch) -> _simulator.Graph:
    """An empty C++ graph with `arch`'s timing (nodes are added to it, then it runs once)."""
    return _simulator.Graph(arch.settings)


@functools.cache
def simulator_build() -> str:
    """Names the simulator build by its extension file's contents: results recorded by another
    build are not reused, and a reinstall of the same build (another machine, a fresh
    environment) keeps them."""
    with open(_simulator.__file__, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _build(spec: GraphSpec, packed: Mapping[str, Any], arch: Arch) -> _simulator.Graph:
    """A fresh C++ graph for `spec` (a run consumes it)."""
    g = _simulator.Graph(arch.settings)
    add_nodes(g, spec, packed)
    return g


def add_nodes(g: _simulator.Graph, spec: GraphSpec, packed: Mapping[str, Any]) -> None:
    """Add `spec`'s nodes to `g` after the ones it holds (a shared run adds one region per part)."""
    base = len(g)
    try:
        for n in spec.nodes:
            g.add_node(n.kind, n.name, [(base + src, port) for src, port in n.inputs], node_params(spec, n, packed))
    except ValueError as e:
        raise SimulationError(f"graph {spec.name}: {e}", region=spec.name) from None


def node_params(spec: GraphSpec, n: NodeSpec, packed: Mapping[str, Any]) -> dict[str, Any]:
    """`n`'s parameters with its tensor's level arrays bound (a compressed scan, a load)."""
    params = dict(n.params)
    if n.tensor and n.tensor in packed:
        p = packed[n.tensor]
        if n.kind == "scan" and params["format"] == "compressed":
            params["seg"] = p.segs[n.level]
            params["crd"] = p.crds[n.level]
        elif n.kind == "load":
            params["vals"] = p.vals
    elif n.kind == "load":
        raise SimulationError(f"graph {spec.name}: load of unknown tensor {n.tensor!r}")
    return params


def run_graph(spec: GraphSpec, data: Mapping[str, np.ndarray], arch: Arch, **options: Any) -> GraphRun:
    """Simulate one graph on dense numpy inputs; returns cycles, counters and dense outputs.
    `options` are `run_packed`'s (record, spans, progress, engine); `progress(cycle)` is called
    about every million simulated cycles."""
    return run_packed(spec, lambda: pack_inputs(spec, data), arch, **options)


def run_packed(
    spec: GraphSpec,
    packed: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
    arch: Arch,
    record: bool = False,
    spans: bool = False,
    progress=None,
    engine: str = "auto",
) -> GraphRun:
    """`run_graph` on inputs already packed (`pack_inputs`): what a worker process receives.

    `packed` may be a function that packs: its arrays are then dropped once the C++ graph holds
    its copies (a 736k-node graph's packed levels are gigabytes), and packed again only if the
    window engine hands the run to the event engine."""
    repack = packed if callable(packed) else (lambda: packed)
    res, chosen = execute(
        spec.name, lambda: _build(spec, repack(), arch), arch, record, spec.value_nodes, spans, progress, engine
    )
    return graph_run(spec, int(res["cycles"]), res["nodes"], res.get("traces"), chosen, res.get("spill"))


@dataclass(frozen=True)
class Checkpoint:
    """States of one run saved to `path` every `every` seconds of wall time (0: every window),
    under `key` (the graph, inputs, arch and build): a file of another key is another run's."""

    path: str
    key: str
    every: float

    def arm(self, g: _simulator.Graph) -> None:
        """Resume `g`'s run from the saved state if it is this run's (else drop it), and save."""
        if self.saved_key() == self.key:
            g.set_resume(self.path, self.key)
        else:
            self.discard()
        g.set_checkpoint(self.path, self.key, self.every)

    def saved_key(self) -> str | None:
        """The key in the saved state's header (None: no state, or not one)."""
        try:
            with open(self.path, "rb") as f:
                head = f.read(20)
                if len(head) < 20 or head[:8] != b"FFCHKPT1":
                    return None
                size = int.from_bytes(head[12:20], "little")
                return f.read(size).decode(errors="replace") if size < 4096 else None
        except OSError:
            return None

    def discard(self) -> None:
        """Delete the saved state (the run finished, or it is another run's)."""
        for p in (self.path, self.path + ".tmp"):
            if os.path.exists(p):
                os.remove(p)


def execute(
    name: str,
    build: Callable[[], _simulator.Graph],
    arch: Arch,
    record: bool = False,
    value_nodes: Sequence[int] = (),
    spans: bool = False,
    progress=None,
    engine: str = "auto",
    checkpoint: Checkpoint | None = None,
) -> tuple[dict, str]:
    """Run the graph `build()` makes on `engine` (``auto``: the window engine where the arch
    allows it, the event engine from where it cannot); returns the simulator's result and the
    engine that ran it. With `checkpoint`, the window engine saves the run's state as it goes
    and a saved state of the same run is continued (docs/pieces.md)."""
    if engine not in ENGINES:
        raise SimulationError(f"unknown simulation engine {engine!r} (one of {', '.join(ENGINES)})")
    g = build()
    chosen = engine
    if engine == "auto":  # the window engine, handing the run to the event engine before a FIFO fills
        chosen = "window+event" if g.window_capable and arch.fifo_depth >= WINDOW_MIN_FIFO_DEPTH else "event"
    if checkpoint is not None:
        if chosen == "event":
            raise SimulationError(
                f"graph {name}: states inside a run are saved by the window engine, which needs the memory model "
                f"off and FIFOs of at least {WINDOW_MIN_FIFO_DEPTH} tokens (arch {arch.name}); checkpoint "
                "without `every` keeps finished pieces only",
                region=name,
            )
        checkpoint.arm(g)
    try:
        try:
            res = g.run(arch.max_cycles, record, list(value_nodes), spans, progress, PROGRESS_EVERY, chosen)
            if chosen == "window+event":  # which engines ran: none handed over, or over from cycle 0
                handed = res.get("event_from")
                chosen = "window" if handed is None else "event" if handed == 0 else chosen
        except _simulator.WindowUnsafe as e:
            if engine != "auto":
                raise SimulationError(f"graph {name}: the window engine cannot run this graph: {e}") from None
            if checkpoint is not None:  # the event engine saves no states: this run starts over if stopped
                checkpoint.discard()
            g = build()  # the window run spent the graph
            chosen = "event"
            res = g.run(arch.max_cycles, record, list(value_nodes), spans, progress, PROGRESS_EVERY, chosen)
    except _simulator.SimError as e:
        raise SimulationError(f"graph {name}: {e}", region=name) from None
    except ValueError as e:
        raise SimulationError(f"graph {name}: {e}", region=name) from None
    if checkpoint is not None:  # done: the caller keeps the result
        checkpoint.discard()
    return res, chosen


def graph_run(
    spec: GraphSpec, cycles: int, nodes: list[dict], traces: list[dict] | None, engine: str, spill: dict | None = None
) -> GraphRun:
    """A `GraphRun` from the simulator's per-node dicts (in `spec.nodes` order): the outputs
    decoded, and the counters without the writers' arrays (they would hold every region's output
    twice for the whole program run; a writer keeps how many it wrote)."""
    outputs = decode_outputs(spec, nodes)
    counters_of = []
    for nd in nodes:
        counters = {k: v for k, v in nd.items() if k not in _WRITTEN}
        written = nd.get("crd", nd.get("vals"))
        if written is not None:
            counters["written"] = len(written)
        counters_of.append(counters)
    return GraphRun(spec.name, cycles, counters_of, outputs, traces, engine, spill)


_WRITTEN = ("seg", "crd", "vals")


def decode_outputs(spec: GraphSpec, nodes: list[dict]) -> dict[str, np.ndarray]:
    """The dense values of `spec`'s outputs from its writers' arrays (`nodes`: the run's per-node
    dicts, in `spec.nodes` order)."""
    outputs = {}
    for name, t in spec.tensors.items():
        if t.role != "output":
            continue
        crd_nodes = [(n.level, nd) for n, nd in zip(spec.nodes, nodes) if n.kind == "write_crd" and n.tensor == name]
        crd_nodes.sort(key=lambda x: x[0])
        vals = [nd["vals"] for n, nd in zip(spec.nodes, nodes) if n.kind == "write_val" and n.tensor == name]
        segs, crds = [nd["seg"] for _, nd in crd_nodes], [nd["crd"] for _, nd in crd_nodes]
        if t.block:
            outputs[name] = unpack_blocked(segs, crds, vals[0], t.shape, t.fmt.mode_order, t.block)
        else:
            level_dims = [t.shape[m] for m in t.fmt.mode_order]
            outputs[name] = unpack(segs, crds, vals[0], level_dims, t.fmt.mode_order)
    return outputs


def check_protocol(tokens: list) -> str | None:
    """Validate one recorded stream against the SAM protocol; returns a problem or None."""
    if not tokens or tokens[-1] != "D":
        return "stream does not end with D"
    if "D" in tokens[:-1]:
        return "D before the end of the stream"
    stops = [int(t[1:]) for t in tokens if isinstance(t, str) and t.startswith("S")]
    if stops:
        top = max(stops)
        last = tokens[-2]
        if not (isinstance(last, str) and last == f"S{top}"):
            return f"stream ends with {last!r} instead of its outermost stop S{top}"
    return None
