"""A region made of independent parts, memoised part by part.

An attention region holds every head, and heads share no stream but the root of the mask they
all read (a root emits one reference, whoever reads it). Without a shared memory model
(`Arch.memory_model`), nothing else couples them in the simulator, so each part runs as if alone:
the region's cycles are the slowest part's (its makespan on the unbounded fabric) and its
counters are the parts' counters, a shared root's once. Memoising parts instead of the whole
region lets one head stand for every head with the same mask, within the region and across
decoders (`sim/memo.py` keys a part like a region). tests/e2e/test_memo.py holds the figures
equal to simulating the whole region.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec, pack_inputs, run_packed
from fuseflow.sim.memo import RegionMemo, structure_key
from fuseflow.sim.pieces import PiecesSummary, run_in_pieces

SHARED = frozenset({"root"})
"""Kinds a part copies instead of sharing: sources whose output no reader can influence."""


@dataclass
class Part:
    """One component: its graph and the indices of its nodes in the region's graph."""

    spec: GraphSpec
    nodes: list[int]


def parts(spec: GraphSpec) -> list[Part]:
    """The region's independent parts in node order: the weakly connected components of its
    graph without the roots, each with the roots it reads. One part when the graph is connected
    (or a root is read by nothing)."""
    n = len(spec.nodes)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    shared = {i for i, node in enumerate(spec.nodes) if node.kind in SHARED and not node.inputs}
    readers: dict[int, list[int]] = {}
    for i, node in enumerate(spec.nodes):
        for j, _ in node.inputs:
            if j in shared:
                readers.setdefault(j, []).append(i)
            else:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        if i not in shared:
            groups.setdefault(find(i), []).append(i)
    if len(groups) < 2 or any(j not in readers for j in shared):
        return [Part(spec, list(range(n)))]
    out = []
    for members in groups.values():
        # a copied root goes just before its first reader: the same place in every head (the
        # lowering emitted it once, with the first head), so identical heads key alike
        indices: list[int] = []
        for i in members:
            indices += [j for j, _ in spec.nodes[i].inputs if j in shared and j not in indices]
            indices.append(i)
        new = {old: k for k, old in enumerate(indices)}
        nodes = [replace(spec.nodes[i], inputs=[(new[j], p) for j, p in spec.nodes[i].inputs]) for i in indices]
        used = dict.fromkeys(node.tensor for node in nodes if node.tensor)  # first use: identical heads key alike
        tensors = {name: spec.tensors[name] for name in used if name in spec.tensors}
        values = [new[i] for i in spec.value_nodes if i in new]
        out.append(Part(GraphSpec(spec.name, nodes, tensors, values, spec.block), indices))
    return out


def independent(arch: Arch) -> bool:
    """Whether a region's parts run as if alone on `arch`: memory, when modelled, is shared."""
    return not arch.memory_model


@dataclass
class PartsRun:
    """A region run part by part: what `RegionResult` and the environment need."""

    cycles: int
    nodes: list[dict]
    outputs: dict[str, np.ndarray]
    engine: str
    memoised: bool  # every part came from the memo
    pieces: PiecesSummary | None = None  # with a checkpoint: the simulated parts' pieces, summed
    spill: list[dict] = field(default_factory=list)  # each simulated part's queues on disk, if any


def run_parts(
    spec: GraphSpec,
    split: list[Part],
    env: Mapping[str, Any],
    arch: Arch,
    memo: RegionMemo,
    evaluate: Callable[[], dict[str, np.ndarray] | None],
    progress=None,
    engine: str = "auto",
    checkpoint: str | os.PathLike | None = None,
    every: float | None = None,
) -> PartsRun:
    """Each part from the memo, or simulated and memoised. Parts taken from the memo get their
    outputs from `evaluate` (the region's index notation); when that cannot evaluate, they are
    simulated too. With `checkpoint`, each simulated part is one piece kept in its own directory
    there (`sim/pieces.py`): a finished part is not run again, and with `every` a stopped part
    continues from its last saved state."""
    nodes: list[dict | None] = [None] * len(spec.nodes)
    outputs: dict[str, np.ndarray] = {}
    cycles, engine_of_slowest, memoised = -1, "event", True
    values: dict[str, np.ndarray] | None = None
    evaluated = False
    summaries: list[PiecesSummary] = []
    spills: list[dict] = []
    for k, part in enumerate(split):  # in order: a later head hits the memo of an earlier one
        packed = pack_inputs(part.spec, env)
        key = structure_key(part.spec, packed, arch)
        hit = memo.get(key)
        if hit is not None and not evaluated:
            values, evaluated = evaluate(), True
        if hit is None or values is None:
            if checkpoint is None:
                run = run_packed(part.spec, packed, arch, progress=progress, engine=engine)
            else:
                where = Path(checkpoint) / f"{part.spec.name}.part{k}"
                cb = (lambda _piece, cycle: progress(cycle)) if progress else None
                run, summary = run_in_pieces(part.spec, packed, arch, 1, where, engine, None, cb, None, every)
                summaries.append(summary)
            if run.spill:
                spills.append(run.spill)
            memo.put(key, run)
            outputs.update(run.outputs)
            counters, c, eng = run.nodes, run.cycles, run.engine
            memoised = False
        else:
            writes = {n.tensor for n in part.spec.nodes if n.kind.startswith("write") and n.tensor}
            outputs.update({name: values[name] for name in writes})
            counters, c, eng = hit.for_graph(part.spec), hit.cycles, hit.engine
        for i, counter in zip(part.nodes, counters):
            if nodes[i] is None:  # a shared root: its first part's counters (every copy's are equal)
                nodes[i] = counter
        if c > cycles:
            cycles, engine_of_slowest = c, eng
    total = _summed(summaries) if summaries else None
    return PartsRun(cycles, [n or {} for n in nodes], outputs, engine_of_slowest, memoised, total, spills)


def _summed(summaries: list[PiecesSummary]) -> PiecesSummary:
    """The simulated parts' pieces as one region's: counts and bytes added up."""
    return PiecesSummary(
        sum(s.pieces for s in summaries),
        sum(s.streams for s in summaries),
        sum(s.tokens for s in summaries),
        sum(s.bytes for s in summaries),
        sum(s.resumed for s in summaries),
        sum(s.states for s in summaries),
        [c for s in summaries for c in s.continued],
    )
