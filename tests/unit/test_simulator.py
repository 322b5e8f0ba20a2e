"""The C++ simulator on hand-built graphs: stream contents, protocol, backpressure, deadlock."""

import os

import numpy as np
import pytest

from fuseflow import _simulator
from fuseflow.sim.graph import check_protocol

I = lambda *a: np.array(a, dtype=np.int64)  # noqa: E731
F = lambda *a: np.array(a, dtype=np.float32)  # noqa: E731


def spmv_graph(depth: int, parent: bool = True):
    """x(i) = sum_j B(i,j) c(j): B 4x4 DCSR rows 0:(0->1, 2->2), 2:(1->3), 3:(0->4, 3->5); c {0:10, 3:20}."""
    g = _simulator.Graph(depth, 1)
    rb = g.add_node("root", "rootB", [], {})
    bi = g.add_node("scan", "Bi", [(rb, 0)], {"format": "compressed", "seg": I(0, 3), "crd": I(0, 2, 3)})
    bj = g.add_node("scan", "Bj", [(bi, 0)], {"format": "compressed", "seg": I(0, 2, 3, 5), "crd": I(0, 2, 1, 0, 3)})
    rc = g.add_node("root", "rootc", [], {})
    sig = g.add_node("repsiggen", "sig", [(bi, 1)], {})
    rep = g.add_node("repeat", "rep", [(rc, 0), (sig, 0)], {})
    cj = g.add_node("scan", "cj", [(rep, 0)], {"format": "compressed", "seg": I(0, 2), "crd": I(0, 3)})
    it = g.add_node("intersect", "ij", [(bj, 1), (cj, 1), (bj, 0), (cj, 0)], {})
    lb = g.add_node("load", "lB", [(it, 1)], {"vals": F(1, 2, 3, 4, 5)})
    lc = g.add_node("load", "lc", [(it, 2)], {"vals": F(10, 20)})
    m = g.add_node("alu", "mul", [(lb, 0), (lc, 0)], {"op": "mul"})
    r = g.add_node("reduce", "red", [(m, 0)] + ([(bi, 1)] if parent else []), {"kind": "sum"})
    g.add_node("write_crd", "x0", [(bi, 1)], {})
    g.add_node("write_val", "xv", [(r, 0)], {})
    return g, [lb, lc, m, r]


def edge(res, src, dst):
    names = [n["name"] for n in res["nodes"]]
    for t in res["traces"]:
        if names[t["src"]] == src and names[t["dst"]] == dst:
            return t["tokens"]
    raise KeyError((src, dst))


def test_spmv_streams_follow_the_sam_protocol():
    g, vals = spmv_graph(10_240_000)
    res = g.run(100_000, True, vals)
    assert edge(res, "Bi", "sig") == [0, 2, 3, "S0", "D"]
    assert edge(res, "Bj", "ij") == [0, 2, "S0", 1, "S0", 0, 3, "S1", "D"]
    assert edge(res, "ij", "lB") == [0, "S0", "S0", 3, 4, "S1", "D"]
    assert edge(res, "red", "xv") == [10.0, 0.0, 140.0, "S0", "D"]
    for t in res["traces"]:
        assert check_protocol(t["tokens"]) is None, t
    w = {n["name"]: n for n in res["nodes"]}
    assert list(w["x0"]["crd"]) == [0, 2, 3] and list(w["x0"]["seg"]) == [0, 3]
    assert list(w["xv"]["vals"]) == [10.0, 0.0, 140.0]


def test_depth_one_fifos_give_same_outputs_and_more_cycles():
    # without the reduce's parent input the graph has no reconvergent fan-out around the reduce
    g1, _ = spmv_graph(10_240_000, parent=False)
    r1 = g1.run(100_000, False, [])
    g2, _ = spmv_graph(1, parent=False)
    r2 = g2.run(100_000, False, [])
    out = lambda r: [list(n.get("vals", [])) + list(n.get("crd", [])) for n in r["nodes"]]  # noqa: E731
    assert out(r1) == out(r2)
    assert r2["cycles"] > r1["cycles"]


def test_counters_count_alu_ops_and_reductions():
    g, _ = spmv_graph(10_240_000)
    nodes = {n["name"]: n for n in g.run(100_000, False, [])["nodes"]}
    assert nodes["mul"]["alu_ops"] == 3
    assert nodes["red"]["reductions"] == 3
    assert nodes["lB"]["mem_read_bytes"] == 12


