"""Micro-batches (fabric/split.py, fabric/batches.py): a region run on row ranges gives exactly
the unsplit run's rows; a consumer waits only for what it reads; `pipeline:K` and `auto` place
the pieces; bad splits are refused with one line."""

from __future__ import annotations

import functools
import importlib

import gpt_bigbird
import graphs as example_graphs
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.errors import FuseflowError
from fuseflow.fabric.batches import batched
from fuseflow.fabric.run import info_for
from fuseflow.fabric.split import SplitInfo, split_nnz, split_rows
from fuseflow.fabric.strategy import Pipeline
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import run_graph

MODELS = ["gcn_layer", "gcn", "sae", "graphsage"]
SCHEDULES = ["unfused", "layer", "full"]


@functools.cache
def _compiled(model: str, schedule: str):
    m, args, formats = importlib.import_module(model).build()
    return fuseflow.compile(m, args, formats=formats, schedule=schedule)


def _whole_runs(prog) -> dict:
    """Every tensor of a plain run, region by region (the reference the micro-batches must match)."""
    env = prog.bind(prog.example_args)
    for g in prog.graphs:
        env.update(run_graph(g, env, Arch.resolve(None)).outputs)
    return env


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    schedule=st.sampled_from(SCHEDULES),
    k=st.integers(1, 8),
    kind=st.sampled_from(["rows", "nnz"]),
)
def test_micro_batches_stack_to_the_unsplit_outputs_bit_for_bit(model, schedule, k, kind):
    prog = _compiled(model, schedule)
    env = _whole_runs(prog)
    info = info_for(prog, env)
    plan = (split_nnz if kind == "nnz" else split_rows)(info, k)
    b = batched(prog, plan, info)
    pieces: dict[str, list[tuple[int, np.ndarray]]] = {}
    for i, spec in enumerate(b.specs):
        if spec is None or b.rows[i] is None:
            continue
        run = run_graph(spec, b.inputs(i, env), Arch.resolve(None))
        for name, val in run.outputs.items():
            pieces.setdefault(name, []).append((b.rows[i][0], val))
    for name, parts in pieces.items():
        stacked = np.concatenate([v for _, v in sorted(parts, key=lambda p: p[0])], axis=0)
        assert np.array_equal(stacked, np.asarray(env[name]), equal_nan=True), name
    res = prog.simulate(strategy=Pipeline(k, kind))
    plain = prog.simulate()
    assert all(torch.equal(a, c) for a, c in zip(res.outputs, plain.outputs))
    res.check()
    if k > 1 and b.cuts:
        assert res.split is not None and res.split.k == k


def test_a_consumer_waits_for_what_it_reads():
    """GCN unfused: A @ XW reads every row of XW (all of its micro-batches), the ReLU reads its
    input row by row (the same micro-batch only)."""
    prog = _compiled("gcn", "unfused")
    env = _whole_runs(prog)
    info = info_for(prog, env)
    b = batched(prog, split_rows(info, 3), info)
    label = [t.label for t in b.tasks]
    deps = {label[i]: sorted(label[d] for d in b.deps[i]) for i in range(len(b.tasks))}
    assert deps["r1_linear#1"] == ["r0_matmul#1"]
    assert deps["r2_relu#2"] == ["r1_linear#2"]
    assert deps["r3_matmul_1#0"] == ["r2_relu#0", "r2_relu#1", "r2_relu#2"]


def test_a_region_whose_rows_are_reduced_runs_whole():
    prog = _compiled("gcn", "full")
    info = info_for(prog, prog.bind(prog.example_args))
    assert info.regions["full"] is not None  # why it is not cut
    res = prog.simulate(strategy="pipeline:4")
    assert all(s.batch is None for s in res.timeline) and res.split is not None


def test_nnz_split_balances_a_power_law_graph():
    """ogbl-collab stand-in (235,868 nodes), K = 4: equal work per micro-batch within 1.1, where
    equal rows are not."""
    adj, _ = example_graphs.standin("ogbl-collab")
    counts = np.diff(sp.csr_matrix(adj).indptr).astype(float)
    info = SplitInfo("rows", adj.shape[0], {"A": counts})
    nnz, rows = split_nnz(info, 4), split_rows(info, 4)
    assert nnz.imbalance <= 1.1
    assert sum(w for w in nnz.work) == pytest.approx(counts.sum())
    assert rows.imbalance >= nnz.imbalance


