"""Re-score variants of the cycle model's memory-stall rule against captured simulations.

`benchmarks/estimator_accuracy.py --capture F` pickles every simulated region's graph spec,
input statistics, timing and simulated cycles. This script re-estimates them all under each rule
below (seconds, no simulation) and prints, per rule, the median and p90 absolute error over the
regions and the Spearman rank correlation per model (program totals over the captured regions):

    python benchmarks/estimator_accuracy.py --quick --random 4 --arch rda --capture build/rda.pkl
    python benchmarks/model_variants.py build/rda.pkl [--worst 20] [--rule series]

Rules (docs/cycle-model.md, "Stalls of several nodes", records what each one measured):
- `model`: the model's own rule: the worst chain of memory nodes, where a node adds its
  stalls to a feeder's that streams and also feeds an accumulator below it (`in_series`), and
  a memory node below an accumulator ends at least one fiber's share of its own chain after the
  worst chain above it (the stages overlap but the last fiber's work below waits);
- `chains`: the model's chains without that last term (below an accumulator, full overlap);
- `worst`: the region waits for its worst memory node alone (the rule before the chains);
- `series`: a memory node fed directly by another memory node whose lines change at most once
  per FIFO's worth of tokens (`--fill` x fifo_depth) pays its own stalls after the feeder's
  (they add); otherwise the feeder runs ahead and they overlap;
- `bypass`: `series`, only where the feeder's tokens also reach a node below the consumer by
  another path;
- `blend`: the worst node's stall plus `--alpha` of what summing along the worst chain of
  directly connected memory nodes would add (a fitted partial overlap);
- `uncovered`: the model's chains, where the nodes of a chain (`--feeder-only`: the node
  behind its feeder) wait each line's full latency, at most the FIFO's streaming rate, without
  the FIFO's cover;
- `barrier`: the model's chains, and a memory node below an accumulator (`--barriers` kinds)
  waits behind the worst chain of memory nodes above it;
- `floorless`: the model without its round trip under a pair in series (Little's law over the
  feeder's FIFO to the accumulator);
- `pertoken`: the model, with the round trip of a pair in series per token (`--stay`
  latencies plus the path, Little's law over the feeder's FIFO, every line of the feeder
  counted) instead of per coordinate line;
- `turns`: the model, where across an accumulator whose output fibers outgrow a FIFO the stages
  above and below take turns for the share the FIFO cannot hold (`--share` of it);
- `undrained`: the model before its fourteenth rule (a load below an accumulator whose fibers
  outgrow a FIFO waits in series with the chain above while each fiber drains);
- `drainall`: the model with the fourteenth rule also over memory nodes reached through scans
  below the accumulator, charged their own chain per drained token;

A new rule is a subclass of the model's memory term (`memory_stalls.MemoryStalls`) overriding
`memory_stalls` or one of its steps, added to `RULES`; it is scored as the model with that term
(`CycleModel.stalls`).
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]

from fuseflow.cost import cycle_model, memory_stalls  # noqa: E402


class _Series(memory_stalls.MemoryStalls):
    """Stalls add along a direct memory-to-memory edge whose feeder cannot run a line ahead:
    its lines change at most once per `FILL` x fifo_depth tokens, so the FIFO to the consumer is
    full before the feeder reaches its next line and it asks for that line only once the consumer
    has its own (two latencies per line change)."""

    FILL = 0.85

    def memory_stalls(self) -> float:
        own = self.node_stalls()
        if not own:
            return 0.0
        depth = float(max(self.t.fifo_depth, 1))
        total: dict[int, float] = {}
        for i, node in enumerate(self.spec.nodes):  # nodes are in topological order
            if i not in own:
                continue
            behind = 0.0
            for src, _ in node.inputs:
                if src in total and src in self.misses:
                    steps = max((s.tokens for s in self.outs[src]), default=0.0)
                    run = steps / max(self.misses[src], 1e-9)  # tokens between the feeder's line changes
                    if self.adds(src, i, run, depth):
                        behind = max(behind, total[src])
            total[i] = own[i] + behind
        for i, s in own.items():
            self.nodes[i].busy += s
        return self.combine(own, total)

    def combine(self, own: dict[int, float], total: dict[int, float]) -> float:
        """The region's stall from each memory node's own and its chain's (own plus feeders')."""
        return max(total.values(), default=0.0)

    def adds(self, src: int, dst: int, run: float, depth: float) -> bool:
        """Whether memory node `dst`'s stalls come after those of `src`, which feeds it."""
        return run >= self.FILL * depth


