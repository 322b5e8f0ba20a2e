"""The window engine reproduces the event engine exactly: cycles, outputs (bit for bit) and every
node's counters, on compiled graphs that use every primitive kind and both timing presets; and
`engine="auto"` falls back to the event engine when the window engine cannot run a graph."""

import gcn_layer
import gpt_bigbird
import graphsage
import kernels
import numpy as np
import pytest
import spgemm_chain
from hypothesis import HealthCheck, given, settings
from test_kernels import KERNELS, operands, program
from test_parallelize import attention

import fuseflow
from fuseflow.sim import graph as sim_graph


def assert_same_runs(a, b):
    assert [r.cycles for r in a.regions] == [r.cycles for r in b.regions]
    for ra, rb in zip(a.regions, b.regions):
        assert len(ra.nodes) == len(rb.nodes)
        for na, nb in zip(ra.nodes, rb.nodes):
            assert na.keys() == nb.keys()
            for k in na:
                if isinstance(na[k], np.ndarray):
                    np.testing.assert_array_equal(na[k], nb[k], err_msg=f"{ra.name}/{na['name']}/{k}")
                else:
                    assert na[k] == nb[k], f"{ra.name}/{na['name']}/{k}: {na[k]} != {nb[k]}"
    for oa, ob in zip(a.outputs, b.outputs):
        np.testing.assert_array_equal(oa.numpy(), ob.numpy())


def both(prog, *args, **kw):
    ev = prog.simulate(*args, engine="event", **kw)
    win = prog.simulate(*args, engine="window", **kw)
    simulated = lambda res: {r.engine for r in res.regions if r.engine != "model"}  # noqa: E731 (re-layouts are modelled)
    assert simulated(ev) == {"event"} and simulated(win) == {"window"}
    assert_same_runs(ev, win)
    return win


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_every_kernel_kind_and_format_runs_the_same(kernel):
    for fmt in ("dense", "csr", "csc", "coo"):
        prog = program(kernel, fmt)

        @settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(operands(kernel))
        def check(ab):
            both(prog, *ab).check(rtol=0, atol=0)  # noqa: B023  (called right below, in this iteration)

        check()


def compiled(build, schedule="full", passes=None, order=None, **kw):
    model, args, formats = build(**kw)
    return fuseflow.compile(model, args, formats=formats, schedule=schedule, passes=passes, order=order)


@pytest.mark.parametrize(
    "arch",
    ["comal", "sam", {"latency": 2, "kinds": {"alu": {"latency": 3, "ii": 2}}}],
    ids=["comal", "sam", "latency-ii"],
)
@pytest.mark.parametrize("spans", [False, True], ids=["counters", "spans"])
def test_fused_gcn_layer_runs_the_same_under_every_timing(arch, spans):
    # Without spans the window engine batches the bookkeeping of consecutive progress steps
    # (Stepped::run_until); with spans it does it per step (run_each): both must match the event engine.
    both(compiled(gcn_layer.build), arch=arch, spans=spans).check()