def test_reconvergent_fanout_with_depth_one_fifos_reports_deadlock():
    g = _simulator.Graph(1, 1)
    r = g.add_node("root", "root", [], {})
    s = g.add_node("scan", "scan_i", [(r, 0)], {"format": "dense", "dim": 8})
    v = g.add_node("load", "vals", [(s, 0)], {"vals": F(*range(8))})
    red = g.add_node("reduce", "sum_i", [(v, 0)], {"kind": "sum"})
    a = g.add_node("alu", "mix", [(red, 0), (v, 0)], {"op": "add"})
    g.add_node("write_val", "out", [(a, 0)], {})
    with pytest.raises(_simulator.SimError, match=r"(?s)deadlock.*sum_i \(reduce\).*mix \(alu\)"):
        g.run(100_000, False, [])


def test_fanout_reconverging_at_a_reduce_deadlocks_with_depth_one_fifos():
    g, _ = spmv_graph(1, parent=True)
    with pytest.raises(_simulator.SimError, match=r"(?s)deadlock.*red \(reduce\)"):
        g.run(100_000, False, [])


@pytest.mark.parametrize("engine", ["event", "window"])
def test_cycle_limit_is_an_error_not_a_hang(engine):
    g, _ = spmv_graph(10_240_000)
    with pytest.raises(_simulator.SimError, match=r"cycle limit reached \(max_cycles = 5; raise it in \[arch\]\)"):
        g.run(5, False, [], engine=engine)


@pytest.mark.parametrize("engine", ["event", "window"])
def test_a_run_past_max_seconds_stops_naming_the_limit(engine):
    """A run that cannot finish (2^40 coordinates) under a huge cycle limit: the wall-clock limit
    stops it, whatever the machine's speed."""
    g = _simulator.Graph({"max_seconds": 1})
    r = g.add_node("root", "root", [], {})
    s = g.add_node("scan", "rows", [(r, 0)], {"format": "dense", "dim": 1 << 40})
    g.add_node("write_crd", "w", [(s, 1)], {})
    with pytest.raises(_simulator.SimError, match=r"time limit reached: the run took longer than max_seconds = 1 s"):
        g.run(1 << 46, False, [], engine=engine)


def test_a_cycle_limit_past_what_a_fifo_entry_stamps_is_refused():
    """Queued tokens carry their cycle in 48 bits (token.h: kMaxCycle)."""
    g, _ = spmv_graph(10_240_000)
    with pytest.raises(ValueError, match=r"max_cycles = 1152921504606846976 is above 2\^47"):
        g.run(1 << 60, False, [])


def test_malformed_compressed_level_is_refused_when_built():
    """seg must start at >= 0, never decrease and end within crd (found by the builder fuzz: a
    scan read past its crd array)."""
    g = _simulator.Graph(4, 1)
    r = g.add_node("root", "root", [], {})
    bad = [(I(12, 20), I()), (I(0, 2, 1), I(0, 1, 2)), (I(-1, 1), I(0)), (I(0, 3), I(0, 1))]
    for seg, crd in bad:
        with pytest.raises(ValueError, match="scan 's'"):
            g.add_node("scan", "s", [(r, 0)], {"format": "compressed", "seg": seg, "crd": crd})


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_nodes_reading_one_array_share_it():
    """A region reads one tensor from thousands of scanners and loads (GPT-3 Small's cross-decoder
    region: 123,041 nodes); 200 loads of one 8 MB array take one copy, not 200 (1.6 GB)."""
    vals = np.arange(2_000_000, dtype=np.float32)
    g = _simulator.Graph(10_240_000, 1)
    r = g.add_node("root", "root", [], {})
    s = g.add_node("scan", "rows", [(r, 0)], {"format": "dense", "dim": 4})
    g.add_node("load", "first", [(s, 0)], {"vals": vals})
    before = _resident_bytes()
    for k in range(200):
        g.add_node("load", f"l{k}", [(s, 0)], {"vals": vals})
    assert _resident_bytes() - before < 100 << 20


def test_a_reused_buffer_with_new_contents_is_not_shared():
    """Sharing is keyed by the buffer's address: a buffer changed in place between two nodes (or
    freed and reallocated at the same address) must give the second node its new values."""
    vals = F(1, 2, 3, 4)
    g = _simulator.Graph(10_240_000, 1)
    r = g.add_node("root", "root", [], {})
    s = g.add_node("scan", "rows", [(r, 0)], {"format": "dense", "dim": 4})
    a = g.add_node("load", "a", [(s, 0)], {"vals": vals})
    vals[:] = F(10, 20, 30, 40)
    b = g.add_node("load", "b", [(s, 0)], {"vals": vals})
    g.add_node("write_val", "wa", [(a, 0)], {})
    g.add_node("write_val", "wb", [(b, 0)], {})
    w = {n["name"]: n for n in g.run(1000, False, [])["nodes"]}
    assert list(w["wa"]["vals"]) == [1, 2, 3, 4]
    assert list(w["wb"]["vals"]) == [10, 20, 30, 40]


