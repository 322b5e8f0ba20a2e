"""Sparse torch inputs to `simulate` are packed from their compressed arrays, never densified;
the result equals the dense-input run exactly (same packed streams) and PyTorch."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

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

    class DenseMatMul(torch.nn.Module):  # eager PyTorch has no BSC @ dense kernel
        def forward(self, a, b):
            return a.to_dense() @ b

    bsc = fuseflow.compile(
        DenseMatMul(), (w.to_sparse_bsc(blocksize=(2, 2)), torch.rand(6, 4, generator=g)), passes=passes
    )
    assert str(bsc.imported.input_formats["a"]) == "bcsc<2>"
    bsc.simulate().check()
    with pytest.raises(fuseflow.UnsupportedError, match=r"BSR with 2x1 blocks is not supported; square blocks"):
        fuseflow.compile(MatMul(), (w.to_sparse_bsr(blocksize=(2, 1)), torch.rand(6, 4)))


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 5),
    cols=st.integers(1, 5),
    b=st.sampled_from([1, 2, 3]),
    density=st.sampled_from([0.0, 0.3, 1.0]),
    levels=st.sampled_from(["csr", "dcsr"]),
    seed=st.integers(0, 1000),
)
def test_bsr_packs_like_the_dense_blocked_packer(rows, cols, b, density, levels, seed):
    """pack_bsr reads torch/scipy BSR arrays directly; it must equal pack_blocked on the dense copy."""
    import scipy.sparse as sp

    from fuseflow.formats import Format, pack_blocked, pack_bsr, parse_format

    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(rows * b, cols * b, generator=g) * (torch.rand(rows * b, cols * b, generator=g) < density)
    bsr = sp.bsr_matrix(dense.numpy(), blocksize=(b, b))
    base = parse_format(levels, 2)
    fmt = Format(base.levels, base.mode_order)
    got, want = pack_bsr(bsr, fmt, b), pack_blocked(dense.numpy(), fmt, b)
    for x, y in zip(got.segs + got.crds, want.segs + want.crds):
        assert (x is None and y is None) or np.array_equal(x, y)
    np.testing.assert_array_equal(got.vals, want.vals)


@pytest.mark.parametrize("layout", ["bsr", "bsc"])
def test_torch_block_input_is_packed_without_densifying(monkeypatch, layout):
    import fuseflow
    import fuseflow.sim.graph as simgraph

    g = torch.Generator().manual_seed(5)
    w = torch.rand(8, 6, generator=g) * (torch.rand(4, 3, generator=g) > 0.5).repeat_interleave(2, 0).repeat_interleave(
        2, 1
    )

    class MatMul(torch.nn.Module):
        def forward(self, a, b):
            return a.to_dense() @ b  # eager PyTorch has no BSC @ dense kernel

    x = torch.rand(6, 4, generator=g)
    blocked = w.to_sparse_bsr(blocksize=(2, 2)) if layout == "bsr" else w.to_sparse_bsc(blocksize=(2, 2))
    prog = fuseflow.compile(MatMul(), (blocked, x), passes="block{size=2}", order="plain")
    dense_run = prog.simulate(w, x)

    real = simgraph.pack_blocked

    def no_dense(arr, *a, **k):
        assert tuple(arr.shape) != tuple(w.shape), "the BSR input was densified"
        return real(arr, *a, **k)

    monkeypatch.setattr(simgraph, "pack_blocked", no_dense)
    res = prog.simulate(blocked, x)
    res.check()
    assert res.cycles == dense_run.cycles
    np.testing.assert_array_equal(res.outputs[0].numpy(), dense_run.outputs[0].numpy())
