"""`fuseflow.experiments`: one point runner (`point.measure`) behind studies, sweeps and the
benchmarks. Its rows carry the program's own simulated cycles and its PyTorch check
(`SimResult.check`, rtol = atol = 1e-5 x the longest dimension), a study and a dse worker
measure a point alike, and a point that fails is a row that says why."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import fuseflow
from fuseflow.experiments.evaluate import evaluate
from fuseflow.experiments.point import measure
from fuseflow.experiments.space import Point
from fuseflow.experiments.study import study

ROOT = Path(__file__).resolve().parents[2]
import gcn_layer  # noqa: E402

OPTIONS = {"features": 8, "hidden": 4}


def test_a_measured_point_is_the_programs_own_simulation_checked_against_pytorch():
    built = gcn_layer.build(**OPTIONS)
    row = measure(built, schedule="full", order="plain")
    assert row["status"] == "ok"
    model, args, formats = built
    res = fuseflow.compile(model, args, formats, schedule="full", order="plain").simulate()
    assert row["cycles"] == res.cycles and row["regions"] == 1
    want = model(*args).detach().numpy()
    assert np.allclose(res.outputs[0].numpy(), want, rtol=1e-4, atol=1e-4)
    assert 0 <= row["max_abs_error"] <= 1e-4
    assert row["estimated_cycles"] > 0 and row["alu_ops"] > 0
    assert row["mem_read_bytes"] > 0 and row["mem_write_bytes"] > 0
    assert set(row["seconds"]) == {"compile", "estimate", "simulate", "check"}


def test_estimate_only_when_the_row_says_so():
    seen = []
    row = measure(gcn_layer.build(**OPTIONS), schedule="layer", simulate=lambda r: seen.append(dict(r)) or False)
    assert row["status"] == "ok" and "cycles" not in row and row["estimated_cycles"] > 0
    assert seen and seen[0]["estimated_cycles"] == row["estimated_cycles"]


def test_failures_are_rows_not_exceptions():
    bad_schedule = measure(gcn_layer.build(**OPTIONS), schedule="no-such-schedule")
    assert bad_schedule["status"].startswith("failed: ") and "no-such-schedule" in bad_schedule["status"]

    def broken():
        raise RuntimeError("the model file's own bug")

    bug = measure(broken)
    assert bug["status"] == "failed: RuntimeError: the model file's own bug"
    assert "Traceback" in bug["traceback"]


def test_a_study_and_a_dse_worker_measure_a_point_alike():
    built = gcn_layer.build(**OPTIONS)
    rows = study(built, [("unfused", "unfused"), ("full", "full")], order="plain", arch="comal")
    by_name = {r["schedule"]: r for r in rows}
    worker = evaluate(str(ROOT / "examples" / "gcn_layer.py"), OPTIONS, Point(schedule="full", order="plain"))
    assert worker["status"] == "ok"
    assert worker["cycles"] == by_name["full"]["cycles"]
    assert worker["est_cycles"] == by_name["full"]["estimated_cycles"]
    assert worker["mem_bytes"] == by_name["full"]["mem_read_bytes"] + by_name["full"]["mem_write_bytes"]
    assert by_name["full"]["speedup_vs_unfused"] == round(by_name["unfused"]["cycles"] / by_name["full"]["cycles"], 3)