@pytest.mark.parametrize("engine", ["event", "window"])
def test_reference_past_an_array_names_the_node_and_the_reference(engine):
    # a dense scan of 4 refs into a load holding 3 values: the 4th ref (3) is out of range
    g = _simulator.Graph(10_240_000, 1)
    r = g.add_node("root", "root", [], {})
    s = g.add_node("scan", "rows", [(r, 0)], {"format": "dense", "dim": 4})
    v = g.add_node("load", "vals", [(s, 0)], {"vals": F(1, 2, 3)})
    g.add_node("write_val", "out", [(v, 0)], {})
    with pytest.raises(_simulator.SimError, match=r"^load 'vals': reference 3 out of range \(3 entries\)$"):
        g.run(1000, False, [], engine=engine)


@pytest.mark.parametrize("engine", ["event", "window"])
def test_tokens_piling_up_in_fifos_stop_the_run_with_the_fullest_named(engine):
    # a dense scan emits a coordinate per cycle; its writer takes one every 100 cycles
    g = _simulator.Graph({"fifo_depth": 10_240_000, "max_fifo_mib": 1, "kinds": {"write_crd": {"ii": 100}}})
    r = g.add_node("root", "root", [], {})
    s = g.add_node("scan", "rows", [(r, 0)], {"format": "dense", "dim": 1 << 20})
    g.add_node("write_crd", "slow", [(s, 1)], {})
    with pytest.raises(_simulator.SimError, match=r"(?s)more than max_fifo_mib = 1 MiB.*rows -> slow: \d+ tokens"):
        g.run(10_000_000, False, [], engine=engine)


def test_window_engine_refuses_a_node_acting_after_the_last_writer():
    # 'idle' feeds no writer and keeps scanning after 'w' has finished: the event engine stops
    # at w's end, so the window engine's counters for 'idle' would differ; it must say so.
    def graph():
        g = _simulator.Graph(10_240_000, 1)
        r = g.add_node("root", "root", [], {})
        s = g.add_node("scan", "rows", [(r, 0)], {"format": "dense", "dim": 2})
        g.add_node("write_crd", "w", [(s, 1)], {})
        g.add_node("scan", "idle", [(r, 0)], {"format": "dense", "dim": 5000})
        return g

    assert graph().run(100_000, False, [], engine="event")["cycles"] < 100
    with pytest.raises(_simulator.WindowUnsafe, match="'idle' acts after the last writer finished"):
        graph().run(100_000, False, [], engine="window")


def test_unread_outputs_store_nothing():
    # the scan's ref output has no reader: 1M tokens would pass a 1 MiB limit if they were kept
    g = _simulator.Graph({"fifo_depth": 10_240_000, "max_fifo_mib": 1})
    r = g.add_node("root", "root", [], {})
    s = g.add_node("scan", "rows", [(r, 0)], {"format": "dense", "dim": 1 << 20})
    g.add_node("write_crd", "w", [(s, 1)], {})
    res = g.run(10_000_000, False, [], engine="window")
    assert len(res["nodes"][2]["crd"]) == 1 << 20


def test_crd_drop_removes_empty_fibers_and_writers_follow_parents():
    # outer 0 1 2 S0 D; inner 5 S0 S0 6 S1 D (coordinate 1 has an empty fiber)
    g = _simulator.Graph(64, 1)
    r = g.add_node("root", "root", [], {})
    o = g.add_node("scan", "outer", [(r, 0)], {"format": "compressed", "seg": I(0, 3), "crd": I(0, 1, 2)})
    i = g.add_node("scan", "inner", [(o, 0)], {"format": "compressed", "seg": I(0, 1, 1, 2), "crd": I(5, 6)})
    d = g.add_node("crd_drop", "drop", [(o, 1), (i, 1)], {})
    g.add_node("write_crd", "w0", [(d, 0)], {})
    g.add_node("write_crd", "w1", [(d, 1), (d, 0)], {})
    res = g.run(1000, True, [])
    assert edge(res, "drop", "w0") == [0, 2, "S0", "D"]
    assert edge(res, "drop", "w1") == [5, "S0", 6, "S1", "D"]
    w = {n["name"]: n for n in res["nodes"]}
    assert list(w["w1"]["seg"]) == [0, 1, 2] and list(w["w1"]["crd"]) == [5, 6]


