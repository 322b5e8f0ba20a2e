"""Segmentations of a row of units 0..n: the planner's search space as dynamic programs.

A segmentation is a run of consecutive segments (a, b) covering 0..n; `allowed(a, b)` says
which segments may be one region. These functions count, cover and rank segmentations by
segment costs; they know nothing of models or regions (fuseflow/planning/planner.py does).
"""

from __future__ import annotations

from collections.abc import Mapping


def most_of(n: int, allowed, todo: set, filler) -> tuple[tuple[int, int], ...]:
    """The segmentation of 0..n with the most segments of `todo`, the rest `filler` segments,
    shortest fillers first; () when none holds one of `todo`."""
    best: list[tuple[int, int, list] | None] = [(0, 0, [])] + [None] * n
    for b in range(1, n + 1):
        for a in range(b):
            prev = best[a]
            if prev is None or not allowed(a, b):
                continue
            hit = (a, b) in todo
            if not hit and not filler(a, b):
                continue
            score = (prev[0] + hit, prev[1] - (0 if hit else b - a))
            cur = best[b]
            if cur is None or score > cur[:2]:
                best[b] = (score[0], score[1], prev[2] + [(a, b)])
    end = best[n]
    return tuple(end[2]) if end is not None and end[0] > 0 else ()


def band(n: int, allowed, length: int, estimated: Mapping, skip) -> list[tuple[tuple[int, int], ...]]:
    """Segmentations that together hold every allowed segment of `length` neither estimated nor
    in `skip`; the other segments are estimated (or length-1) ones, the cheapest to lower again."""
    todo = {(a, a + length) for a in range(n - length + 1) if allowed(a, a + length)}
    todo -= set(estimated) | set(skip)
    out: list[tuple[tuple[int, int], ...]] = []
    done: set[tuple[int, int]] = set()  # held by an earlier segmentation of this band

    def filler(a: int, b: int) -> bool:
        return ((a, b) in estimated or (a, b) in done or b - a == 1) and (a, b) not in skip

    while todo:
        segs = most_of(n, allowed, todo, filler)
        if not segs:
            break
        out.append(segs)
        todo -= set(segs)
        done |= set(segs)
    return out


def best_splits(n: int, cost: Mapping[tuple[int, int], float]) -> dict[tuple[int, int], float]:
    """For every span (a, b), the cheapest segmentation of it into estimated segments of which
    none is the whole span (inf when there is none)."""
    whole: dict[tuple[int, int], float] = {}  # cheapest segmentation, the whole span allowed
    split: dict[tuple[int, int], float] = {}
    inf = float("inf")
    for length in range(1, n + 1):
        for a in range(n - length + 1):
            b = a + length
            split[(a, b)] = min((whole[(a, m)] + whole[(m, b)] for m in range(a + 1, b)), default=inf)
            whole[(a, b)] = min(cost.get((a, b), inf), split[(a, b)])
    return split


def k_best(n: int, cost: Mapping[tuple[int, int], float], k: int) -> list[tuple[float, tuple]]:
    """The k cheapest segmentations of 0..n by the sum of segment costs."""
    best: list[list[tuple[float, tuple]]] = [[(0.0, ())]] + [[] for _ in range(n)]
    for b in range(1, n + 1):
        options = []
        for a in range(b):
            if (a, b) not in cost:
                continue
            options += [(c + cost[(a, b)], segs + ((a, b),)) for c, segs in best[a]]
        best[b] = sorted(options)[:k]
    return best[n]


def count_segmentations(n: int, allowed) -> int:
    """How many segmentations of 0..n `allowed(a, b)` admits (the size of the planner's space)."""
    ways = [1] + [0] * n
    for b in range(1, n + 1):
        ways[b] = sum(ways[a] for a in range(b) if allowed(a, b))
    return ways[n]
