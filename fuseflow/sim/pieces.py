"""One region's graph simulated in pieces from recorded streams (docs/pieces.md).

Node ids are a topological order, so contiguous id ranges are pieces whose edges all point
forward. A piece runs alone: every stream it sends to a later piece goes through a `tape` sink
to a file (each token with the cycle it became visible), and every stream it takes from an
earlier piece comes from a `replay` source that pushes the tape's tokens to be visible at
their recorded cycles (simulator/src/stream.cpp). Where the cut FIFOs never fill (unbounded
FIFOs, no shared memory model), a producer never waits for its consumer, so each piece's
nodes see exactly the streams they see in the whole graph: cycles, counters and outputs are
the whole run's. Peak memory is the largest piece's.

Each finished piece leaves its tapes, counters and written arrays in the pieces' directory
under a fingerprint of the graph, its inputs, the architecture and the simulator build: a run
stopped between pieces and started again with the same directory resumes at the first piece
not finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fuseflow.errors import FuseflowError, SimulationError
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import (
    Checkpoint,
    GraphRun,
    GraphSpec,
    SimulatorFault,
    execute,
    graph_run,
    new_graph,
    node_params,
    simulator_build,
)

UNBOUNDED_FIFO = 1 << 20
"""FIFOs at least this deep are taken as never filling; a replay whose FIFO fills anyway stops
the run with an error (simulator/src/stream.cpp)."""
SLACK = 0.1
"""A count of pieces cuts each within this fraction of the graph's nodes of its ideal place,
where the fewest streams cross."""
LIMITS = ("max_cycles", "max_seconds", "max_fifo_mib", "spill_tokens")
"""Settings that stop a run, or store its queues, without changing it: not part of a run's fingerprint."""
FORMAT = 1
"""The pieces' directory layout; a directory of another layout is not resumed."""

Stream = tuple[int, int]
"""An output port of the whole graph: (node id, port)."""


@dataclass(frozen=True)
class Piece:
    """Nodes [first, end) of the graph; the streams it replays from earlier pieces, and those of
    its own nodes that later pieces read (taped)."""

    index: int
    first: int
    end: int
    replays: tuple[Stream, ...]
    tapes: tuple[Stream, ...]


@dataclass(frozen=True)
class PieceRun:
    """A piece's run: its nodes' counters and written arrays (in id order), its tapes' tokens and
    bytes, and the engine that ran it."""

    index: int
    nodes: list[dict]
    tokens: int
    bytes: int
    engine: str
    states: int = 0  # states saved while it ran (checkpoints inside the run)
    continued_from: int | None = None  # the cycle it continued from, resumed from a saved state


@dataclass
class PiecesSummary:
    """How a region ran in pieces: how many, the streams and tokens taped, their bytes on disk,
    and how many pieces a resumed run found finished."""

    pieces: int
    streams: int
    tokens: int
    bytes: int
    resumed: int
    states: int = 0  # states saved inside runs (`every`)
    continued: list[int] = field(default_factory=list)  # cycles pieces continued from saved states

    @property
    def bytes_per_token(self) -> float:
        """Bytes on disk per taped token (a queued token takes 16 in memory)."""
        return self.bytes / self.tokens if self.tokens else 0.0


def _consumers(spec: GraphSpec) -> dict[Stream, list[int]]:
    out: dict[Stream, list[int]] = {}
    for dst, n in enumerate(spec.nodes):
        for src, port in n.inputs:
            out.setdefault((src, port), []).append(dst)
    return out


def crossing(spec: GraphSpec, tokens: Sequence[float] | None = None) -> np.ndarray:
    """What crosses a cut before each node id (index b: between b - 1 and b): the streams, or
    with `tokens` (predicted tokens each node emits, `prog.estimate()`), their predicted tokens
    (a node's shared evenly by its ports), plus one per stream to break ties."""
    diff = np.zeros(len(spec.nodes) + 1, dtype=np.float64)
    for (src, _), dsts in _consumers(spec).items():
        w = 1.0 if tokens is None else 1.0 + float(tokens[src]) / max(spec.nodes[src].n_out, 1)
        diff[src + 1] += w  # crosses every cut b with src < b <= its last consumer
        diff[max(dsts) + 1] -= w
    return np.cumsum(diff)


