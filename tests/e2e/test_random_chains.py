"""Random chains of 2-4 einsum-style ops over random sparse/dense operands, fused into one
region, equal a numpy evaluation of the same chain (integer data: exact up to f32 rounding)."""

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.models import Chain

OPS = ["matmul", "mul", "add", "relu", "scale", "rowsum_bcast"]


def numpy_chain(ops, x, ws):
    k = 0
    for op in ops:
        if op in ("matmul", "mul", "add"):
            w = ws[k]
            k += 1
            x = x @ w if op == "matmul" else (x * w if op == "mul" else x + w)
        elif op == "relu":
            x = np.maximum(x, 0)
        elif op == "scale":
            x = x * 3.0
        else:
            x = x + x.sum(axis=1, keepdims=True)
    return x


@st.composite
def chains(draw):
    ops = draw(st.lists(st.sampled_from(OPS), min_size=2, max_size=4))
    n, m = draw(st.integers(2, 6)), draw(st.integers(2, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))

    def sparse(shape):
        dens = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
        return (rng.integers(-3, 4, shape) * (rng.random(shape) < dens)).astype(np.float32)

    x = sparse((n, m))
    ws, formats, cols = [], {"x": draw(st.sampled_from(["dense", "csr", "dcsr"]))}, m
    for op in ops:
        if op == "matmul":
            c = draw(st.integers(2, 6))
            ws.append(sparse((cols, c)))
            cols = c
        elif op in ("mul", "add"):
            ws.append(sparse((n, cols)))
        else:
            continue
        formats[f"w{len(ws) - 1}"] = draw(st.sampled_from(["dense", "csr", "dcsr", "csc"]))
    return ops, x, ws, formats


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(chains())
def test_random_fused_chain_equals_numpy(case):
    ops, x, ws, formats = case
    model = Chain(ops)
    names = ["x"] + [f"w{i}" for i in range(len(ws))]

    class Named(torch.nn.Module):  # forward's parameter names are the format keys
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, *args):
            return self.inner(*args)

    import inspect

    params = [inspect.Parameter(nm, inspect.Parameter.POSITIONAL_OR_KEYWORD) for nm in names]
    Named.forward.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + params
    )
    args = [torch.tensor(a) for a in [x, *ws]]
    prog = fuseflow.compile(Named(), args, formats=formats, schedule="full")
    assert len(prog.graphs) == 1
    got = prog.simulate().outputs[0].numpy()
    want = numpy_chain(ops, x, ws)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
