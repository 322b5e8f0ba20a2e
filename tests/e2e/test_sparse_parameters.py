"""Modules may hold torch sparse parameters and buffers: they are traced like sparse inputs (a
zero view, the format implied by the layout), bound from their stored entries, and the simulated
outputs match eager PyTorch running the same module (tolerance: `check()`'s, rtol = atol = 1e-5 x
the longest reduction)."""

import numpy as np
import pytest
import scipy.sparse
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow


def _sparse_linear(n_in: int, n_out: int, density: float, layout: str, seed: int = 0) -> torch.nn.Sequential:
    gen = torch.Generator().manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(n_in, n_out), torch.nn.ReLU())
    w = m[0].weight.detach() * (torch.rand(n_out, n_in, generator=gen) < density)
    w[0] = 0.0  # an empty row
    sparse = w.to_sparse_csr() if layout == "csr" else w.to_sparse_csc()
    m[0].weight = torch.nn.Parameter(sparse, requires_grad=False)
    return m


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_a_sparse_weight_is_bound_from_its_stored_entries(layout):
    m = _sparse_linear(12, 9, 0.3, layout)
    x = torch.rand(5, 12)
    prog = fuseflow.compile(m, (x,), schedule="full")
    assert prog.imported.input_formats["0.weight"].levels == ("dense", "compressed")
    bound = prog.imported.param_values["0.weight"]
    assert scipy.sparse.issparse(bound) and bound.nnz == m[0].weight._nnz()  # never densified
    res = prog.simulate(x)
    res.check()
    want = torch.relu(x @ m[0].weight.to_dense().T + m[0].bias).detach().numpy()
    np.testing.assert_allclose(res.outputs[0].numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_sparse_buffer_in_a_custom_module_and_the_planner():
    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            w = torch.rand(7, 10) * (torch.rand(7, 10) < 0.4)
            self.register_buffer("w", w.to_sparse_csr())

        def forward(self, x):
            return torch.relu(torch.mm(x, self.w.t())) * 2.0

    x = torch.rand(3, 10)
    for schedule in ("unfused", "auto"):
        prog = fuseflow.compile(Masked(), (x,), schedule=schedule)
        prog.simulate(x).check()


def test_a_sparse_weight_eager_pytorch_cannot_use_is_one_located_error():
    """A COO weight in nn.Linear fails in eager PyTorch itself: refused at compile time in one line
    naming torch's error, never simulated to some other value. (No source line: the failing frame
    is torch's own nn.Linear, not the user's code.)"""
    m = torch.nn.Sequential(torch.nn.Linear(6, 4))
    m[0].weight = torch.nn.Parameter(m[0].weight.detach().to_sparse(), requires_grad=False)
    with pytest.raises(fuseflow.EagerError, match="fails in eager PyTorch") as e:
        fuseflow.compile(m, (torch.rand(2, 6),))
    assert "\n" not in str(e.value) and "addmm_sparse_dense" in str(e.value)


def test_a_large_sparse_weight_is_never_densified(monkeypatch):
    """20,000 x 20,000 with 400 entries: dense it would take 1.6 GB; every dense view of it is
    refused here, so a densification anywhere fails the test."""
    n = 20_000
    idx = torch.randint(0, n, (2, 400), generator=torch.Generator().manual_seed(3))
    w = torch.sparse_coo_tensor(idx, torch.rand(400), (n, n)).coalesce().to_sparse_csr()
    m = torch.nn.Linear(n, n, bias=False, device="meta")
    m.weight = torch.nn.Parameter(w, requires_grad=False)
    real = torch.Tensor.to_dense

    def refuse(t, *a, **k):
        assert t.numel() < 10**7, f"densified a {tuple(t.shape)} tensor"
        return real(t, *a, **k)

    monkeypatch.setattr(torch.Tensor, "to_dense", refuse)
    x = torch.rand(2, n)
    prog = fuseflow.compile(m, (x,), schedule="full")
    prog.simulate(x).check()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_in=st.integers(2, 16),
    n_out=st.integers(2, 16),
    density=st.floats(0.0, 1.0),
    layout=st.sampled_from(["csr", "csc"]),
    seed=st.integers(0, 1000),
)
def test_random_sparse_weights_match_pytorch(n_in, n_out, density, layout, seed):
    m = _sparse_linear(n_in, n_out, density, layout, seed)
    x = torch.rand(3, n_in, generator=torch.Generator().manual_seed(seed))
    fuseflow.compile(m, (x,), schedule="full").simulate(x).check()


def test_sae_with_sparse_weights_matches_pytorch():
    """examples/sae.py's `sparse_weights`: weights built as torch CSR parameters, never dense."""
    import sae

    model, args, formats = sae.build(batch=4, n_in=96, n_hidden=24, sparse_weights=True)
    assert model.encoder.weight.layout == torch.sparse_csr
    prog = fuseflow.compile(model, args, formats=formats, schedule="full")
    assert {prog.imported.input_formats[w].levels for w in ("encoder.weight", "decoder.weight")} == {
        ("dense", "compressed")
    }
    prog.simulate().check()
