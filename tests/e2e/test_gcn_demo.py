"""The demo's GCN layer relu(A @ (X @ W) + b) on the karate club, every op its own region."""

import json
import subprocess
import sys
from pathlib import Path

import torch
from gcn_layer import build

import fuseflow

ROOT = Path(__file__).resolve().parents[2]


def test_gcn_layer_unfused_matches_pytorch():
    model, args, formats = build()
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    assert "#sparse_tensor.encoding" in prog.mlir("linalg")
    assert prog.mlir("sam").count('"sam.graph"') == 3  # linear (mm + bias), A @ ., relu
    res = prog.simulate()
    err = res.check()  # rtol = atol = 1e-5 x longest dimension (34)
    assert err < 1e-4
    assert res.cycles == sum(r.cycles for r in res.regions) > 0
    j = res.to_json()
    assert j["total_cycles"] == res.cycles and len(j["regions"]) == 3 and j["max_abs_error"] == err


def test_declared_sparse_parameter_becomes_a_sparse_operand():
    model, args, formats = build()
    with torch.no_grad():
        model.lin.weight[model.lin.weight.abs() < 0.1] = 0.0
    prog = fuseflow.compile(model, args, formats={**formats, "lin.weight": "dcsr"})
    assert "tensor<8x16xf32, #sparse" in prog.mlir("linalg")
    prog.simulate().check()


def test_simulate_accepts_other_inputs_of_the_example_shapes():
    model, (A, X), formats = build()
    prog = fuseflow.compile(model, (A, X), formats=formats)
    X2 = torch.rand_like(X)
    res = prog.simulate(A, X2)
    assert torch.allclose(res.outputs[0], model(A, X2), rtol=1e-4, atol=1e-4)


def test_cli_run_json():
    r = subprocess.run(
        [str(Path(sys.executable).parent / "fuseflow"), "run", "examples/gcn_layer.py", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["total_cycles"] > 0 and j["max_abs_error"] < 1e-4
