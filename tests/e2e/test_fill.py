"""Filling a finite fabric: ``schedule="auto"`` gives each region its lanes (docs/fabric.md,
"Filling the fabric"). Every simulated program is checked against eager PyTorch by
``res.check()`` (rtol = atol = 1e-5 x the longest dimension)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow import Match, Rule, Schedule
from fuseflow.fabric.resources import demand_of, fits, lanes_of
from fuseflow.planning import lanes
from fuseflow.primitives import RESOURCE
from fuseflow.sim.arch import Arch


def fabric(compute: int, memory: int, **memory_model) -> Arch:
    """The `amber` preset (16-deep FIFOs, its memory model) with another array."""
    spec: dict = {"preset": "amber", "fabric": {"compute": compute, "memory": memory, "reconfig_cycles": 64}}
    if memory_model:
        spec["memory"] = memory_model
    return Arch.resolve(spec)


class Chain(torch.nn.Module):
    """A @ (X W) then elementwise ops: an aggregation, a dense product and a tail."""

    def __init__(self, tail: tuple[str, ...]):
        super().__init__()
        self.tail = tail

    def forward(self, a, x, w):
        h = a @ (x @ w)
        for op in self.tail:
            h = torch.relu(h) if op == "relu" else (h * 2.0 if op == "scale" else h + h)
        return h


def _inputs(n: int, f: int, density: float, seed: int):
    rng = np.random.default_rng(seed)
    a = (rng.random((n, n)) < density) * rng.integers(1, 4, (n, n))
    x = rng.integers(-3, 4, (n, f))
    w = rng.integers(-3, 4, (f, f))
    return tuple(torch.tensor(v, dtype=torch.float32) for v in (a, x, w))


@given(
    tail=st.lists(st.sampled_from(["relu", "scale", "double"]), max_size=2).map(tuple),
    n=st.integers(8, 20),
    f=st.sampled_from([4, 8]),
    density=st.sampled_from([0.1, 0.3]),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([1.0, 1.5, 3.0, 8.0]),
)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_planned_program_fits_and_is_never_slower_than_what_the_planner_simulated(tail, n, f, density, seed, scale):
    model, args = Chain(tail), _inputs(n, f, density, seed)
    need = fuseflow.compile(model, args, {"a": "csr"}, schedule="unfused", arch=fabric(10**6, 10**6)).resources()
    biggest = {c: max(u[c] for u in need.values()) for c in ("compute", "memory")}
    arch = fabric(int(biggest["compute"] * scale) + 1, int(biggest["memory"] * scale) + 1)
    prog = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch=arch)
    for region, units in prog.resources().items():
        assert fits(units, arch.fabric), (region, units)
    simulated = [c.simulated_cycles for c in prog.plan.candidates if c.simulated_cycles is not None]
    res = prog.simulate()
    res.check()
    assert res.cycles == prog.plan.chosen.simulated_cycles
    assert res.cycles <= min(simulated)


class Scale(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def test_a_fabric_too_small_for_two_lanes_gets_one():
    x = torch.tensor(np.random.default_rng(0).integers(-3, 4, (32, 8)), dtype=torch.float32)
    roomy = fabric(10**6, 10**6)
    one = fuseflow.compile(Scale(), (x,), schedule="full", arch=roomy)
    ((_, need),) = one.resources().items()
    menu = lanes.lane_menu(one, roomy)
    assert any(o.factor > 1 for o in menu.options[one.graphs[0].name])  # lanes would pay on a larger array
    prog = fuseflow.compile(Scale(), (x,), schedule="auto", arch=fabric(need["compute"], need["memory"]))
    assert [lanes_of(g) for g in prog.graphs] == [1]
    prog.simulate().check()


def test_lanes_on_a_roomy_fabric_beat_one_lane_and_the_saved_schedule_reproduces_them():
    model, args = Chain(("relu",)), _inputs(24, 8, 0.2, 1)
    arch = fabric(384, 128)
    one = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch=arch, max_lanes=1, max_block=1)
    prog = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch=arch, max_block=1)
    assert all(lanes_of(g) == 1 for g in one.graphs)
    assert max(lanes_of(g) for g in prog.graphs) > 1
    fast, slow = prog.simulate(), one.simulate()
    fast.check()
    assert fast.cycles < 0.8 * slow.cycles
    # the plan's rules carry par= and reproduce the program
    assert any(r.par for r in prog.plan.schedule.ruleset)
    again = fuseflow.compile(model, args, {"a": "csr"}, schedule=prog.plan.schedule, arch=arch)
    assert again.simulate().cycles == fast.cycles
    explained = prog.plan.explain()
    assert "lanes (placed sequential" in explained and "predicted busy" in explained


def test_without_a_fabric_the_planner_gives_no_lanes():
    model, args = Chain(()), _inputs(12, 4, 0.3, 2)
    prog = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch="rda")
    assert prog.plan.lanes is None
    assert all(lanes_of(g) == 1 for g in prog.graphs)


def test_a_memory_bound_region_stops_adding_lanes_where_the_next_doubling_gains_little():
    """One memory channel: a dense add's lanes wait for lines an in-order join lets them ask
    for only when their row comes up, so doubling past the planner's choice buys < 10%."""

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    rng = np.random.default_rng(0)
    x, y = (torch.tensor(rng.integers(-3, 4, (64, 64)), dtype=torch.float32) for _ in range(2))
    arch = fabric(384, 128, channels=1, bytes_per_request=64, latency=80, ii=4)
    prog = fuseflow.compile(Add(), (x, y), schedule="auto", arch=arch)
    chosen = max(lanes_of(g) for g in prog.graphs)
    base = prog.simulate()
    base.check()
    (region,) = prog.graphs
    doubled = Schedule.rules(Rule(Match(index=(0,)), name=region.name, par=f"i:{2 * chosen}"))
    more = fuseflow.compile(Add(), (x, y), schedule=doubled, arch=arch).simulate()
    more.check()
    assert (base.cycles - more.cycles) / base.cycles < 0.10, (chosen, base.cycles, more.cycles)


