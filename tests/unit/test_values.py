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
