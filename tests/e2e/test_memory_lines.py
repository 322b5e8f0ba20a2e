"""The simulator counts the memory lines each node requests for reads (`mem_lines`), and the
cycle model predicts them (`NodeEstimate.lines`): a dense vector read in order fetches one
64-byte line per 16 floats, and a second read of the same line costs none."""

from __future__ import annotations

import math

import torch

import fuseflow


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


class Twice(torch.nn.Module):
    def forward(self, x, y):
        return x * y + x


def _loads(res, est):
    sim = {n["name"]: n["mem_lines"] for r in res.regions for n in r.nodes if n["kind"] == "load"}
    model = {n.name: n.lines for r in est.regions for n in r.nodes if n.kind == "load"}
    return sim, model


def test_a_dense_vector_read_in_order_fetches_a_line_per_sixteen_floats():
    n = 1000
    x = torch.rand(n)
    prog = fuseflow.compile(Scale(), (x,), schedule="full", arch="rda")
    res = prog.simulate(arch="rda")
    res.check()
    sim, model = _loads(res, prog.estimate(arch="rda"))
    assert list(sim.values()) == [math.ceil(n * 4 / 64)]
    assert abs(next(iter(model.values())) - n / 16) <= 1.0
    # without the memory model nothing is requested
    assert all(nd["mem_lines"] == 0 for r in prog.simulate(arch="comal").regions for nd in r.nodes)


def test_two_loads_of_one_array_each_fetch_its_lines():
    n = 320
    x, y = torch.rand(n), torch.rand(n)
    prog = fuseflow.compile(Twice(), (x, y), schedule="full", arch="rda")
    res = prog.simulate(arch="rda")
    res.check()
    sim, _ = _loads(res, prog.estimate(arch="rda"))
    assert sorted(sim.values()) == [n // 16] * len(sim) and len(sim) >= 2


def test_a_compressed_scan_asks_for_its_coordinates_once_the_fibers_bounds_arrive():
    """A scanner learns where a fiber's coordinates lie from its `seg` line, so the coordinates'
    line is requested only when that line arrives: the load of the values waits two memory
    latencies, its own line a third, all in series; the cycle model charges the same chain."""
    a = torch.zeros(4, 64)
    a[0, 3], a[1, 40], a[3, 7], a[3, 9] = 1.0, 2.0, 3.0, 4.0
    prog = fuseflow.compile(Scale(), (a.to_sparse_csr(),), schedule="full", arch="rda")
    for latency in (80, 500):
        arch = {"preset": "rda", "memory": {"latency": latency}}
        res = prog.simulate(arch=arch, spans=True)
        res.check()
        startup = 20  # the rda preset's memory startup
        (load,) = [n for r in res.regions for n in r.nodes if n["kind"] == "load"]
        assert startup + 2 * latency <= load["first_active"] <= startup + 2 * latency + 4
        assert startup + 3 * latency <= res.cycles <= startup + 3 * latency + 20
        est = prog.estimate(arch=arch).cycles
        assert 0.9 <= est / res.cycles <= 1.1, (latency, est, res.cycles)
