"""The numpy evaluator of index notation (`sim/values.py`) against numpy written out by hand, and
its memory: an intermediate is dropped after its last consumer, so a long fused chain holds a
few arrays at a time, not one per op."""

from __future__ import annotations

import numpy as np

from fuseflow.analysis.index_notation import Access, Assign, Call, Reduce
from fuseflow.sim import values


def chain(x: Access, n: int):
    """relu(x) + x, n times over: each step reads the previous one twice."""
    e = x
    for _ in range(n):
        e = Call("add", (Call("relu", (e,)), e))
    return e


def test_a_long_chain_holds_a_few_arrays_at_a_time():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    body = chain(Access("X", ("i", "j"), 0), 40)
    asg = Assign(
        "out", ("i",), Reduce("sum", ("j",), Call("mul", (body, Access("W", ("j",), 0)))), {"i": 6, "j": 5}, None
    )
    w = rng.standard_normal(5).astype(np.float32)
    ev = values._Evaluator({"X": x, "W": w}, asg.dims)
    ev.count_uses([asg])
    held: list[int] = []
    evaluate = ev.eval

    def watched(e):
        held.append(len(ev.memo))
        return evaluate(e)

    ev.eval = watched  # type: ignore[method-assign]
    out = ev.output(asg)
    ref = x.copy()
    for _ in range(40):
        ref = np.maximum(ref, 0) + ref
    np.testing.assert_allclose(out, ref @ w, rtol=1e-5)
    assert max(held) <= 4, max(held)  # without dropping: one per op, 80 and more
    assert not ev.memo


def test_outputs_sharing_a_subexpression_are_each_right():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    shared = Call("exp", (Access("X", ("i", "j"), 0),))
    a = Assign("a", ("i", "j"), shared, {"i": 3, "j": 4}, None)
    b = Assign("b", ("i",), Reduce("max", ("j",), shared), {"i": 3, "j": 4}, None)
    c = Assign("c", ("i", "j"), Call("mul", (shared, shared)), {"i": 3, "j": 4}, None)
    out = values.region_values([a, b, c], {"X": x})
    np.testing.assert_allclose(out["a"], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(out["b"], np.exp(x).max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(out["c"], np.exp(x) ** 2, rtol=1e-5)


def test_the_work_of_a_region_counts_each_subexpression_once():
    x = Access("X", ("i", "j"), 0)
    shared = Call("exp", (x,))  # 6 x 5 = 30 elements, read twice, evaluated once
    matmul = Reduce("sum", ("j",), Call("mul", (shared, Access("W", ("j", "k"), 0))))  # i, j, k: 6 x 5 x 4
    asg = Assign(
        "out", ("i", "k"), Call("add", (matmul, Reduce("max", ("j",), shared))), {"i": 6, "j": 5, "k": 4}, None
    )
    # exp 30, the einsum 120 points (a BLAS call), the max 30, the add over (i, k) 24
    assert values.work([asg]) == 30 + 120 / values.BLAS_SPEEDUP + 30 + 24


def test_copies_named_apart_are_evaluated_once():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    # the parser names each copy of a recomputed row sum afresh: one value, one evaluation
    rows = [Reduce("sum", (v,), Call("exp", (Access("X", ("i", v), 0),))) for v in ("j", "r", "s")]
    asg = Assign(
        "out", ("i",), Call("add", (Call("add", (rows[0], rows[1])), rows[2])), {"i": 4, "j": 5, "r": 5, "s": 5}, None
    )
    one = Assign("out", ("i",), rows[0], asg.dims, None)
    assert values.work([asg]) == values.work([one]) + 2 * 4  # the two adds over i
    calls: list[int] = []
    ev = values._Evaluator({"X": x}, asg.dims)
    ev.count_uses([asg])
    reduce = ev._reduce
    ev._reduce = lambda e: calls.append(1) or reduce(e)  # type: ignore[method-assign]
    out = ev.output(asg)
    assert len(calls) == 1
    np.testing.assert_allclose(out, 3 * np.exp(x).sum(axis=1), rtol=1e-5)


def test_the_cycle_model_skips_a_region_past_the_work_limit(monkeypatch):
    x = np.ones((6, 5), dtype=np.float32)
    asg = Assign("out", ("i", "j"), Call("exp", (Access("X", ("i", "j"), 0),)), {"i": 6, "j": 5}, None)
    env: dict = {"X": x}
    monkeypatch.setattr(values, "ESTIMATE_WORK", 29.0)  # the region is 30 element operations
    assert not values.evaluate_into(env, [asg]) and "out" not in env
    monkeypatch.setattr(values, "ESTIMATE_WORK", 30.0)
    assert values.evaluate_into(env, [asg])
    np.testing.assert_allclose(env["out"], np.exp(x), rtol=1e-6)


def test_a_recomputed_reduction_named_apart_is_evaluated_once_and_released():
    """A fused region recomputes an intermediate per consumer, and the parser names each copy's
    bound variables afresh (k1, k2): alpha-equivalent, one class, but their children are other
    classes. Evaluated through whichever copy comes first, the children counted for the other
    stayed live to the end: GPT-3 Small's fused decoder held thousands of arrays (> 16 GB)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    dims = {"i": 4, "j": 5, "k1": 6, "k2": 6}

    def matmul(k: str) -> Reduce:
        return Reduce("sum", (k,), Call("mul", (Call("exp", (Access("X", ("i", k), 0),)), Access("W", (k, "j"), 0))))

    a = Assign("a", ("i", "j"), Call("relu", (matmul("k1"),)), dims, None)
    b = Assign("b", ("i", "j"), Call("neg", (matmul("k2"),)), dims, None)
    ev = values._Evaluator({"X": x, "W": w}, dims)
    ev.count_uses([a, b])  # counted through k2's copy (the last root is met first), evaluated through k1's
    out_a, out_b = ev.output(a), ev.output(b)
    ref = np.exp(x) @ w
    np.testing.assert_allclose(out_a, np.maximum(ref, 0), rtol=1e-5)
    np.testing.assert_allclose(out_b, -ref, rtol=1e-5)
    assert not ev.memo and not ev.uses
