"""Differential fuzzing (fuseflow.fuzz): a bounded run passes, and a failure shrinks to a minimal
model file that reproduces it."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fuseflow
from fuseflow import fuzz

ROOT = Path(__file__).resolve().parents[2]


def test_bounded_fuzz_run_finds_no_wrong_answer(tmp_path):
    """Random programs x formats x schedules x orders against eager PyTorch (SimResult.check's
    tolerance). The long run is `python -m fuseflow.fuzz --cases 10000`."""
    report = fuzz.run(40, seed=7, out=tmp_path / "repro.py")
    assert report.failure is None, (report.failure, (tmp_path / "repro.py").read_text())
    assert report.outcomes["ok"] >= 30  # most random programs compile: the fuzzer tests something


def test_a_failure_shrinks_to_a_minimal_reproducer(tmp_path):
    """An oracle that calls every program containing a softmax wrong: hypothesis must shrink the
    first such case to the single op on the smallest input, and the file must be a model file
    that `fuseflow run` accepts."""

    def oracle(case: fuzz.Case) -> str:
        if "softmax" in case.ops:
            raise fuzz.Failure("softmax is wrong (test oracle)")
        return "ok"

    out = tmp_path / "repro.py"
    report = fuzz.run(200, seed=3, out=out, check=oracle)
    assert report.failure == "softmax is wrong (test oracle)"
    text = out.read_text()
    assert "torch.softmax(h, dim=-1)" in text and text.count("h = ") == 2  # h = x, then the softmax alone
    case = fuzz.load(text.split("\n", 1)[1])
    model, args, formats = case.build()
    assert [tuple(a.shape) for a in args] == [(1, 1)]
    res = subprocess.run(
        [sys.executable, "-m", "fuseflow.cli.main", "run", str(out), "--schedule", case.SCHEDULE],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr


def test_cli_reports_counts(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "fuseflow.fuzz", "--cases", "5", "--seed", "11", "-o", str(tmp_path / "r.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cases in" in res.stdout and " ok" in res.stdout


class _Expr(torch.nn.Module):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def forward(self, x, m, w):
        return eval(self.text, {"torch": torch}, {"x": x, "m": m, "w": w})


def test_masked_value_times_an_empty_sparse_row_is_zero_not_nan():
    """mask(x, m) * w with w's row absent: the dense writer rebuilt the product from absent
    operands, -inf x 0 = NaN, where PyTorch reads m's real value (fuzz seed 101)."""
    x, m, w = torch.tensor([[1.0], [0.0]]), torch.ones(2, 1), torch.tensor([[3.0], [0.0]])
    for text in [
        "x.masked_fill(m == 0, float('-inf')) * w",
        "torch.softmax(x.masked_fill(m == 0, float('-inf')), -1) * w + m",
    ]:
        for order in ("plain", "auto"):
            prog = fuseflow.compile(_Expr(text), (x, m, w), formats={"w": "dcsr"}, schedule="full", order=order)
            prog.simulate().check()


def test_a_shared_statistic_inside_and_outside_a_gustavson_body_is_not_shared():
    """(x / x.sum(-1) @ w + x.sum(-1)).t() in the plain order: the row sum appears inside the
    Gustavson body (its row variable renamed) and outside; one shared subgraph broke the stream
    protocol (fuzz seed 202)."""
    x, w = torch.rand(3, 2), torch.rand(2, 3)
    text = "(x / x.sum(-1, keepdim=True) @ w + x.sum(dim=-1, keepdim=True)).t()"
    prog = fuseflow.compile(_Expr(text), (x, torch.ones(1), w), schedule="full", order="plain")
    prog.simulate().check()


class _Softmax3(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(torch.relu(x), dim=-1), x * 0 + (x + 1).sum(-1, keepdim=True)


def test_a_gustavson_sum_whose_body_is_not_zero_where_absent_sees_every_row():
    """sum_l(x + 1) accumulated Gustavson-style under an outer loop skipped the rows where a
    3-D x has no entries (softmax gave inf, the row sums 0; fuzz seed 101)."""
    x = torch.tensor([[[1.0, 0], [0, 0]], [[0, 2.0], [0, 0]]])
    for order in ("plain", "0", "auto"):
        prog = fuseflow.compile(_Softmax3(), (x,), formats={"x": ["dense", "compressed", "compressed"]}, order=order)
        prog.simulate().check()


class _SoftmaxTimesSparse(torch.nn.Module):
    def forward(self, x, w):
        return (torch.softmax(x, -1) * w).sum()


def test_a_summed_product_with_an_empty_sparse_factor_is_zero_not_nan():
    """sum(softmax(x) * w) with w (CSC) empty: the sum rebuilt the softmax where w is absent,
    its Gustavson denominator absent too: 1/0 x 0 = NaN (fuzz seed 101). Also over a size-1
    leading dimension, which was a loop variable in the sum and the unit elsewhere."""
    for shape in [(2, 2, 2), (1, 2, 2), (1, 3, 2, 2)]:
        x, w = torch.zeros(shape), torch.zeros(shape)
        w[..., 0, 1] = 2.0
        for wv in (torch.zeros(shape), w):
            prog = fuseflow.compile(
                _SoftmaxTimesSparse(), (x, wv), formats={"w": "csc"}, schedule="full", order="plain"
            )
            prog.simulate().check()


def test_a_case_ending_in_repeated_blocks_matches_pytorch_under_every_schedule():
    """Identical blocks with parameters of their own (exported and lowered once, copied), after
    a sparse product: the simulated output is PyTorch's under each schedule."""
    for schedule in fuzz.SCHEDULES:
        case = fuzz.Case(
            ops=["matmul", "relu"],
            rows=3,
            cols=4,
            widths=[4, 4],
            densities=[0.5, 0.5],
            formats=["csr", "dense"],
            final_sum=False,
            schedule=schedule,
            order="auto",
            seed=1,
            blocks=["linear", "gain", "softmax"],
            repeat=3,
        )
        assert "torch.nn.ModuleList(Block(g) for _ in range(3))" in case.source()
        assert fuzz.run_case(case) == "ok", schedule


def test_bounded_message_passing_fuzz_run_finds_no_wrong_answer(tmp_path):
    """Random PyG message passing with values on the edges (endpoint sums and products,
    leaky_relu, exp, sigmoid gates, edge features, GAT-like segment softmax; sum, mean or max;
    every schedule) against eager PyTorch. The long run is `python -m fuseflow.fuzz --messages`."""
    pytest.importorskip("torch_geometric")
    from fuseflow.fuzz_messages import edge_cases

    report = fuzz.run(25, seed=5, out=tmp_path / "repro.py", strategy=edge_cases())
    assert report.failure is None, (report.failure, (tmp_path / "repro.py").read_text())
    assert report.outcomes["ok"] >= 18


def test_exp_of_a_gathered_value_whose_fiber_is_zero_is_computed_not_skipped():
    """exp(P * x) * P where a source node's features are all 0: the gathered fiber is empty,
    exp(0) = 1 on every channel of that edge (found by the message-passing fuzzer: the channel
    level under a maybe-absent reference was taken as full)."""
    pytest.importorskip("torch_geometric")
    from fuseflow.fuzz_messages import EdgeCase

    case = EdgeCase(
        ops=["exp"], softmax=False, aggr="add", nodes=3, extra_edges=[(0, 2)], self_loops=False,
        heads=1, channels=2, features=1, schedule="unfused", seed=0,
    )  # fmt: skip
    assert fuzz.run_case(case) == "ok"
