"""torch sparse layouts map to per-level storage, read from torch's own arrays; broken ones are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fuseflow
from fuseflow.formats import Format
from fuseflow.frontend.torch_sparse import implied_format, layout_name, to_coo_array


def _dense():
    x = torch.zeros(2, 3, 4)
    x[0, 1, 2], x[0, 2, 0], x[1, 0, 3], x[1, 2, 1] = 1.0, 2.0, 3.0, 4.0
    return x


@pytest.mark.parametrize(
    "make, levels, order, name",
    [
        (lambda x: x.to_sparse(), ("compressed",) * 3, (0, 1, 2), "COO"),
        (lambda x: x.to_sparse(sparse_dim=2), ("compressed", "compressed", "dense"), (0, 1, 2), "hybrid COO (dense 1)"),
        (lambda x: x.to_sparse_csr(), ("dense", "dense", "compressed"), (0, 1, 2), "batched CSR (batch 1)"),
        (lambda x: x.to_sparse_csc(), ("dense", "dense", "compressed"), (0, 2, 1), "batched CSC (batch 1)"),
        (lambda x: x.to_sparse_csr(dense_dim=1), ("dense", "compressed", "dense"), (0, 1, 2), "hybrid CSR (dense 1)"),
        (lambda x: x.to_sparse_csc(dense_dim=1), ("dense", "compressed", "dense"), (1, 0, 2), "hybrid CSC (dense 1)"),
    ],
)
def test_nd_layouts_imply_their_levels_and_keep_their_entries(make, levels, order, name):
    x = _dense()
    t = make(x)
    assert implied_format(t, "x") == Format(levels, order)
    assert layout_name(t) == name
    arr = to_coo_array(t, "x")
    assert arr.shape == (2, 3, 4) and arr.nnz == 4  # hybrid blocks' zeros dropped
    np.testing.assert_array_equal(arr.toarray(), x.numpy())


def test_batched_bsr_is_refused_naming_the_layout():
    x = torch.zeros(2, 4, 4)
    x[:, 0, 0] = 1.0
    with pytest.raises(fuseflow.UnsupportedError, match="batched BSR .* is not supported"):
        implied_format(x.to_sparse_bsr((2, 2)), "x")


def test_coo_with_out_of_range_indices_is_refused_at_compile_time():
    bad = torch.sparse_coo_tensor(torch.tensor([[0, 5]]), torch.tensor([1.0, 2.0]), (3,), check_invariants=False)

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    with pytest.raises(fuseflow.UnsupportedError, match="input 'x': invalid COO tensor"):
        fuseflow.compile(M(), (bad,))


def test_cli_refuses_a_broken_sparse_input_with_one_line(tmp_path, capsys):
    from fuseflow.cli.main import main

    model = tmp_path / "bad.py"
    model.write_text(
        "import torch\n\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return -x\n\n"
        "def build():\n"
        "    i = torch.tensor([[0, 1], [0, 9], [0, 0]])\n"
        "    x = torch.sparse_coo_tensor(i, torch.tensor([1.0, 2.0]), (2, 3, 4), check_invariants=False)\n"
        "    return M(), (x,), {}\n"
    )
    assert main(["run", str(model)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "input 'x': invalid COO tensor" in err[0]
