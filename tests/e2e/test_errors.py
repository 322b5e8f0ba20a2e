"""Bad input gets one clear error: unsupported ops, malformed IR, unknown formats, deadlocks."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fuseflow
from fuseflow.cli.main import main as fuseflow_main

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class Sorts(torch.nn.Module):
    def forward(self, A):
        return torch.cumsum(A, dim=1)


class MatMul(torch.nn.Module):
    def forward(self, A, B):
        return A @ B


def test_unsupported_op_names_the_op_and_its_source_line():
    with pytest.raises(fuseflow.UnsupportedError) as e:
        fuseflow.compile(Sorts(), (torch.rand(4, 4),), formats={"A": "csr"})
    msg = str(e.value)
    assert "test_errors.py:" in msg or "unsupported" in msg
    assert "error:" in msg or "could not lower" in msg


class TopK(torch.nn.Module):
    def forward(self, x):
        return torch.topk(x * 2, 2).values  # the line the error must name


def test_unsupported_op_error_names_the_pytorch_op_and_its_line():
    with pytest.raises(fuseflow.UnsupportedError) as e:
        fuseflow.compile(TopK(), (torch.rand(4, 5),))
    line = TopK.forward.__code__.co_firstlineno + 1
    msg = str(e.value)
    assert msg == f"{__file__}:{line}:0: error: aten.topk is not supported (supported ops: fuseflow ops)", msg


def test_unknown_format_name_lists_the_known_ones():
    with pytest.raises(fuseflow.FormatError, match=r"unknown format 'bsr'.*csr"):
        fuseflow.compile(MatMul(), (torch.rand(4, 4), torch.rand(4, 2)), formats={"A": "bsr"})


def test_format_for_unknown_tensor_is_rejected():
    with pytest.raises(
        fuseflow.FormatError,
        match=r"formats names 'C', which is neither an argument, a parameter, an op of prog.ops\(\) \(0:matmul\) "
        r"nor a module path; arguments and parameters: A, B",
    ):
        fuseflow.compile(MatMul(), (torch.rand(4, 4), torch.rand(4, 2)), formats={"C": "csr"})


def test_wrong_arity_and_shapes_at_simulate():
    prog = fuseflow.compile(MatMul(), (torch.rand(4, 4), torch.rand(4, 2)), formats={"A": "csr"})
    with pytest.raises(fuseflow.FuseflowError, match="takes 2 arguments"):
        prog.simulate(torch.rand(4, 4))
    with pytest.raises(fuseflow.SimulationError, match=r"shape \(5, 4\)"):
        prog.simulate(torch.rand(5, 4), torch.rand(4, 2))


def test_deadlock_on_finite_fifos_is_reported_not_hung():
    prog = fuseflow.compile(MatMul(), (torch.rand(6, 6), torch.rand(6, 3)), formats={"A": "csr"})
    with pytest.raises(fuseflow.SimulationError, match=r"(?s)deadlock.*blocked nodes"):
        prog.simulate(arch={"fifo_depth": 1})


def test_run_limits_are_errors_naming_the_limit():
    prog = fuseflow.compile(MatMul(), (torch.rand(6, 6), torch.rand(6, 3)), formats={"A": "csr"})
    with pytest.raises(fuseflow.SimulationError, match=r"cycle limit reached \(max_cycles = 3"):
        prog.simulate(arch={"max_cycles": 3})
    # a limit the run stays within; check() raises past its tolerance, and float sums in another
    # order than torch's may differ in the last bits (the inputs are unseeded)
    assert prog.simulate(arch={"max_seconds": 60}).check() < 1e-5
    with pytest.raises(fuseflow.FuseflowError, match="max_seconds"):
        prog.simulate(arch={"max_seconds": 0})


def run_cli(*args, stdin=None):
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, input=stdin, cwd=ROOT)


def test_fuseflow_opt_reports_malformed_ir_with_location(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        '"sam.graph"() ({\n  %0 = "sam.root"() : () -> !sam.ref\n}) {sym_name = "g", tensors = []} : () -> ()\n'
    )
    r = run_cli("fuseflow-opt", str(bad))
    assert r.returncode == 1
    assert f"{bad}:2: error:" in r.stderr
    assert "Traceback" not in r.stderr


def test_fuseflow_opt_refuses_a_bad_pass_option_in_one_line(tmp_path):
    """Pipeline text is parsed (and its options checked) before any IR is read."""
    src = tmp_path / "in.mlir"
    src.write_text("module {}\n")
    r = run_cli("fuseflow-opt", str(src), "--pass-pipeline=builtin.module(lower-to-sam{node-budget=x})")
    assert r.returncode == 1
    assert r.stderr.strip() == "fuseflow-opt: error: pass lower-to-sam: option node-budget expects an integer, got 'x'"


def test_fuseflow_simulate_user_errors_are_one_line(tmp_path):
    r = run_cli("fuseflow", "simulate", str(tmp_path / "missing.mlir"))
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "no such file" in r.stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text("this is not mlir")
    r = run_cli("fuseflow", "simulate", str(bad))
    assert r.returncode == 1 and "Traceback" not in r.stderr and "error" in r.stderr


def test_unknown_arch_is_a_clear_error(capsys):
    rc = fuseflow_main(["run", str(ROOT / "examples" / "gcn_layer.py"), "--arch", "nosuch"])
    assert rc == 1
    assert "unknown architecture 'nosuch'" in capsys.readouterr().err


def test_diagonal_access_is_rejected_with_location():
    class Diag(torch.nn.Module):
        def forward(self, A):
            return torch.diagonal(A)

    with pytest.raises(fuseflow.FuseflowError):
        fuseflow.compile(Diag(), (torch.rand(4, 4),), formats={"A": "csr"})


def test_order_sweep_cli_reports_every_order(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    rc = fuseflow_main(
        ["order-sweep", str(ROOT / "examples" / "spgemm_chain.py"), "--cap", "3", "--json", "-o", str(out)]
    )
    import json

    result = json.loads(out.read_text())
    assert rc == 0 and result["region"] == "full" and len(result["orders"]) == 3
    assert all("cycles" in r and r["max_abs_error"] < 1e-4 for r in result["orders"])
    assert sum(r["auto"] for r in result["orders"]) <= 1


def test_run_cli_pipeline_errors_are_one_line():
    r = run_cli(
        "fuseflow", "run", str(ROOT / "examples" / "gcn_layer.py"), "--pipeline", "sam-parallelize{level=zz factor=2}"
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "no such index variable" in r.stderr
    r = run_cli("fuseflow", "run", str(ROOT / "examples" / "gcn_layer.py"), "--order", "i,q")
    assert r.returncode == 1 and "unknown index variable(s) q" in r.stderr and "Traceback" not in r.stderr


def test_fusing_decoders_whose_recomputation_multiplies_is_an_error_not_a_hang():
    """Full fusion of two GPT decoders recomputes every use of the first decoder's output inside
    the second, and the uses multiply: the expression is refused once it passes 2 x the node
    budget of operations (before: compile ran for more than 10 minutes)."""
    sys.path.insert(0, str(ROOT / "examples"))
    import gpt_bigbird

    model, args, formats = gpt_bigbird.build(seq=16, d_model=8, d_ff=16, block=8, layers=2)
    # located at the user's line (examples/gpt_bigbird.py), not inside torch's LayerNorm
    with pytest.raises(fuseflow.UnsupportedError, match=r"gpt_bigbird.py:\d+:0: error: .*passes 10,000 operations"):
        fuseflow.compile(model, args, formats=formats, schedule="full", order="plain", node_budget=5_000)


def _model_file(tmp_path, body: str, build: str) -> Path:
    path = tmp_path / "model.py"
    path.write_text(
        "import torch\n\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, a):\n"
        f"        {body}\n\n"
        "def build():\n"
        f"    {build}\n"
    )
    return path


def test_a_model_eager_pytorch_cannot_run_is_one_located_line(tmp_path, capsys):
    path = _model_file(
        tmp_path, "return a.sum(dim=0)", "return M(), (torch.eye(3).to_sparse_csr(),), {}"
    )  # torch: reductions on CSR need keepdim
    assert fuseflow_main(["run", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"{path}:5:0: error: the model fails in eager PyTorch on these inputs: RuntimeError: ")


def test_an_exception_in_a_model_files_build_is_one_located_line(tmp_path, capsys):
    path = _model_file(tmp_path, "return a", "return M(), (torch.zeros(2) @ torch.zeros(3),), {}")
    assert fuseflow_main(["run", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{path}:8:0: error: RuntimeError: ")


def test_study_refuses_an_unknown_schedule_and_runs_op(tmp_path, capsys):
    path = _model_file(tmp_path, "return torch.relu(a) * 2", "return M(), (torch.rand(3, 4),), {}")
    assert fuseflow_main(["study", str(path), "--schedules", "op,nonsense"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "fuseflow: unknown schedule 'nonsense' in --schedules; valid: unfused, layer, full, op, auto, or FILE.json/.py"
    ]
    out = tmp_path / "study.json"
    assert fuseflow_main(["study", str(path), "--schedules", "op,unfused", "-o", str(out)]) == 0
    import json

    rows = json.loads(out.read_text())["schedules"]
    assert [r["schedule"] for r in rows] == ["op", "unfused"]
    assert rows[1]["speedup_vs_unfused"] == 1.0 and rows[0]["speedup_vs_unfused"] is not None


def test_run_refuses_an_unknown_schedule_listing_the_valid_ones(tmp_path, capsys):
    path = _model_file(tmp_path, "return torch.relu(a)", "return M(), (torch.rand(3, 4),), {}")
    assert fuseflow_main(["run", str(path), "--schedule", "nonsense"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown schedule 'nonsense'; expected unfused, layer, full, op, auto" in err[0]