class _Bypass(_Series):
    """`series`, only where the feeder's tokens also reach, by a path around the consumer, a node
    below it (a scan whose coordinates go to the accumulator as well as to the load of its
    values): that FIFO, not the one to the consumer, bounds how far the feeder runs ahead."""

    def memory_stalls(self) -> float:
        spec = self.spec
        below: list[set[int]] = [set() for _ in spec.nodes]
        for i in reversed(range(len(spec.nodes))):
            for src, _ in spec.nodes[i].inputs:
                below[src] |= below[i] | {i}
        consumers: dict[int, set[int]] = {}
        for i, node in enumerate(spec.nodes):
            for src, _ in node.inputs:
                consumers.setdefault(src, set()).add(i)

        def bypassed(a: int, b: int) -> bool:
            return any(x != b and (x in below[b] or below[x] & below[b]) for x in consumers.get(a, ()))

        self._bypassed = bypassed
        return super().memory_stalls()

    def adds(self, src: int, dst: int, run: float, depth: float) -> bool:
        return run >= self.FILL * depth and self._bypassed(src, dst)


class _Blend(_Series):
    """The worst node's stall plus `ALPHA` of what summing along the worst chain of directly
    connected memory nodes adds to it: a fitted partial overlap, not a mechanism."""

    ALPHA = 0.3

    def combine(self, own: dict[int, float], total: dict[int, float]) -> float:
        worst = max(own.values(), default=0.0)
        return worst + self.ALPHA * (max(total.values(), default=0.0) - worst)

    def adds(self, src: int, dst: int, run: float, depth: float) -> bool:
        return True


class _Worst(memory_stalls.MemoryStalls):
    """The region waits for its worst memory node alone (the model's rule before the chains)."""

    def memory_stalls(self) -> float:
        own = self.node_stalls()
        for i, s in own.items():
            self.nodes[i].busy += s
        return max(own.values(), default=0.0)


class _Uncovered(memory_stalls.MemoryStalls):
    """The model's chains, where a node in series with its feeder (and the feeder) pay their
    lines without the FIFO's cover: the FIFO between them is full while the feeder waits on its
    own line, so it hides nothing. Each still streams at most at the FIFO's rate (a line per
    latency, `fifo_depth` tokens in flight)."""

    BOTH = True  # the feeder too (False: only the node behind it)

    def memory_stalls(self) -> float:
        own = self.node_stalls()
        latency = float(self.t.memory.get("latency", 0)) if self.t.memory else 0.0
        depth = float(max(self.t.fifo_depth, 1))

        def bare(i: int) -> float:
            steps = max((s.tokens for s in self.outs[i]), default=0.0)
            return min(self.misses[i] * latency, steps * latency / depth)

        chain: dict[int, float] = {}
        for i, node in enumerate(self.spec.nodes):
            if i not in own:
                continue
            feeders = [s for s, _ in node.inputs if s in chain and self.in_series(s, i)]
            if feeders:
                f = max(feeders, key=lambda s: chain[s])
                chain[i] = max(own[i], bare(i)) + chain[f]
                if self.BOTH:  # the feeder's own stalls, uncovered too
                    chain[i] += max(bare(f) - own[f], 0.0)
            else:
                chain[i] = own[i]
            self.nodes[i].busy += own[i]
        return max(chain.values(), default=0.0)


class _Barrier(memory_stalls.MemoryStalls):
    """The model's chains, and a memory node below an accumulator (`spacc`, `reduce`) waits
    behind every memory node above it: the accumulator emits a fiber's result only once its
    inputs' last tokens for it arrived, so the stages before and after it take turns."""

    KINDS = ("spacc", "reduce")

    def memory_stalls(self) -> float:
        own = self.node_stalls()
        up: dict[int, float] = {}  # node -> the worst chain of memory nodes above it (itself included)
        bar: dict[int, float] = {}  # node -> the chains it waits behind, across accumulators above it
        chain: dict[int, float] = {}
        for i, node in enumerate(self.spec.nodes):
            srcs = [s for s, _ in node.inputs]
            bar[i] = max(
                [bar.get(s, 0.0) for s in srcs]
                + [up.get(s, 0.0) for s in srcs if self.spec.nodes[s].kind in self.KINDS],
                default=0.0,
            )
            if i in own:
                behind = [chain[s] for s in srcs if s in chain and self.in_series(s, i)]
                chain[i] = own[i] + max(behind + [bar[i]])
                self.nodes[i].busy += own[i]
            up[i] = max([up.get(s, 0.0) for s in srcs] + [chain.get(i, 0.0)], default=0.0)
        return max(chain.values(), default=0.0)


