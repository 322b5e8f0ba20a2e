"""Dataflow order of a region's index variables (docs/architecture.md, "Design: lowering").

Each tensor access constrains the order to its storage order (concordant traversal). The
default order is a deterministic topological sort: among the variables that are ready, output
variables come first in output order, then reduced variables in first-use order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from fuseflow.errors import UnsupportedError


def storage_vars(vars_: Sequence[str], mode_order: Sequence[int]) -> list[str]:
    """The access's variables in storage-level order."""
    return [vars_[m] for m in mode_order]


def default_order(
    out_vars: Sequence[str], all_vars: Iterable[str], chains: Mapping[str, Sequence[str]], loc: str | None = None
) -> list[str]:
    """Topological order of `all_vars` under each chain (tensor name -> its storage-order vars)."""
    g = nx.DiGraph()
    rank = {v: i for i, v in enumerate(list(out_vars) + [v for v in all_vars if v not in out_vars])}
    g.add_nodes_from(rank)
    for tensor, chain in chains.items():
        for a, b in zip(chain, chain[1:]):
            g.add_edge(a, b, tensor=tensor)
    try:
        return list(nx.lexicographical_topological_sort(g, key=lambda v: rank[v]))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(g)
        tensors = sorted({g.edges[e]["tensor"] for e in cycle})
        path = " -> ".join([cycle[0][0]] + [e[1] for e in cycle])
        raise UnsupportedError(
            f"no concordant dataflow order: tensors {', '.join(tensors)} need {path}; "
            "store one of them in another mode order (e.g. csc instead of csr)",
            loc,
        ) from None