def test_union_emits_empty_tokens_and_loads_of_them_are_zero():
    g = _simulator.Graph(64, 1)
    ra = g.add_node("root", "ra", [], {})
    rb = g.add_node("root", "rb", [], {})
    a = g.add_node("scan", "a", [(ra, 0)], {"format": "compressed", "seg": I(0, 2), "crd": I(0, 2)})
    b = g.add_node("scan", "b", [(rb, 0)], {"format": "compressed", "seg": I(0, 2), "crd": I(2, 3)})
    u = g.add_node("union", "u", [(a, 1), (b, 1), (a, 0), (b, 0)], {})
    la = g.add_node("load", "la", [(u, 1)], {"vals": F(1, 2)})
    lb = g.add_node("load", "lb", [(u, 2)], {"vals": F(10, 20)})
    s = g.add_node("alu", "add", [(la, 0), (lb, 0)], {"op": "add"})
    g.add_node("write_crd", "w0", [(u, 0)], {})
    g.add_node("write_val", "wv", [(s, 0)], {})
    res = g.run(1000, True, [la, lb, s])
    assert edge(res, "u", "la") == [0, 1, "N", "S0", "D"]
    w = {n["name"]: n for n in res["nodes"]}
    assert list(w["w0"]["crd"]) == [0, 2, 3]
    assert list(w["wv"]["vals"]) == [1.0, 12.0, 20.0]
    assert edge(res, "u", "lb") == ["N", 0, 1, "S0", "D"]


def test_spacc_order_2_accumulates_across_the_reduced_fibers():
    # X(k,l) = sum_j T(j,k,l): T dense 2x2x2 of ones -> all 2.0; order (j, k, l)
    g = _simulator.Graph(64, 1)
    r = g.add_node("root", "r", [], {})
    j = g.add_node("scan", "j", [(r, 0)], {"format": "dense", "dim": 2})
    k = g.add_node("scan", "k", [(j, 0)], {"format": "dense", "dim": 2})
    l_ = g.add_node("scan", "l", [(k, 0)], {"format": "dense", "dim": 2})
    v = g.add_node("load", "v", [(l_, 0)], {"vals": F(*range(1, 9))})
    acc = g.add_node("spacc", "acc", [(k, 1), (l_, 1), (j, 1), (v, 0)], {"order": 2, "kind": "sum"})
    g.add_node("write_crd", "w0", [(acc, 0)], {})
    g.add_node("write_crd", "w1", [(acc, 1), (acc, 0)], {})
    g.add_node("write_val", "wv", [(acc, 2)], {})
    res = g.run(1000, False, [])
    w = {n["name"]: n for n in res["nodes"]}
    assert list(w["w0"]["crd"]) == [0, 1]
    assert list(w["w1"]["seg"]) == [0, 2, 4]
    assert list(w["wv"]["vals"]) == [1 + 5, 2 + 6, 3 + 7, 4 + 8]


def test_bad_node_parameters_raise_value_error():
    g = _simulator.Graph(4, 1)
    with pytest.raises(ValueError, match="unknown primitive kind"):
        g.add_node("transpose", "t", [], {})
    r = g.add_node("root", "r", [], {})
    with pytest.raises(ValueError, match="unknown ALU op"):
        g.add_node("alu", "a", [(r, 0)], {"op": "pow"})
    with pytest.raises(ValueError, match="unknown node"):
        g.add_node("scan", "s", [(7, 0)], {"format": "dense", "dim": 2})


def test_progress_reports_cycles_and_can_stop_a_long_run(monkeypatch):
    import sys as _sys
    from pathlib import Path as _Path

    import pytest as _pytest

    import fuseflow
    from fuseflow.sim import graph as graph_mod

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[2] / "examples"))
    import gcn_layer

    monkeypatch.setattr(graph_mod, "PROGRESS_EVERY", 1000)
    model, args, formats = gcn_layer.build()
    prog = fuseflow.compile(model, args, formats=formats, schedule="full")
    seen = []
    res = prog.simulate(progress=lambda region, cycle: seen.append((region, cycle)))
    assert [r for r, _ in seen] == ["full"] * len(seen) and len(seen) >= res.cycles // 1000 - 1
    assert all(b > a for (_, a), (_, b) in zip(seen, seen[1:])) and seen[-1][1] <= res.cycles

    def stop(region, cycle):
        raise KeyboardInterrupt

    with _pytest.raises(KeyboardInterrupt):
        prog.simulate(progress=stop)