class _PerToken(memory_stalls.MemoryStalls):
    """The twelfth rule's first form: every token of a pair in series stays `STAY` latencies plus
    the path in the feeder's FIFO to the accumulator (Little's law per token, all of the
    feeder's lines counted), where the model charges a round trip per coordinate line."""

    STAY = 1.5

    def round_trip(self, feeder: int, node: int, acc: int, pace: float) -> float:
        mem = self.t.memory or {}
        depth = float(max(self.t.fifo_depth, 1))
        steps = max((o.tokens for o in self.outs[feeder]), default=0.0)
        stay = self.STAY * float(mem.get("latency", 0)) + self.path_latency(node, acc)
        c = max(pace / steps, 1.0) if steps > 0.0 else 1.0
        return max(min(self.later_lines(feeder) * (stay - depth * c), steps * (stay / depth - c)), 0.0)


class _Turns(memory_stalls.MemoryStalls):
    """The model, where across an accumulator whose output fibers hold more tokens than a FIFO
    the stages above and below take turns for the share of each fiber the FIFO below cannot
    hold (`--share` of it): the accumulator accepts the next fiber's inputs only once its
    output has drained into the FIFO (GPT's fused FFN: the up projection's `spacc` emits a row
    of d_ff values that the down projection consumes a column at a time)."""

    SHARE = 1.0

    def memory_stalls(self) -> float:
        own = self.node_stalls()
        pace = max((n.busy for n in self.nodes), default=0.0)
        depth = float(max(self.t.fifo_depth, 1))
        chain: dict[int, float] = {}
        above: dict[int, float] = {}
        tail: dict[int, tuple[float, float]] = {}
        turn: dict[int, float] = {}
        for i, node in enumerate(self.spec.nodes):
            feeders = [s for s, _ in node.inputs]
            tail[i] = self.after_accumulator(feeders, above, tail)
            turns = [turn.get(s, 0.0) for s in feeders]
            for s in feeders:
                if self.spec.nodes[s].kind in self.ACCUMULATORS and self.outs[s]:
                    counts = self.outs[s][0].counts
                    fiber = counts[-1] / max(counts[-2], 1.0) if len(counts) >= 2 else counts[-1]
                    turns.append(self.SHARE * max(0.0, 1.0 - depth / max(fiber, 1e-9)) * above.get(s, 0.0))
            turn[i] = max(turns, default=0.0)
            if i in own:
                self.nodes[i].busy += own[i]
                mine = self.behind_feeders(i, feeders, own, chain, pace)
                before, fibers = tail[i]
                chain[i] = max(mine, before + mine / fibers, turn[i] + mine)
            above[i] = max([above.get(s, 0.0) for s in feeders] + [chain.get(i, 0.0)])
        return max(chain.values(), default=0.0)


class _Undrained(memory_stalls.MemoryStalls):
    """The model before its fourteenth rule: a load below an accumulator overlaps the chain
    above while the accumulator drains its fibers."""

    def drain_stalls(self, node: int, drain, mine: float) -> float:
        return 0.0


class _DrainAll(memory_stalls.MemoryStalls):
    """The model, where the drain rule also follows the drain through scans and covers the
    memory nodes there, charged their own chain per drained token (GPT's fused FFN: each
    drained up projection value starts a fiber of the down projection's weight)."""

    DRAIN_STOPS: tuple[str, ...] = ()

    def drain_stalls(self, node: int, drain, mine: float) -> float:
        if drain is None or self.spec.nodes[node].kind == "load":
            return super().drain_stalls(node, drain, mine)
        up, fibers, fiber = drain
        depth = float(max(self.t.fifo_depth, 1))
        per = mine / max(fibers * fiber, 1e-9)
        extra = fibers * max(fiber - depth, 0.0) * max(per - float(self.t.ii), 0.0)
        return up + extra if extra > 0.0 else 0.0


class _Floorless(memory_stalls.MemoryStalls):
    """The model without the round trip under a pair in series (before its twelfth rule)."""

    def round_trip(self, feeder: int, node: int, acc: int, pace: float) -> float:
        return 0.0


class _Chains(memory_stalls.MemoryStalls):
    """The model's chains without the tail below an accumulator (the model before its eleventh
    rule): memory nodes below an accumulator overlap the ones above it entirely."""

    def after_accumulator(self, feeders, above, tail) -> tuple[float, float]:
        return (0.0, 1.0)


RULES: dict[str, type[memory_stalls.MemoryStalls]] = {
    "chains": _Chains,
    "pertoken": _PerToken,
    "floorless": _Floorless,
    "turns": _Turns,
    "undrained": _Undrained,
    "drainall": _DrainAll,
    "barrier": _Barrier,
    "uncovered": _Uncovered,
    "model": memory_stalls.MemoryStalls,
    "worst": _Worst,
    "series": _Series,
    "bypass": _Bypass,
    "blend": _Blend,
}


