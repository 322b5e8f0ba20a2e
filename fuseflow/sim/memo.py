"""Memoised region cycles: a region structurally identical to one already simulated is not
simulated again (identical decoders, identical attention heads, the same projection under
another block size).

Cycles and counters depend only on the graph, the architecture and where the tokens go, which
the coordinates of sparse inputs decide; values never steer a token, except in value-dependent
primitives (`sam.val_drop`, `sam.crd_drop`: a zero is dropped), so a graph with one is never
memoised. The key therefore hashes the graph with its tensors renamed by first appearance (decoder
3's ``t41`` is decoder 1's ``t5``), every input's shape and format, the `seg`/`crd` arrays of its
compressed levels, the architecture and fuseflow's version. A hit takes the region's values from
`sim/values.py`. The memo lives for one `simulate` call, or on disk (one JSON file per key, safe to
share between processes) when a directory is given.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphRun, GraphSpec
from fuseflow.version import __version__

VALUE_DEPENDENT = frozenset({"val_drop", "crd_drop"})
"""Primitives whose token streams depend on values: their graphs are never memoised."""
_ARRAYS = ("seg", "crd", "vals")  # per-node outputs of writers: values, not counters


@dataclass(frozen=True)
class Memoised:
    """What a memoised region reports: its cycles, per-node counters and engine."""

    cycles: int
    nodes: list[dict]
    engine: str

    def for_graph(self, spec: GraphSpec) -> list[dict]:
        """The counters under `spec`'s node names (the memoised graph named its tensors otherwise)."""
        return [{**n, "name": s.name} for n, s in zip(self.nodes, spec.nodes)]


def structure_key(spec: GraphSpec, packed: Mapping[str, Any], arch: Arch) -> str | None:
    """The memo key of running `spec` on `packed` inputs, or None when the graph may not be memoised."""
    if any(n.kind in VALUE_DEPENDENT for n in spec.nodes):
        return None

    canon: dict[str, int] = {}

    def name(t: str | None) -> int | None:
        return None if t is None else canon.setdefault(t, len(canon))

    h = hashlib.sha256()
    h.update(json.dumps([__version__, arch.settings, arch.max_cycles, spec.block], sort_keys=True).encode())
    for tname, t in spec.tensors.items():
        fmt = (t.fmt.levels, t.fmt.mode_order)
        h.update(repr((name(tname), t.role, t.shape, fmt, name(t.copy_of), t.block)).encode())
    for n in spec.nodes:
        h.update(repr((n.kind, n.inputs, name(n.tensor), n.level, n.n_out)).encode())
        for k in sorted(n.params):
            v = n.params[k]
            h.update(k.encode())
            h.update(v.tobytes() if isinstance(v, np.ndarray) else repr(v).encode())
    for tname, t in spec.tensors.items():
        p = packed.get(tname)
        if t.role != "input" or p is None:
            continue
        for arr in (*p.segs, *p.crds):
            h.update(b"-" if arr is None else np.ascontiguousarray(arr, dtype=np.int64).tobytes())
    return h.hexdigest()


class RegionMemo:
    """Memoised region runs by `structure_key`; in memory, and in `root` when given."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else None
        if self.root:
            self.root.mkdir(parents=True, exist_ok=True)
        self.runs: dict[str, Memoised] = {}
        self.hits = 0

    def get(self, key: str | None) -> Memoised | None:
        """The run memoised under `key` (from memory, then from the memo directory), or None."""
        if key is None:
            return None
        hit = self.runs.get(key)
        if hit is None and self.root:
            try:
                d = json.loads((self.root / f"{key}.json").read_text())
                hit = self.runs[key] = Memoised(d["cycles"], d["nodes"], d["engine"])
            except (OSError, json.JSONDecodeError, KeyError):
                return None
        return hit

    def put(self, key: str | None, run: GraphRun) -> None:
        """Memoise `run` under `key` (its counters, not its arrays), on disk too when the memo has a directory."""
        if key is None:
            return
        nodes = [{k: v for k, v in n.items() if k not in _ARRAYS} for n in run.nodes]
        self.runs[key] = Memoised(run.cycles, nodes, run.engine)
        if self.root:
            tmp = self.root / f"{key}.json.tmp"
            tmp.write_text(json.dumps({"cycles": run.cycles, "nodes": nodes, "engine": run.engine}, default=_plain))
            tmp.replace(self.root / f"{key}.json")


def _plain(v: Any) -> Any:
    return v.tolist() if hasattr(v, "tolist") else str(v)


def as_memo(memo: bool | str | Path | RegionMemo | None) -> RegionMemo | None:
    """`simulate(memo=)`: True (this call), a directory (shared on disk), a RegionMemo, or off."""
    if memo is None or memo is False:
        return None
    if isinstance(memo, RegionMemo):
        return memo
    if memo is True:
        return RegionMemo()
    return RegionMemo(memo)
