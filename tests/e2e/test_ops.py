"""The op table is true: every listed op compiles and matches PyTorch; anything else is reported
with its line before torch-mlir runs; docs/ops.md is the table."""

from pathlib import Path

import pytest
import torch

import fuseflow
from fuseflow.cli.main import main as fuseflow_main
from fuseflow.frontend.ops import COMPOSITES, SUPPORTED, graph_name, markdown

ROOT = Path(__file__).resolve().parents[2]


class Expr(torch.nn.Module):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def forward(self, a, b, c, m, ids):
        return eval(self.text, {"torch": torch}, {"a": a, "b": b, "c": c, "m": m, "ids": ids})


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(4, 6, generator=g) * (torch.rand(4, 6, generator=g) < 0.5)
    a[0, 0] = 0.5  # no empty mask row: a fully masked softmax row is NaN in PyTorch too, but noisy
    m = (torch.rand(4, 6, generator=g) < 0.5).float()
    m[:, 0] = 1.0
    return a, torch.rand(6, 5, generator=g), torch.rand(4, 6, generator=g), m, torch.tensor([0, 2, 2, 5])


@pytest.mark.parametrize("entry", SUPPORTED, ids=[s.name for s in SUPPORTED])
def test_every_listed_op_compiles_and_matches_pytorch(entry):
    model = Expr(entry.example)
    args = _inputs()
    ep = torch.export.export(model, args)
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    names = {graph_name(n.target) for n in ep.run_decompositions(get_decomposition_table()).graph.nodes}
    assert entry.name in names, f"{entry.example!r} does not use {entry.name}: {sorted(names)}"
    prog = fuseflow.compile(model, args, formats={"a": "csr", "m": "csr"}, schedule="full")
    res = prog.simulate()
    res.check()  # default tolerance: rtol = atol = 1e-5 x the longest reduction


@pytest.mark.parametrize("example", [e for _, e in COMPOSITES], ids=[n for n, _ in COMPOSITES])
def test_every_listed_composite_compiles_and_matches_pytorch(example):
    prog = fuseflow.compile(Expr(example), _inputs(), formats={"a": "csr", "m": "csr"})
    prog.simulate().check()


class TwoBad(torch.nn.Module):
    def forward(self, x):
        y = torch.cumsum(x, dim=1)  # first unsupported line
        return torch.sort(y, dim=1).values  # second unsupported line


def test_every_unsupported_op_is_reported_with_its_line_before_torch_mlir():
    with pytest.raises(fuseflow.UnsupportedError) as e:
        fuseflow.compile(TwoBad(), (torch.rand(4, 5),))
    first = TwoBad.forward.__code__.co_firstlineno + 1
    msg = str(e.value)
    assert msg.startswith(f"{__file__}:{first}:0: error: aten.cumsum is not supported (supported ops: fuseflow ops)")
    assert f"{__file__}:{first + 1}:0: error: aten.sort is not supported" in msg


def test_cli_unsupported_op_is_one_located_line_and_exit_1(tmp_path, capsys):
    model = tmp_path / "topk.py"
    model.write_text(
        "import torch\n\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.topk(x * 2, 2).values\n\n"
        "def build():\n"
        "    return M(), (torch.rand(4, 5),), {}\n"
    )
    assert fuseflow_main(["run", str(model)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{model}:5:0: error: aten.topk is not supported (supported ops: fuseflow ops)"]


def test_docs_ops_md_is_the_table():
    assert (ROOT / "docs" / "ops.md").read_text() == markdown()


def test_cli_ops_lists_every_op_and_format(capsys):
    assert fuseflow_main(["ops"]) == 0
    out = capsys.readouterr().out
    for s in SUPPORTED:
        assert s.name in out
    for f in ("csr", "dcsc", "bcsr<b>", "coo"):
        assert f in out


class ThreeNorm(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.vector_norm(x, 3, dim=1)  # an order fuseflow does not decompose


@pytest.mark.parametrize("order", [1, 2, float("inf")])
def test_vector_norms_of_orders_1_2_and_inf_match_pytorch(order):
    x = torch.randn(5, 6)

    class Norm(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.vector_norm(x, order, dim=1, keepdim=True) * x

    fuseflow.compile(Norm(), (x,)).simulate().check()


def test_a_vector_norm_of_another_order_is_refused_with_its_line():
    with pytest.raises(fuseflow.UnsupportedError) as e:
        fuseflow.compile(ThreeNorm(), (torch.rand(4, 5),))
    line = ThreeNorm.forward.__code__.co_firstlineno + 1
    assert str(e.value).startswith(f"{__file__}:{line}:0: error: aten.linalg_vector_norm is not supported")
