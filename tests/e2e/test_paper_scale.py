"""The paper-scale study's parts: seeded stand-in graphs, sparse adjacencies end to end, and
benchmarks/figure12.py's rows, limits and chart."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import fuseflow

ROOT = Path(__file__).resolve().parents[2]

import gcn  # noqa: E402
import graphs  # noqa: E402
import graphsage  # noqa: E402


def _figure12():
    spec = importlib.util.spec_from_file_location("figure12", ROOT / "benchmarks" / "figure12.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["cora-ml", "dblp"])
def test_standins_have_the_papers_sizes_and_a_heavy_tail(name):
    nodes, entries, width, density = graphs.STANDINS[name]
    a, x = graphs.standin(name)
    assert a.shape == (nodes, nodes)
    assert abs(a.nnz - entries) <= 1
    assert (a != a.T).nnz == 0  # symmetric
    assert a.diagonal().sum() == 0  # no self loops
    deg = np.asarray(a.sum(1)).ravel()
    assert deg.max() >= 20 * np.median(deg)  # power law: hubs far above the typical node
    assert tuple(x.shape) == (nodes, width)
    assert abs(float((x != 0).float().mean()) - density) < 0.002
    again, _ = graphs.standin(name)
    assert (again != a).nnz == 0  # seeded


@pytest.mark.parametrize("build", [gcn.build, graphsage.build])
def test_a_sparse_adjacency_compiles_and_matches_pytorch(build, monkeypatch):
    """Beyond DENSE_LIMIT nodes the examples hand over a torch sparse CSR adjacency: traced as a
    zero view (never densified), simulated from its CSR arrays, checked against eager PyTorch on
    the sparse tensor."""
    monkeypatch.setattr(graphs, "DENSE_LIMIT", 1000)
    model, args, formats = build(graph="standin:cora-ml", max_features=48)
    assert args[0].layout == torch.sparse_csr
    dense_calls = []
    real = torch.Tensor.to_dense
    monkeypatch.setattr(torch.Tensor, "to_dense", lambda t, *a, **k: dense_calls.append(t.shape) or real(t, *a, **k))
    prog = fuseflow.compile(model, args, formats=formats, schedule="layer")
    assert (2995, 2995) not in dense_calls  # the adjacency is never densified to compile
    res = prog.simulate()
    res.check()
    monkeypatch.setattr(graphs, "DENSE_LIMIT", 4096)  # the same seeded graph, handed over dense
    dense_model, dense_args, _ = build(graph="standin:cora-ml", max_features=48)
    assert dense_args[0].layout == torch.strided
    same = fuseflow.compile(dense_model, dense_args, formats=formats, schedule="layer").simulate()
    assert same.cycles == res.cycles  # the layout handed over changes nothing the simulator sees


def test_speedups_and_table_from_rows():
    f12 = _figure12()
    rows = [
        {"app": "gcn", "dataset": "x", "schedule": "unfused", "cycles": 300, "estimated_cycles": 200},
        {"app": "gcn", "dataset": "x", "schedule": "layer", "cycles": 100, "estimated_cycles": 100},
        {"app": "gcn", "dataset": "x", "schedule": "full", "estimated_cycles": 400, "status": "estimate only"},
    ]
    for r in rows:
        r.setdefault("status", "ok")
        r.update(wall_s=1.0, peak_rss_gb=0.5)
    f12.speedups(rows)
    assert rows[1]["speedup"] == 3.0 and rows[1]["estimated_speedup"] == 2.0
    assert "speedup" not in rows[2] and rows[2]["estimated_speedup"] == 0.5
    text = f12.table(rows)
    assert "| gcn | x | layer | 100 | 3.0 | 100 | 2.0 |" in text
    assert "| gcn | x | full | — | — | 400 | 0.5 |" in text


def test_a_point_runs_in_its_own_process_with_its_figures(tmp_path):
    f12 = _figure12()
    out, svg = tmp_path / "f12.json", tmp_path / "f12.svg"
    argv = ["--only", "gcn", "--datasets", "cora-ml", "--schedules", "unfused,layer", "--scratch", str(tmp_path)]
    assert f12.main(argv + ["-o", str(out), "--plot", str(svg)]) == 0
    doc = json.loads(out.read_text())
    unfused, layer = doc["rows"]
    for r in doc["rows"]:
        assert r["status"] == "ok" and r["standin"] is True
        assert r["cycles"] > 0 and r["estimated_cycles"] > 0 and r["max_abs_error"] < 1e-3
        assert 0.1 < r["peak_rss_gb"] < 8 and r["wall_s"] > 0
    assert layer["speedup"] == round(unfused["cycles"] / layer["cycles"], 3)
    assert "speedup over unfused" in svg.read_text()


def test_a_point_over_its_memory_limit_is_stopped_and_says_so(tmp_path):
    f12 = _figure12()
    out = tmp_path / "f12.json"
    argv = ["--only", "gcn", "--datasets", "cora-ml", "--schedules", "unfused", "--max-rss-gb", "0.05"]
    assert f12.main(argv + ["--scratch", str(tmp_path), "-o", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["status"] == "stopped: over 0.05 GB" and "cycles" not in row
