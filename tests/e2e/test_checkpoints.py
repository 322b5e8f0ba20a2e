"""States saved inside a run (`simulate(checkpoint=DIR, every=...)`, docs/pieces.md): a run
stopped at any window, or killed, continues from its last state to the cycles, every node's
counters and the outputs of a run never stopped; states of another run are not continued."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pieces import same_run
from test_sampling import case

import fuseflow._simulator as sim
from fuseflow.errors import FuseflowError, SimulationError
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import Checkpoint, _build, execute, pack_inputs
from fuseflow.simulation import seconds


def settings_of(prog, **more):
    return {**Arch.resolve(prog.arch).settings, **more}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["spmm", "gcn", "gated"]),
    seed=st.integers(0, 10_000),
    schedule=st.sampled_from(["unfused", "full"]),
    pieces=st.sampled_from([None, 2, 3]),
    stop=st.floats(0.05, 0.95),
)
def test_a_run_stopped_at_any_window_continues_identically(tmp_path_factory, kind, seed, schedule, pieces, stop):
    """The run stops at a cycle limit (a window's end); the state saved at that window's start
    is continued with the limit raised (limits are not part of a run's fingerprint)."""
    prog = case(kind, 400, 0.05, seed, schedule)
    whole = prog.simulate()
    where = tmp_path_factory.mktemp("ck")
    longest = max(r.cycles for r in whole.regions)
    limit = max(1025, int(stop * longest))  # past the first window, so a state was saved
    with pytest.raises(SimulationError, match="cycle limit reached"):
        prog.simulate(checkpoint=where, every=0, pieces=pieces, arch=settings_of(prog, max_cycles=limit))
    assert list(where.rglob("*.state")), "the stopped run left its state"
    res = prog.simulate(checkpoint=where, every=0, pieces=pieces)
    res.check()
    same_run(res, whole)
    continued = [c for r in res.regions if r.pieces for c in r.pieces.continued]
    assert len(continued) == 1 and 0 < continued[0] < limit
    assert not list(where.rglob("*.state"))  # a finished piece keeps its result, not its state


KILLED = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{tests!r}]
    from test_sampling import case
    prog = case("gated", 3000, 0.01, 7, "full")
    prog.simulate(checkpoint={where!r}, every=0, pieces=3)
    """
)


def test_a_killed_run_continues_identically(tmp_path):
    """SIGKILL while a piece runs (no clean-up at all); the same call continues it."""
    where = tmp_path / "ck"
    script = KILLED.format(tests=str(Path(__file__).parent), where=str(where))
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONWARNINGS": "ignore"})
    try:
        deadline = time.monotonic() + 300
        while not list(where.rglob("*.state")):
            assert proc.poll() is None, "the run ended before any state was saved"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    prog = case("gated", 3000, 0.01, 7, "full")
    res = prog.simulate(checkpoint=where, every=0, pieces=3)
    res.check()
    same_run(res, prog.simulate())
    (region,) = [r.pieces for r in res.regions if r.pieces]
    assert region.continued or region.resumed  # it went on from where the killed run was


ARRAYS = ("seg", "crd", "vals")


def _graph_and_state(tmp_path):
    prog = case("spmm", 300, 0.05, 2, "full")
    (g,) = prog.graphs
    arch = Arch.resolve(prog.arch)
    packed = pack_inputs(g, prog.bind(prog.example_args))
    path = str(tmp_path / "run.state")
    first = _build(g, packed, arch)
    first.set_checkpoint(path, "this run", 0)
    res = first.run(arch.max_cycles, engine="window")
    assert res["checkpoints"] >= 2 and Path(path).exists()
    return g, packed, arch, path, res


def test_a_state_of_another_run_or_cut_short_is_refused(tmp_path):
    g, packed, arch, path, whole = _graph_and_state(tmp_path)
    other = _build(g, packed, arch)
    other.set_resume(path, "another run")
    with pytest.raises(sim.SimError, match="saved from another graph, other inputs"):
        other.run(arch.max_cycles, engine="window")
    same = _build(g, packed, arch)
    same.set_resume(path, "this run")
    res = same.run(arch.max_cycles, engine="window")
    assert res["resumed_from"] > 0 and res["cycles"] == whole["cycles"]
    for a, b in zip(res["nodes"], whole["nodes"]):  # every counter, and the writers' arrays
        assert {k: v for k, v in a.items() if k not in ARRAYS} == {k: v for k, v in b.items() if k not in ARRAYS}
        assert all(np.array_equal(a[k], b[k]) for k in ARRAYS if k in b)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    cut = _build(g, packed, arch)
    cut.set_resume(path, "this run")
    with pytest.raises(sim.SimError, match="cut short"):
        cut.run(arch.max_cycles, engine="window")
    event = _build(g, packed, arch)
    event.set_checkpoint(path, "this run", 0)
    with pytest.raises(ValueError, match="checkpoints are taken by the window engine"):
        event.run(arch.max_cycles, engine="event")


def test_a_state_of_other_inputs_is_dropped_and_the_run_starts_over(tmp_path):
    g, packed, arch, path, whole = _graph_and_state(tmp_path)
    ck = Checkpoint(path, "other inputs", 0)
    res, _ = execute(g.name, lambda: _build(g, packed, arch), arch, checkpoint=ck)
    assert "resumed_from" not in res and res["cycles"] == whole["cycles"]
    assert not Path(path).exists()  # done: the state is dropped


def test_what_cannot_save_states_is_refused():
    prog = case("spmm", 100, 0.05, 1)
    with pytest.raises(SimulationError, match="saved by the window engine"):
        prog.simulate(checkpoint="unused", every="10m", arch="rda")
    with pytest.raises(FuseflowError, match="give checkpoint= too"):
        prog.simulate(every="10m")
    with pytest.raises(FuseflowError, match="choose one"):
        prog.simulate(checkpoint="unused", sample=True)
    assert [seconds(x) for x in ("90s", "10m", "2h", 5, "0")] == [90, 600, 7200, 5, 0]
    with pytest.raises(FuseflowError, match="not a duration"):
        seconds("soon")


def test_the_cli_resumes_a_checkpointed_run(tmp_path):
    where = tmp_path / "ck"
    cmd = [sys.executable, "-m", "fuseflow.cli.main", "run", "examples/gcn.py"]
    first = subprocess.run(cmd + ["--checkpoint", str(where), "--every", "0s"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    again = subprocess.run(
        [sys.executable, "-m", "fuseflow.cli.main", "resume", str(where)], capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    makespan = [line for line in first.stdout.splitlines() if line.startswith("makespan")]
    assert makespan and makespan[0] in again.stdout and "resumed from the checkpoint" in again.stdout
    # resumed again, it resumes the same run (it used to record `resume DIR` and recurse)
    assert json.loads((where / "command.json").read_text())["argv"][0] == "run"
    twice = subprocess.run(
        [sys.executable, "-m", "fuseflow.cli.main", "resume", str(where)], capture_output=True, text=True
    )
    assert twice.returncode == 0, twice.stderr
    assert makespan[0] in twice.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "fuseflow.cli.main", "resume", str(tmp_path)], capture_output=True, text=True
    )
    assert missing.returncode == 1 and "holds no command to resume" in missing.stderr


@pytest.mark.parametrize("stop", [0.3, 0.7])
def test_lanes_continue_identically(tmp_path, stop):
    """Forks and joins keep their turn and pending stops across a saved state."""
    import fuseflow

    base = case("gated", 600, 0.05, 9, "full")
    prog = fuseflow.compile(
        base.model,
        base.example_args,
        formats={"A": "csr"},
        schedule="full",
        passes="sam-parallelize{level=i factor=4}",
    )
    assert any(n.kind == "fork" for g in prog.graphs for n in g.nodes)
    whole = prog.simulate()
    limit = max(1025, int(stop * max(r.cycles for r in whole.regions)))
    with pytest.raises(SimulationError, match="cycle limit reached"):
        prog.simulate(checkpoint=tmp_path, every=0, arch=settings_of(prog, max_cycles=limit))
    res = prog.simulate(checkpoint=tmp_path, every=0)
    res.check()
    same_run(res, whole)
    assert [c for r in res.regions if r.pieces for c in r.pieces.continued]
