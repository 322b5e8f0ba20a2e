"""A region's rows as a window: the outermost dense scans over the output rows, told to iterate
rows lo..hi-1 only (the simulator's scan parameters ``lo``/``hi``, docs/sampling.md).

A windowed run reads every input whole, at the addresses the whole run reads them. It writes the
rows of the window, and nothing else changes. So any region whose outputs' rows are its
outermost loop, and are never reduced, can be sampled, fused ones included: a fused GraphSAGE
reads A by the output's rows and again by the neighbours' rows, which a slice of A would lose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse

from fuseflow.analysis.index_notation import Assign, accesses
from fuseflow.fabric.split import row_counts, row_vars
from fuseflow.sim.graph import GraphSpec


@dataclass(frozen=True)
class RowWindow:
    """The scans (node indices) whose window is the unit's rows, and the tensors they walk."""

    scans: tuple[int, ...]
    tensors: tuple[str, ...]


def row_window(spec: GraphSpec, assigns: Sequence[Assign], rows: int) -> RowWindow | str:
    """The region's row window, or why its rows cannot be windowed (it then runs whole)."""
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


def row_work(spec: GraphSpec, assigns: Sequence[Assign], window: RowWindow, env: Mapping[str, Any], rows: int):
    """Each row's work, known before anything runs: one, plus the stored entries in that row of
    every sparse input the rows walk; a square one the region reads more than once (a fused
    GNN's neighbours' rows, recomputed per row) adds its rows' neighbours' entries too."""
    work = np.ones(rows)
    uses: dict[str, int] = {}
    for a in assigns:
        for acc in accesses(a.expr):
            uses[acc.tensor] = uses.get(acc.tensor, 0) + 1
    for name in window.tensors:
        t = spec.tensors.get(name)
        source = (t.copy_of or name) if t is not None else name
        data = env.get(source)
        if data is None or not (scipy.sparse.issparse(data) or (t is not None and "compressed" in t.fmt.levels)):
            continue
        per_row = row_counts(data, 0)
        work += per_row
        if uses.get(name, 0) > 1 and data.shape[0] == data.shape[1] == rows:
            pattern = scipy.sparse.csr_matrix(data if scipy.sparse.issparse(data) else np.asarray(data))
            pattern.data[:] = 1
            work += pattern @ per_row
    return work
