"""Queues kept on disk (arch `spill_tokens`, docs/simulator-performance.md "Queues on disk"): a
run whose long queues keep their middles in a file gives the cycles, every node's counters and
the outputs of the run that keeps them in memory, on random programs and inputs, with bounded
FIFOs beside it, and across a checkpoint saved with one setting and continued with the other."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_checkpoints import settings_of
from test_pieces import same_run
from test_sampling import case

import fuseflow
from fuseflow.errors import FuseflowError, SimulationError
from fuseflow.model_files import example
from fuseflow.sim.arch import UNBOUNDED, Arch


def spilled(res) -> int:
    """FIFOs that kept a middle on disk, over the run's regions."""
    return sum(r.spill["queues"] for r in res.regions if r.spill)


@pytest.fixture(scope="module")
def gpt():
    """GPT-BigBird's cross-decoder program at seq 64: thousands of queues run a matrix ahead."""
    gpt = example("gpt_bigbird", "examples")
    model, args, formats = gpt.build(seq=64, d_model=64, heads=2, d_ff=128, block=16, layers=2)
    return fuseflow.compile(model, args, formats=formats, schedule=gpt.fuseflow_full_schedule(2), node_budget=10**6)


def test_spilled_queues_change_nothing_on_gpt(gpt):
    whole = gpt.simulate()
    res = gpt.simulate(arch=settings_of(gpt, spill_tokens=256))
    res.check(rtol=1e-5 * 64, atol=1e-5 * 64)  # GPT's tolerance (benchmarks/paper.py), eager PyTorch
    same_run(res, whole)
    comp = next(r for r in res.regions if r.name == "comp3_0")
    assert comp.spill["queues"] > 1000  # the cross-decoder region's residual and bias streams
    assert comp.spill["bytes_written"] > comp.spill["peak_bytes"] > 0  # slots are reused once read
    assert all(r.spill is None for r in whole.regions)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["spmm", "gcn", "gated"]),
    n=st.integers(60, 300),
    density=st.floats(0.02, 0.1),
    seed=st.integers(0, 10_000),
    schedule=st.sampled_from(["unfused", "full"]),
    spill=st.sampled_from([1, 128, 300, 1024]),
    depth=st.sampled_from([UNBOUNDED, 2048]),
)
def test_spilled_queues_reproduce_the_run_exactly(kind, n, density, seed, schedule, spill, depth):
    prog = case(kind, n, density, seed, schedule)
    plain = prog.simulate(arch=settings_of(prog, fifo_depth=depth))
    res = prog.simulate(arch=settings_of(prog, fifo_depth=depth, spill_tokens=spill))
    res.check()
    same_run(res, plain)


def test_a_spilled_queue_that_nears_its_depth_goes_back_to_memory_in_order():
    """A 2,048-deep FIFO spills, then comes within a window's pushes of its depth: its middle
    comes back behind the head it had just refilled (a protocol violation when it did not)."""
    prog = case("spmm", 225, 0.0625, 0, "unfused")
    plain = prog.simulate(arch=settings_of(prog, fifo_depth=2048))
    res = prog.simulate(arch=settings_of(prog, fifo_depth=2048, spill_tokens=128))
    res.check()
    same_run(res, plain)
    assert spilled(res) > 0


def test_random_cases_do_spill():
    """The random cases above reach the spill: a long queue in a small program."""
    prog = case("gated", 300, 0.1, 3, "full")
    res = prog.simulate(arch=settings_of(prog, spill_tokens=128))
    same_run(res, prog.simulate())
    assert spilled(res) > 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    stop=st.floats(0.1, 0.9),
    before=st.sampled_from([1, 128, None]),
    after=st.sampled_from([1, 128, None]),
)
def test_a_checkpoint_with_spilled_queues_continues_identically(tmp_path_factory, seed, stop, before, after):
    """Stopped at a cycle limit with queues on disk (or not), continued with them on disk (or in
    memory): a state holds every queue whole, wherever its middle was."""
    prog = case("gated", 300, 0.1, seed, "full")
    whole = prog.simulate()
    where = tmp_path_factory.mktemp("ck")
    limit = max(1025, int(stop * max(r.cycles for r in whole.regions)))
    spill = {"spill_tokens": before} if before else {}
    with pytest.raises(SimulationError, match="cycle limit reached"):
        prog.simulate(checkpoint=where, every=0, arch=settings_of(prog, max_cycles=limit, **spill))
    assert list(where.rglob("*.state"))
    res = prog.simulate(checkpoint=where, every=0, arch=settings_of(prog, **({"spill_tokens": after} if after else {})))
    res.check()
    same_run(res, whole)
    assert any(r.pieces and r.pieces.continued for r in res.regions)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_a_bad_spill_setting_is_refused(bad):
    with pytest.raises(FuseflowError, match="spill_tokens must be a positive integer"):
        Arch.resolve({"spill_tokens": bad})
