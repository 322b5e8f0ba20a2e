"""The planner's cover of the segment space (`segmentations.band`) and the split costs that decide
which segments it prunes (`segmentations.best_splits`), against brute-force enumeration."""

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.planning.planner import HOPELESS, _hopeless
from fuseflow.planning.segmentations import band, best_splits


def _segmentations(a: int, b: int):
    """Every segmentation of the span a..b, as tuples of (start, end)."""
    inner = range(a + 1, b)
    for k in range(len(inner) + 1):
        for cuts in itertools.combinations(inner, k):
            points = (a, *cuts, b)
            yield tuple(zip(points, points[1:], strict=False))


@st.composite
def _costs(draw):
    n = draw(st.integers(1, 6))
    segs = [(a, b) for a in range(n) for b in range(a + 1, n + 1)]
    known = draw(st.lists(st.sampled_from(segs), unique=True))
    known = set(known) | {(a, a + 1) for a in range(n)}  # the cover estimates every unit first
    return n, {s: draw(st.floats(1.0, 1000.0)) for s in sorted(known)}


@given(_costs())
@settings(max_examples=200, deadline=None)
def test_best_split_is_the_cheapest_segmentation_of_known_segments_but_the_whole(case):
    n, cost = case
    split = best_splits(n, cost)
    for a in range(n):
        for b in range(a + 1, n + 1):
            options = [
                sum(cost[s] for s in segs)
                for segs in _segmentations(a, b)
                if len(segs) > 1 and all(s in cost for s in segs)
            ]
            want = min(options, default=math.inf)
            assert split[(a, b)] == want or math.isclose(split[(a, b)], want, rel_tol=1e-12)


def test_a_segment_is_hopeless_only_past_the_factor_and_never_a_single_unit():
    cost = {(0, 1): 10.0, (1, 2): 10.0, (0, 2): HOPELESS * 20.0 + 1}
    split = best_splits(2, cost)
    assert _hopeless((0, 2), cost, split)
    cost[(0, 2)] = HOPELESS * 20.0
    assert not _hopeless((0, 2), cost, split)
    assert not _hopeless((0, 1), cost, split)


@st.composite
def _band_case(draw):
    n = draw(st.integers(1, 7))
    cut = draw(st.sets(st.integers(1, max(1, n - 1)), max_size=2)) if n > 1 else set()
    keep = draw(st.sets(st.integers(1, max(1, n - 1)), max_size=1)) if n > 1 else set()
    keep -= cut
    segs = [(a, b) for a in range(n) for b in range(a + 1, n + 1)]
    length = draw(st.integers(1, n))
    shorter = [s for s in segs if s[1] - s[0] < length]
    skip = set(draw(st.lists(st.sampled_from(segs), unique=True, max_size=4))) if segs else set()
    estimated = {s: 1.0 for s in shorter if s not in skip}
    return n, cut, keep, length, estimated, skip


@given(_band_case())
@settings(max_examples=300, deadline=None)
def test_a_band_covers_every_reachable_segment_of_its_length_with_allowed_segmentations(case):
    n, cut, keep, length, estimated, skip = case

    def allowed(a, b):
        return not any(c in cut for c in range(a + 1, b)) and a not in keep and b not in keep

    out = band(n, allowed, length, estimated, skip)
    covered = {s for segs in out for s in segs}
    for segs in out:
        assert segs[0][0] == 0 and segs[-1][1] == n
        assert all(x[1] == y[0] for x, y in zip(segs, segs[1:], strict=False))
        for s in segs:
            assert allowed(*s) and s not in skip
            assert s[1] - s[0] in (1, length) or s in estimated
    # a wanted segment is left out only when no allowed segmentation holds it without another
    # segment that is neither wanted, estimated nor a lone unit
    wanted = {
        (a, a + length) for a in range(n - length + 1) if allowed(a, a + length) and (a, a + length) not in skip
    } - set(estimated)

    def usable(s):
        return allowed(*s) and s not in skip and (s in wanted or s in estimated or s[1] - s[0] == 1)

    for s in wanted - covered:
        assert not any(s in segs and all(usable(x) for x in segs) for segs in _segmentations(0, n))


def _units(labels_by_layer):
    """Units and op infos for layers given as (layer path or None, [unit labels])."""
    from types import SimpleNamespace

    from fuseflow.planning.units import Unit

    units, infos = [], []
    for layer, labels in labels_by_layer:
        for label in labels:
            infos.append(SimpleNamespace(path=f"{layer}.{label}" if layer else ""))
            units.append(Unit([len(infos) - 1], label))
    return units, infos


def _layer_of(path: str) -> str:
    return ".".join(path.split(".")[:2])


def test_period_is_the_longest_run_of_layers_with_the_same_units():
    from fuseflow.planning.units import period_of

    block = ["ln1", "attn", "ffn"]
    units, infos = _units([(None, ["embed"]), ("blocks.0", block), ("blocks.1", block), ("blocks.2", block)])
    assert period_of(units, infos, _layer_of) == (1, 3, 3)
    units, infos = _units([("blocks.0", block), ("blocks.1", ["ln1", "attn"]), ("blocks.2", block)])
    assert period_of(units, infos, _layer_of) is None  # no two consecutive layers alike
    units, infos = _units([("enc.0", ["a", "b"]), ("enc.1", ["a", "b"]), ("dec.0", block), ("dec.1", block)])
    assert period_of(units, infos, _layer_of) == (4, 3, 2)  # the run covering more units
    # a layer whose units are not contiguous in the order: no period
    units, infos = _units([("blocks.0", block), ("blocks.1", block), ("blocks.0", ["late"])])
    assert period_of(units, infos, _layer_of) is None
