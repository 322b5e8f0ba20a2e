"""Graphs run in pieces from recorded streams (fuseflow/sim/pieces.py): cycles, every node's
counters and the outputs identical to the whole run, on both engines, at random cuts; outputs
equal to PyTorch; couplings that could cross a cut refused; finished pieces resumed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sampling import case

import fuseflow
from fuseflow.errors import FuseflowError, SimulationError
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import pack_inputs
from fuseflow.sim.pieces import boundaries, crossing, fingerprint, run_piece, split


def same_run(a, b, outputs: bool = True) -> None:
    assert a.cycles == b.cycles
    for x, y in zip(a.regions, b.regions):
        assert (x.name, x.cycles) == (y.name, y.cycles)
        assert x.nodes == y.nodes, x.name  # every counter of every node, activity spans included
    for x, y in zip(a.outputs, b.outputs):
        assert torch.equal(x, y) or not outputs


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["spmm", "gcn", "gated"]),
    n=st.integers(40, 200),
    density=st.floats(0.02, 0.1),
    seed=st.integers(0, 10_000),
    schedule=st.sampled_from(["unfused", "full"]),
    pieces=st.integers(2, 7),
    engine=st.sampled_from(["auto", "event"]),
)
def test_pieces_reproduce_the_whole_run_exactly(kind, n, density, seed, schedule, pieces, engine):
    prog = case(kind, n, density, seed, schedule)
    whole = prog.simulate(engine=engine)
    cut = prog.simulate(pieces=pieces, engine=engine)
    cut.check()  # against eager PyTorch, check()'s tolerance
    same_run(cut, whole)
    graphs = {g.name for g in prog.graphs}
    assert all(r.pieces is not None and r.pieces.pieces >= 2 for r in cut.regions if r.name in graphs)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), data=st.data())
def test_cuts_before_any_named_nodes_are_exact(seed, data):
    prog = case("gated", 120, 0.05, seed, "full")
    (g,) = prog.graphs
    names = data.draw(st.lists(st.sampled_from([n.name for n in g.nodes[1:]]), min_size=1, max_size=6, unique=True))
    same_run(prog.simulate(pieces=names), prog.simulate())


def test_lanes_run_in_pieces_exactly():
    prog = fuseflow.compile(
        *case_args(), formats={"A": "csr"}, schedule="full", passes="sam-parallelize{level=i factor=4}"
    )
    res = prog.simulate(pieces=4)
    res.check()
    same_run(res, prog.simulate())


def case_args():
    prog = case("spmm", 150, 0.05, 11)
    return prog.model, prog.example_args


def brute_crossing(g, b: int, tokens=None) -> float:
    """What crosses a cut before node b, counted edge by edge: each (node, port) with a consumer
    at or after b and the node before it, once (weighted by its share of the node's tokens)."""
    streams = {(src, port) for dst, n in enumerate(g.nodes) for src, port in n.inputs if src < b <= dst}
    return sum(1.0 + (0.0 if tokens is None else tokens[src] / max(g.nodes[src].n_out, 1)) for src, _ in streams)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_count_cuts_where_least_crosses(weighted):
    prog = case("gated", 200, 0.05, 3, "full")
    (g,) = prog.graphs
    n = len(g.nodes)
    tokens = [n_.tokens for n_ in prog.estimate().regions[-1].nodes] if weighted else None
    cuts = boundaries(g, 4, tokens)
    assert len(cuts) == 3 and cuts == sorted(cuts) and cuts[0] > 0 and cuts[-1] < n
    reach = max(1, int(0.1 * n / 4))
    for j, c in enumerate(cuts, 1):  # each cut within its slack, where the least crosses there
        ideal = round(j * n / 4)
        assert abs(c - ideal) <= reach
        window = range(max(1, ideal - reach), ideal + reach + 1)
        assert brute_crossing(g, c, tokens) == pytest.approx(min(brute_crossing(g, b, tokens) for b in window))
    assert all(crossing(g, tokens)[b] == pytest.approx(brute_crossing(g, b, tokens)) for b in range(1, n))
    for p in split(g, cuts):  # streams a piece replays come from earlier pieces; tapes go to later ones
        assert all(src < p.first for src, _ in p.replays)
        assert all(p.first <= src < p.end for src, _ in p.tapes)


def test_what_could_couple_pieces_is_refused():
    prog = case("spmm", 100, 0.05, 1)
    with pytest.raises(FuseflowError, match="memory model on: its channels are shared"):
        prog.simulate(pieces=2, arch="rda")
    with pytest.raises(FuseflowError, match=r"FIFOs of depth 8: the stream .* crosses a cut"):
        prog.simulate(pieces=2, arch={"fifo_depth": 8})
    with pytest.raises(FuseflowError, match="no node named 'nope'"):
        prog.simulate(pieces=["nope"])
    with pytest.raises(FuseflowError, match="give checkpoint= too"):
        prog.simulate(pieces=2, every="1m")
    with pytest.raises(FuseflowError, match="choose one"):
        prog.simulate(pieces=2, sample=True)
    with pytest.raises(FuseflowError, match="not with record"):
        prog.simulate(pieces=2, record=True)


def test_a_blocked_region_is_refused():
    from test_parallelize import attention

    model, args, formats = attention(seq=32, d=16, block=16)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", passes="block{size=16}")
    with pytest.raises(FuseflowError, match="tile store"):
        prog.simulate(pieces=2)


def _piece_setup(tmp_path):
    prog = case("spmm", 120, 0.05, 2, "full")
    (g,) = prog.graphs
    env = prog.bind(prog.example_args)
    arch = Arch.resolve(prog.arch)
    packed = pack_inputs(g, env)
    pieces = split(g, boundaries(g, 2))
    return g, packed, arch, pieces


def test_a_tape_of_another_graph_or_cut_short_is_refused(tmp_path):
    g, packed, arch, (first, second) = _piece_setup(tmp_path)
    digest = fingerprint(g, packed, arch)
    run_piece(g, first, packed, arch, str(tmp_path), digest, "auto")
    with pytest.raises(SimulationError, match="recorded from another graph or edge"):
        run_piece(g, second, packed, arch, str(tmp_path), "another", "auto")
    tape = next(tmp_path.glob("*.tape"))
    tape.write_bytes(tape.read_bytes()[: len(tape.read_bytes()) // 2])
    with pytest.raises(SimulationError, match="cut short|ends inside a record"):
        run_piece(g, second, packed, arch, str(tmp_path), digest, "auto")
    tape.write_bytes(b"not a tape")
    with pytest.raises(SimulationError, match="not a stream tape"):
        run_piece(g, second, packed, arch, str(tmp_path), digest, "auto")


def test_a_stopped_run_resumes_after_its_last_finished_piece(tmp_path):
    prog = case("gcn", 150, 0.05, 4, "full")
    whole = prog.simulate()
    first = prog.simulate(pieces=3, checkpoint=tmp_path)
    same_run(first, whole)
    region = next(d for d in tmp_path.iterdir() if d.is_dir() and (d / "piece-2.json").exists())
    (region / "piece-2.json").unlink()  # stopped before its last piece was kept
    again = prog.simulate(pieces=3, checkpoint=tmp_path)
    same_run(again, whole)
    resumed = {r.name: r.pieces.resumed for r in again.regions if r.pieces is not None}
    assert resumed[region.name] == 2 and all(v == 3 for k, v in resumed.items() if k != region.name)
    other = torch.rand_like(prog.example_args[1])  # other inputs: nothing is resumed, the run is redone
    redone = prog.simulate(prog.example_args[0], other, pieces=3, checkpoint=tmp_path)
    redone.check()
    assert all(r.pieces.resumed == 0 for r in redone.regions if r.pieces is not None)
    same_run(redone, prog.simulate(prog.example_args[0], other))


def test_pieces_in_worker_processes_match(tmp_path):
    prog = case("gated", 100, 0.05, 5, "full")
    same_run(prog.simulate(pieces=2, jobs=2), prog.simulate())


def test_piece_streams_are_compact():
    """The tapes' records take a few bytes a token (the cycle's increase and the payload's
    change as varints), not the 16 a queued token takes."""
    prog = case("gcn", 300, 0.03, 6, "full")
    res = prog.simulate(pieces=4)
    cut = [r.pieces for r in res.regions if r.pieces is not None and r.pieces.tokens]
    assert cut and all(c.bytes_per_token < 6 for c in cut)


def test_the_cli_runs_in_pieces_and_resumes(tmp_path):
    cmd = [sys.executable, "-m", "fuseflow.cli.main", "run", "examples/gcn.py", "--pieces", "3"]
    first = subprocess.run(cmd + ["--checkpoint", str(tmp_path), "--json"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    j = json.loads(first.stdout)
    assert all(r["pieces"]["resumed"] == 0 for r in j["regions"] if "pieces" in r)
    again = subprocess.run(cmd + ["--checkpoint", str(tmp_path)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "exact;" in again.stdout and "resumed from the checkpoint" in again.stdout
    assert f"makespan {j['total_cycles']:,} cycles" in again.stdout
    bad = subprocess.run(cmd + ["--every", "1m"], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0 and "give checkpoint= too" in bad.stderr
    assert not list(Path(tmp_path).glob("*.tmp"))


def test_pieces_with_the_region_memo_match():
    """With memo, regions simulated once run in pieces; identical ones take their run (how a
    stack of identical decoders runs its large fused region once, in pieces)."""
    import gpt_bigbird

    model, args, formats = gpt_bigbird.build(seq=32, d_model=16, heads=2, d_ff=32, layers=2, block=8)
    prog = fuseflow.compile(model, args, formats=formats, schedule=gpt_bigbird.fuseflow_full_schedule(2))
    res = prog.simulate(memo=True, pieces=3)
    res.check()
    # the memo's heads (independent parts) take values from the index notation where they repeat;
    # in pieces the region is simulated as one graph: cycles and counters equal, values within check()
    same_run(res, prog.simulate(memo=True), outputs=False)
    # every region simulated here ran in pieces (regions of independent parts too), the rest are memo hits
    assert all(r.pieces is not None and r.pieces.pieces == 3 for r in res.regions if not r.memoised)
    assert any(r.memoised for r in res.regions)
    with pytest.raises(FuseflowError, match="not with jobs"):
        prog.simulate(memo=True, pieces=3, jobs=2)
