"""Sparse torch inputs to `simulate` are packed from their compressed arrays, never densified;
the result equals the dense-input run exactly (same packed streams) and PyTorch."""

import numpy as np
import pytest
import torch

import fuseflow


class SpMM(torch.nn.Module):
    def forward(self, A, X):
        return torch.relu(A @ X)


@pytest.mark.parametrize("fmt", ["csr", "csc", "dcsr", "dcsc"])
@pytest.mark.parametrize("layout", ["csr", "csc", "coo"])
def test_sparse_inputs_match_dense_inputs(fmt, layout):
    gen = torch.Generator().manual_seed(1)
    A = torch.rand(30, 20, generator=gen) * (torch.rand(30, 20, generator=gen) < 0.2)
    A[3] = 0.0  # an empty row
    X = torch.rand(20, 5, generator=gen) - 0.5
    prog = fuseflow.compile(SpMM(), (A, X), formats={"A": fmt}, schedule="full")
    dense = prog.simulate()
    sparse_A = {"csr": A.to_sparse_csr(), "csc": A.to_sparse_csc(), "coo": A.to_sparse()}[layout]
    res = prog.simulate(sparse_A, X)
    res.check()
    np.testing.assert_array_equal(res.outputs[0].numpy(), dense.outputs[0].numpy())
    assert res.cycles == dense.cycles


@pytest.mark.parametrize("passes", [None, "block{size=2}"])
def test_torch_bsr_input_maps_to_bcsr(passes):
    """A square-block BSR input implies bcsr<b> (read as CSR unblocked, as blocks with `block`);
    BSC is refused naming what is supported."""
    import fuseflow

    g = torch.Generator().manual_seed(3)
    w = torch.rand(4, 6, generator=g) * (torch.rand(4, 6, generator=g) > 0.5)

    class MatMul(torch.nn.Module):
        def forward(self, a, b):
            return a @ b

    prog = fuseflow.compile(MatMul(), (w.to_sparse_bsr(blocksize=(2, 2)), torch.rand(6, 4, generator=g)), passes=passes)
    assert str(prog.imported.input_formats["a"]) == "bcsr<2>"
    prog.simulate().check()
    with pytest.raises(fuseflow.UnsupportedError, match="BSC is not supported"):
        fuseflow.compile(MatMul(), (w.to_sparse_bsc(blocksize=(2, 2)), torch.rand(6, 4)))