@settings(max_examples=60, deadline=None)
@given(
    work=st.lists(st.integers(0, 50), min_size=1, max_size=60),
    k=st.integers(1, 12),
)
def test_split_ranges_cover_the_rows_and_each_cut_is_near_its_share(work, k):
    info = SplitInfo("rows", len(work), {"A": np.asarray(work, float)})
    if k > len(work):
        with pytest.raises(FuseflowError, match="cannot split"):
            split_nnz(info, k)
        return
    for plan in (split_nnz(info, k), split_rows(info, k)):
        edges = [lo for lo, _ in plan.bounds] + [plan.bounds[-1][1]]
        assert edges[0] == 0 and edges[-1] == len(work) and all(a < b for a, b in zip(edges, edges[1:]))
        assert plan.k == k and sum(plan.work) == sum(work)
    plan = split_nnz(info, k)
    prefix = np.concatenate([[0], np.cumsum(work)])
    total, biggest = prefix[-1], max(work)
    for j, (lo, _) in enumerate(plan.bounds[1:], start=1):
        forced = lo in (plan.bounds[j - 1][0] + 1, len(work) - (k - j))  # kept one row per range
        assert forced or abs(prefix[lo] - j * total / k) <= biggest


@pytest.fixture(scope="module")
def sae():
    return _compiled("sae", "unfused")


def test_pipelining_a_row_local_model_overlaps_its_regions(sae):
    seq = sae.simulate()
    res = sae.simulate(strategy="pipeline:4")
    res.check()
    assert res.strategy == "pipeline:4" and res.split.k == 4
    assert res.serial_cycles == seq.serial_cycles  # the regions' own runs are the same
    assert seq.cycles / res.cycles >= 1.3
    by_region: dict[str, list] = {}
    for s in res.timeline:
        by_region.setdefault(s.region, []).append(s)
    for spans in by_region.values():  # one running copy per region, micro-batches in order
        spans.sort(key=lambda s: s.batch)
        assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    first, second = (sorted(v, key=lambda s: s.batch) for v in list(by_region.values())[:2])
    assert second[0].start < first[-1].end  # region 2 works on micro-batch 0 while region 1 goes on


def test_auto_is_never_slower_than_sequential_and_names_its_choice(sae):
    res = sae.simulate(strategy="auto")
    seq = sae.simulate()
    assert res.cycles <= seq.cycles
    assert res.strategy.startswith("auto(pipeline:")
    assert set(res.considered) >= {"sequential", "concurrent", "pipeline:2", "pipeline:4"}
    assert seq.cycles / res.cycles >= 1.3
    gcn = _compiled("gcn", "full")  # nothing to cut, nothing side by side: sequential stays
    assert gcn.simulate(strategy="auto").cycles <= gcn.simulate().cycles


def test_a_kept_configuration_is_not_loaded_again():
    """On a finite fabric a region's later micro-batches reuse the configuration its first left
    on the units, unless another region took them."""
    prog = _compiled("sae", "unfused")
    arch = {"preset": "comal", "fabric": {"compute": 400, "memory": 400, "reconfig_cycles": 100}}
    res = prog.simulate(arch=arch, strategy="pipeline:4")
    res.check()
    loads = {(s.region, s.batch): s.reconfig for s in res.timeline}
    assert all(loads[(r, 0)] == 100 for r, _ in loads)
    assert all(v == 0 for (r, b), v in loads.items() if b)


def test_micro_batches_share_the_memory_model_in_one_run():
    model, args, formats = gpt_bigbird.build(seq=32, d_model=16, d_ff=32, block=8)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    seq = prog.simulate(arch="rda")
    res = prog.simulate(arch="rda", strategy="pipeline:2")
    res.check()
    assert all(torch.equal(a, b) for a, b in zip(seq.outputs, res.outputs))
    assert any(s.batch == 1 for s in res.timeline)


class TwoStreams(torch.nn.Module):
    """Two regions that do not read each other."""

    def forward(self, a, b):
        return a * 2.0, b * 3.0


class OutOfOrder(fuseflow.Strategy):
    """Issues micro-batch 0 of the second region before that of the first."""

    name = "out-of-order"

    def split(self, info):
        return split_rows(info, 2)

    def schedule(self, ctx):
        ctx.issue([t for t in ctx.tasks if t.batch == 0][1])


def test_a_micro_batch_run_out_of_program_order_is_refused():
    args = (torch.rand(8, 4), torch.rand(8, 4))
    prog = fuseflow.compile(TwoStreams(), args, schedule="unfused")
    with pytest.raises(FuseflowError, match=r"#0 was issued before r0_mul#0: a micro-batch runs its regions"):
        prog.simulate(strategy=OutOfOrder())


