"""The cycle model's memory term: the lines a graph's memory nodes wait for, and how their stalls
combine (docs/cycle-model.md, "Memory" and "Stalls of several nodes").

The cycle model's collaborator (`cycle_model.CycleModel.stalls`): built once the model's
per-primitive rules have filled in the streams, node estimates and line counts (`outs`,
`nodes`, `misses`), it is handed those, the arch's timing and two of the model's own rules (a
node's latency, its first lines). Other memory rules subclass it, overriding `memory_stalls`
or a step of it (`round_trip`, `drain_stalls`, `after_accumulator`, ...):
`benchmarks/model_variants.py` scores its variants so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fuseflow.sim.graph import GraphSpec

_REWALKED = 0.1
"""A feeder whose walk returns to the line it holds for more than this fraction of its tokens
(`Walk.free`, `Walk.same`: fibers walked again) runs ahead of its consumer's line changes."""


class MemoryStalls:
    """Memory stalls and channel time of one graph estimate (`cycle_model.CycleModel`)."""

    def __init__(
        self,
        spec: GraphSpec,
        timing: Any,
        outs: list[list[Any]],
        nodes: list[Any],
        misses: dict[int, float],
        seg_lines: dict[int, float],
        latency: Callable[[Any], float],
        first_line_count: Callable[[int], float],
    ) -> None:
        self.spec, self.t = spec, timing  # t: timing.Timing
        self.outs = outs  # each node's output streams (streams.Stream)
        self.nodes = nodes  # estimates.NodeEstimate per node (`memory_stalls` adds each node's stalls)
        self.misses = misses  # node id -> memory lines it waits for (reads)
        self.seg_lines = seg_lines  # compressed scan id -> of its misses, the `seg` lines
        self.latency = latency  # a node's own latency (cycle_model.CycleModel._latency)
        self.first_line_count = first_line_count  # lines the timeline charges (CycleModel.first_line_count)
        self._readers: dict[int, list[int]] | None = None

    def memory_stalls(self) -> float:
        """Cycles the pipeline waits for memory lines, beyond its compute time (docs/cycle-model.md).

        A node that reads memory emits a step's outputs only when the step's line arrives (a read
        of the line it read last costs nothing), and its output FIFO lets it run `fifo_depth`
        tokens ahead, which covers `fifo_depth x c` cycles when the pipeline takes `c` cycles
        per token of that node. So each line change stalls the pipeline `latency - fifo_depth x
        c` cycles, and a node whose lines change more than once per FIFO's worth of tokens
        streams at fifo_depth / latency tokens per cycle. The graph waits for its worst chain
        of memory nodes: stalls of different nodes overlap, except along a memory node that
        feeds another one it must wait behind (`in_series`), where they add, and below an
        accumulator (`after_accumulator`)."""
        own = self.node_stalls()
        pace = max((n.busy for n in self.nodes), default=0.0)  # before the stalls are added
        chain: dict[int, float] = {}
        above: dict[int, float] = {}  # node -> the worst chain of memory nodes at or above it
        tail: dict[int, tuple[float, float]] = {}  # node -> (chain above an accumulator above it, its fibers)
        drains: dict[int, tuple[float, float, float]] = {}  # node -> (chain above, fibers, tokens a fiber)
        for i, node in enumerate(self.spec.nodes):  # topological order: feeders first
            feeders = [s for s, _ in node.inputs]
            tail[i] = self.after_accumulator(feeders, above, tail)
            drain = self.drained(feeders, above, drains)
            if drain is not None:
                drains[i] = drain
            if i in own:
                self.nodes[i].busy += own[i]
                mine = self.behind_feeders(i, feeders, own, chain, pace)
                before, fibers = tail[i]
                chain[i] = max(mine, before + mine / fibers, self.drain_stalls(i, drain, mine))
            above[i] = max([above.get(s, 0.0) for s in feeders] + [chain.get(i, 0.0)])
        return max(chain.values(), default=0.0)

    def drained(
        self, feeders: list[int], above: dict[int, float], drains: dict[int, tuple[float, float, float]]
    ) -> tuple[float, float, float] | None:
        """The accumulator whose output fibers reach this node token for token (directly or
        through nodes that are not scans): the worst chain of memory nodes above it, its
        fibers and its output tokens a fiber; None when there is none."""
        cands = [drains[s] for s in feeders if s in drains and self.spec.nodes[s].kind not in self.DRAIN_STOPS]
        for s in feeders:
            if self.spec.nodes[s].kind in self.ACCUMULATORS and self.outs[s]:
                counts = self.outs[s][0].counts
                fibers = max(counts[-2], 1.0) if len(counts) >= 2 else 1.0
                cands.append((above.get(s, 0.0), fibers, counts[-1] / fibers))
        return max(cands, default=None)

    DRAIN_STOPS: tuple[str, ...] = ("scan",)
    """Kinds past which an accumulator's drain is not followed: a scan turns each drained token
    into a fiber, not one token."""

    def drain_stalls(self, node: int, drain: tuple[float, float, float] | None, mine: float) -> float:
        """A load below an accumulator whose output fibers hold more tokens than a FIFO, in series
        with the chain above: the accumulator drains a fiber before it reads the next one, and
        while the fiber's tokens beyond a FIFO's worth wait for the load's lines (`latency x
        min(lines per token, 1 / fifo_depth)` a token: a line a token at most, a FIFO's worth
        of tokens in flight), the stages above wait too. A linear's bias load after its
        accumulator, once per output row (docs/cycle-model.md, the fourteenth rule of "Stalls of
        several nodes"). 0 when it does not apply; `mine` (the node's own chain) is unused here."""
        mem = self.t.memory or {}
        if drain is None or self.spec.nodes[node].kind != "load" or self.nodes[node].tokens <= 0.0:
            return 0.0
        up, fibers, fiber = drain
        depth = float(max(self.t.fifo_depth, 1))
        tokens = self.nodes[node].tokens
        per_token = float(mem.get("latency", 0)) * min(self.misses.get(node, 0.0) / tokens, 1.0 / depth)
        per_drained = tokens / fibers / max(fiber, 1e-9) * per_token  # the load's time per drained token
        extra = fibers * max(fiber - depth, 0.0) * max(per_drained - float(self.t.ii), 0.0)
        return up + extra if extra > 0.0 else 0.0

    def behind_feeders(
        self, node: int, feeders: list[int], own: dict[int, float], chain: dict[int, float], pace: float
    ) -> float:
        """Memory node `node`'s chain through its feeders: its own stalls, or behind a feeder in
        series (`series_accumulator`) that feeder's chain plus the larger of its own stalls and
        the pair's round trip less the feeder's (`round_trip`)."""
        mine = own[node]
        for s in feeders:
            acc = self.series_accumulator(s, node) if s in chain else None
            if acc is not None:
                mine = max(mine, chain[s] + max(own[node], self.round_trip(s, node, acc, pace) - own.get(s, 0.0)))
        return mine

    ACCUMULATORS = ("spacc", "reduce")
    STAY = 2.0
    """Memory latencies each coordinate line of a pair in series' feeder waits, besides the path
    from the node to the accumulator: the feeder's line, then the node's (docs/cycle-model.md,
    the twelfth rule of "Stalls of several nodes")."""

    def after_accumulator(
        self, feeders: list[int], above: dict[int, float], tail: dict[int, tuple[float, float]]
    ) -> tuple[float, float]:
        """The worst chain of memory nodes above an accumulator that feeds this node (directly or
        through others), and how many fibers that accumulator emits. An accumulator emits a
        fiber's result once the fiber's inputs are in, so the memory nodes below it overlap the
        ones above, but the last fiber's share of their work starts only when the chain above
        ends (SAE's fused decoder after its encoder; docs/cycle-model.md, the eleventh rule of
        "Stalls of several nodes")."""
        cands = [tail.get(s, (0.0, 1.0)) for s in feeders]
        for s in feeders:
            if self.spec.nodes[s].kind in self.ACCUMULATORS and self.outs[s]:
                counts = self.outs[s][0].counts
                fibers = counts[-2] if len(counts) >= 2 else 1.0
                cands.append((above.get(s, 0.0), max(fibers, 1.0)))
        return max(cands, key=lambda c: c[0], default=(0.0, 1.0))

    def round_trip(self, feeder: int, node: int, acc: int, pace: float) -> float:
        """The stalls of a pair in series, beyond the pace: each coordinate line of the feeder
        waits a round trip (`STAY` latencies: the feeder's line, then the node's, plus the path
        from `node` to the accumulator `acc`), since the feeder fills its FIFO to `acc` with the
        line's first `fifo_depth` tokens and asks for its next line only once `acc` has popped
        them; the line's tokens beyond a FIFO's worth follow at the pace. A line of fewer tokens
        than the FIFO shares it with the next ones: by Little's law each token then stays one
        round trip in the FIFO, which bounds the pair at fifo_depth tokens per round trip. Per
        node, each stall less its own FIFO's cover vanishes at deep FIFOs (a node alone keeps
        up) though the round trip does not. The feeder's `seg` lines are not counted: a fiber's
        bounds do not travel to the accumulator."""
        mem = self.t.memory or {}
        depth = float(max(self.t.fifo_depth, 1))
        steps = max((s.tokens for s in self.outs[feeder]), default=0.0)
        lines = self.misses[feeder] - self.seg_lines.get(feeder, 0.0)
        if steps <= 0.0 or lines <= 0.0:
            return 0.0
        trip = self.STAY * float(mem.get("latency", 0)) + self.path_latency(node, acc)
        c = max(pace / steps, 1.0)
        per_line = trip + max(steps / lines - depth, 0.0) * c
        return max(min(lines * per_line, steps * trip / depth) - steps * c, 0.0)

    def path_latency(self, node: int, acc: int) -> float:
        """The longest latency of a path from `node` down to `acc` (ids in topological order)."""
        path = {node: 0.0}
        for j in range(node + 1, acc + 1):
            ins = [path[s] for s, _ in self.spec.nodes[j].inputs if s in path]
            if ins:
                path[j] = max(ins) + self.latency(self.spec.nodes[j])
        return path.get(acc, 0.0)

    def in_series(self, feeder: int, node: int) -> bool:
        """Whether memory node `node`'s stalls come after those of `feeder` (`series_accumulator`)."""
        return self.series_accumulator(feeder, node) is not None

    def series_accumulator(self, feeder: int, node: int) -> int | None:
        """The accumulator through which memory node `node`'s stalls come after those of
        `feeder`, which feeds it, or None when they overlap: the feeder streams (it walks on
        through memory, not a fiber again within the line it holds) and its tokens also reach,
        directly, an accumulator below `node`. The accumulator pops a coordinate only with the
        product `node`'s line holds up, so the feeder's FIFO to it fills and the feeder asks
        for its next line only once `node` has its own: two latencies a line (SpMM in order
        ``j,k,i``; SAE's decoder in its ``plain`` order). A feeder that walks fibers again
        overlaps (SpMM ``k,j,i``), as does one whose only consumers are `node`'s side of the
        graph (docs/cycle-model.md, "Stalls of several nodes")."""
        walk = self.outs[feeder][0].walk if self.outs[feeder] else None
        if walk is None or walk.free > _REWALKED or walk.same > _REWALKED:
            return None
        below: set[int] = set()
        todo = [node]
        while todo:
            x = todo.pop()
            for c in self.consumers().get(x, ()):
                if c not in below:
                    below.add(c)
                    todo.append(c)
        accs = [c for c in below if self.spec.nodes[c].kind == "spacc" and self._fed_by(c, feeder)]
        return min(accs, default=None)

    def _fed_by(self, acc: int, feeder: int) -> bool:
        """Whether `feeder`'s tokens reach `acc` directly, or through the joins of lanes only
        (an accumulator over the parallel level reads each lane's coordinates through a join,
        which holds as few tokens as a FIFO: the lane's feeder still waits on it)."""
        todo, seen = [acc], set()
        while todo:
            x = todo.pop()
            for s, _ in self.spec.nodes[x].inputs:
                if s == feeder:
                    return True
                if s not in seen and self.spec.nodes[s].kind == "join":
                    seen.add(s)
                    todo.append(s)
        return False

    def consumers(self) -> dict[int, list[int]]:
        """Node id -> the ids of the nodes reading one of its outputs (built once)."""
        if self._readers is None:
            self._readers = {}
            for i, n in enumerate(self.spec.nodes):
                for s, _ in n.inputs:
                    self._readers.setdefault(s, []).append(i)
        return self._readers

    def node_stalls(self) -> dict[int, float]:
        """Each memory node's own stalls (node id -> cycles), as `memory_stalls` charges them;
        {} without a memory model. `benchmarks/model_variants.py` combines them other ways."""
        mem = self.t.memory
        if not mem or not self.misses:
            return {}
        latency = float(mem.get("latency", 0))
        depth = float(max(self.t.fifo_depth, 1))
        # a join's (or fork's) busy cycles are all its lanes' tokens: it does not pace one lane
        pace = max((n.busy for n in self.nodes if n.kind not in ("join", "fork")), default=0.0)
        own: dict[int, float] = {}
        for i in self.misses:
            steps = max((s.tokens for s in self.outs[i]), default=0.0)
            if steps <= 0.0:
                continue
            c = max(pace / steps, 1.0)
            own[i] = min(self.later_lines(i) * max(latency - depth * c, 0.0), max(steps * (latency / depth - c), 0.0))
        return own

    def later_lines(self, i: int) -> float:
        """The lines memory node `i` waits for after its first ones, which the timeline charges
        (`cycle_model.CycleModel._first_lines`)."""
        return max(self.misses[i] - self.first_line_count(i), 0.0)

    def memory_cycles(self) -> float:
        """With the memory model on: lines over the channels, plus one request's latency."""
        mem = self.t.memory
        if not mem:
            return 0.0
        line = int(mem.get("bytes_per_request", 64))
        lines = sum(
            self.misses[i] if i in self.misses else math.ceil(n.mem_bytes / line)
            for i, n in enumerate(self.nodes)
            if n.mem_bytes
        )
        return (
            lines * int(mem.get("ii", 1)) / max(int(mem.get("channels", 1)), 1)
            + int(mem.get("latency", 0))
            + int(mem.get("startup", 0))
        )
