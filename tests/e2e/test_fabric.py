"""The fabric: regions on a finite machine, side by side when they fit; cycles are a makespan.

Expected timelines of the scheduler are worked out by hand in the comments; simulated ones are
compared with sequential runs of the same program (identical outputs, exact sums) and with
PyTorch (`check()`, its stated tolerance).
"""

from __future__ import annotations

import json
from pathlib import Path

import gcn_layer  # noqa: E402
import gpt_bigbird  # noqa: E402
import pytest
import torch

import fuseflow
from fuseflow.errors import FuseflowError
from fuseflow.fabric.dag import Task
from fuseflow.fabric.resources import FitError
from fuseflow.fabric.run import predicted_cycles, program_tasks
from fuseflow.fabric.scheduler import FabricState, Utilization, timeline_from_durations
from fuseflow.fabric.shared_run import shared_timeline
from fuseflow.fabric.strategy import Concurrent
from fuseflow.primitives import KINDS, RESOURCE
from fuseflow.sim.arch import Arch, Fabric
from fuseflow.sim.graph import run_graph

ROOT = Path(__file__).resolve().parents[2]
SMALL_GPT = dict(seq=32, d_model=16, d_ff=32, block=8)


@pytest.fixture(scope="module")
def gpt_unfused():
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    return fuseflow.compile(model, args, formats=formats, schedule="unfused")


def _task(name, reads=(), writes=(), compute=1, memory=1):
    return Task(name, frozenset(reads), frozenset(writes), {"compute": compute, "memory": memory})


def test_every_primitive_has_a_resource_class():
    assert set(RESOURCE) == set(KINDS)
    assert set(RESOURCE.values()) == {"compute", "memory"}
    assert RESOURCE["scan"] == RESOURCE["write_val"] == "memory" and RESOURCE["alu"] == "compute"


def test_fabric_table_merges_into_a_preset_and_refuses_bad_keys():
    assert Arch.resolve("amber").fabric == Fabric(384, 128, 512)
    assert Arch.resolve("rda").fabric is None  # no table: unbounded
    a = Arch.resolve({"preset": "rda", "fabric": {"compute": 10, "memory": 4}})
    assert a.fabric == Fabric(10, 4, 0) and a.settings == Arch.resolve("rda").settings
    assert Arch.resolve({"preset": "amber", "fabric": {"compute": 30}}).fabric == Fabric(30, 128, 512)
    with pytest.raises(FuseflowError, match="fabric: unknown setting 'pe'"):
        Arch.resolve({"fabric": {"compute": 1, "memory": 1, "pe": 3}})
    with pytest.raises(FuseflowError, match="fabric.compute must be a positive integer"):
        Arch.resolve({"fabric": {"compute": 0, "memory": 1}})
    with pytest.raises(FuseflowError, match="preset 'big' is not one of"):
        Arch.resolve({"preset": "big"})


def test_scheduler_on_a_diamond_by_hand():
    # a -> (b, c) -> d. Durations a=10, b=30, c=20, d=5; every region holds 2 compute units.
    tasks = [
        _task("a", writes={"x"}, compute=2),
        _task("b", reads={"x"}, writes={"y"}, compute=2),
        _task("c", reads={"x"}, writes={"z"}, compute=2),
        _task("d", reads={"y", "z"}, compute=2),
    ]
    durations = [10, 30, 20, 5]
    seq = timeline_from_durations(tasks, durations, None, "sequential")
    assert [(s.start, s.end) for s in seq] == [(0, 10), (10, 40), (40, 60), (60, 65)]
    # unbounded, side by side: b and c both start at 10; d waits for b (ends 40)
    con = timeline_from_durations(tasks, durations, None, "concurrent")
    assert [(s.start, s.end) for s in con] == [(0, 10), (10, 40), (10, 30), (40, 45)]
    # 3 compute units: b and c cannot overlap; b (longer path) goes first; reconfig 1 per region:
    # a 0-11, b 11-42, c 42-63, d 63-69
    small = Fabric(3, 8, reconfig_cycles=1)
    one = timeline_from_durations(tasks, durations, small, "concurrent")
    assert [(s.start, s.end) for s in one] == [(0, 11), (11, 42), (42, 63), (63, 69)]
    assert one == timeline_from_durations(tasks, durations, small, "sequential")
    util = Utilization.of(one, small)
    assert util.peak == {"compute": 2, "memory": 1} and util.fraction["compute"] == pytest.approx(2 / 3)


