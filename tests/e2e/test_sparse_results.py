"""Sparse activations: `to_sparse*()` inside a model, or `formats=` naming an op's result, store
that intermediate in the format with its zeros dropped; consumers iterate only its nonzeros.
Outputs are compared with eager PyTorch (default tolerance: 1e-5 x the longest reduction)."""

import pytest
import sae
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow


class ToSparse(torch.nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, a, c, b):
        h = torch.relu(a - c)
        h = h.to_sparse_csr() if self.kind == "csr" else h.to_sparse()
        return h @ b


def _written(res, tensor: str) -> dict[int, int]:
    """{level: coordinates written} of `tensor`, from the simulator's writer nodes."""
    out = {}
    for r in res.regions:
        for n in r.nodes:
            if n["kind"] == "write_crd" and n["name"].endswith(f"_{tensor}") and "written" in n:
                out[len(out)] = n["written"]
    return out


def _inputs(n=6, m=8, k=5, seed=0, density=0.5):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(n, m, generator=g) * (torch.rand(n, m, generator=g) < density)
    return a, torch.rand(n, m, generator=g) * 0.5, torch.rand(m, k, generator=g)


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
@pytest.mark.parametrize("kind", ["csr", "coo"])
def test_to_sparse_inside_forward_matches_pytorch_and_stores_only_nonzeros(kind, schedule):
    args = _inputs()
    prog = fuseflow.compile(ToSparse(kind), args, formats={"a": "csr"}, schedule=schedule)
    res = prog.simulate()
    res.check()
    sam = prog.mlir("sam")
    assert '"sam.val_drop"' in sam
    assert ('"sam.crd_drop"' in sam) == (kind == "coo")  # DCSR drops empty rows too
    hidden = torch.relu(args[0] - args[1])
    consumer = prog.graphs[-1]
    stored = [t for n, t in consumer.tensors.items() if t.role == "input" and n.startswith("t")]
    assert stored and all("compressed" in t.fmt.levels for t in stored)
    name = stored[0].copy_of or next(n for n, t in consumer.tensors.items() if t is stored[0])
    levels = _written(res, name)
    assert levels[len(levels) - 1] == int(torch.count_nonzero(hidden))


class Dense(torch.nn.Module):
    def forward(self, a, c, b):
        return torch.relu(a - c) @ b


def test_declared_sparse_intermediate_makes_its_consumer_cheaper():
    args = _inputs(n=16, m=32, k=8, density=0.3)
    sparse = fuseflow.compile(Dense(), args, formats={"a": "csr", 1: "csr"}, schedule="unfused", order="plain")
    dense = fuseflow.compile(Dense(), args, formats={"a": "csr"}, schedule="unfused", order="plain")
    s_res, d_res = sparse.simulate(), dense.simulate()
    s_res.check()
    # the matmul reads the ReLU output: all 16 x 32 entries dense, only the nonzeros sparse
    assert s_res.regions[-1].cycles < d_res.regions[-1].cycles


@pytest.mark.parametrize("key", ["relu", 1, "1"])
def test_sae_relu_output_declared_csr_by_op_name_or_index(key):
    model, args, formats = sae.build(batch=4, n_in=64, n_hidden=32)
    prog = fuseflow.compile(model, args, formats={**formats, key: "csr"}, schedule="full")
    res = prog.simulate()
    res.check()
    hidden = torch.relu(model.encoder(args[0]))
    assert _written(res, "t0")[1] == int(torch.count_nonzero(hidden))


def test_module_path_names_its_output():
    model, args, formats = sae.build(batch=4, n_in=64, n_hidden=32)
    prog = fuseflow.compile(model, args, formats={**formats, "encoder": "dcsr"}, schedule="full")
    prog.simulate().check()
    assert "full.1" in prog.summary  # the encoder's output is materialised: two pieces


def test_formats_naming_no_op_or_input_is_an_error_listing_what_exists():
    model, args, formats = sae.build(batch=4, n_in=64, n_hidden=32)
    with pytest.raises(fuseflow.FormatError, match=r"formats names 'hidden'.*0:linear, 1:relu, 2:linear_1.*x, "):
        fuseflow.compile(model, args, formats={**formats, "hidden": "csr"})
    with pytest.raises(fuseflow.FormatError, match=r"formats names 7"):
        fuseflow.compile(model, args, formats={**formats, 7: "csr"})


class ToSparseInput(torch.nn.Module):
    def forward(self, a, b):
        return a.to_sparse() @ b


def test_to_sparse_of_an_input_reads_the_input():
    args = (torch.rand(3, 4) * (torch.rand(3, 4) < 0.5), torch.rand(4, 2))
    fuseflow.compile(ToSparseInput(), args).simulate().check()


class PassThrough(torch.nn.Module):
    """Returns its sparse input, a view of it, its conversions and its ReLU (copy regions)."""

    def forward(self, a, b):
        return a, b.t(), a.to_dense(), b.to_sparse_csr(), torch.relu(a)


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full", "op"])
def test_pass_through_and_conversion_outputs_are_copy_regions(schedule):
    a = torch.tensor([[1.0, 0, -2], [0, 0, 3]])
    args = (a.to_sparse_csr(), torch.rand(2, 3))
    prog = fuseflow.compile(PassThrough(), args, schedule=schedule)
    assert {"copy_out0", "copy_out1", "copy_out2", "copy_out3"} <= set(prog.summary)
    prog.simulate(*args).check()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 9),
    m=st.integers(1, 9),
    density=st.sampled_from([0.0, 0.2, 0.6, 1.0]),
    kind=st.sampled_from(["csr", "coo"]),
    schedule=st.sampled_from(["unfused", "full"]),
    seed=st.integers(0, 100),
)
def test_random_sparse_activations_match_pytorch(n, m, density, kind, schedule, seed):
    args = _inputs(n=n, m=m, k=3, seed=seed, density=density)
    prog = fuseflow.compile(ToSparse(kind), args, formats={"a": "csr"}, schedule=schedule)
    prog.simulate().check()


class ExpAfterSparse(torch.nn.Module):
    """Found by fuseflow.fuzz: the ReLU output is all zeros, so its declared-sparse form is empty,
    and exp(0.1 * (h @ w1)) is 1, not 0, where h has no entries."""

    def forward(self, x, w0, w1, w2):
        h = torch.relu(x @ w0).to_sparse_csr() @ w1
        return torch.exp(h * 0.1) @ w2


@pytest.mark.parametrize("schedule", ["unfused", "full"])
def test_a_factor_that_is_not_zero_where_absent_keeps_the_products_it_contributes_to(schedule):
    args = (
        torch.tensor([[1.0], [0.0]]),
        torch.tensor([[-2.0, -1.0]]),
        torch.tensor([[1.0], [2.0]]),
        torch.tensor([[-2.0]]),
    )
    fuseflow.compile(ExpAfterSparse(), args, schedule=schedule, order="plain").simulate().check()
