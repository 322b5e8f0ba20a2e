"""Timing presets and architecture settings: the SAM reference traces, memory, latency, II."""

import numpy as np
import pytest

from fuseflow import _simulator
from fuseflow.errors import FuseflowError
from fuseflow.sim.arch import Arch

I = lambda *a: np.array(a, dtype=np.int64)  # noqa: E731
F = lambda *a: np.array(a, dtype=np.float32)  # noqa: E731


def writers(res):
    return {n["name"]: n for n in res["nodes"] if n["kind"].startswith("write")}


ENGINES = ["event", "window"]


def elementwise_mul(arch, engine="event"):
    """x(i) = a(i) * b(i), a: crd [0,2,3,7] vals [1,2,3,4], b: crd [2,3,5,7] vals [5,6,7,8]."""
    g = _simulator.Graph(Arch.resolve(arch).settings)
    ra, rb = g.add_node("root", "ra", [], {}), g.add_node("root", "rb", [], {})
    a = g.add_node("scan", "a", [(ra, 0)], {"format": "compressed", "seg": I(0, 4), "crd": I(0, 2, 3, 7)})
    b = g.add_node("scan", "b", [(rb, 0)], {"format": "compressed", "seg": I(0, 4), "crd": I(2, 3, 5, 7)})
    x = g.add_node("intersect", "x", [(a, 1), (b, 1), (a, 0), (b, 0)], {})
    la = g.add_node("load", "la", [(x, 1)], {"vals": F(1, 2, 3, 4)})
    lb = g.add_node("load", "lb", [(x, 2)], {"vals": F(5, 6, 7, 8)})
    m = g.add_node("alu", "mul", [(la, 0), (lb, 0)], {"op": "mul"})
    g.add_node("write_crd", "x_crd", [(x, 0)], {})
    g.add_node("write_val", "x_val", [(m, 0)], {})
    return g.run(10_000, engine=engine)