def test_a_region_larger_than_the_fabric_never_starts():
    tasks = [_task("big", compute=5)]
    with pytest.raises(FuseflowError, match=r"1 region\(s\) never issued, first big \(does it fit"):
        timeline_from_durations(tasks, [3], Fabric(4, 4), "concurrent")


def test_sequential_on_an_unbounded_fabric_is_the_sum(gpt_unfused):
    res = gpt_unfused.simulate()
    assert res.strategy == "sequential" and res.cycles == sum(r.cycles for r in res.regions)
    ends = [0] + [s.end for s in res.timeline]
    assert [s.start for s in res.timeline] == ends[:-1]  # back to back, in program order


def test_concurrent_heads_overlap_with_identical_outputs(gpt_unfused):
    seq = gpt_unfused.simulate()
    con = gpt_unfused.simulate(strategy="concurrent")
    con.check()
    assert all(torch.equal(a, b) for a, b in zip(seq.outputs, con.outputs))
    assert con.serial_cycles == seq.cycles
    # two heads, Q/K/V and the FFN's independent pieces: measured 0.59 of the sum (69,652 / 117,383)
    assert con.cycles < 0.85 * seq.cycles
    assert max(s.end for s in con.timeline) == con.cycles
    starts = sorted((s.start, s.end) for s in con.timeline)
    assert any(b[0] < a[1] for a, b in zip(starts, starts[1:]))  # some regions overlap


def test_a_fabric_for_one_region_at_a_time_costs_at_most_sequential_plus_reconfiguration(gpt_unfused):
    need = gpt_unfused.resources()
    fabric = {"compute": max(d["compute"] for d in need.values()), "memory": max(d["memory"] for d in need.values())}
    arch = {"preset": "comal", "fabric": {**fabric, "reconfig_cycles": 100}}
    seq = gpt_unfused.simulate(arch=arch)
    con = gpt_unfused.simulate(arch=arch, strategy="concurrent")
    n = len(gpt_unfused.graphs)
    assert seq.cycles == seq.serial_cycles + 100 * n
    assert con.cycles <= seq.cycles
    caps = Arch.resolve(arch).fabric
    for _, busy in con.utilization.steps:
        assert busy["compute"] <= caps.compute and busy["memory"] <= caps.memory


def test_without_the_memory_model_a_shared_run_equals_offset_runs(gpt_unfused):
    arch = Arch.resolve("comal")
    res = gpt_unfused.simulate(arch=arch)
    cycles = [r.cycles for r in res.regions]
    tasks = program_tasks(gpt_unfused)
    predicted = predicted_cycles(gpt_unfused, gpt_unfused.example_args, arch)
    offset = timeline_from_durations(tasks, cycles, None, "concurrent", predicted)
    env = gpt_unfused.bind(gpt_unfused.example_args)
    for g in gpt_unfused.graphs:  # every intermediate, as the sequential run computed it
        env.update(run_graph(g, env, arch).outputs)
    graphs = dict(enumerate(gpt_unfused.graphs))
    state = FabricState(tasks, None, predicted, "concurrent")
    shared = shared_timeline(state, Concurrent(), graphs, {}, lambda i: env, lambda i: {}, arch)
    assert [(s.region, s.start, s.end) for s in shared] == [(s.region, s.start, s.end) for s in offset]


class TwoStreams(torch.nn.Module):
    """Two independent memory-bound regions: each reads a dense matrix and writes it scaled."""

    def forward(self, a, b):
        return a * 2.0, b * 3.0