@pytest.mark.parametrize(
    "arch",
    [
        "sam",
        "comal",
        {"latency": 2, "kinds": {"scan": {"ii": 2}, "load": {"latency": 3}, "reduce": {"ii": 3}, "repeat": {"ii": 2}}},
        {"fifo_depth": 96},
    ],
    ids=["sam", "comal", "latency-ii", "fifo-96"],
)
@pytest.mark.parametrize("kernel,order", [("sddmm", "i,j,k"), ("sddmm", "j,i,k"), ("spmm", "i,k,j")])
def test_bulk_runs_over_dense_fibers_run_the_same(kernel, order, arch, monkeypatch):
    # The window engine advances dense fibers, loads, ALUs, reductions and repeats many steps per
    # call (their `bulk` runs); the runs stop at stops, at tokens not yet visible, at full FIFOs.
    monkeypatch.setattr(sim_graph, "WINDOW_MIN_FIFO_DEPTH", 1)  # try the window engine on shallow FIFOs too
    model, args, formats = kernels.build(kernel=kernel, n=24, k=40, density=0.2)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", order={"full": order})
    ev = prog.simulate(arch=arch, engine="event")
    win = prog.simulate(arch=arch)  # the window engine, or the event engine once a FIFO fills
    assert_same_runs(ev, win)
    win.check(rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order", ["i,l,k,j", "k,l,i,j", "i,j,k,l"])
def test_spgemm_chain_orders_run_the_same(order):
    # Gustavson spacc, outer product (order-2 spacc), and recomputed inner products
    both(compiled(spgemm_chain.build, order=order)).check()


@pytest.mark.parametrize(
    "passes", [None, "sam-parallelize{level=i factor=4}", "block{size=16}"], ids=["plain", "lanes", "tiles"]
)
def test_masked_attention_runs_the_same(passes):
    # union/intersect/reduce-max/exp/div; fork and join; tile loads, ALUs and accumulators
    both(compiled(attention, passes=passes, seq=32, d=16, block=16)).check()


def test_gpt_block_with_fuseflow_schedule_runs_the_same():
    model, args, formats = gpt_bigbird.build(seq=32, d_model=16, heads=2, d_ff=32, block=16)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    prog = fuseflow.compile(model, args, formats=formats, schedule=gpt_bigbird.schedules(prog.op_infos)["fuseflow"])
    both(prog).check()


def test_recorded_traces_are_the_same():
    prog = compiled(gcn_layer.build)
    ev, win = prog.simulate(engine="event", record=True), prog.simulate(engine="window", record=True)
    assert ev.traces == win.traces


def test_auto_picks_window_for_deep_fifos_and_event_for_memory_or_shallow_fifos():
    prog = compiled(gcn_layer.build)
    assert {r.engine for r in prog.simulate().regions if r.engine != "model"} == {"window"}
    assert {r.engine for r in prog.simulate(arch="rda").regions if r.engine != "model"} == {"event"}
    assert {r.engine for r in prog.simulate(arch={"fifo_depth": 4}).regions if r.engine != "model"} == {"event"}


def test_auto_falls_back_to_the_event_engine_when_a_fifo_fills(monkeypatch):
    prog = compiled(gcn_layer.build)
    want = prog.simulate(arch={"fifo_depth": 2}, engine="event")
    monkeypatch.setattr(sim_graph, "WINDOW_MIN_FIFO_DEPTH", 1)  # let auto try the window engine on depth 2
    got = prog.simulate(arch={"fifo_depth": 2})
    assert {r.engine for r in got.regions if r.engine != "model"} == {"event"}
    assert_same_runs(want, got)
    with pytest.raises(fuseflow.SimulationError, match="window engine cannot run this graph: a FIFO filled up"):
        prog.simulate(arch={"fifo_depth": 2}, engine="window")


@pytest.mark.parametrize("spans", [False, True], ids=["counters", "spans"])
def test_auto_hands_the_run_to_the_event_engine_before_a_fifo_fills(spans, monkeypatch):
    # The SpMM's accumulator lags its scans: with 400-token FIFOs a backlog builds up, and at the
    # window where a FIFO could fill (before its consumer is four 64-cycle windows behind), the
    # event engine takes the run over from the window engine's state. Everything matches an
    # event-engine run from cycle 0.
    monkeypatch.setattr(sim_graph, "WINDOW_MIN_FIFO_DEPTH", 1)
    handed: list = []
    real = sim_graph._build

    def build(*args):
        g = real(*args)

        class Seen:  # the extension's graph, noting where each run changed engines
            window_capable = g.window_capable

            def run(self, *a):
                res = g.run(*a)
                handed.append((res.get("event_from"), res["cycles"]))
                return res

        return Seen()

    monkeypatch.setattr(sim_graph, "_build", build)
    model, args, formats = kernels.build(kernel="spmm", n=200, k=200, density=0.2)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full")
    arch = {"fifo_depth": 400}
    ev = prog.simulate(arch=arch, engine="event", spans=spans)
    handed.clear()
    got = prog.simulate(arch=arch, spans=spans)
    assert [r.engine for r in got.regions if r.engine != "model"] == ["window+event"]
    assert [0 < at < cycles for at, cycles in handed] == [True]  # mid-run, not from the start
    assert_same_runs(ev, got)  # spans too, when recorded: they are node fields
    assert all("spans" in nd for r in got.regions for nd in r.nodes) == spans
    got.check(rtol=1e-5, atol=1e-5)
    with pytest.raises(fuseflow.SimulationError, match="a FIFO filled up"):  # the window engine alone refuses
        prog.simulate(arch={"fifo_depth": 300}, engine="window")


@pytest.mark.parametrize("spans", [False, True], ids=["counters", "spans"])
def test_the_window_engine_runs_backpressure_when_the_full_fifos_consumers_are_buffered(spans):
    # SAE's fused decoder lags its encoder: with 10,000-token FIFOs they fill and the producers
    # stall on output for 639k node-cycles. Each FIFO that could fill holds more tokens than its
    # consumer pops in a window, so the consumer runs first and the producer sees its pops at
    # their cycles: the window engine alone runs it, exactly as the event engine does.
    import sae

    model, args, formats = sae.build(batch=8, n_in=4096, n_hidden=256)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full")
    arch = {"fifo_depth": 10_000}
    ev = prog.simulate(arch=arch, engine="event", spans=spans)
    assert sum(nd["stall_output"] for r in ev.regions for nd in r.nodes) > 100_000  # real backpressure
    win = prog.simulate(arch=arch, engine="window", spans=spans)
    assert [r.engine for r in win.regions] == ["window"]
    assert_same_runs(ev, win)
    assert (prog.simulate(arch=arch).regions[0].engine, sim_graph.WINDOW_MIN_FIFO_DEPTH <= 10_000) == ("window", True)
    # 500 tokens: even the shortest window (64 cycles) needs a filling FIFO to hold 256 tokens
    # more than its consumer has popped, and a FIFO fills before that
    shallow = {"fifo_depth": 500}
    with pytest.raises(fuseflow.SimulationError, match="a FIFO filled up at node"):
        prog.simulate(arch=shallow, engine="window")
    got = prog.simulate(arch=shallow)  # auto: below WINDOW_MIN_FIFO_DEPTH the event engine runs it
    assert [r.engine for r in got.regions] == ["event"] and sim_graph.WINDOW_MIN_FIFO_DEPTH > 500
    win.check()


@pytest.mark.parametrize("depth", [600, 2_000, 6_000])
def test_shallower_fifos_run_in_shorter_windows_exactly(depth):
    """The window shrinks with the FIFO depth (an eighth of it, at least 64 cycles), so a FIFO
    that could fill in a window still holds more than its consumer pops in one: SAE's fused
    decoder at 600-6,000-token FIFOs (0.75-2.2M node-cycles stalled on output) runs on the
    window engine alone, every counter as the event engine's."""
    import sae

    model, args, formats = sae.build(batch=8, n_in=4096, n_hidden=256)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full")
    arch = {"fifo_depth": depth}
    ev = prog.simulate(arch=arch, engine="event")
    assert sum(nd["stall_output"] for r in ev.regions for nd in r.nodes) > 700_000
    got = prog.simulate(arch=arch)
    assert [r.engine for r in got.regions] == ["window"]
    assert_same_runs(ev, got)


def test_unknown_engine_is_named():
    with pytest.raises(fuseflow.SimulationError, match="unknown simulation engine 'fast'"):
        compiled(gcn_layer.build).simulate(engine="fast")


@pytest.mark.parametrize(
    "arch",
    [
        "comal",
        {"latency": 2, "kinds": {"intersect": {"ii": 2, "latency": 3}, "union": {"ii": 3}}},
        {"fifo_depth": 8},
    ],
    ids=["comal", "latency-ii", "fifo-8"],
)
@pytest.mark.parametrize("kernel", ["mul", "add", "spgemm"])
def test_joiner_runs_over_two_fibers_run_the_same(kernel, arch, monkeypatch):
    # Two-operand intersections and unions advance many steps per call in the window engine: a
    # step consumes one side or both and emits nothing (a skip) or one token per port; one side
    # may sit at a stop while the other drains. Runs stop at stops, D, unseen tokens, full FIFOs.
    monkeypatch.setattr(sim_graph, "WINDOW_MIN_FIFO_DEPTH", 1)  # try the window engine on shallow FIFOs too
    prog = program(kernel, "csr")

    @settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(operands(kernel))
    def check(ab):
        ev = prog.simulate(*ab, arch=arch, engine="event")
        win = prog.simulate(*ab, arch=arch)  # the window engine, or the event engine once a FIFO fills
        assert_same_runs(ev, win)
        win.check(rtol=0, atol=0)

    check()


def test_joiners_of_three_to_five_operands_run_the_same():
    # GraphSAGE fused: unions of 2, 3 and 5 operands and an intersection of 4, with fan-out
    both(compiled(graphsage.build)).check()


@pytest.mark.parametrize(
    "arch",
    ["comal", {"latency": 2, "kinds": {"spacc": {"ii": 2, "latency": 3}}}, {"fifo_depth": 8}],
    ids=["comal", "latency-ii", "fifo-8"],
)
@pytest.mark.parametrize("order", ["i,k,j", "k,i,j"], ids=["gustavson", "outer-product"])
def test_spacc_accumulating_runs_run_the_same(order, arch, monkeypatch):
    # Scalar spaccs (order 1 under Gustavson, order 2 under the outer product) accumulate many
    # steps per call in the window engine; the runs stop at stops, D and unseen tokens.
    monkeypatch.setattr(sim_graph, "WINDOW_MIN_FIFO_DEPTH", 1)  # try the window engine on shallow FIFOs too
    model, args, formats = kernels.build(kernel="spmm", n=24, k=40, density=0.2)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", order={"full": order})
    ev = prog.simulate(arch=arch, engine="event")
    win = prog.simulate(arch=arch)  # the window engine, or the event engine once a FIFO fills
    assert_same_runs(ev, win)
    win.check(rtol=1e-5, atol=1e-5)
