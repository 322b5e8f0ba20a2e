"""The sampling estimator (sampling/estimator.py) against textbook formulas worked by hand, and
its interval's coverage on synthetic populations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fuseflow.errors import FuseflowError
from fuseflow.sampling.estimator import Strata, allocate, draw, ratio_estimate, stratify
from fuseflow.sampling.region import unit_bounds, unit_count
from fuseflow.sampling.spec import SampleSpec


def test_proportional_cycles_are_estimated_exactly_with_zero_variance():
    x = np.array([1.0, 2, 3, 4, 5, 6, 7, 8])
    y = {u: np.array([3 * x[u]]) for u in (0, 3, 5, 7)}  # cycles = 3 * work everywhere
    est = ratio_estimate(x, Strata(np.zeros(8, dtype=int), 1), y)
    assert est.total[0] == pytest.approx(3 * x.sum())
    assert est.variance[0] == pytest.approx(0.0)


def test_one_stratum_matches_cochrans_ratio_estimator_by_hand():
    x = np.array([2.0, 4, 6, 8, 10])
    sample = {0: np.array([5.0]), 2: np.array([13.0]), 4: np.array([19.0])}
    est = ratio_estimate(x, Strata(np.zeros(5, dtype=int), 1), sample)
    r = (5 + 13 + 19) / (2 + 6 + 10)  # 37/18
    assert est.total[0] == pytest.approx(r * 30)
    e = np.array([5 - r * 2, 13 - r * 6, 19 - r * 10])
    s2 = (e**2).sum() / 2
    assert est.variance[0] == pytest.approx(25 * (1 - 3 / 5) * s2 / 3)
    assert est.dof == 2
    assert est.half_width(0.95)[0] == pytest.approx(stats.t.ppf(0.975, 2) * np.sqrt(est.variance[0]))


def test_a_fully_sampled_stratum_adds_no_variance():
    x = np.arange(1.0, 7)
    of = np.array([0, 0, 0, 1, 1, 1])
    y = {u: np.array([x[u] ** 2]) for u in range(6)}
    est = ratio_estimate(x, Strata(of, 2), y)
    assert est.total[0] == pytest.approx((x**2).sum())
    assert est.variance[0] == 0


def test_strata_hold_about_equal_work_and_at_least_two_units():
    rng = np.random.default_rng(1)
    x = rng.uniform(1, 10, 400)
    s = stratify(x)
    sums = [x[s.members(h)].sum() for h in range(s.count)]
    assert s.count == 8 and max(sums) < 1.1 * min(sums)
    heavy = rng.pareto(1.5, 400) + 1  # a few units hold much of the work: strata merge, in work order
    s = stratify(heavy)
    assert 4 <= s.count <= 8 and all(len(s.members(h)) >= 2 for h in range(s.count))
    assert all(heavy[s.members(h)].max() <= heavy[s.members(h + 1)].min() for h in range(s.count - 1))
    assert stratify(np.ones(3)).count == 1


def test_neyman_allocation_sends_units_to_the_noisy_stratum():
    rng = np.random.default_rng(0)
    x = np.ones(200)
    of = np.repeat([0, 1], 100)
    y = {u: np.array([1.0 + (rng.normal() * (5 if u >= 100 else 0.01))]) for u in (0, 1, 2, 100, 101, 102)}
    more = allocate(x, Strata(of, 2), y, want=1.0)
    assert more[1] > 10 * max(more[0], 1)
    drawn = draw(Strata(of, 2), list(y), more, rng)
    assert len(drawn) == sum(more) and not set(drawn) & set(y)


def test_intervals_cover_the_truth_at_about_their_confidence():
    """Synthetic populations (cycles = work x noisy rate): the 90% interval of a 30-unit sample
    covers the true total in at least 80% of 200 draws."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(200):
        x = rng.integers(5, 200, 300).astype(float)
        y_all = x * rng.normal(3.0, 0.4, 300) + rng.normal(0, 5, 300)
        s = stratify(x, 4)
        picks = draw(s, [], [8, 8, 7, 7], rng)
        est = ratio_estimate(x, s, {u: np.array([y_all[u]]) for u in picks})
        half = est.half_width(0.9)[0]
        covered += abs(est.total[0] - y_all.sum()) <= half
    assert covered >= 160


def test_units_balance_work_and_are_sized_by_predicted_cycles():
    work = np.array([1.0] * 90 + [100.0] * 10)
    b = unit_bounds(work, 4)
    assert b[0][0] == 0 and b[-1][1] == 100 and all(lo < hi for lo, hi in b)
    sums = [work[lo:hi].sum() for lo, hi in b]
    assert max(sums) < 1.6 * min(sums)
    spec = SampleSpec(unit_cycles=1000, min_units=3)
    assert unit_count(50_000, 1000, spec) == 50
    assert unit_count(50_000, 20, spec) == 20  # at most one unit per row
    assert unit_count(10, 1000, spec) == 1


def test_sample_specs_parse_and_refuse_nonsense():
    assert SampleSpec.of(True) == SampleSpec()
    assert SampleSpec.of(None) is None and SampleSpec.of(False) is None
    s = SampleSpec.of("1%@99%")
    assert s is not None and (s.error, s.confidence) == (0.01, 0.99)
    s = SampleSpec.of({"error": 0.05, "confidence": 0.9})
    assert s is not None and s.describe() == "±5% at 90%"
    with pytest.raises(FuseflowError, match="ERROR\\[@CONFIDENCE\\]"):
        SampleSpec.of("two percent")
    with pytest.raises(FuseflowError, match="fraction"):
        SampleSpec.of({"error": 2})
    with pytest.raises(FuseflowError, match="unknown sample option"):
        SampleSpec.of({"eror": 0.1})