def test_side_by_side_regions_contend_for_memory():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    prog = fuseflow.compile(TwoStreams(), (a, b), schedule="unfused")
    # one channel that takes 4 cycles per line and answers in 2: each region alone is bound by
    # its own requests (a region of 4,096 reads and 4,096 writes)
    arch = {"preset": "rda", "memory": {"channels": 1, "ii": 4, "latency": 2}}
    alone = prog.simulate(arch=arch)
    side = prog.simulate(arch=arch, strategy="concurrent")
    side.check()
    longest = max(r.cycles for r in alone.regions)
    spans = {s.region: (s.start, s.end) for s in side.timeline}
    assert all(start == 0 for start, _ in spans.values())  # both start at once
    # together they share the channel: measured 6,251 cycles against 4,236 alone (1.48x the
    # longer region) and 8,472 summed (0.74x)
    assert side.cycles > 1.3 * longest
    assert side.cycles < alone.cycles
    assert all(torch.equal(x, y) for x, y in zip(alone.outputs, side.outputs))


def test_a_region_that_does_not_fit_is_refused_with_its_demand():
    model, args, formats = gcn_layer.build()
    arch = {"preset": "rda", "fabric": {"compute": 2, "memory": 64}}
    with pytest.raises(FitError, match=r"region \S+ needs \d+ compute units; the fabric of dict has 2"):
        fuseflow.compile(model, args, formats=formats, schedule="full", arch=arch)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full")
    with pytest.raises(FitError, match="compute units"):
        prog.simulate(arch=arch)


