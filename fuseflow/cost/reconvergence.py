"""The cycle model's reconvergence bound: a short stream beside a long path (docs/cycle-model.md,
"Reconvergent streams").

Where a node reads a stream straight from a producer that also reaches it through a long path
(a sparse accumulator reading the outer coordinates of the scan whose elements its lanes are
still loading), a token waits in the short stream's FIFO for as long as its element takes on the
long path. By Little's law the FIFO then holds at most `fifo_depth` tokens in flight, so the
stream moves at most `fifo_depth` tokens per long-path latency, memory latencies included. One
lane hides that latency behind its own work; lanes divide the work but not the latency, and the
bound is what stops their gain. Where the long path runs through lanes, the tokens in flight
also queue in the lanes (a FIFO's worth shared by P lanes waits about a lane's busy time per
token over P), so the lanes' busiest node's time adds; without lanes that queue is left out,
which the captured `rda` regions (benchmarks/model_variants.py) rank better without.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from typing import Any

UNBOUNDED_DEPTH = 1 << 20
"""FIFOs this deep never bound a stream in flight (the unbounded presets): the bound is skipped."""
SPAN = 4096
"""Node ids a long path may span: a reconvergence further apart (in topological order) is not
weighed."""
BUDGET = 2_000_000
"""Path steps one graph's bound may take; past it the reconvergences not yet weighed are left
out, so the bound's time stays bounded in very large graphs."""


def reconvergence_bound(
    nodes: Sequence[Any],
    tokens_on: Callable[[int, int], float],
    latency_of: Callable[[int], float],
    misses: Mapping[int, float],
    starts: Sequence[float],
    busy: Sequence[float],
    fifo_depth: int,
    memory_latency: float,
) -> float:
    """The latest cycle by which every short stream beside a long path can have moved its tokens
    (0 when none applies). `nodes`: the graph's `NodeSpec`s in topological order; `tokens_on(src,
    port)`: tokens on an output stream; `latency_of(i)`: node i's own latency; `misses`: memory
    lines each node waits for; `starts`: each node's first cycle (`CycleModel.timeline`)."""
    if fifo_depth >= UNBOUNDED_DEPTH or not nodes:
        return 0.0
    consumers: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        for s, _ in node.inputs:
            consumers.setdefault(s, []).append(i)
    worst, steps = 0.0, [0]
    for m, node in enumerate(nodes):
        if steps[0] > BUDGET:
            break
        sources = {s for s, _ in node.inputs}
        if len(sources) < 2:
            continue
        for d, port in node.inputs:
            others = sources - {d}
            if m - d > SPAN:
                continue
            tokens = tokens_on(d, port)
            if tokens <= 0.0:
                continue
            path = _longest_path(d, max(others), consumers, nodes, latency_of, misses, tokens, memory_latency, steps)
            reach = [path[s] for s in others if s in path]
            if not reach:
                continue
            long = max(reach) + latency_of(m)
            laned = any(nodes[i].kind == "fork" for i in path if i != d)
            queue = max((busy[i] for i in path if i != d and nodes[i].kind not in ("fork", "join")), default=0.0)
            queue = queue if laned else 0.0
            worst = max(worst, starts[d] + tokens * long / fifo_depth + queue)
    return worst


def _longest_path(
    d: int,
    last: int,
    consumers: Mapping[int, list[int]],
    nodes: Sequence[Any],
    latency_of: Callable[[int], float],
    misses: Mapping[int, float],
    tokens: float,
    memory_latency: float,
    steps: list[int],
) -> dict[int, float]:
    """Node id -> the longest latency from `d` to it (ids up to `last`), each node on the way
    charged its own latency plus, for a memory node, the memory latency times the lines each of
    the short stream's tokens waits for there (its lines over the tokens its lane sees, a fork
    dividing the tokens among its lanes; at most one, or two for a scan, which reads a fiber's
    bounds and then its coordinates)."""
    best: dict[int, tuple[float, float]] = {d: (0.0, 1.0)}  # node -> (latency, lanes dividing the tokens)
    frontier = [d]  # reached nodes in topological (id) order: each is final when popped
    queued = {d}
    while frontier:
        i = heapq.heappop(frontier)
        steps[0] += 1
        lat, lanes = best[i]
        if nodes[i].kind == "fork" and i != d:
            lanes *= float(nodes[i].factor)
        for c in consumers.get(i, ()):
            if c > last:
                continue
            serial = 2.0 if nodes[c].kind == "scan" else 1.0  # a scan's bounds, then its coordinates
            wait = memory_latency * min(serial, misses.get(c, 0.0) * lanes / tokens) if c in misses else 0.0
            here = lat + latency_of(c) + wait
            c_lanes = lanes / max(len(nodes[c].inputs), 1) if nodes[c].kind == "join" else lanes
            if c not in best or here > best[c][0]:
                best[c] = (here, max(c_lanes, 1.0))
            if c not in queued:
                queued.add(c)
                heapq.heappush(frontier, c)
    return {i: v[0] for i, v in best.items()}
