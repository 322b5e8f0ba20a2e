"""benchmarks/paper.py: FuseFlow's figures beside the paper's. The smallest tier runs every
figure; each row has the schema docs/paper.md is written from, and every point of ours was
checked against PyTorch. The paper's numbers are checked against the figures the paper states."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"figure", "app", "dataset", "config", "ours", "paper", "ratio", "source", "note"}


@pytest.fixture(scope="module")
def paper():
    spec = importlib.util.spec_from_file_location("paper_benchmark", ROOT / "benchmarks" / "paper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_smoke_tier_runs_every_figure_with_the_row_schema(paper, tmp_path):
    """Run as a user would, the points on two worker processes."""
    import os
    import subprocess
    import sys

    out, md = tmp_path / "paper.json", tmp_path / "paper.md"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "paper.py"), "--figure", "all", "--tier", "smoke"]
    cmd += ["-o", str(out), "--md", str(md), "--jobs", "2"]
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    rows = json.loads(out.read_text())["rows"]
    assert {r["figure"] for r in rows} == set(paper.FIGURES)
    for r in rows:
        assert set(r) >= KEYS, r
        assert r["source"] == "simulated" and r["ours"] is not None and r["ours"] > 0
        assert (r["ratio"] is None) == (r["paper"] is None)
        if "max_abs_error" in r:  # check() passed: within the program's tolerance of PyTorch
            assert r["max_abs_error"] < 1e-3
    fig17 = [r for r in rows if r["figure"] == "17"]
    assert min(r["ours"] for r in fig17) == 1.0  # speedup over the worst order
    assert any(r["config"].endswith("(auto)") for r in fig17)
    # splitting the query rows pays; splitting the keys, whose softmax sums every lane needs, does not
    fig15b = {r["config"].split(" (")[0]: r["ours"] for r in rows if r["figure"] == "15b"}
    assert fig15b["P = 4 at i"] > 2.0 and fig15b["P = 4 at i"] > 1.5 * fig15b["P = 4 at k"], fig15b
    assert "## Figure 12" in md.read_text() and "## Figure 17" in md.read_text()


def test_the_paper_numbers_give_the_speedups_the_paper_states():
    """GCN per-layer fusion 1.63x (Cora), 1.88x (Cora-ML), 1.49x (DBLP); full fusion about 0.30x;
    SAE full fusion 0.63-0.67x (the figures quoted from the paper in the project's issues)."""
    data = json.loads((ROOT / "benchmarks" / "paper" / "numbers.json").read_text())["figure12"]
    gcn = data["gcn"]
    partial = [u / p for u, p in zip(gcn["unfused"], gcn["partial"])][:3]
    assert [round(x, 2) for x in partial] == [1.63, 1.88, 1.49]
    assert 0.29 <= gcn["unfused"][0] / gcn["full"][0] <= 0.31
    sae = [u / f for u, f in zip(data["sae"]["unfused"], data["sae"]["full"])]
    assert all(0.63 <= x <= 0.68 for x in sae)


def test_the_paper_tier_runs_gpt3_small_on_a_raised_cycle_limit_and_reports_a_refused_schedule(paper, monkeypatch):
    """The paper tier: every figure has points, GPT runs at GPT-3 Small's geometry (here shrunk),
    with the cycle limit raised, and a schedule refused at that size is a row saying why."""
    assert set(paper.TIERS["paper"]) == set(paper.FIGURES)
    assert ("sae", "1024x1024") in paper.TIERS["paper"]["12"] and ("gcn", "ogbn-mag") in paper.TIERS["paper"]["12"]
    assert len(paper.tasks(paper.FIGURES, "paper")) == len(paper.TIERS["paper"]["12"]) + len(paper.FIGURES) - 1
    assert paper.gpt_geometry("paper") == {"seq": 1024, "d_model": 768, "heads": 12, "d_ff": 3072, "layers": 12}
    monkeypatch.setattr(paper, "GPT3_SMALL", {"seq": 32, "d_model": 16, "heads": 2, "d_ff": 32, "layers": 2})
    real, arches, calls = paper._run_gpt, [], []

    def run_gpt(model, args, formats, schedule, arch=None):
        arches.append(arch)
        calls.append(schedule)
        if len(calls) == 4:  # op, unfused, partial, then full: refused
            raise paper.fuseflow.UnsupportedError("the fused region's expression passes 200,000 operations")
        return real(model, args, formats, schedule, arch)

    monkeypatch.setattr(paper, "_run_gpt", run_gpt)
    rows = paper._gpt_rows("block16", "paper")
    assert arches == [paper.PAPER_ARCH] * 4 and paper.PAPER_ARCH["max_cycles"] >= 10**12
    by = {r["config"]: r for r in rows}
    for base in ("op", "unfused"):
        ok, refused = by[f"partial over {base}"], by[f"full over {base}"]
        assert ok["source"] == "simulated" and ok["ours"] > 1.0 and ok["max_abs_error"] < 1e-3
        assert refused["source"] == "failed" and refused["ours"] is None and refused["ratio"] is None
        assert refused["note"].startswith("full failed: the fused region's expression passes")
        assert refused["paper"] is not None  # the paper's bar stays beside ours


def test_gpt_runs_under_checkpoint_keep_their_progress_and_spill_on_request(paper, monkeypatch, tmp_path, capsys):
    """`--checkpoint DIR --spill N`: each GPT schedule keeps its finished regions (and parts) in
    its own directory under DIR with queues over N tokens on disk; run again, it takes them from
    there and gives the same cycles. Sampling does not combine with them."""
    import gpt_bigbird

    model, args, formats = gpt_bigbird.build(seq=32, d_model=16, heads=2, d_ff=32, layers=2, block=8)
    plain = paper._run_gpt(model, args, formats, "op")
    monkeypatch.setenv(paper.CHECKPOINT_ENV, f"{tmp_path}@0")
    monkeypatch.setenv(paper.SPILL_ENV, "4")
    first = paper._run_gpt(model, args, formats, "op")
    (where,) = tmp_path.iterdir()
    kept = {p: p.stat().st_mtime_ns for p in where.rglob("piece-0.json")}
    assert where.name.startswith("gpt-") and kept
    again = paper._run_gpt(model, args, formats, "op")
    assert first["cycles"] == again["cycles"] == plain["cycles"] and again["max_abs_error"] < 1e-3
    assert {p: p.stat().st_mtime_ns for p in where.rglob("piece-0.json")} == kept  # taken, not run again
    with pytest.raises(SystemExit):
        paper.main(["--figure", "12", "--tier", "smoke", "--sample", "--checkpoint", str(tmp_path)])
    assert "choose one" in capsys.readouterr().err


def test_a_point_stopped_by_the_cycle_limit_is_a_row_saying_why_and_the_others_are_measured(paper, monkeypatch):
    """GCN on the karate club under a 15,000-cycle limit: full fusion (19,733 cycles) stops at
    the limit, the other schedules (8,690-11,770) run. Figures 12 and 14 report full fusion's
    rows as failed with the simulator's reason, and every other row is simulated and checked."""
    monkeypatch.setattr(paper, "_arch", lambda tier: {"max_cycles": 15_000})
    rows = paper.figure12_point("smoke", 0, lambda msg: None) + paper.figure14("smoke", lambda msg: None)
    failed = [r for r in rows if r["source"] == "failed"]
    assert failed and all(r["ours"] is None and r["ratio"] is None for r in failed)
    assert all(r["note"].startswith("full failed: ") and "cycle limit" in r["note"] for r in failed)
    assert {r["config"] for r in failed} == {
        "full over op",
        "full over unfused",
        "full: FLOPs",
        "full: bytes",
    }
    measured = [r for r in rows if r["source"] == "simulated"]
    assert {r["config"] for r in measured} >= {
        "partial over op",
        "partial over unfused",
        "both: FLOPs",
        "layer1: bytes",
    }
    assert all(r["ours"] > 0 and r["max_abs_error"] < 1e-3 for r in measured)


def test_a_skipped_schedule_is_not_run_and_its_rows_say_so_beside_the_measured_ones(paper, monkeypatch):
    """`--skip full` on GCN at the karate club: full fusion is never compiled, its rows are
    `skipped` without a value, and partial fusion's rows are simulated."""
    real, ran = paper._run, []

    def run(model, args, formats, schedule, arch=None):
        ran.append(schedule)
        return real(model, args, formats, schedule, arch)

    monkeypatch.setattr(paper, "_run", run)
    (task,) = paper.tasks(("12",), "smoke", ("gcn",), None, ("full",))
    rows = paper.run_task(*task)
    assert "full" not in ran and {"unfused", "op", "layer"} <= set(ran)
    by = {r["config"]: r for r in rows}
    for base in ("op", "unfused"):
        skipped, measured = by[f"full over {base}"], by[f"partial over {base}"]
        assert skipped["source"] == "skipped" and skipped["ours"] is None and skipped["ratio"] is None
        assert skipped["note"] == "full not run (--skip)"
        assert measured["source"] == "simulated" and measured["ours"] > 0 and measured["max_abs_error"] < 1e-3


def test_an_unknown_schedule_to_skip_is_refused_before_anything_runs(paper, capsys):
    with pytest.raises(SystemExit) as e:
        paper.main(["--figure", "12", "--tier", "paper", "--skip", "fulll"])
    assert e.value.code == 2
    assert "--skip fulll: not a Figure 12 schedule (op, unfused, layer, partial, full)" in capsys.readouterr().err


def test_only_selects_figure12_points_in_the_order_given_and_names_the_tier_points_when_one_is_unknown(paper):
    points = paper.TIERS["paper"]["12"]
    todo = paper.tasks(("12", "17"), "paper", ("sae:1024x1024", "gcn"))
    picked = [points[k] for _, f, k, _, _ in todo if f == "12"]
    assert picked == [("sae", "1024x1024")] + [p for p in points if p[0] == "gcn"]
    assert ("paper", "17", None, None, ()) in todo
    with pytest.raises(ValueError, match="no Figure 12 point 'gcn:nowhere'.*gcn:cora"):
        paper.tasks(("12",), "paper", ("gcn:nowhere",))


def test_a_page_merged_from_several_runs_lists_each_run_and_the_rows_of_all(paper, tmp_path):
    rows = [
        paper._row("12", "gcn", "cora", "full over op", 0.3, 0.295, cycles={}),
        paper._row("17", "spgemm chain", "karate", "i,j,k,l", 1.0, None),
    ]
    runs = [
        {"command": "python benchmarks/paper.py --figure 17 --tier paper", "wall_s": 12.4, "peak_rss_gb": 1.5},
        {"command": "python benchmarks/paper.py --figure 12 --tier paper --only gcn:cora", "wall_s": 30, "note": "x"},
    ]
    page = paper.markdown(rows, "paper", 42.4, md=tmp_path / "p.md", plots=tmp_path / "plots", runs=runs)
    assert "--figure all" not in page
    assert "- `python benchmarks/paper.py --figure 17 --tier paper` (12 s, peak 1.5 GB resident)" in page
    assert "--only gcn:cora` (30 s; x)" in page
    assert "## Figure 12" in page and "## Figure 17" in page and "| gcn | cora | full over op | 0.3 |" in page
    findings = paper.ROOT / "benchmarks" / "paper"
    assert page.rstrip().endswith((findings / "findings_paper.md").read_text().rstrip())
    # a tier without findings of its own (medium) carries the general ones, as its one-run page does
    medium = paper.markdown(rows, "medium", 42.4, md=tmp_path / "m.md", plots=tmp_path / "plots", runs=runs)
    assert medium.rstrip().endswith((findings / "findings.md").read_text().rstrip())


def test_reuse_takes_a_saved_runs_cycles_and_extends_it(paper, monkeypatch):
    """`--reuse`: the schedules a saved run simulated for a Figure 12 point are not run again,
    the rows come out the same (noted as reused), and the saved run's rows of that point are
    replaced by this run's, the others kept."""
    real, calls = paper._run, []

    def counted(*args, **kwargs):
        calls.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(paper, "_run", counted)
    first = paper.figure12_point("smoke", 0, lambda msg: None)
    ran = len(calls)
    saved = {"tier": "smoke", "wall_s": 1.0, "rows": first + [paper._row("17", "x", "y", "z", 1.0, None)]}
    app, dataset = paper.TIERS["smoke"]["12"][0]
    reused = paper._reused(saved)[f"{app}:{dataset}"]
    assert set(reused) == {"unfused", "op", "layer", "full"}
    calls.clear()
    again = paper.figure12_point("smoke", 0, lambda msg: None, reused)
    assert len(calls) == ran - 4  # the four schedules of the point's own model were not simulated
    main = [r for r in first if r["note"].startswith("ours: ")]
    by = {r["config"]: r for r in again}
    for r in main:
        assert by[r["config"]]["ours"] == r["ours"]
        assert "cycles from the saved run (--reuse)" in by[r["config"]]["note"]
    merged = paper._merged(saved, again)
    assert [r["config"] for r in merged] == [r["config"] for r in saved["rows"]]
    assert merged[0] is by[first[0]["config"]] and merged[-1]["figure"] == "17"


def test_reuse_from_the_command_line_writes_the_saved_run_extended(paper, tmp_path):
    """`--reuse SAVED -o OUT`: OUT is SAVED with this run's rows in place of the same rows, its
    other rows kept, its wall time summed and this command added to its `runs`."""
    first, out = tmp_path / "first.json", tmp_path / "out.json"
    assert paper.main(["--figure", "17", "--tier", "smoke", "-o", str(first)]) == 0
    saved = json.loads(first.read_text())
    saved["rows"].append(paper._row("16", "attention", "seq 8", "kept", 2.0, None))
    first.write_text(json.dumps(saved))
    assert paper.main(["--figure", "17", "--tier", "smoke", "--reuse", str(first), "-o", str(out)]) == 0
    got = json.loads(out.read_text())
    assert [r["config"] for r in got["rows"]] == [r["config"] for r in saved["rows"]]
    assert got["rows"][-1]["config"] == "kept"
    assert len(got["runs"]) == 2 and "--reuse" in got["runs"][1]["command"]
    assert got["wall_s"] >= saved["wall_s"]
    with pytest.raises(SystemExit):  # another tier's run cannot be extended
        paper.main(["--figure", "17", "--tier", "quick", "--reuse", str(first), "-o", str(out)])


def test_merge_combines_runs_that_extended_one_saved_run_side_by_side(paper, tmp_path):
    """`--reuse SAVED --merge A,B -o OUT`: A and B each extended SAVED in its own process; OUT is
    SAVED with A's and B's changed and new rows, both runs listed, their wall times added. A JSON
    that did not extend SAVED is refused with a one-line error."""
    saved = {
        "tier": "smoke",
        "wall_s": 10.0,
        "peak_rss_gb": 1.0,
        "runs": [{"command": "first", "wall_s": 10.0, "peak_rss_gb": 1.0}],
        "rows": [
            paper._row("12", "gcn", "cora", "full over op", 0.3, 0.3),
            paper._row("16", "attention", "seq 8", "b16", 2.0, None),
        ],
    }

    def extended(command, wall, peak, rows):
        return {
            **saved,
            "runs": saved["runs"] + [{"command": command, "wall_s": wall, "peak_rss_gb": peak}],
            "rows": saved["rows"] + rows,
        }

    a = extended("a", 5.0, 3.0, [paper._row("12", "sage", "cora", "full over op", 0.25, 0.48)])
    b = extended("b", 7.0, 2.0, [paper._row("12", "gcn", "mag", "full over op", 0.11, None)])
    b["rows"][0] = paper._row("12", "gcn", "cora", "full over op", 0.31, 0.3)  # b re-ran a point SAVED had
    paths = []
    for name, data in (("saved", saved), ("a", a), ("b", b)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(data))
    out = tmp_path / "out.json"
    args = ["--tier", "smoke", "--reuse", str(paths[0]), "--merge", f"{paths[1]},{paths[2]}", "-o", str(out)]
    assert paper.main(args) == 0
    got = json.loads(out.read_text())
    assert [(r["app"], r["dataset"], r["ours"]) for r in got["rows"]] == [
        ("gcn", "cora", 0.31),
        ("attention", "seq 8", 2.0),
        ("sage", "cora", 0.25),
        ("gcn", "mag", 0.11),
    ]
    assert [r["command"] for r in got["runs"]] == ["first", "a", "b"]
    assert got["wall_s"] == 22.0 and got["peak_rss_gb"] == 3.0
    paths[1].write_text(json.dumps({**a, "runs": [{"command": "elsewhere", "wall_s": 1.0}] * 2}))
    with pytest.raises(SystemExit):
        paper.main(args)


def test_every_paper_tier_graph_has_the_papers_bars(paper):
    """Each GCN and GraphSAGE graph of the paper tier names one of the artifact's datasets, so
    its rows carry the paper's speedups (ogbn-mag's had none)."""
    for app, dataset in paper.TIERS["paper"]["12"]:
        if app in ("gcn", "sage"):
            key = "graphsage" if app == "sage" else app
            assert paper.GRAPH_NAMES.get(dataset) in paper.PAPER["figure12"][key]["datasets"], (app, dataset)


def test_gat_rows_are_marked_beyond_the_paper_with_no_paper_figure(paper, monkeypatch):
    """GAT (examples/gat.py) is a Figure 12 row the paper does not have: its speedups stand alone."""
    pytest.importorskip("torch_geometric")
    cycles = {"unfused": 400, "op": 800, "layer": 200, "full": 100}

    def run(model, args, formats, schedule, arch=None):
        return {"cycles": cycles[schedule], "alu_ops": 1, "mem_bytes": 1, "regions": 1, "max_abs_error": 0.0}

    monkeypatch.setattr(paper, "_run", run)
    rows = {r["config"]: r for r in paper._gat_rows("karate", "quick")}
    assert set(rows) == {"partial over op", "full over op", "partial over unfused", "full over unfused"}
    assert all(r["paper"] is None and r["ratio"] is None and r["note"].startswith(paper.BEYOND) for r in rows.values())
    assert rows["full over op"]["ours"] == 8.0 and rows["partial over unfused"]["ours"] == 2.0
    assert ("gat", "cora") in paper.TIERS["quick"]["12"]
