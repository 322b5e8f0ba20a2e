"""`fuseflow dse`: the same rows from the local pool and from Ray, a second run served from the
cache, estimate pruning, JSON/Parquet/plot outputs, and one-line errors. Every simulated point is
checked against eager PyTorch inside the worker (`check()`, rtol = atol = 1e-5 x the longest
dimension); a mismatch would be a failed row."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuseflow.errors import FuseflowError
from fuseflow.executor import LocalExecutor, RayExecutor
from fuseflow.experiments.dse import load_space, pareto_plot, sweep, write_parquet

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "examples" / "gcn_layer.py")
OPTIONS = {"features": 8, "hidden": 4}
VOLATILE = ("wall_s", "cached")


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def _space(**kw):
    return load_space(None, {"schedule": ["unfused", "full"], "order": ["auto", "plain"], **kw})


def test_local_pool_and_ray_give_identical_rows_and_the_cache_serves_a_rerun(tmp_path):
    space = _space()
    local = sweep(MODEL, OPTIONS, space, LocalExecutor(jobs=2), tmp_path / "cache")
    assert len(local.rows) == 4 and all(r["status"] == "ok" for r in local.rows), local.rows
    assert local.cached == 0 and all(r["cycles"] > 0 and r["max_abs_error"] < 1e-3 for r in local.rows)
    again = sweep(MODEL, OPTIONS, space, LocalExecutor(jobs=2), tmp_path / "cache")
    assert again.cached == 4 and all(r["cached"] for r in again.rows)
    assert _stable(again.rows) == _stable(local.rows)

    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = sweep(MODEL, OPTIONS, space, RayExecutor(), cache_dir=None)
    finally:
        ray.shutdown()
    assert _stable(remote.rows) == _stable(local.rows)


def test_pruning_simulates_only_what_the_estimate_does_not_dominate(tmp_path):
    space = load_space(None, {"schedule": ["unfused", "layer", "full"], "order": ["plain"]}, prune=True)
    res = sweep(MODEL, OPTIONS, space, LocalExecutor(jobs=1), cache_dir=None)
    pruned = [r for r in res.rows if r["status"].startswith("pruned")]
    done = [r for r in res.rows if r["status"] == "ok"]
    assert pruned and done and all("cycles" not in r for r in pruned) and all("cycles" in r for r in done)
    for p in pruned:  # each pruned point is dominated by a simulated one on all three estimates
        assert any(all(d[k] <= p[k] for k in ("est_cycles", "est_mem_bytes", "est_alu_ops")) for d in done), (p, done)
    write_parquet(res.rows, tmp_path / "rows.parquet")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(tmp_path / "rows.parquet")
    assert table.num_rows == 3 and {"schedule", "cycles", "est_cycles", "status"} <= set(table.column_names)
    pareto_plot(res.rows, tmp_path / "pareto.svg")
    assert (tmp_path / "pareto.svg").read_text().lstrip().startswith("<?xml")


def test_space_toml_with_arch_parameters(tmp_path):
    toml = tmp_path / "space.toml"
    toml.write_text('[dse]\nschedule = ["layer"]\norder = "plain"\n[dse.arch_params]\nfifo_depth = [16, 1024]\n')
    space = load_space(str(toml))
    points = space.points()
    assert [dict(p.arch_params)["fifo_depth"] for p in points] == [16, 1024]
    res = sweep(MODEL, OPTIONS, space, LocalExecutor(jobs=1), cache_dir=None)
    assert [r["arch_params"] for r in res.rows] == [{"fifo_depth": 16}, {"fifo_depth": 1024}]
    assert all(r["status"] == "ok" for r in res.rows)
    toml.write_text("[dse]\nschedules = ['layer']\n")
    with pytest.raises(FuseflowError, match="unknown \\[dse\\] key 'schedules'"):
        load_space(str(toml))


def test_a_point_that_cannot_compile_is_a_failed_row_not_a_lost_sweep():
    space = load_space(None, {"schedule": ["layer"], "order": ["plain"], "block": [0, 3]})
    res = sweep(MODEL, OPTIONS, space, LocalExecutor(jobs=1), cache_dir=None)
    assert res.rows[0]["status"] == "ok"
    assert res.rows[1]["status"].startswith("failed: ") and "block size 3" in res.rows[1]["status"]


def _cli(*args):
    return subprocess.run(
        [str(Path(sys.executable).parent / "fuseflow"), *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_cli_writes_rows_and_an_unreachable_ray_is_one_line_exit_1(tmp_path):
    out = tmp_path / "rows.json"
    r = _cli("dse", MODEL, "-O", "features=8", "-O", "hidden=4", "--schedule", "layer", "--no-cache", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["points"][0]["schedule"] == "layer"
    r = _cli("dse", MODEL, "--executor", "ray", "--address", "127.0.0.1:1")
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("fuseflow: cannot reach Ray at 127.0.0.1:1")


def test_strategies_and_a_finite_fabric_are_axes_of_the_sweep():
    # gcn_layer unfused is a chain: concurrent equals sequential on an unbounded fabric; on amber
    # with its FIFO depth swept, the fabric stays (every region pays its 512-cycle configuration)
    space = load_space(
        None,
        {
            "schedule": ["unfused"],
            "order": ["plain"],
            "arch": ["comal", "amber"],
            "strategy": ["sequential", "concurrent"],
            "fifo_depth": [16],
        },
    )
    res = sweep(MODEL, OPTIONS, space, LocalExecutor(jobs=1), cache_dir=None)
    assert all(r["status"] == "ok" for r in res.rows), [r["status"] for r in res.rows]
    by = {(r["arch"], r["strategy"]): r for r in res.rows}
    assert by[("comal", "sequential")]["cycles"] == by[("comal", "concurrent")]["cycles"]
    import fuseflow
    from fuseflow.model_files import build_from_file

    model, args, formats = build_from_file(MODEL, OPTIONS)[1]
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused", order="plain")
    direct = prog.simulate(arch={"preset": "amber", "fifo_depth": 16})
    assert direct.cycles == direct.serial_cycles + 512 * len(prog.graphs)
    assert by[("amber", "sequential")]["cycles"] == direct.cycles


def test_micro_batch_strategies_are_swept_and_recorded():
    space = load_space(
        None, {"schedule": ["unfused"], "order": ["plain"], "strategy": ["sequential", "pipeline:2", "auto"]}
    )
    res = sweep(MODEL, OPTIONS, space, LocalExecutor(jobs=1), cache_dir=None)
    assert all(r["status"] == "ok" for r in res.rows), [r["status"] for r in res.rows]
    by = {r["strategy"]: r for r in res.rows}
    assert by["pipeline:2"]["split"]["k"] == 2 and "split" not in by["sequential"]
    assert by["auto"]["chosen_strategy"].startswith("auto(")
    assert by["auto"]["cycles"] <= by["sequential"]["cycles"]
    import fuseflow
    from fuseflow.model_files import build_from_file

    model, args, formats = build_from_file(MODEL, OPTIONS)[1]
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused", order="plain")
    assert by["pipeline:2"]["cycles"] == prog.simulate(strategy="pipeline:2").cycles