def test_lanes_stay_below_a_bounded_fifo_depth():
    """16 lanes on 16-deep FIFOs deadlock GPT-BigBird's attention scores; the planner's cap is 15."""
    assert lanes.lane_cap(Arch.resolve("amber"), None) == 15
    assert lanes.lane_cap(Arch.resolve("amber"), 4) == 4
    assert lanes.lane_cap(fabric(10, 10, channels=4), 32) == 15


def test_max_lanes_in_the_arch_table_is_validated():
    with pytest.raises(fuseflow.FuseflowError, match="max_lanes must be a positive integer"):
        Arch.resolve({"preset": "amber", "fabric": {"compute": 8, "memory": 8, "max_lanes": 0}})
    capped = Arch.resolve({"preset": "amber", "fabric": {"compute": 8, "memory": 8, "max_lanes": 4}})
    assert capped.fabric is not None and capped.fabric.max_lanes == 4


def test_an_accumulators_values_are_dealt_with_its_coordinates():
    """GCN's first layer in order i,l,k,j at k: the lanes walk the accumulated X W's rows; its
    values must follow their coordinates to the same lane (a copy to every lane broke the
    repeat's stream protocol)."""
    import gcn

    model, args, formats = gcn.build()
    base = fuseflow.compile(model, args, formats=formats, schedule="layer", arch="amber")
    ops = base.region_ops["conv1"]
    for par in ("k:2", "k:4"):
        rules = Schedule.rules(Rule(by="layer"), Rule(Match(index=ops), name="conv1", par=par, order="i,l,k,j"))
        prog = fuseflow.compile(model, args, formats=formats, schedule=rules, arch="amber")
        (conv1,) = [g for g in prog.graphs if g.name == "conv1"]
        assert lanes_of(conv1) == int(par[2:])
        prog.simulate().check()


def test_a_region_with_lanes_runs_whole_under_micro_batches():
    """Shrinking a laned region's row loops broke a join's stream protocol (SDDMM, 8 lanes at
    its rows, 4 micro-batches); such a region runs whole and the split says why."""
    import kernels

    model, args, formats = kernels.build(kernel="sddmm", n=64, k=64)
    laned = Schedule.rules(Rule(name="main", par="i:8"))
    prog = fuseflow.compile(model, args, formats=formats, schedule=laned, arch="amber")
    res = prog.simulate(strategy="pipeline:4")
    res.check()
    whole = fuseflow.compile(model, args, formats=formats, schedule=laned, arch="amber").simulate()
    assert [s.batch for s in res.timeline if s.region == "main"] == [None]
    assert [r.cycles for r in res.regions if r.name == "main"] == [r.cycles for r in whole.regions if r.name == "main"]
    from fuseflow.fabric.run import info_for

    assert "lanes" in info_for(prog, prog.bind(args)).regions["main"]


@pytest.mark.parametrize(
    ("region", "order", "par"),
    [
        ("conv2", "i,k,j,l", "k:4"),  # the accumulator reads the scan's k coordinates straight
        ("conv2", "i,k,j,l", "k:8"),
    ],
)
def test_the_model_sees_lanes_saturate_beside_a_short_stream(region, order, par):
    """GCN's second layer with lanes at k: the accumulator over k also reads k's coordinates
    straight from their scan, a 16-token FIFO beside the lanes' two memory latencies, so lanes
    divide the work but the stream moves at most a FIFO per round trip (docs/cycle-model.md,
    "Reconvergent streams"). The model said 2,515 cycles at 8 lanes where the simulator takes
    6,886; the simulator is the reference here, within 1.2x."""
    import gcn

    model, args, formats = gcn.build()
    arch = fabric(192, 64)
    layer = fuseflow.compile(model, args, formats, schedule="layer", arch=arch)
    ops = tuple(sorted(layer.region_ops[region]))
    rules = Schedule.rules(Rule(by="layer"), Rule(Match(index=ops), name=region, order=order, par=par))
    prog = fuseflow.compile(model, args, formats, schedule=rules, arch=arch)
    res = prog.simulate()
    res.check()
    simulated = next(r.cycles for r in res.regions if r.name == region)
    estimated = next(r.cycles for r in prog.estimate().regions if r.name == region)
    assert 1 / 1.2 <= simulated / estimated <= 1.2, (simulated, estimated)


