"""Stratified ratio estimation of a region's totals from a sample of its units (docs/sampling.md).

A region's rows are cut into N units whose work `x` (rows plus stored entries read along them)
is known before anything runs. Units are stratified by work; within stratum h the total of a
quantity y (cycles, a counter) is estimated by the separate ratio estimator
``R_h * X_h`` with ``R_h = sum(y_s) / sum(x_s)`` over the stratum's sampled units, and its
variance by ``(Xbar_h / xbar_s)^2 N_h^2 (1 - n_h/N_h) s_e^2 / n_h`` with ``e = y - R_h x``
(Cochran, Sampling Techniques, 6.10-6.13). The interval uses Student's t with the sample's
residual degrees of freedom.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

PILOT = 4
"""Units per stratum in the first round. Two would give a variance, but one too noisy to stop on:
a sequential sample stops when its estimated interval first meets the target, which favours
underestimates (optional stopping)."""
MAX_STRATA = 8
MIN_SAMPLE = 30
"""Units sampled before the interval may stop the sampling (or every unit, when fewer)."""


@dataclass(frozen=True)
class Strata:
    """Each unit's stratum (`of[u]`), from the units' work `x`."""

    of: np.ndarray
    count: int

    def members(self, h: int) -> np.ndarray:
        """The units of stratum `h`, in row order."""
        return np.flatnonzero(self.of == h)


def stratify(x: np.ndarray, strata: int = MAX_STRATA) -> Strata:
    """Strata of units by work, each holding about the same total work and at least twice
    `PILOT` units (the cumulative-work rule: heavy units, whose cycles vary most, get small
    strata)."""
    n = len(x)
    h = max(1, min(strata, n // (2 * PILOT)))
    order = np.argsort(x, kind="stable")
    cum = np.cumsum(x[order].astype(float))
    total = cum[-1] if n else 0.0
    if total <= 0:
        cuts = np.floor(np.arange(n) * h / max(n, 1)).astype(int)
    else:
        cuts = np.minimum((cum - 1e-9 * total) * h // total, h - 1).astype(int)
    cuts = _at_least(cuts, h, 2 * PILOT)
    of = np.empty(n, dtype=int)
    of[order] = cuts
    used = np.unique(of)
    remap = {int(s): i for i, s in enumerate(used)}
    return Strata(np.array([remap[int(s)] for s in of], dtype=int), len(used))


def _at_least(cuts: np.ndarray, h: int, k: int) -> np.ndarray:
    """Merge each stratum (in sorted order) with fewer than `k` units into its neighbour."""
    out = cuts.copy()
    for s in range(h):
        members = np.flatnonzero(out == s)
        if 0 < len(members) < k:
            higher = out > s
            out[out == s] = out[higher].min() if higher.any() else (out[out < s].max() if (out < s).any() else s)
    return out


@dataclass(frozen=True)
class Estimate:
    """Estimated totals (one per quantity), their variances, and the degrees of freedom."""

    total: np.ndarray
    variance: np.ndarray
    dof: int

    def half_width(self, confidence: float) -> np.ndarray:
        """Half-width of the two-sided `confidence` interval of each total."""
        if self.dof <= 0:
            return np.where(self.variance > 0, np.inf, 0.0)
        t = stats.t.ppf(0.5 + confidence / 2, self.dof)
        return t * np.sqrt(self.variance)


def ratio_estimate(x: np.ndarray, strata: Strata, sampled: dict[int, np.ndarray]) -> Estimate:
    """The stratified ratio estimate of every quantity's total over all units. `sampled` maps a
    unit to its measured quantities (one row of y); every stratum needs a sampled unit."""
    k = len(next(iter(sampled.values())))
    total, variance, dof = np.zeros(k), np.zeros(k), 0
    for h in range(strata.count):
        units = strata.members(h)
        s = [u for u in units if u in sampled]
        if not s:
            raise ValueError(f"stratum {h} has no sampled unit")
        y = np.array([sampled[u] for u in s], dtype=float)
        xs = x[s].astype(float)
        big_n, n = len(units), len(s)
        scale = 1.0
        if xs.sum() > 0:
            r = y.sum(axis=0) / xs.sum()
            total += r * x[units].sum()
            resid = y - np.outer(xs, r)
            scale = (x[units].mean() / xs.mean()) ** 2  # Cochran 6.13: a light sample's ratio varies more
        else:  # no work in the sample: the expansion estimator
            total += big_n * y.mean(axis=0)
            resid = y - y.mean(axis=0)
        if n > 1 and n < big_n:
            variance += scale * big_n**2 * (1 - n / big_n) * resid.var(axis=0, ddof=1) / n
            dof += n - 1
        elif n == 1 and big_n > 1:
            variance += np.inf  # one unit gives no spread
    return Estimate(total, variance, dof)


def allocate(x: np.ndarray, strata: Strata, sampled: dict[int, np.ndarray], want: float, column: int = 0) -> list[int]:
    """How many more units each stratum needs (Neyman allocation, n_h proportional to N_h s_h) for
    the variance of `column`'s total to fall to `want`; at least one more unit overall."""
    sizes, spreads = [], []
    for h in range(strata.count):
        units = strata.members(h)
        s = [u for u in units if u in sampled]
        y = np.array([sampled[u][column] for u in s], dtype=float)
        xs = x[s].astype(float)
        r = y.sum() / xs.sum() if xs.sum() > 0 else 0.0
        resid = y - r * xs if xs.sum() > 0 else y - y.mean()
        sizes.append(len(units))
        spreads.append(float(resid.std(ddof=1)) if len(s) > 1 else float(np.abs(y).mean()))
    big = np.array(sizes, dtype=float)
    sd = np.array(spreads)
    weight = big * sd
    if weight.sum() <= 0:
        return [0] * strata.count
    need = weight.sum() ** 2 / (max(want, 1e-300) + (big * sd**2).sum())
    have = np.array([sum(1 for u in strata.members(h) if u in sampled) for h in range(strata.count)])
    target = np.minimum(np.ceil(need * weight / weight.sum()), big)
    more = np.maximum(target - have, 0).astype(int)
    if more.sum() == 0 and (have < big).any():
        h = int(np.argmax(np.where(have < big, weight, -1)))
        more[h] = 1
    return [int(m) for m in more]


def draw(strata: Strata, sampled: Sequence[int], more: Sequence[int], rng: np.random.Generator) -> list[int]:
    """`more[h]` units of stratum h not yet sampled, drawn at random without replacement."""
    taken = set(sampled)
    out: list[int] = []
    for h, m in enumerate(more):
        free = [int(u) for u in strata.members(h) if int(u) not in taken]
        if m and free:
            out.extend(int(u) for u in rng.choice(free, size=min(m, len(free)), replace=False))
    return sorted(out)
