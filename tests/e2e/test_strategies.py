"""User strategies (`fuseflow.Strategy`): loaded from files, run under both drivers (known
durations; one shared engine run with the memory model), and refused with a clear error naming
the region when they break the fabric's rules."""

from __future__ import annotations

from pathlib import Path

import gpt_bigbird  # noqa: E402
import pytest
import torch

import fuseflow
from fuseflow.errors import FuseflowError

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = ROOT / "examples" / "strategies"
SMALL_GPT = dict(seq=32, d_model=16, d_ff=32, block=8)
ARCHES = ["comal", "rda"]  # known durations; a shared run that contends for memory


@pytest.fixture(scope="module")
def prog():
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    return fuseflow.compile(model, args, formats=formats, schedule="unfused")


def _overlap(timeline) -> int:
    """The most regions running at one cycle."""
    edges = sorted([(s.start, 1) for s in timeline] + [(s.end, -1) for s in timeline])
    most = now = 0
    for _, d in edges:
        now += d
        most = max(most, now)
    return most


@pytest.mark.parametrize("arch", ARCHES)
def test_ping_pong_from_a_file_runs_two_regions_at_a_time(prog, arch):
    seq = prog.simulate(arch=arch)
    res = prog.simulate(arch=arch, strategy=f"{STRATEGIES / 'ping_pong.py'}:PingPong")
    res.check()
    assert res.strategy == "ping-pong"
    assert all(torch.equal(a, b) for a, b in zip(seq.outputs, res.outputs))
    assert _overlap(res.timeline) == 2 and res.cycles < seq.cycles


@pytest.mark.parametrize("arch", ARCHES)
def test_colocate_never_runs_two_memory_bound_regions_together(prog, arch):
    from fuseflow.fabric.run import predictions

    res = prog.simulate(arch=arch, strategy=f"{STRATEGIES / 'colocate.py'}")  # the file's only class
    res.check()
    cycles, traffic = predictions(prog, prog.example_args, fuseflow.sim.arch.Arch.resolve(arch))
    bound = {s.region for s, c, b in zip(res.timeline, cycles, traffic) if b > 4.0 * max(c, 1.0)}
    assert bound  # the linears stream their weights
    for a in res.timeline:
        for b in res.timeline:
            if a is not b and a.region in bound and b.region in bound:
                assert a.end <= b.start or b.end <= a.start, (a.region, b.region)


class Plain(fuseflow.Strategy):
    """The base class unchanged: program order, one at a time."""

    name = "plain"


@pytest.mark.parametrize("arch", ARCHES)
def test_the_base_strategy_is_sequential(prog, arch):
    a = prog.simulate(arch=arch)
    b = prog.simulate(arch=arch, strategy=Plain())
    assert [(s.start, s.end) for s in a.timeline] == [(s.start, s.end) for s in b.timeline]


class Early(fuseflow.Strategy):
    name = "early"

    def schedule(self, ctx):
        for t in ctx.tasks:
            ctx.issue(t)  # every region at once, inputs or not


class Greedy(fuseflow.Strategy):
    name = "greedy"

    def schedule(self, ctx):
        while True:
            for t in ctx.ready():
                ctx.issue(t)  # without asking whether it fits
            if ctx.wait() is None:
                return


class Lazy(fuseflow.Strategy):
    name = "lazy"

    def schedule(self, ctx):
        ctx.issue(ctx.ready()[0])


class Broken(fuseflow.Strategy):
    name = "broken"

    def schedule(self, ctx):
        return {}["missing"]


@pytest.mark.parametrize("arch", ARCHES)
def test_strategies_that_break_the_rules_are_refused_naming_the_region(prog, arch):
    with pytest.raises(
        FuseflowError,
        match=r"strategy early: region r1_linear was issued at cycle 0 before its input region r0_layer_norm finished",
    ):
        prog.simulate(arch=arch, strategy=Early())
    tight = {"preset": arch, "fabric": {"compute": 30, "memory": 24}}
    with pytest.raises(
        FuseflowError, match=r"strategy greedy: region \S+ needs \d+ \w+ units at cycle \d+, but only \d+ are free"
    ):
        prog.simulate(arch=tight, strategy=Greedy())
    with pytest.raises(FuseflowError, match="strategy lazy finished with 24 region.s. never issued, first r1_linear"):
        prog.simulate(arch=arch, strategy=Lazy())
    with pytest.raises(FuseflowError, match=r"test_strategies.py:\d+:0: error: strategy broken: KeyError: 'missing'"):
        prog.simulate(arch=arch, strategy=Broken())


def test_strategy_files_and_classes_that_do_not_exist_are_one_line(tmp_path, capsys):
    from fuseflow.cli.main import main

    with pytest.raises(FuseflowError, match="no such file"):
        fuseflow.compile(torch.nn.ReLU(), (torch.rand(2, 2),)).simulate(strategy=str(tmp_path / "nope.py:X"))
    with pytest.raises(FuseflowError, match="defines no Strategy subclass 'Nope'"):
        fuseflow.compile(torch.nn.ReLU(), (torch.rand(2, 2),)).simulate(strategy=f"{STRATEGIES / 'colocate.py'}:Nope")
    with pytest.raises(FuseflowError, match="unknown strategy 'fastest'"):
        fuseflow.compile(torch.nn.ReLU(), (torch.rand(2, 2),)).simulate(strategy="fastest")
    model = str(ROOT / "examples" / "gcn_layer.py")
    assert main(["run", model, "--strategy", str(tmp_path / "nope.py:X")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]