def boundaries(spec: GraphSpec, pieces: int | Sequence[str], tokens: Sequence[float] | None = None) -> list[int]:
    """The first node id of every piece but the first: `pieces` equal counts of nodes, each cut
    moved within `SLACK` of its place to where the least crosses (`crossing`: the fewest
    predicted tokens, given `tokens`, else the fewest streams); or the names of the nodes that
    start a piece."""
    n = len(spec.nodes)
    if isinstance(pieces, int):
        if pieces < 1:
            raise FuseflowError(f"pieces must be at least 1, got {pieces}")
        count = min(pieces, n)
        cross = crossing(spec, tokens if tokens is not None and len(tokens) == n else None)
        reach = max(1, int(SLACK * n / count))
        cuts: list[int] = []
        for j in range(1, count):
            ideal = round(j * n / count)
            lo, hi = max(ideal - reach, (cuts[-1] if cuts else 0) + 1), min(ideal + reach, n - (count - j))
            if lo > hi:
                continue
            cuts.append(lo + int(np.argmin(cross[lo : hi + 1])))
        return cuts
    ids = {node.name: i for i, node in enumerate(spec.nodes)}
    missing = [name for name in pieces if name not in ids]
    if missing:
        raise FuseflowError(f"graph {spec.name}: no node named {missing[0]!r} to start a piece at")
    return sorted({ids[name] for name in pieces} - {0})


def split(spec: GraphSpec, cuts: Sequence[int]) -> list[Piece]:
    """The pieces between `cuts`, each with the streams it replays and tapes."""
    edges = [0, *cuts, len(spec.nodes)]
    consumers = _consumers(spec)
    out = []
    for k, (first, end) in enumerate(zip(edges, edges[1:])):
        replays = sorted({(src, port) for i in range(first, end) for src, port in spec.nodes[i].inputs if src < first})
        tapes = sorted(s for s, dsts in consumers.items() if first <= s[0] < end and max(dsts) >= end)
        out.append(Piece(k, first, end, tuple(replays), tuple(tapes)))
    return out


def check_exact(spec: GraphSpec, arch: Arch, pieces: Sequence[Piece]) -> None:
    """Refuse a cut whose pieces could differ from the whole run, naming what couples them."""
    streams = [s for p in pieces for s in p.tapes]
    if not streams:
        return
    src, port = streams[0]
    name = spec.nodes[src].name
    if arch.memory_model:
        raise FuseflowError(
            f"graph {spec.name}: cannot run in pieces with the memory model on: its channels are shared by "
            f"every node, so a piece's requests delay another's (the stream {name}.{port} crosses a cut)"
        )
    if arch.fifo_depth < UNBOUNDED_FIFO:
        raise FuseflowError(
            f"graph {spec.name}: cannot run in pieces with FIFOs of depth {arch.fifo_depth}: the stream "
            f"{name}.{port} crosses a cut, and a full FIFO there would hold its producer back (backpressure "
            f"across the cut); pieces need FIFOs of at least {UNBOUNDED_FIFO} tokens"
        )
    if spec.block:
        raise FuseflowError(
            f"graph {spec.name}: a blocked region's value tokens name tiles in the simulator's tile store, "
            "which a piece does not share: run it whole"
        )