class Gappy(fuseflow.Strategy):
    name = "gappy"

    def split(self, info):
        return fuseflow.SplitPlan("rows", ((0, 3), (5, info.extent)), (3.0, 1.0))


def test_a_split_that_misses_rows_is_refused(sae):
    with pytest.raises(FuseflowError, match="contiguous"):
        sae.simulate(strategy=Gappy())


@pytest.mark.parametrize("bad", ["pipeline:0", "pipeline:x", "pipeline:2:cols"])
def test_a_malformed_pipeline_is_one_line(bad):
    with pytest.raises(FuseflowError) as e:
        fuseflow.fabric.strategy.resolve(bad)
    assert "\n" not in str(e.value)


def test_more_micro_batches_than_rows_is_refused():
    prog = _compiled("gcn_layer", "unfused")
    with pytest.raises(FuseflowError, match="cannot split 34 rows into 35"):
        prog.simulate(strategy="pipeline:35")


class WithTemplate(fuseflow.Strategy):
    """Runs one region as a hand-built graph (`template`), the rest as compiled."""

    name = "with-template"

    def __init__(self, region: str, template):
        self.region, self.template = region, template

    def schedule(self, ctx):
        for task in ctx.tasks:
            ctx.issue(task, template=self.template if task.region == self.region else None)
            ctx.wait()


def _gcn_layer_and_lanes():
    m, args, formats = importlib.import_module("gcn_layer").build()
    prog = fuseflow.compile(m, args, formats=formats, schedule="unfused", order="plain")
    lanes = fuseflow.compile(
        m, args, formats=formats, schedule="unfused", order="plain", passes="sam-parallelize{level=i factor=4}"
    )
    return prog, lanes


def test_a_template_runs_in_place_of_its_region_and_is_checked(tmp_path):
    """The 4-lane graph of the aggregation, handed over as a file, replaces the compiled one on
    the timeline; its cycles are its own run's."""
    prog, lanes = _gcn_layer_and_lanes()
    path = tmp_path / "lanes.sam.mlir"
    path.write_text(lanes.sam_text)
    region = "r1_matmul"
    res = prog.simulate(strategy=WithTemplate(region, str(path)))
    res.check()
    span = next(s for s in res.timeline if s.region == region)
    alone = run_graph(next(g for g in lanes.graphs if g.name == region), _whole_runs(prog), Arch.resolve(None))
    assert span.template == region and span.cycles == alone.cycles
    assert alone.cycles < next(r.cycles for r in res.regions if r.name == region)
    assert res.to_json()["timeline"][1]["template"] == region


def test_a_template_that_computes_something_else_is_a_mismatch(tmp_path):
    prog, _ = _gcn_layer_and_lanes()
    wrong = prog.sam_text.replace('op = "relu"', 'op = "abs"')  # the ReLU region takes |x|
    assert wrong != prog.sam_text
    with pytest.raises(fuseflow.MismatchError, match="template r2_relu in place of region r2_relu writes other"):
        prog.simulate(strategy=WithTemplate("r2_relu", wrong))


def test_a_template_with_other_tensors_is_refused():
    prog, _ = _gcn_layer_and_lanes()
    other = prog.graphs[0]  # r0_linear: reads X and the weights, not A
    with pytest.raises(FuseflowError, match="template r0_linear does not read A, which region r1_matmul does"):
        prog.simulate(strategy=WithTemplate("r1_matmul", other))
    with pytest.raises(FuseflowError, match="no such file"):
        prog.simulate(strategy=WithTemplate("r1_matmul", "missing.sam.mlir"))


def test_the_planner_confirms_its_finalists_under_a_strategy():
    from fuseflow.compiler import plan

    m, args, formats = importlib.import_module("sae").build()
    found = plan(m, args, formats, strategy="pipeline:4")
    simulated = [c for c in found.candidates if c.simulated_cycles is not None]
    assert simulated and found.chosen.simulated_cycles == min(c.simulated_cycles for c in simulated)
    assert found.program.simulate(strategy="pipeline:4").cycles == found.chosen.simulated_cycles


def test_estimate_places_micro_batches_and_names_autos_choice(sae):
    """The cycle model's preview splits too: each micro-batch estimated on its own rows."""
    seq = sae.estimate()
    piped = sae.estimate(strategy="pipeline:4")
    assert piped.split is not None and piped.split.k == 4
    assert {s.batch for s in piped.timeline} == {0, 1, 2, 3}
    assert piped.cycles < seq.cycles
    auto = sae.estimate(strategy="auto")
    assert auto.strategy.startswith("auto(pipeline:") and auto.cycles <= piped.cycles
