"""The planner's units: runs of PyTorch-level ops a schedule search never splits, in a
topological order, and the periods of identical blocks among them (docs/architecture.md,
"Planning")."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx

from fuseflow.conversion.linalg_attrs import producers

OP_UNITS = 10
"""Models with at most this many PyTorch-level ops are planned op by op."""
MAX_UNITS = 24
"""More units than this are coarsened to top-level layers (the cover grows as units^2)."""


@dataclass
class Unit:
    """A run of PyTorch-level ops the planner never splits."""

    ops: list[int]
    label: str


def _general(path: str) -> str:
    return re.sub(r"(^|\.)\d+(?=\.|$)", r"\1*", path)


def units_of(
    op_infos, op_deps: Mapping[int, set[int]], layer_of=None, coarsen: bool = True
) -> tuple[list[Unit], list[str]]:
    """The planner's units in a topological order (see the module docstring), and notes. With
    `coarsen`, more than `MAX_UNITS` module units fall back to top-level layers."""
    notes: list[str] = []
    n = len(op_infos)
    if n <= OP_UNITS:
        groups = [[o.index] for o in op_infos]
    else:
        by_path: dict[str, list[int]] = {}
        groups = []
        for o in op_infos:
            if not o.path:
                groups.append([o.index])
            elif o.path in by_path:
                by_path[o.path].append(o.index)
            else:
                by_path[o.path] = [o.index]
                groups.append(by_path[o.path])
        if not nx.is_directed_acyclic_graph(_unit_graph(groups, op_deps)):
            # a module's ops interleave with its children's (GraphSAGE: aggregate, lin, combine):
            # units are runs of consecutive ops of one module instead
            groups = []
            for o in op_infos:
                if groups and o.path and op_infos[groups[-1][-1]].path == o.path:
                    groups[-1].append(o.index)
                else:
                    groups.append([o.index])
            notes.append("a module's ops interleave with its children's: units are runs of one module's ops")
        groups = _merge_independent(groups, op_infos, op_deps)
        if coarsen and len(groups) > MAX_UNITS and layer_of is not None:
            notes.append(f"{len(groups)} module units > {MAX_UNITS}: planning over top-level layers")
            by_layer: dict[str, list[int]] = {}
            groups = []
            for o in op_infos:
                key = layer_of(o.path) if o.path else f"#{o.index}"
                if key not in by_layer:
                    by_layer[key] = []
                    groups.append(by_layer[key])
                by_layer[key].append(o.index)
    g = _unit_graph(groups, op_deps)
    order = list(nx.lexicographical_topological_sort(g, key=lambda u: min(groups[u])))
    units = []
    for u in order:
        ops = sorted(groups[u])
        paths = {_general(op_infos[i].path) for i in ops}
        label = paths.pop() if len(paths) == 1 and "" not in paths else op_infos[ops[0]].node
        units.append(Unit(ops, label or op_infos[ops[0]].node))
    return units, notes


def _unit_graph(groups: list[list[int]], op_deps: Mapping[int, set[int]]) -> nx.DiGraph:
    g = nx.DiGraph()
    unit_of = {op: u for u, ops in enumerate(groups) for op in ops}
    g.add_nodes_from(range(len(groups)))
    for op, deps in op_deps.items():
        for d in deps:
            if unit_of[d] != unit_of[op]:
                g.add_edge(unit_of[d], unit_of[op])
    return g


def _merge_independent(groups: list[list[int]], op_infos, op_deps) -> list[list[int]]:
    """Merge module units whose paths differ only in list indices when neither depends on the
    other (heads of one layer; not successive layers, which would make a cycle)."""
    closure = _closure(op_deps, len(op_infos))

    def reaches(a: list[int], b: list[int]) -> bool:
        return any(closure[y] & set(a) for y in b)

    merged: list[list[int]] = []
    key_of: dict[str, list[list[int]]] = {}
    for grp in groups:
        key = _general(op_infos[grp[0]].path) if op_infos[grp[0]].path else None
        home = None
        if key is not None:
            for cand in key_of.get(key, []):
                if not reaches(cand, grp) and not reaches(grp, cand) and not _via(cand, grp, closure, merged):
                    home = cand
                    break
        if home is None:
            merged.append(list(grp))
            if key is not None:
                key_of.setdefault(key, []).append(merged[-1])
        else:
            home.extend(grp)
    return merged


def _closure(op_deps: Mapping[int, set[int]], n: int) -> list[set[int]]:
    out: list[set[int]] = [set() for _ in range(n)]
    for i in range(n):
        for d in op_deps.get(i, ()):
            out[i] |= out[d] | {d}
    return out


def _via(a: list[int], b: list[int], closure: list[set[int]], groups: list[list[int]]) -> bool:
    """Would merging a and b make a cycle through a third group?"""
    sa, sb = set(a), set(b)
    for g in groups:
        if g is a:
            continue
        sg = set(g)
        g_reads_a = any(closure[x] & sa for x in g)
        g_reads_b = any(closure[x] & sb for x in g)
        a_reads_g = any(closure[x] & sg for x in a)
        b_reads_g = any(closure[x] & sg for x in b)
        if (g_reads_a and b_reads_g) or (g_reads_b and a_reads_g):
            return True
    return False


# --- the search ----------------------------------------------------------------------------------
def period_of(units: list[Unit], op_infos, layer_of) -> tuple[int, int, int] | None:
    """(start, length, count): the longest run of consecutive top-level layers whose units carry
    the same labels in the same order (identical decoder blocks), or None. Units of one layer
    must be contiguous in the order."""
    keys = [layer_of(op_infos[u.ops[0]].path) if op_infos[u.ops[0]].path else None for u in units]
    runs: list[list] = []  # [layer key, start, end)
    for i, k in enumerate(keys):
        if runs and runs[-1][0] == k and k is not None:
            runs[-1][2] = i + 1
        else:
            runs.append([k, i, i + 1])
    if len({r[0] for r in runs if r[0] is not None}) != sum(r[0] is not None for r in runs):
        return None  # a layer's units are not contiguous
    best = None
    for r0, (key, start, end) in enumerate(runs):
        labels = [u.label for u in units[start:end]]
        count = 1
        while (
            r0 + count < len(runs)
            and runs[r0 + count][0] is not None
            and [u.label for u in units[runs[r0 + count][1] : runs[r0 + count][2]]] == labels
        ):
            count += 1
        if key is not None and count >= 2 and (best is None or count * len(labels) > best[1] * best[2]):
            best = (start, end - start, count)
    return best


def _op_dependences(func, ops, index_of) -> dict[int, set[int]]:
    """PyTorch-level op -> the PyTorch-level ops it reads (through views)."""

    compute = set(ops)
    deps: dict[int, set[int]] = {k: set() for k in set(index_of)}
    for i, op in enumerate(ops):
        for p in producers(op, compute):
            a, b = index_of[ops.index(p)], index_of[i]
            if a != b:
                deps[b].add(a)
    return deps