def fingerprint(spec: GraphSpec, packed: Mapping[str, Any], arch: Arch) -> str:
    """A digest of what a piece's run depends on: the graph, its inputs' arrays, the
    architecture and the simulator build."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([FORMAT, simulator_build()]).encode())
    timing = {k: v for k, v in arch.settings.items() if k not in LIMITS}  # a run resumed may raise its limits
    h.update(json.dumps(timing, sort_keys=True, default=str).encode())
    for n in spec.nodes:
        h.update(json.dumps([n.kind, n.name, n.inputs, n.tensor, n.level, _plain(n.params)], default=str).encode())
    for name in sorted(packed):
        p = packed[name]
        for arr in [*getattr(p, "segs", []), *getattr(p, "crds", []), getattr(p, "vals", None)]:
            if arr is not None:
                h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def _plain(params: Mapping[str, Any]) -> dict:
    return {k: v for k, v in params.items() if not isinstance(v, np.ndarray)}


def _key(digest: str, stream: Stream) -> int:
    """A tape's key: 63 bits of the run's fingerprint and the stream (the simulator refuses a
    tape whose key differs)."""
    h = hashlib.blake2b(f"{digest}:{stream[0]}:{stream[1]}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1


def _tape(directory: Path, stream: Stream) -> str:
    return str(directory / f"stream-{stream[0]}-{stream[1]}.tape")


def run_piece(
    spec: GraphSpec,
    piece: Piece,
    packed: Mapping[str, Any],
    arch: Arch,
    directory: str,
    digest: str,
    engine: str,
    progress: Callable[[int], None] | None = None,
    every: float | None = None,
) -> PieceRun:
    """Simulate one piece: its replays, its nodes, its tapes (a task a worker process runs;
    `progress(cycle)` as `run_packed`'s). With `every`, its run's state is saved in `directory`
    every that many seconds, and a state saved there by the same run is continued."""
    where = Path(directory)
    fed = [
        (i, j)
        for i in range(piece.first, piece.end)
        for j, (src, _) in enumerate(spec.nodes[i].inputs)
        if src < piece.first
    ]
    replay_of = {edge: k for k, edge in enumerate(fed)}  # one replay per consumer input (its own pace)

    def build() -> Any:
        g = new_graph(arch)
        try:
            for i, j in fed:
                s = spec.nodes[i].inputs[j]
                name = f"replay {spec.nodes[s[0]].name}.{s[1]} -> {spec.nodes[i].name}.{j}"
                g.add_node("replay", name, [], _stream(where, s, digest))
            base = len(g)
            for i in range(piece.first, piece.end):
                n = spec.nodes[i]
                ins = [
                    (base + src - piece.first, port) if src >= piece.first else (replay_of[(i, j)], 0)
                    for j, (src, port) in enumerate(n.inputs)
                ]
                g.add_node(n.kind, n.name, ins, node_params(spec, n, packed))
            for s in piece.tapes:
                g.add_node(
                    "tape",
                    f"tape {spec.nodes[s[0]].name}.{s[1]}",
                    [(base + s[0] - piece.first, s[1])],
                    _stream(where, s, digest),
                )
        except (ValueError, SimulatorFault) as e:  # a bad node, or a tape that is not this run's
            raise SimulationError(f"graph {spec.name}, piece {piece.index}: {e}", region=spec.name) from None
        return g

    key = f"{digest}:{piece.first}:{piece.end}"  # a state of another cut is another run's
    state = None if every is None else Checkpoint(str(where / f"piece-{piece.index}.state"), key, every)
    res, chosen = execute(
        f"{spec.name} (piece {piece.index})", build, arch, progress=progress, engine=engine, checkpoint=state
    )
    first = len(fed)
    nodes = res["nodes"][first : first + piece.end - piece.first]
    taped = res["nodes"][first + piece.end - piece.first :]
    size = sum(os.path.getsize(_tape(where, s)) for s in piece.tapes)
    tokens = sum(int(t["tokens_in"]) for t in taped)
    return PieceRun(piece.index, nodes, tokens, size, chosen, int(res.get("checkpoints", 0)), res.get("resumed_from"))


def _stream(where: Path, s: Stream, digest: str) -> dict[str, Any]:
    return {"path": _tape(where, s), "key": _key(digest, s)}


Runner = Callable[[GraphSpec, Piece, Mapping[str, Any], Arch, str, str, str, None, float | None], PieceRun]
"""Runs one piece (`run_piece`, or the same in a worker process) and returns its run."""


@contextmanager
def _directory(checkpoint: str | os.PathLike | None) -> Iterator[Path]:
    if checkpoint is not None:
        path = Path(checkpoint)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix="fuseflow-pieces-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_in_pieces(
    spec: GraphSpec,
    packed: Mapping[str, Any],
    arch: Arch,
    pieces: int | Sequence[str],
    checkpoint: str | os.PathLike | None = None,
    engine: str = "auto",
    runner: Runner | None = None,
    progress: Callable[[str, int], None] | None = None,
    tokens: Sequence[float] | None = None,
    every: float | None = None,
) -> tuple[GraphRun, PiecesSummary]:
    """`spec` run piece after piece (`runner` runs one, in a worker; in this process by
    default, with `progress(piece, cycle)`), merged into the whole run's cycles, counters and
    outputs. With `checkpoint`, the region's directory under it keeps each finished piece, and
    a later call resumes after the last one. `tokens`: each node's predicted tokens, for a count's
    cuts (`boundaries`). `every`: seconds between states saved inside a piece's run (with
    `checkpoint`): a stopped piece continues from its last state."""
    if every is not None and checkpoint is None:
        raise FuseflowError("every= saves states in the checkpoint directory: give checkpoint= too")
    digest = fingerprint(spec, packed, arch)
    runs: list[PieceRun] = []
    resumed = 0
    root = None if checkpoint is None else Path(checkpoint) / _safe(spec.name)
    with _directory(root) as where:
        parts = split(spec, boundaries(spec, pieces, tokens))
        check_exact(spec, arch, parts)
        for p in parts:
            done = _load(where, p, digest)
            if done is None:
                done = _run_one(spec, p, len(parts), packed, arch, where, digest, engine, runner, progress, every)
                _save(where, p, digest, done)
            else:
                resumed += 1
            runs.append(done)
    nodes = [n for r in runs for n in r.nodes]
    _check_no_late_node(spec, nodes)
    cycles = 1 + max((int(n["last_active"]) for n in nodes), default=-1)
    engines = sorted({r.engine for r in runs})
    whole = graph_run(spec, cycles, nodes, None, engines[0] if len(engines) == 1 else "+".join(engines))
    summary = PiecesSummary(
        len(parts),
        sum(len(p.tapes) for p in parts),
        sum(r.tokens for r in runs),
        sum(r.bytes for r in runs),
        resumed,
        sum(r.states for r in runs),
        [r.continued_from for r in runs if r.continued_from is not None],
    )
    return whole, summary


def _run_one(spec, p: Piece, count: int, packed, arch, where: Path, digest: str, engine, runner, progress, every):
    if runner is not None:
        return runner(spec, p, packed, arch, str(where), digest, engine, None, every)
    label = f"piece {p.index + 1}/{count}"
    cb = (lambda cycle: progress(label, cycle)) if progress else None
    return run_piece(spec, p, packed, arch, str(where), digest, engine, cb, every)


def _check_no_late_node(spec: GraphSpec, nodes: Sequence[dict]) -> None:
    """The whole graph's run ends when its last writer finishes; a node that acts later in its
    piece would show activity the whole run stops: refuse rather than differ."""
    writers = [int(n["last_active"]) for n, s in zip(nodes, spec.nodes) if s.kind in ("write_val", "write_crd")]
    end = max(writers, default=-1)
    for n, s in zip(nodes, spec.nodes):
        if int(n["last_active"]) > end:
            raise SimulationError(
                f"graph {spec.name}: node {s.name} acts after the last writer finished; the whole run stops it "
                "there, a piece does not: run this graph whole",
                region=spec.name,
            )


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _load(where: Path, piece: Piece, digest: str) -> PieceRun | None:
    """A finished piece's run from the directory, or None (absent, or of another run)."""
    meta = where / f"piece-{piece.index}.json"
    if not meta.exists():
        return None
    try:
        saved = json.loads(meta.read_text())
        if saved["fingerprint"] != digest or saved["format"] != FORMAT or saved["range"] != [piece.first, piece.end]:
            return None
        arrays = np.load(where / f"piece-{piece.index}.npz")
    except (OSError, ValueError, KeyError):
        return None
    nodes = saved["nodes"]
    for i, n in enumerate(nodes):
        for k in ("seg", "crd", "vals"):
            if f"{i}.{k}" in arrays:
                n[k] = arrays[f"{i}.{k}"]
    return PieceRun(
        piece.index, nodes, saved["tokens"], saved["bytes"], saved["engine"], saved["states"], saved["continued_from"]
    )


def _save(where: Path, piece: Piece, digest: str, run: PieceRun) -> None:
    """Keep a finished piece: arrays first, then its description (written last and renamed into
    place, so a piece stopped while saving is run again)."""
    arrays = {f"{i}.{k}": n[k] for i, n in enumerate(run.nodes) for k in ("seg", "crd", "vals") if k in n}
    np.savez(where / f"piece-{piece.index}.npz", **arrays)
    nodes = [{k: v for k, v in n.items() if k not in ("seg", "crd", "vals")} for n in run.nodes]
    saved = {
        "format": FORMAT,
        "fingerprint": digest,
        "range": [piece.first, piece.end],
        "nodes": nodes,
        "tokens": run.tokens,
        "bytes": run.bytes,
        "engine": run.engine,
        "states": run.states,
        "continued_from": run.continued_from,
    }
    tmp = where / f"piece-{piece.index}.json.tmp"
    tmp.write_text(json.dumps(saved))
    tmp.replace(where / f"piece-{piece.index}.json")
