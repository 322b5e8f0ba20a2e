"""Scalar results: full reductions of sparse inputs return 0-d tensors, as eager PyTorch does,
under every schedule and order (issue 15, item 1). Tolerance: check()'s default, rtol = atol =
1e-5 x the longest dimension."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fuseflow


class SumSq(torch.nn.Module):
    def forward(self, x):
        return (x * x).sum()


class Mean(torch.nn.Module):
    def forward(self, x):
        return x.mean()


class TwoScalars(torch.nn.Module):
    """Two full reductions in one region, the second reading x against its storage order."""

    def forward(self, x):
        return x.sum(), (x @ x.T).sum()


def _x(rows=6, cols=5, density=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(rows, cols, generator=g) * (torch.rand(rows, cols, generator=g) < density)


@pytest.mark.parametrize("order", ["auto", "plain"])
@pytest.mark.parametrize("schedule", ["unfused", "full"])
@pytest.mark.parametrize("model", [SumSq(), Mean(), TwoScalars()], ids=["sumsq", "mean", "two"])
def test_full_reductions_are_0d_and_match_pytorch(model, schedule, order):
    x = _x()
    prog = fuseflow.compile(model, (x,), {"x": "csr"}, schedule=schedule, order=order)
    res = prog.simulate()
    res.check()
    want = model(x)
    want = want if isinstance(want, tuple) else (want,)
    assert [tuple(o.shape) for o in res.outputs] == [()] * len(want)
    for got, w in zip(res.outputs, want):
        assert torch.allclose(got, w, rtol=1e-5, atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.floats(0.0, 1.0), st.integers(0, 2**16))
def test_sum_of_squares_of_random_sparse_inputs(rows, cols, density, seed):
    x = _x(rows, cols, density, seed)
    prog = fuseflow.compile(SumSq(), (x,), {"x": "csr"})
    res = prog.simulate()
    res.check()
    assert res.outputs[0].shape == () and torch.allclose(res.outputs[0], (x * x).sum(), rtol=1e-5, atol=1e-5)