def spmv(arch, n_rows: int = 0, engine: str = "event"):
    """x(i) = sum_j B(i,j) c(j): the 4x4 DCSR example (or a larger banded one), no crd_drop."""
    if n_rows:
        rows = [[(i + d) % n_rows for d in (0, 3, 7)] for i in range(n_rows)]
        seg1 = np.cumsum([0] + [len(sorted(set(r))) for r in rows])
        crd1 = np.concatenate([sorted(set(r)) for r in rows])
        bi = dict(seg=I(0, n_rows), crd=np.arange(n_rows, dtype=np.int64))
        bj = dict(seg=seg1.astype(np.int64), crd=crd1.astype(np.int64))
        bvals = np.ones(len(crd1), np.float32)
        c = dict(seg=I(0, n_rows), crd=np.arange(n_rows, dtype=np.int64))
        cvals = np.ones(n_rows, np.float32)
    else:
        bi, bj = dict(seg=I(0, 3), crd=I(0, 2, 3)), dict(seg=I(0, 2, 3, 5), crd=I(0, 2, 1, 0, 3))
        bvals, c, cvals = F(1, 2, 3, 4, 5), dict(seg=I(0, 2), crd=I(0, 3)), F(10, 20)
    g = _simulator.Graph(Arch.resolve(arch).settings)
    rb = g.add_node("root", "rootB", [], {})
    si = g.add_node("scan", "Bi", [(rb, 0)], {"format": "compressed", **bi})
    sj = g.add_node("scan", "Bj", [(si, 0)], {"format": "compressed", **bj})
    rc = g.add_node("root", "rootc", [], {})
    sig = g.add_node("repsiggen", "sig", [(si, 1)], {})
    rep = g.add_node("repeat", "rep", [(rc, 0), (sig, 0)], {})
    cj = g.add_node("scan", "cj", [(rep, 0)], {"format": "compressed", **c})
    it = g.add_node("intersect", "ij", [(sj, 1), (cj, 1), (sj, 0), (cj, 0)], {})
    lb = g.add_node("load", "lB", [(it, 1)], {"vals": bvals})
    lc = g.add_node("load", "lc", [(it, 2)], {"vals": cvals})
    m = g.add_node("alu", "mul", [(lb, 0), (lc, 0)], {"op": "mul"})
    r = g.add_node("reduce", "red", [(m, 0)], {"kind": "sum"})
    g.add_node("write_crd", "x_crd", [(si, 1)], {})
    g.add_node("write_val", "x_val", [(r, 0)], {})
    return g.run(10_000_000, engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_sam_preset_reproduces_the_elementwise_trace(engine):
    res = elementwise_mul("sam", engine)
    w = writers(res)
    assert res["cycles"] == 12
    assert list(w["x_crd"]["crd"]) == [2, 3, 7]
    assert list(w["x_val"]["vals"]) == [10.0, 18.0, 32.0]


@pytest.mark.parametrize("engine", ENGINES)
def test_sam_preset_reproduces_the_spmv_trace(engine):
    res = spmv("sam", engine=engine)
    w = writers(res)
    assert res["cycles"] == 22
    assert list(w["x_crd"]["crd"]) == [0, 2, 3]
    assert list(w["x_val"]["vals"]) == [10.0, 0.0, 140.0]


@pytest.mark.parametrize("engine", ENGINES)
def test_comal_preset_opens_a_fiber_in_its_own_cycle(engine):
    # Comal's scanner reads the segment before the first coordinate: one cycle more per scan level.
    assert elementwise_mul("comal", engine)["cycles"] == 13
    assert spmv("comal", engine=engine)["cycles"] == 24


def test_memory_model_slows_a_bandwidth_bound_kernel_more_as_bandwidth_drops():
    base = spmv("comal", n_rows=400)["cycles"]
    mem = lambda ii: {"memory": {"channels": 1, "bytes_per_request": 64, "latency": 50, "ii": ii}}  # noqa: E731
    fast, slow = spmv(mem(1), n_rows=400), spmv(mem(16), n_rows=400)
    assert base < fast["cycles"] < slow["cycles"]
    assert slow["mem_requests"] == fast["mem_requests"] > 0
    assert writers(slow)["x_val"]["vals"].tolist() == writers(fast)["x_val"]["vals"].tolist()


@pytest.mark.parametrize("engine", ENGINES)
def test_per_kind_latency_and_initiation_interval_cost_cycles(engine):
    base = spmv("comal", n_rows=100, engine=engine)["cycles"]
    slow_alu = spmv({"kinds": {"alu": {"latency": 10}}}, n_rows=100, engine=engine)["cycles"]
    ii_joiner = spmv({"kinds": {"intersect": {"ii": 3}}}, n_rows=100, engine=engine)["cycles"]
    assert slow_alu == base + 9
    assert ii_joiner > 2 * base  # the intersect is the busiest node of this graph


def test_window_engine_refuses_the_memory_model_and_full_fifos():
    mem = {"memory": {"channels": 1, "bytes_per_request": 64, "latency": 50, "ii": 1}}
    with pytest.raises(_simulator.WindowUnsafe, match="memory model"):
        spmv(mem, n_rows=10, engine="window")
    with pytest.raises(_simulator.WindowUnsafe, match="FIFO filled up"):
        spmv({"fifo_depth": 1}, n_rows=10, engine="window")


def test_rda_preset_has_finite_fifos_and_memory():
    arch = Arch.resolve("rda")
    assert arch.fifo_depth == 16 and "memory" in arch.settings


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"fifo_depth": 0}, "fifo_depth must be a positive integer"),
        ({"latancy": 1}, "unknown setting 'latancy'"),
        ({"kinds": {"scanner": {"latency": 2}}}, "unknown primitive kind 'scanner'"),
        ({"memory": {"chanels": 2}}, "memory: unknown setting 'chanels'"),
        ({"scan_emit_on_pop": 1}, "must be true or false"),
    ],
)
def test_bad_architecture_settings_are_named(bad, message):
    with pytest.raises(FuseflowError, match=message):
        Arch.resolve(bad)


def test_architecture_from_toml_file(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text("[arch]\nfifo_depth = 4\n[arch.kinds.reduce]\nlatency = 2\n")
    arch = Arch.resolve(p)
    assert arch.fifo_depth == 4 and arch.settings["kinds"]["reduce"]["latency"] == 2
    p.write_text("[arch\nfifo")
    with pytest.raises(FuseflowError, match="invalid TOML"):
        Arch.resolve(p)