APART = 1.05
"""Pairs of configurations at least this far apart in simulated cycles must be ordered right
(`estimator_accuracy.py`'s `ordered_apart_per_model`)."""


def score(regions: list[dict], rule: type[memory_stalls.MemoryStalls]) -> list[tuple[dict, float]]:
    """Each captured region with its estimate under the memory term `rule`."""
    model = type(f"Model{rule.__name__}", (cycle_model.CycleModel,), {"stalls": rule})
    return [(r, cycle_model.estimate_graph(*r["inputs"], model=model).cycles) for r in regions]


def summary(scored: list[tuple[dict, float]]) -> dict:
    """Median and p90 absolute relative error, and Spearman per model over program totals."""
    errs = np.array([abs(e - r["cycles"]) / max(r["cycles"], 1) for r, e in scored])
    totals: dict[str, dict[tuple, list[float]]] = {}
    for r, e in scored:
        cfg = tuple(r["config"])
        t = totals.setdefault(cfg[0], {}).setdefault(cfg, [0.0, 0.0])
        t[0] += r["cycles"]
        t[1] += e
    rank = {}
    right = pairs = 0
    for cfgs in totals.values():
        both = list(cfgs.values())
        for i, (sim_a, est_a) in enumerate(both):
            for sim_b, est_b in both[i + 1 :]:
                if max(sim_a, sim_b) >= APART * min(sim_a, sim_b):
                    pairs += 1
                    right += (sim_a - sim_b) * (est_a - est_b) > 0
    for model, cfgs in totals.items():
        if len(cfgs) >= 3:
            sim, est = zip(*cfgs.values(), strict=True)
            rank[model] = round(float(spearmanr(sim, est).statistic), 3)  # ties: average ranks
    return {
        "regions": int(errs.size),
        "median": round(float(np.median(errs)), 4),
        "p90": round(float(np.percentile(errs, 90)), 4),
        "spearman": rank,
        "ordered_apart": [right, pairs],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", help="a pickle written by estimator_accuracy.py --capture")
    ap.add_argument("--rule", action="append", choices=sorted(RULES), help="rules to score (default: all)")
    ap.add_argument("--worst", type=int, default=0, help="list the N regions each rule misses most")
    ap.add_argument(
        "--fill",
        type=float,
        default=_Series.FILL,
        help="series/bypass: the feeder's tokens between "
        "line changes, as a fraction of the FIFO depth, at which stalls add",
    )
    ap.add_argument(
        "--barriers", default="spacc,reduce", help="barrier: the accumulator kinds stages take turns across"
    )
    ap.add_argument(
        "--stay", type=float, default=_PerToken.STAY, help="pertoken: the latencies a token of a pair in series stays"
    )
    ap.add_argument(
        "--share", type=float, default=_Turns.SHARE, help="turns: the share of the turn-taking that is charged"
    )
    ap.add_argument("--feeder-only", action="store_true", help="uncovered: only the node behind its feeder")
    ap.add_argument("--alpha", type=float, default=_Blend.ALPHA, help="blend: the share of the chain's sum that adds")
    ap.add_argument(
        "--rewalked",
        type=float,
        default=memory_stalls._REWALKED,
        help="the share of its tokens a feeder may walk again and still add its stalls to its consumer's (every rule)",
    )
    a = ap.parse_args()
    memory_stalls._REWALKED = a.rewalked
    _Series.FILL = a.fill
    _PerToken.STAY = a.stay
    _Turns.SHARE = a.share
    _Blend.ALPHA = a.alpha
    _Uncovered.BOTH = not a.feeder_only
    _Barrier.KINDS = tuple(a.barriers.split(","))
    data = pickle.loads(Path(a.capture).read_bytes())
    regions = data["regions"]
    out = {}
    for name in a.rule or list(RULES):
        scored = score(regions, RULES[name])
        out[name] = summary(scored)
        print(f"{name}: {json.dumps(out[name])}")
        key: Callable = lambda x: -abs(x[1] - x[0]["cycles"]) / max(x[0]["cycles"], 1)  # noqa: E731
        for r, e in sorted(scored, key=key)[: a.worst]:
            print(f"   {'/'.join(r['config'])} {r['region']}: simulated {r['cycles']:,}, estimated {e:,.0f}")
    print("\n| rule | regions | median | p90 | pairs ordered right | Spearman below 0.9 |")
    print("|---|---:|---:|---:|---:|---|")
    for name, s in out.items():
        low = ", ".join(f"{m} {v}" for m, v in s["spearman"].items() if v < 0.9) or "none"
        right, pairs = s["ordered_apart"]
        cells = [
            name,
            str(s["regions"]),
            f"{100 * s['median']:.1f}%",
            f"{100 * s['p90']:.1f}%",
            f"{right} / {pairs}",
            low,
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
