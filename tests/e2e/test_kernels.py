"""Every single-op kernel kind x operand format, compiled once, checked on random sparse data.

Data are small integers (exact in f32), so simulated outputs must equal PyTorch exactly
(tolerance 0); densities span 0 (all-zero) to 50%, with empty rows and columns.
"""

from functools import cache

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow

N, M, K = 12, 10, 7
FORMATS = ["dense", "csr", "dcsr", "csc", "coo"]


class Kernel(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, A, B):
        return self.fn(A, B)


KERNELS = {
    "spmv": (lambda A, B: A @ B, (N, M), (M,)),
    "spmm": (lambda A, B: A @ B, (N, M), (M, K)),
    "sparse_mm": (lambda A, B: torch.sparse.mm(A, B), (N, M), (M, K)),
    "spgemm": (lambda A, B: A @ B, (N, M), (M, K)),
    "mul": (lambda A, B: A * B, (N, M), (N, M)),
    "add": (lambda A, B: A + B, (N, M), (N, M)),
    "bias": (lambda A, B: A + B, (N, M), (M,)),
    "relu": (lambda A, B: torch.relu(A - B), (N, M), (N, M)),
    "scale": (lambda A, B: A * 2.5, (N, M), (N, M)),
    "rowsum": (lambda A, B: A.sum(dim=1), (N, M), (N, M)),
    "rowmax": (lambda A, B: torch.amax(A, dim=1), (N, M), (N, M)),
}
B_SPARSE = {"spgemm", "mul", "add", "relu"}  # these also declare B sparse


@cache
def program(kernel: str, fmt: str):
    fn, sa, sb = KERNELS[kernel]
    formats = {"A": fmt}
    if kernel in B_SPARSE and len(sb) == 2:
        formats["B"] = fmt
    return fuseflow.compile(Kernel(fn), (torch.zeros(sa), torch.zeros(sb)), formats=formats)


def sparse_matrix(draw, shape, density):
    vals = draw(st.lists(st.integers(-4, 4), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    keep = draw(st.lists(st.floats(0, 1), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    a = np.array(vals, dtype=np.float32) * (np.array(keep) < density)
    return torch.tensor(a.reshape(shape))


@st.composite
def operands(draw, kernel):
    _, sa, sb = KERNELS[kernel]
    density = draw(st.sampled_from([0.0, 0.01, 0.1, 0.3, 0.5]))
    A = sparse_matrix(draw, sa, density)
    if draw(st.booleans()):  # force empty rows and columns
        A[draw(st.integers(0, sa[0] - 1))] = 0
        A[:, draw(st.integers(0, sa[1] - 1))] = 0
    B = sparse_matrix(draw, sb, draw(st.sampled_from([0.05, 0.3, 1.0])))
    return A, B


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_kernel_matches_pytorch_exactly(kernel, fmt):
    prog = program(kernel, fmt)

    @settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(operands(kernel))
    def check(ab):
        A, B = ab
        res = prog.simulate(A, B)
        assert res.check(rtol=0, atol=0) == 0.0

    check()


def test_sparse_input_given_as_torch_sparse_tensor_implies_its_format():
    A = torch.tensor([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 3.0]])
    X = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    prog = fuseflow.compile(Kernel(lambda A, B: A @ B), (A.to_sparse_csr(), X))
    assert "d1 : compressed" in prog.mlir("linalg")
    res = prog.simulate(A.to_sparse_csr(), X)
    assert torch.equal(res.outputs[0], A @ X)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 64),
    m=st.integers(1, 64),
    density=st.sampled_from([0.01, 0.2, 0.5]),
    fmt=st.sampled_from(["csr", "dcsr", "csc"]),
)
def test_spmm_over_random_shapes(n, m, density, fmt):
    rng = np.random.default_rng(n * 100 + m)
    A = torch.tensor(((rng.random((n, m)) < density) * rng.integers(-3, 4, (n, m))).astype(np.float32))
    X = torch.tensor(rng.integers(-3, 4, (m, 5)).astype(np.float32))
    prog = fuseflow.compile(Kernel(lambda A, B: A @ B), (A, X), formats={"A": fmt})
    res = prog.simulate()
    assert torch.equal(res.outputs[0], A @ X)
    assert res.cycles > 0


@pytest.mark.parametrize("fmt", ["csr", "dcsr", "csc", "coo"])
@pytest.mark.parametrize("n,m", [(1, 1), (1, 4), (3, 1)])
def test_size_one_dimensions_of_sparse_operands(n, m, fmt):
    # a compressed level over a size-1 dimension is stored dense (a note says so)
    A = torch.zeros(n, m)
    A[0, 0] = 2.0
    X = torch.arange(m * 5, dtype=torch.float32).reshape(m, 5)
    prog = fuseflow.compile(Kernel(lambda A, B: A @ B), (A, X), formats={"A": fmt})
    stored_dense = fmt in ("dcsr", "coo") or (fmt == "csr" and m == 1) or (fmt == "csc" and n == 1)
    assert any("size-1 compressed level" in note for note in prog.imported.notes) == stored_dense
    for data in (A, torch.zeros(n, m)):
        assert torch.equal(prog.simulate(data, X).outputs[0], data @ X)


def test_float_data_within_stated_tolerance():
    torch.manual_seed(0)
    A = torch.rand(30, 40) * (torch.rand(30, 40) < 0.2)
    X = torch.randn(40, 8)
    prog = fuseflow.compile(Kernel(lambda A, B: A @ B), (A, X), formats={"A": "csr"})
    err = prog.simulate().check()  # rtol = atol = 1e-5 * longest dimension
    assert err < 1e-4