def test_cli_run_concurrent_draws_the_timeline_and_traces_tracks(tmp_path, capsys):
    from fuseflow.cli.main import main

    png, saved, trace = tmp_path / "t.png", tmp_path / "r.json", tmp_path / "trace.json"
    model = str(ROOT / "examples" / "gcn_layer.py")
    args = ["run", model, "--arch", "amber", "--strategy", "concurrent", "--timeline", str(png), "--save", str(saved)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "strategy concurrent" in out and "makespan" in out and "512 cycles per configuration" in out
    assert png.stat().st_size > 10_000
    result = json.loads(saved.read_text())
    assert result["strategy"] == "concurrent" and len(result["timeline"]) == len(result["regions"])
    assert result["total_cycles"] == max(s["end"] for s in result["timeline"])
    assert main(["report", str(saved), "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    fabric = [e for e in events if e.get("pid") == 0 and e["ph"] == "X"]
    assert sorted(e["name"] for e in fabric) == sorted(s["region"] for s in result["timeline"])
    # regions that overlap in time sit on different tracks
    for a in fabric:
        for b in fabric:
            if a is not b and a["tid"] == b["tid"]:
                assert a["ts"] + a["dur"] <= b["ts"] or b["ts"] + b["dur"] <= a["ts"]


def test_cli_a_region_that_does_not_fit_is_one_line_and_exit_1(tmp_path, capsys):
    from fuseflow.cli.main import main

    arch = tmp_path / "tiny.toml"
    arch.write_text('[arch]\npreset = "rda"\n[arch.fabric]\ncompute = 2\nmemory = 64\n')
    assert main(["run", str(ROOT / "examples" / "gcn_layer.py"), "--schedule", "full", "--arch", str(arch)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs" in err[0] and "compute units" in err[0] and "has 2" in err[0]


def test_estimate_predicts_the_makespan_with_the_same_strategies(gpt_unfused):
    seq = gpt_unfused.estimate()
    con = gpt_unfused.estimate(strategy="concurrent")
    assert seq.cycles == seq.serial_cycles == con.serial_cycles
    assert con.cycles < 0.85 * seq.cycles
    amber = gpt_unfused.estimate(arch="amber")
    n = len(gpt_unfused.graphs)  # regions' predicted cycles are rounded one by one on the timeline
    assert abs(amber.cycles - (amber.serial_cycles + 512 * n)) <= n


def test_auto_on_a_finite_fabric_splits_what_does_not_fit():
    import gcn

    model, args, formats = gcn.build()
    # full fusion of the two-layer GCN needs 37 compute and 35 memory units; each layer fits
    arch = {"preset": "rda", "fabric": {"compute": 24, "memory": 24, "reconfig_cycles": 64}}
    with pytest.raises(FitError):
        fuseflow.compile(model, args, formats=formats, schedule="full", arch=arch)
    prog = fuseflow.compile(model, args, formats=formats, schedule="auto", arch=arch)
    assert "do not fit the fabric" in prog.plan.explain()
    cap = Arch.resolve(arch).fabric
    assert all(d["compute"] <= cap.compute and d["memory"] <= cap.memory for d in prog.resources().values())
    res = prog.simulate()
    res.check()
    assert res.cycles == res.serial_cycles + 64 * len(prog.graphs)


def test_the_demo_compares_unfused_and_auto_on_the_finite_preset(tmp_path):
    from fuseflow.cli.main import main

    out = tmp_path / "demo.json"
    model = str(ROOT / "examples" / "gcn_layer.py")
    argv = ["study", model, "--schedules", "unfused,auto", "--arch", "amber", "--strategy", "concurrent", "-o"]
    assert main([*argv, str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["arch"] == "amber" and result["strategy"] == "concurrent"
    unfused, auto = result["schedules"]
    for row in (unfused, auto):
        # one 512-cycle configuration per region at least (less the memory model's 20-cycle startup,
        # which a region started after cycle 20 of a shared run does not wait for); estimate near
        assert row["cycles"] >= row["region_cycles"] + 512 - 20
        assert 0.7 < row["estimated_cycles"] / row["cycles"] < 1.4
    assert auto["cycles"] <= unfused["cycles"]
    # the planner's lanes: more than one, and the busy units on the finite array
    assert auto["lanes"] > 1 and unfused["lanes"] == 1
    assert 0 < auto["busy"]["compute"] <= 1 and auto["busy"]["memory"] > unfused["busy"]["memory"]
    assert auto["cycles"] < 0.5 * unfused["cycles"]


def test_plan_caps_lanes_at_max_lanes_and_reports_them(tmp_path, capsys):
    from fuseflow.cli.main import main

    model = str(ROOT / "examples" / "gcn_layer.py")
    assert main(["plan", model, "--arch", "amber", "--max-lanes", "2", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["lanes"]
    assert all(row["lanes"] == "1 lane" or row["lanes"].startswith("2 lanes at") for row in found["lanes"])
    assert any(row["lanes"] != "1 lane" for row in found["lanes"])


def test_memoised_regions_keep_their_place_on_the_timeline(gpt_unfused):
    plain = gpt_unfused.simulate(strategy="concurrent")
    memo = gpt_unfused.simulate(strategy="concurrent", memo=True)
    assert any(r.memoised for r in memo.regions)  # the two heads are identical
    assert [(s.region, s.start, s.end) for s in memo.timeline] == [(s.region, s.start, s.end) for s in plain.timeline]


def test_a_region_fed_by_a_relayout_starts_when_the_relayout_ends_while_another_region_runs():
    """GraphSAGE on amber: `relayout_A` (a modelled host task, 346 cycles) feeds `r0_sum_1` and
    `r3_matmul` while `r2_linear` (~9k cycles) runs from cycle 0. The relayout's end is reported
    to the strategy at its own cycle (the engine's timer), so both start there and end long
    before `r2_linear` (they used to start only when `r2_linear` finished); values match PyTorch."""
    import graphsage

    model, args, formats = graphsage.build()
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused", arch="amber")
    res = prog.simulate(strategy="concurrent")
    res.check()
    span = {s.region: s for s in res.timeline}
    assert "relayout_A" in span, "the orders ranked for amber no longer re-lay A out: pick another case"
    alone = {r.name: r.cycles for r in prog.simulate().regions}
    assert span["relayout_A"].end == alone["relayout_A"]
    for name in ("r0_sum_1", "r3_matmul"):
        assert span[name].start == span["relayout_A"].end, (name, span[name])
        assert span[name].end < span["r2_linear"].end, (name, span[name], span["r2_linear"])
        assert span[name].end - span[name].start < 2 * alone[name], (name, span[name], alone[name])
    assert res.cycles < prog.simulate().cycles
