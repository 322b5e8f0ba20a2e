"""The caches the planner's compiles share through the order ranker serve only what a fresh
evaluation would give: a region's values on the same arrays, never on other data."""

from __future__ import annotations

import numpy as np

from fuseflow.analysis.index_notation import Access, Assign, Call, Const, Reduce
from fuseflow.search.rank import OrderRanker


def _region(scale: float) -> list[Assign]:
    """t0(i) = sum_j(A(i,j) * x(j)) * scale."""
    body = Reduce("sum", ("j",), Call("mul", (Access("A", ("i", "j"), 0), Access("x", ("j",), 0))))
    return [Assign("t0", ("i",), Call("mul", (body, Const(scale))), {"i": 4, "j": 3}, None)]


def test_values_are_served_for_the_same_arrays_only():
    rng = np.random.default_rng(0)
    A, x = rng.random((4, 3), dtype=np.float32), rng.random(3, dtype=np.float32)
    shared: dict = {}
    first = OrderRanker({"A": A, "x": x}, values=shared)
    assert first._evaluate(_region(0.5))
    np.testing.assert_allclose(first.data["t0"], (A @ x) * 0.5, rtol=1e-6)
    again = OrderRanker({"A": A, "x": x}, values=shared)  # another compile, the same arrays
    assert again._evaluate(_region(0.5))
    assert again.data["t0"] is first.data["t0"]  # served, not recomputed
    other = OrderRanker({"A": A, "x": x + 1}, values=shared)  # other data under the same names
    assert other._evaluate(_region(0.5))
    np.testing.assert_allclose(other.data["t0"], (A @ (x + 1)) * 0.5, rtol=1e-6)
    close = OrderRanker({"A": A, "x": x}, values=shared)  # a constant `render` would print alike
    assert close._evaluate(_region(0.5000001))
    np.testing.assert_allclose(close.data["t0"], (A @ x) * 0.5000001, rtol=1e-6)
    assert close.data["t0"] is not first.data["t0"]
