"""How a sampled unit of rows runs: as a row window of the region's own graph, or as a slice.

**Window** (preferred): the outermost dense scans over the output rows are told to iterate rows
lo..hi-1 only (the simulator's scan parameters ``lo``/``hi``, docs/sampling.md). The run reads
every input whole, at the addresses the whole run reads, and writes the window's rows. Fused
regions that read an input by the output's rows and again by other rows (a fused GraphSAGE reads
A both ways) sample this way; a slice of A would lose the second read.

**Slice** (when the rows are an inner loop, as in ``X @ W`` under the order the planner picks):
the micro-batch machinery (`fabric/split.py`) shrinks the region to the rows and slices the
inputs it reads along them; the run writes just those rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse

from fuseflow.analysis.index_notation import Assign, accesses
from fuseflow.fabric.split import RegionCut, batch_inputs, batch_spec, cut_region, row_counts, row_vars
from fuseflow.sim.graph import GraphSpec, pack_inputs

Job = tuple[GraphSpec, Callable[[], Mapping[str, Any]]]
"""A graph to run and what packs its inputs."""


@dataclass(frozen=True)
class RowWindow:
    """The scans (node indices) whose window is the unit's rows, and the tensors they walk."""

    scans: tuple[int, ...]
    tensors: tuple[str, ...]


def row_window(spec: GraphSpec, assigns: Sequence[Assign], rows: int) -> RowWindow | str:
    """The region's row window, or why its rows cannot be windowed."""
    if spec.block:
        return "a blocked region"
    if not assigns:
        return "no index notation"
    if any(n.kind == "fork" for n in spec.nodes):
        return "it has lanes (sam.fork)"
    out_rows = row_vars(assigns, rows)
    if isinstance(out_rows, str):
        return out_rows
    roots = {i for i, n in enumerate(spec.nodes) if n.kind == "root"}
    scans = [i for i, n in enumerate(spec.nodes) if n.kind == "scan" and n.var in out_rows]
    if not scans:
        return "no scan walks the output rows"
    for i in scans:
        n = spec.nodes[i]
        if n.params.get("format") != "dense":
            return f"the output rows ({n.var}) are a compressed level of {n.tensor}"
        if not all(src in roots for src, _ in n.inputs):
            return f"the output rows ({n.var}) are not the outermost loop"
        if int(n.params.get("dim", -1)) != rows:
            return f"a loop over the rows ({n.var}) has another extent"
    tensors = tuple(sorted({t for i in scans if (t := spec.nodes[i].tensor)}))
    return RowWindow(tuple(scans), tensors)


def windowed(spec: GraphSpec, window: RowWindow, lo: int, hi: int) -> GraphSpec:
    """`spec` iterating rows lo..hi-1 only."""
    chosen = set(window.scans)
    nodes = [
        replace(n, params={**n.params, "lo": lo, "hi": hi}) if i in chosen else n for i, n in enumerate(spec.nodes)
    ]
    return replace(spec, name=f"{spec.name}[{lo}:{hi}]", nodes=nodes)


class Units:
    """What runs a unit of rows, and where its rows are in what the run writes."""

    along: dict[str, int]  # the tensors the rows walk, and the dimension they walk
    how: str  # "window" | "slice"

    def job(self, lo: int, hi: int) -> Job:  # pragma: no cover - interface
        """The graph that runs rows lo..hi-1, and what packs its inputs."""
        raise NotImplementedError

    def rows(self, written: np.ndarray, lo: int, hi: int) -> np.ndarray:  # pragma: no cover - interface
        """The unit's rows of an output as the run wrote it."""
        raise NotImplementedError


class WindowUnits(Units):
    """Units as row windows; the region's inputs are packed once and shared by every run."""

    how = "window"

    def __init__(self, spec: GraphSpec, window: RowWindow, env: Mapping[str, Any]):
        self.spec, self.window, self.env = spec, window, env
        self.along = {t: 0 for t in window.tensors}
        self._packed: Mapping[str, Any] | None = None

    def _pack(self) -> Mapping[str, Any]:
        if self._packed is None:
            self._packed = pack_inputs(self.spec, self.env)
        return self._packed

    def job(self, lo: int, hi: int) -> Job:
        """The region's graph windowed to lo..hi-1, on its whole inputs."""
        return windowed(self.spec, self.window, lo, hi), self._pack

    def rows(self, written: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """A windowed run writes the whole output with only the window's rows filled."""
        return np.asarray(written)[lo:hi]


class SliceUnits(Units):
    """Units as micro-batches: the region shrunk to the rows, on its inputs' rows."""

    how = "slice"

    def __init__(self, spec: GraphSpec, cut: RegionCut, env: Mapping[str, Any]):
        self.spec, self.cut, self.env = spec, cut, env
        self.along = {n: d for n, d in cut.dims.items() if spec.tensors[n].role == "input"}

    def job(self, lo: int, hi: int) -> Job:
        """The micro-batch of rows lo..hi-1 and its sliced inputs."""
        spec = batch_spec(self.spec, self.cut, lo, hi, 0)
        return spec, lambda: pack_inputs(spec, batch_inputs(self.spec, self.cut, self.env, lo, hi))

    def rows(self, written: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """A micro-batch writes just its rows."""
        return np.asarray(written)


def units_for(spec: GraphSpec, assigns: Sequence[Assign], env: Mapping[str, Any], rows: int) -> Units | str:
    """A window where the rows are the outermost loop, else a slice where the region can be cut,
    else why neither works."""
    window = row_window(spec, assigns, rows)
    if not isinstance(window, str):
        return WindowUnits(spec, window, env)
    cut = cut_region(spec, assigns, rows)
    if not isinstance(cut, str):
        return SliceUnits(spec, cut, env)
    return f"its rows can be neither windowed ({window}) nor cut ({cut})"


def row_work(
    spec: GraphSpec, assigns: Sequence[Assign], along: Mapping[str, int], env: Mapping[str, Any], rows: int
) -> dict[str, np.ndarray]:
    """Measures of each row's work, known before anything runs (`sample_region` estimates with
    the one that predicts the sample best):

    - ``entries``: one, plus the row's stored entries in every sparse input the rows walk;
    - ``rows``: one per row (dense regions, or work that does not follow the entries);
    - ``two-hop``: where the region reads a square sparse input more than once (a fused GNN
      recomputes each neighbour's rows per row), the entries plus the row's neighbours' entries.
    """
    uses: dict[str, int] = {}
    for a in assigns:
        for acc in accesses(a.expr):
            uses[acc.tensor] = uses.get(acc.tensor, 0) + 1
    entries, hops = np.ones(rows), np.zeros(rows)
    for name, dim in along.items():
        t = spec.tensors.get(name)
        source = (t.copy_of or name) if t is not None else name
        data = env.get(source)
        if data is None or not (scipy.sparse.issparse(data) or (t is not None and "compressed" in t.fmt.levels)):
            continue
        per_row = row_counts(data, dim)
        if len(per_row) != rows:
            continue
        entries += per_row
        if uses.get(name, 0) > 1 and data.shape[0] == data.shape[1] == rows:
            pattern = scipy.sparse.csr_matrix(data if scipy.sparse.issparse(data) else np.asarray(data))
            pattern.data[:] = 1
            hops += pattern @ per_row
    out = {"entries": entries, "rows": np.ones(rows)}
    if hops.any():
        out["two-hop"] = entries + hops
    return out
