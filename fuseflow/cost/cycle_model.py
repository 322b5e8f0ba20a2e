"""An analytical cycle model of a sam graph: tokens per node first, then cycles
(docs/architecture.md, "Design: planning").

Every stream is summarised by how many elements it holds at each depth (`Stream.counts`: the
root's one reference, then the coordinates of each nested level) and the extent of each level.
Counts start exact at the roots and at the scans of stored tensors (per-level entry counts of the
real data, `TensorStats`) and are propagated through the primitives: an intersection of
independent fibers keeps |a||b|/n of each fiber's n coordinates, a union |a|+|b|-|a∩b|, a repeat
takes its signal's shape, a reduction drops a level, a sparse accumulator keeps the distinct
coordinates of the fibers it merges, a fork deals a level's elements to its lanes.

A stream's tokens are its innermost elements, one stop per innermost fiber, and D. A node's
*steps* (cycles in which it acts) follow from its streams; with deep FIFOs a graph is a pipeline,
so its cycles are close to its busiest node's steps x II (tiles: x their occupancy), plus the
latency along the longest path (fill and drain), or the memory channels' time when the memory
model is on. `docs/cycle-model.md` states the rules and where they are approximate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fuseflow.cost.coordinates import Atom, CoordinateOrigins
from fuseflow.cost.estimates import EstimateError, GraphEstimate, NodeEstimate
from fuseflow.cost.memory_stalls import MemoryStalls
from fuseflow.cost.memory_walk import LINE_ELEMS as _LINE_ELEMS
from fuseflow.cost.reconvergence import reconvergence_bound
from fuseflow.cost.streams import DEFAULT_FIBER_DENSITY, Stream, union_fraction
from fuseflow.cost.tensor_stats import TensorStats
from fuseflow.cost.timing import Timing

if TYPE_CHECKING:  # plain data classes; the model itself needs neither MLIR nor the simulator
    from fuseflow.sim.graph import GraphSpec, NodeSpec


class CycleModel:
    """One graph's estimate, node by node in topological order (`run`).

    The extension point for other rules: a subclass overriding a primitive's rule method (named
    by `_RULE_OF`) or `timeline`, or naming another memory term in `stalls` (a `MemoryStalls`
    subclass), passed as `estimate_graph(..., model=)` (`benchmarks/model_variants.py` scores
    its variants so). Two collaborators receive what they read: `coords` (`CoordinateOrigins`)
    the graph and its inputs' statistics, and the memory term, built by `run` once the rules
    have filled in the streams, busy cycles and misses."""

    stalls: type[MemoryStalls] = MemoryStalls

    def __init__(self, spec: GraphSpec, stats: Mapping[str, TensorStats], timing: Timing):
        self.spec, self.stats, self.t = spec, stats, timing
        self.outs: list[list[Stream]] = []
        self.nodes: list[NodeEstimate] = []
        self.written: dict[str, dict[int, float]] = {}
        self.loaded: dict[str, float] = {}
        self.starts: list[float] = []  # each node's first cycle (timeline)
        self.tails: dict[int, float] = {}  # node id -> tokens emitted after its last input
        self.misses: dict[int, float] = {}  # node id -> memory lines it waits for (reads)
        self.seg_lines: dict[int, float] = {}  # compressed scan id -> of its misses, the `seg` lines
        self.coords = CoordinateOrigins(spec, stats)  # what each stored level's coordinates are

    def inp(self, node: NodeSpec, i: int) -> Stream:
        """The stream on the node's input port `i`."""
        src, port = node.inputs[i]
        return self.outs[src][port]

    def run(self) -> GraphEstimate:
        """Every node's estimate in topological order, then the graph's cycles."""
        for node in self.spec.nodes:
            outs, busy, alu, mem = self.step(node)
            self.outs.append(outs)
            tokens = (
                sum(s.tokens for s in outs) if outs else sum(self.inp(node, i).tokens for i in range(len(node.inputs)))
            )
            self.nodes.append(NodeEstimate(node.name, node.kind, tokens, busy, alu, mem))
        for i, misses in self.misses.items():
            self.nodes[i].lines = misses
        end, fill = self.timeline()
        self.memory = self.stalls(
            self.spec, self.t, self.outs, self.nodes, self.misses, self.seg_lines, self._latency, self.first_line_count
        )
        end += self.memory.memory_stalls()
        worst = max(range(len(self.nodes)), key=lambda i: self.nodes[i].busy, default=0)
        mem_cycles = self.memory.memory_cycles()
        cycles = max(end, mem_cycles + fill, self.join_serial(), self.reconvergence())
        recompute = max(
            (n / max(self.stats[t].nnz, 1.0) for t, n in self.loaded.items() if t in self.stats), default=1.0
        )
        return GraphEstimate(
            self.spec.name,
            cycles,
            self.nodes,
            self.output_stats(),
            self.nodes[worst].name if self.nodes else "",
            fill,
            mem_cycles,
            recompute,
        )

    # -- per-primitive rules --------------------------------------------------------------------
    def step(self, node: NodeSpec) -> tuple[list[Stream], float, float, float]:
        """Output streams, busy cycles, ALU element ops, memory bytes of one node (its kind's rule)."""
        rule = _RULE_OF.get(node.kind)
        if rule is None:
            raise EstimateError(f"graph {self.spec.name}: the cycle model has no rule for sam.{node.kind}")
        return getattr(self, rule)(node, self.t.kind_ii(node.kind))

    def intersect(self, node: NodeSpec, ii: int):
        """Intersection of coordinate streams: `joiner` keeping common coordinates."""
        return self.joiner(node, ii, False)

    def union(self, node: NodeSpec, ii: int):
        """Union of coordinate streams: `joiner` keeping every coordinate."""
        return self.joiner(node, ii, True)

    def root(self, node: NodeSpec, ii: int):
        """The root reference of a tensor: one token and a stop."""
        return [Stream((1.0,), (1,), ref=(self.coords.identity(node.tensor), -1, ()))], 2.0 * ii, 0.0, 0.0

    def locate(self, node: NodeSpec, ii: int):
        """Locate: coordinates looked up in a tensor's level, one reference each."""
        crd, ref = self.inp(node, 0), self.inp(node, 1)
        fiber = crd.data / max(crd.fibers, 1e-9)
        dim = max(crd.dims[-1], 1)
        walk = ref.walk.walked(ref.data, fiber, float(dim), _LINE_ELEMS % dim == 0)
        out = Stream(
            crd.counts,
            crd.dims,
            ref.present,
            crd.vars,
            crd.pattern,
            self.coords.deeper(ref.ref, node),
            crd.pattern,
            walk,
        )
        return [out], crd.tokens * ii, 0.0, 0.0

    def repsiggen(self, node: NodeSpec, ii: int):
        """Repeat-signal generator: one signal per coordinate of its input."""
        s = self.inp(node, 0)
        return [s], s.tokens * ii, 0.0, 0.0

    def repeat(self, node: NodeSpec, ii: int):
        """Repeat: a reference repeated once per element of the signal's shape."""
        ref, sig = self.inp(node, 0), self.inp(node, 1)
        copies = max(sig.data / max(ref.data, 1e-9), 1.0)  # each reference, once per signal element
        out = Stream(
            sig.counts,
            sig.dims,
            ref.present,
            sig.vars,
            sig.pattern,
            ref.ref,
            ref.ref_pattern,
            ref.walk.repeated(copies),
        )
        return [out], (sig.tokens + ref.tokens - ref.data) * ii, 0.0, 0.0

    def load(self, node: NodeSpec, ii: int):
        """Array load: one value per reference, one memory access each."""
        s = self.inp(node, 0)
        real = s.data * s.present
        if node.tensor:
            self.loaded[node.tensor] = self.loaded.get(node.tensor, 0.0) + real
        elems = self.tile_elems(node)
        walk = s.walk
        self.misses[len(self.outs)] = real * walk.line_changes(_LINE_ELEMS / elems) * max(elems / _LINE_ELEMS, 1.0)
        return [s], self.tile_steps(node, s, ii), 0.0, 4.0 * real * elems

    def alu(self, node: NodeSpec, ii: int):
        """ALU: one element op per innermost element (tiles: per tile element)."""
        s = self.inp(node, 0)
        out = Stream(s.counts, s.dims, 1.0, s.vars, s.pattern)
        return [out], self.tile_steps(node, s, ii), s.data * self.tile_elems(node), 0.0

    def crd_drop(self, node: NodeSpec, ii: int):
        """Coordinate drop: keeps the coordinates whose inner fibers are non-empty."""
        outer, inner = self.inp(node, 0), self.inp(node, 1)
        L = inner.data / max(outer.data, 1e-9)
        N = max(inner.dims[-1], 1)
        keep = union_fraction(L / N, N) if L > 0 else 0.0
        o = outer.with_last(outer.data * keep)
        i = Stream(inner.counts[:-2] + (outer.data * keep, inner.data), inner.dims, 1.0, inner.vars)
        return [o, i], max(inner.tokens, outer.tokens) * ii, 0.0, 0.0

    def val_drop(self, node: NodeSpec, ii: int):
        """Value drop: keeps the nonzero values and their coordinates."""
        crd, val = self.inp(node, 0), self.inp(node, 1)
        return [crd, val], crd.tokens * ii, 0.0, 0.0

    def write_crd(self, node: NodeSpec, ii: int):
        """Coordinate writer: stores the coordinates of one level."""
        s = self.inp(node, 0)
        self.written.setdefault(node.tensor or "", {})[node.level] = s.data
        self.coords.wpatterns.setdefault(node.tensor or "", {})[node.level] = (s.pattern, s.vars)
        return [], s.tokens * ii, 0.0, 4.0 * (s.data + s.fibers + 1)

    def write_val(self, node: NodeSpec, ii: int):
        """Value writer: stores the values."""
        s = self.inp(node, 0)
        self.written.setdefault(node.tensor or "", {}).setdefault(-1, s.data)
        return [], self.tile_steps(node, s, ii), 0.0, 4.0 * s.data * self.tile_elems(node)

    def scan(self, node: NodeSpec, ii: int):
        """Level scanner: a fiber's coordinates and references per input reference."""
        r = self.inp(node, 0)
        dim = node.dim
        refs = r.data * r.present
        weights = None
        if node.format == "dense":
            fiber = float(dim)
        else:
            st = self.stats.get(node.tensor or "")
            fiber = (
                st.mean_fiber(node.level)
                if st is not None and node.level < len(st.level_counts)
                else DEFAULT_FIBER_DENSITY * dim
            )
            weights = (
                self.coords.visits(r, len(st.fiber_lengths))
                if st is not None and st.fiber_lengths is not None
                else None
            )
            if weights is not None and st is not None:
                fiber = st.weighted_fiber(node.level, weights) or fiber
        n = refs * fiber
        ref = self.coords.deeper(r.ref, node)
        if node.format == "dense":
            pattern: frozenset | None = frozenset()
        elif ref is None:
            pattern = None
        else:
            pattern = self.coords.level_pattern(node, ref, min(fiber / max(dim, 1), 1.0))
        dense = node.format == "dense"
        # every fiber full (a dense tensor stored compressed): its fibers lie back to back, each
        # `dim` positions from the last, as a dense level's rows do
        rows = dense or fiber >= dim - 1e-9
        rw = r.walk
        walk = rw.walked(r.data, fiber, float(dim) if rows else fiber, rows and _LINE_ELEMS % max(dim, 1) == 0)
        out = Stream(
            r.counts + (n,), r.dims + (dim,), 1.0, r.vars + (node.var or "",), pattern, ref, pattern, walk, weights
        )
        nonempty = refs * (1.0 if fiber >= 1.0 else fiber)
        steps = 2.0 * r.data + n + 1.0 - (nonempty if self.t.scan_emit_on_pop else 0.0)
        if node.format == "dense":
            return [out, out], steps * ii, 0.0, 0.0
        self.seg_lines[len(self.outs)] = refs * rw.line_changes(_LINE_ELEMS)
        self.misses[len(self.outs)] = self.seg_lines[len(self.outs)] + n * walk.line_changes(_LINE_ELEMS)
        return [out, out], steps * ii, 0.0, 8.0 * refs + 4.0 * n

    def joiner(self, node: NodeSpec, ii: int, union: bool):
        """Intersect or union of coordinate streams (statistics decide how many meet)."""
        n_ops = len(node.inputs) - (node.n_out - 1)
        crds = [self.inp(node, i) for i in range(n_ops)]
        distinct = list({node.inputs[i]: crds[i] for i in range(n_ops)}.values())
        f = crds[0].fibers
        N = max(crds[0].dims[-1], 1)
        space = max(f * N, 1e-9)
        ps = [min(c.data / space, 1.0) for c in distinct]
        pats = [c.pattern for c in distinct]
        known = all(p is not None for p in pats)
        pattern: frozenset | None = None
        if union:
            core = min(distinct, key=lambda c: len(c.pattern or ())) if known else None
            if core is not None and all(core.pattern <= p for p in pats):  # type: ignore[operator]
                n, pattern = core.data, core.pattern  # the others' coordinates all lie within it
            else:
                n = space * (1.0 - math.prod(1.0 - p for p in ps))
            steps = n + f + 1.0
            payload_present = [min(c.data / max(n, 1e-9), 1.0) for c in crds]
        else:
            # independent operands multiply their densities; an atom two operands share is one
            # constraint, not two (a level intersected with itself keeps all its coordinates)
            shared = 1.0
            seen: dict[Atom, int] = {}
            for p in pats:
                for atom in p or ():
                    if seen.get(atom):
                        shared *= max(self.coords.atom_p.get(atom, 1.0), 1e-12)
                    seen[atom] = seen.get(atom, 0) + 1
            n = min(space * math.prod(ps) / shared, min(c.data for c in distinct))
            if known:
                pattern = frozenset().union(*pats)  # type: ignore[arg-type]
            steps = sum(c.data for c in distinct) - (len(distinct) - 1) * n + f + 1.0
            payload_present = [1.0] * len(crds)
        crd = crds[0].with_last(n)._replace(pattern=pattern)
        outs = [crd]
        for j in range(n_ops, len(node.inputs)):
            pay = self.inp(node, j)
            present = payload_present[j - n_ops] * (pay.present if union else 1.0)
            # a payload of references at the joined coordinate now sits at the joined coordinates
            at_join = pay.ref is not None and pay.ref[2][-1:] == crd.vars[-1:]
            thin = max(pay.data / max(n, 1e-9), 1.0)  # the joined references skip the others
            outs.append(
                Stream(
                    crd.counts,
                    crd.dims,
                    present,
                    crd.vars,
                    crd.pattern,
                    pay.ref,
                    pattern if at_join else pay.ref_pattern,
                    pay.walk.thinned(thin),
                )
            )
        return outs, steps * ii, 0.0, 0.0

    def reduce(self, node: NodeSpec, ii: int):
        """Reduce: the innermost level summed into one value per fiber."""
        v = self.inp(node, 0)
        out = Stream(v.counts[:-1], v.dims[:-1], 1.0, v.vars[:-1])
        steps = v.tokens
        if self.t.reduce_split_stop and v.depth >= 2:
            steps += v.counts[-3]  # one stop above S0 per enclosing fiber
        rank = self._in_rank(node)
        busy = steps * ii
        if rank is not None:
            busy += v.data * max(self.t.tile_busy(rank, self.spec.block) - ii, 0)
        return [out], busy, v.data * (self.spec.block**rank if rank is not None else 1.0), 0.0

    def spacc(self, node: NodeSpec, ii: int):
        """Sparse accumulator: the distinct coordinates of the fibers it merges."""
        order = node.order
        v = self.inp(node, len(node.inputs) - 1)
        c, d = v.counts, v.dims
        if order == 1:
            outer, k_per, inner = c[-3], c[-2] / max(c[-3], 1e-9), c[-1] / max(c[-2], 1e-9)
            N = max(d[-1], 1)
            U = self.coords.merged_rows(self.inp(node, 0), self.inp(node, 1))
            if U is None:
                U = outer * N * union_fraction(inner / N, k_per)
            outs = [Stream(c[:-2] + (U,), d[:-2] + (d[-1],), 1.0, v.vars[:-2] + v.vars[-1:])] * 2
            flushes = outer
        else:
            parent, r_per = c[-4], c[-3] / max(c[-4], 1e-9)
            Nk, Nl = max(d[-2], 1), max(d[-1], 1)
            k_len = c[-2] / max(c[-3], 1e-9)
            Uk = parent * Nk * union_fraction(k_len / Nk, r_per)
            l_len = c[-1] / max(c[-2], 1e-9)
            Ul = Uk * Nl * union_fraction(l_len / Nl, c[-2] / max(Uk, 1e-9))
            kk = Stream(c[:-3] + (Uk,), d[:-3] + (d[-2],), 1.0, v.vars[:-3] + v.vars[-2:-1])
            ll = Stream(c[:-3] + (Uk, Ul), d[:-3] + (d[-2], d[-1]), 1.0, v.vars[:-3] + v.vars[-2:])
            outs = [kk, ll, ll]
            flushes = parent
        steps = v.tokens + max(s.tokens for s in outs)
        self.tails[len(self.outs)] = max(s.tokens for s in outs) / max(flushes, 1.0)
        rank = self._in_rank(node)
        busy = steps * ii
        if rank is not None:
            busy += v.data * max(self.t.tile_busy(rank, self.spec.block) - ii, 0)
        return outs, busy, 0.0, 0.0

    def fork(self, node: NodeSpec, ii: int):
        """Fork: a level's elements dealt to the lanes."""
        s = self.inp(node, 0)
        P = node.factor
        lane = (
            s
            if node.depth < 0
            else Stream(s.counts[:-1] + (s.data / P,), s.dims, s.present, s.vars, walk=s.walk.dealt(P))
        )
        return [lane] * node.n_out, s.tokens * ii, 0.0, 0.0

    def join(self, node: NodeSpec, ii: int):
        """Join: the lanes' streams merged back in order."""
        lanes = [self.inp(node, i) for i in range(len(node.inputs))]
        d = node.depth
        first = lanes[0]
        cut = max(first.depth - d, 0)
        counts = first.counts[:cut] + tuple(sum(s.counts[j] for s in lanes) for j in range(cut, len(first.counts)))
        present = sum(s.data * s.present for s in lanes) / max(sum(s.data for s in lanes), 1e-9)
        out = Stream(counts, first.dims, present, first.vars)
        return [out], out.tokens * ii, 0.0, 0.0

    # -- tiles, fill, memory, outputs ---------------------------------------------------------
    def _in_rank(self, node: NodeSpec) -> int | None:
        ranks = node.in_ranks
        if not self.spec.block or ranks is None:
            return None
        return ranks[0] if ranks else 0

    def tile_elems(self, node: NodeSpec) -> float:
        """Elements of one tile the node works on (1 without blocking)."""
        rank = node.tile_rank
        if not self.spec.block or rank is None:
            return 1.0
        return float(self.spec.block**rank)

    def tile_steps(self, node: NodeSpec, s: Stream, ii: int) -> float:
        """Steps of a value node: one per token; a tile occupies the node for its busy time."""
        rank = node.tile_rank
        if not self.spec.block or rank is None:
            return s.tokens * ii
        ranks = [rank, *(node.in_ranks or [])]
        busy = self.t.tile_busy(max(ranks), self.spec.block)
        return s.tokens * ii + s.data * max(busy - ii, 0)

    def _latency(self, node: NodeSpec) -> float:
        own = self.t.latency if not self.t.kinds else self.t.kind_latency(node.kind)
        rank = node.tile_rank
        if self.spec.block and rank is not None:
            own = max(own, self.t.tile_latency(rank, self.spec.block))
        return float(own)

    def _first_lines(self, i: int, node: NodeSpec) -> float:
        """Memory latencies before memory node `i`'s first token: a compressed scan reads its
        fiber's bounds from its `seg` line and only then knows where its coordinates lie, so its
        `seg` and first coordinate lines come in series (two); a load, one line. Along a chain of
        memory nodes these add (SpMV's first product waits for a scan's two lines and the load's
        one; docs/cycle-model.md, "First lines")."""
        mem = self.t.memory
        if not mem or i not in self.misses:
            return 0.0
        return float(mem.get("latency", 0)) * self.first_line_count(i)

    def first_line_count(self, i: int) -> float:
        """Memory node `i`'s lines in series before its first token (`_first_lines`); its stalls
        are charged over the lines after them (`MemoryStalls.later_lines`)."""
        return min(2.0 if self.spec.nodes[i].kind == "scan" else 1.0, self.misses.get(i, 0.0))

    def timeline(self) -> tuple[float, float]:
        """(when the last node finishes, the fill latency). A node starts once its inputs' first
        tokens arrive and works for its busy cycles, and cannot finish before its inputs' last
        tokens arrive plus its tail (what it still emits after its last input: a spacc's final
        flush). A memory node's first token also waits for its first lines (`_first_lines`).
        The fill is the latency along the longest path from a root to a writer."""
        n = len(self.nodes)
        start, finish, lat = [0.0] * n, [0.0] * n, [0.0] * n
        for i, node in enumerate(self.spec.nodes):
            own = self._latency(node)
            if node.inputs:
                srcs = [s for s, _ in node.inputs]
                start[i] = max(start[s] for s in srcs) + own + self._first_lines(i, node)
                last_in = max(finish[s] for s in srcs) + own + self.tails.get(i, 1.0)
                lat[i] = own + max(lat[s] for s in srcs)
            else:
                last_in, lat[i] = 0.0, own
                start[i] = self._first_lines(i, node)
            finish[i] = max(start[i] + self.nodes[i].busy, last_in)
        self.starts = start
        return max(finish, default=0.0), max(lat, default=0.0)

    def reconvergence(self) -> float:
        """The bound a short stream beside a long path puts on the region (`reconvergence_bound`)."""
        return reconvergence_bound(
            self.spec.nodes,
            lambda s, p: self.outs[s][min(p, len(self.outs[s]) - 1)].tokens if self.outs[s] else 0.0,
            lambda i: self._latency(self.spec.nodes[i]),
            self.misses if self.t.memory else {},
            self.starts,
            [n.busy for n in self.nodes],
            self.t.fifo_depth,
            float((self.t.memory or {}).get("latency", 0)),
        )

    JOIN_SLACK_FIFOS = 2
    """FIFOs of run-ahead a lane has before an in-order join: its last stage's output FIFO and
    the one before it (`_join_serial`)."""

    def _lane_lines(self) -> float:
        """The most lines one memory node waits for (after its first): with lanes, one lane's."""
        return max((self.memory.later_lines(i) for i in self.misses), default=0.0) if self.t.memory else 0.0

    def join_serial(self) -> float:
        """The cycles in-order joins take when their lanes cannot run far ahead of them (0 without
        joins, or when an element fits the FIFOs). A join takes the parallel level's elements in
        order, each from its lane; a lane whose element holds more tokens n on the join's stream
        than its FIFOs hold (`JOIN_SLACK_FIFOS` x `fifo_depth`, B) stops B tokens into its next
        element until the join reaches it, so the rest of every element is produced while the
        join waits. Per element that is the larger of the lane's compute for the rest, w x (1 -
        B/n) (w: the lane's busiest input to the join over its elements), and the lines the
        rest needs, each a whole latency since the lane could not ask for them earlier (at least
        one: L x (1 - B/n), L its memory node's lines per element), plus the join's n tokens.
        The simulator: a 64 x 64 dense add at i on one memory channel stops gaining at 2 lanes
        (21,931 -> 12,735 -> 12,735 at 4), a 34 x 8 relu at j with 8 lanes takes 1,304 cycles
        for 1,744 at one lane (docs/cycle-model.md, "Lanes and in-order joins")."""
        latency = float((self.t.memory or {}).get("latency", 0))
        lines = self._lane_lines()
        worst = 0.0
        for i, node in enumerate(self.spec.nodes):
            if node.kind != "join":
                continue
            slack = self.join_slack(node) * self.t.fifo_depth
            d = node.depth
            elements, lane = 0.0, 0.0
            for src, port in node.inputs:
                outs = self.outs[src]
                s = outs[min(port, len(outs) - 1)]
                cut = s.depth - d
                if not 0 <= cut <= s.depth:
                    break
                elements += s.counts[cut]
                lane = max(lane, self.nodes[src].busy)
            else:
                tokens = self.nodes[i].tokens
                if elements <= 0 or tokens / elements <= slack:
                    continue
                n = tokens / elements
                per_lane = max(elements / max(len(node.inputs), 1), 1e-9)
                rest = 1.0 - slack / n
                compute = lane / per_lane * rest
                memory = max(1.0, lines / per_lane * rest) * latency if lines else 0.0
                serial = elements * max(compute, memory + n * self.t.kind_ii("join"))
                worst = max(worst, self.starts[i] + serial)
        return worst

    def join_slack(self, node: NodeSpec) -> int:
        """FIFOs a lane fills ahead of the join `node`: `JOIN_SLACK_FIFOS`, or one where the join
        reads a memory node's stream directly (a scan's coordinates go straight to the join,
        so its next fiber's lines wait until the join has taken all but a FIFO of this one)."""
        direct = self.t.memory and any(src in self.misses for src, _ in node.inputs)
        return 1 if direct else self.JOIN_SLACK_FIFOS

    def output_stats(self) -> dict[str, TensorStats]:
        """Statistics of the tensors the graph writes (what later regions read)."""
        out = {}
        for name, t in self.spec.tensors.items():
            if t.role != "output":
                continue
            b = t.block or self.spec.block
            shape = tuple(max(1, -(-s // b)) for s in t.shape) if b else t.shape
            dims = tuple(shape[m] for m in t.fmt.mode_order)
            written = self.written.get(name, {})
            counts, acc = [], 1.0
            for lvl, kind in enumerate(t.fmt.levels):
                acc = written.get(lvl, acc * dims[lvl] if kind == "dense" else acc)
                counts.append(float(acc))
            patterns = None if b else self.coords.carried_patterns(name, t.fmt.levels)
            freqs = {
                key: f
                for level in patterns or ()
                for (ident, lvl, _), _p in level or ()
                for key, f in self.coords.level_freq.items()
                if key[:2] == (ident, lvl)
            }
            out[name] = TensorStats(
                dims, tuple(counts), False, patterns, tuple(t.fmt.mode_order), level_frequencies=freqs
            )
        return out


_RULE_OF: dict[str, str] = {
    "root": "root",
    "scan": "scan",
    "locate": "locate",
    "intersect": "intersect",
    "union": "union",
    "repsiggen": "repsiggen",
    "repeat": "repeat",
    "load": "load",
    "alu": "alu",
    "reduce": "reduce",
    "spacc": "spacc",
    "crd_drop": "crd_drop",
    "val_drop": "val_drop",
    "write_crd": "write_crd",
    "write_val": "write_val",
    "fork": "fork",
    "join": "join",
}
"""Each primitive kind's rule: the `CycleModel` method giving its output streams, busy cycles,
ALU element ops and bytes (a subclass overriding the method changes the rule)."""
RULES = frozenset(_RULE_OF)
"""Primitive kinds the model has a rule for (a test checks it covers fuseflow.primitives.KINDS)."""


def estimate_graph(
    spec: GraphSpec, stats: Mapping[str, TensorStats], timing: Timing, model: type[CycleModel] | None = None
) -> GraphEstimate:
    """Predict one graph's tokens per node and cycles from its input tensors' statistics
    (`model`: a `CycleModel` subclass with other rules)."""
    return (model or CycleModel)(spec, stats, timing).run()