def test_the_model_serialises_a_join_fed_straight_by_a_scan():
    """A linear's accumulation over k in lanes (order j,k,i): each lane's scan sends its column's
    coordinates straight to the join, so it can run only one FIFO ahead, its next column's lines
    wait for the join's turn, and 2, 4 and 8 lanes take about the same time (docs/cycle-model.md,
    "Lanes and in-order joins"). The model once said 2.6x faster than simulated at 8 lanes."""
    import gcn

    model, args, formats = gcn.build()
    unfused = fuseflow.compile(model, args, formats, schedule="unfused", arch="amber")
    region = "r4_linear_1"
    ops = tuple(sorted(unfused.region_ops[region]))
    for par in ("k:2", "k:8"):
        rules = Schedule.rules(Rule(Match(index=ops), name=region, order="j,k,i", par=par))
        prog = fuseflow.compile(model, args, formats, schedule=rules, arch="amber")
        res = prog.simulate()
        res.check()
        simulated = next(r.cycles for r in res.regions if r.name == region)
        estimated = next(r.cycles for r in prog.estimate().regions if r.name == region)
        assert 1 / 1.2 <= simulated / estimated <= 1.2, (par, simulated, estimated)


def test_the_planner_chooses_blocks_that_hold_b_units_per_tile_and_the_saved_schedule_reproduces_them():
    """A dense-valued chain on a roomy fabric: blocks of b beat scalar lanes; each tile primitive
    holds b compute units (docs/fabric.md, "Blocks"); the outputs match PyTorch (rtol = atol =
    1e-5 x the longest dimension), and max_block=1 keeps every region unblocked."""
    model, args = Chain(("relu",)), _inputs(32, 16, 0.3, 3)
    arch = fabric(384, 128)
    prog = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch=arch)
    blocked = [g for g in prog.graphs if g.block]
    assert blocked, prog.plan.explain()
    res = prog.simulate()
    res.check()
    for g in blocked:
        tiles = sum(1 for n in g.nodes if RESOURCE[n.kind] == "compute" and "axes" in n.params)
        others = sum(1 for n in g.nodes if RESOURCE[n.kind] == "compute" and "axes" not in n.params)
        assert tiles > 0 and demand_of(g)["compute"] == g.block * tiles + others
    assert any(r.block for r in prog.plan.schedule.ruleset) and "blocks of" in prog.plan.explain()
    again = fuseflow.compile(model, args, {"a": "csr"}, schedule=prog.plan.schedule, arch=arch)
    assert again.simulate().cycles == res.cycles
    plain = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch=arch, max_block=1)
    assert not any(g.block for g in plain.graphs)
    assert res.cycles <= plain.simulate().cycles  # the plan is the fastest program it simulated


def test_max_block_in_the_arch_table_is_validated():
    with pytest.raises(fuseflow.FuseflowError, match="fabric.max_block"):
        Arch.resolve({"preset": "amber", "fabric": {"compute": 8, "memory": 8, "max_block": 0}})


def test_the_planner_plans_for_the_strategy_the_program_will_run_under():
    """compile(strategy=) simulates the planner's candidates under that strategy and places
    lanes side by side for any strategy but sequential; the chosen program's simulated makespan
    under it is the one the plan recorded."""
    model, args = Chain(("relu", "scale")), _inputs(20, 8, 0.2, 4)
    arch = fabric(96, 48)
    prog = fuseflow.compile(model, args, {"a": "csr"}, schedule="unfused", arch=arch)
    assert len(prog.graphs) > 1  # regions that can run side by side
    planned = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch=arch, strategy="concurrent")
    assert planned.plan.lanes is not None and planned.plan.lanes.placement == "concurrent"
    res = planned.simulate(strategy="concurrent")
    res.check()
    assert res.cycles == planned.plan.chosen.simulated_cycles
    sequential = fuseflow.compile(model, args, {"a": "csr"}, schedule="auto", arch=arch)
    assert sequential.plan.lanes is not None and sequential.plan.lanes.placement == "sequential"


def test_lanes_over_blocks_beat_blocks_alone():
    """SDDMM on `amber`: the planner gives its blocked region lanes as well (tiles dealt among
    lanes like scalars), which simulates faster than the blocks alone (`max_lanes=1`); outputs
    match PyTorch."""
    import kernels

    model, args, formats = kernels.build(kernel="sddmm")
    both = fuseflow.compile(model, args, formats, schedule="auto", arch="amber")
    ((name, _),) = [(g.name, g) for g in both.graphs if g.block]
    graph = next(g for g in both.graphs if g.name == name)
    assert lanes_of(graph) > 1 and ", blocks of" in both.plan.explain()
    res = both.simulate()
    res.check()
    alone = fuseflow.compile(model, args, formats, schedule="auto", arch="amber", max_lanes=1)
    assert any(g.block for g in alone.graphs) and all(lanes_of(g) == 1 for g in alone.graphs)
    assert res.cycles < alone.simulate().cycles
