"""Memoised and parallel simulation (`simulate(memo=, jobs=, executor=)`): the same cycles and
counters as the plain run, node by node, and values that match PyTorch.

The shortcuts rest on `sim/values.py` computing a region's values from its index notation; the
parallel path checks every region it simulates against that computation (`simulation._agrees`), so
running it over random programs tests the evaluator against the simulator region by region.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import fuseflow
from fuseflow import fuzz, simulation
from fuseflow.errors import FuseflowError, MismatchError
from fuseflow.executor import LocalExecutor
from fuseflow.sim import memo as memo_mod
from fuseflow.sim.arch import Arch
from fuseflow.sim.values import region_values

ROOT = Path(__file__).resolve().parents[2]

import gcn  # noqa: E402
import gpt_bigbird  # noqa: E402
import sae  # noqa: E402

INLINE = LocalExecutor(1)  # the parallel path, tasks run in this process (no spawn in most tests)
SMALL_GPT = dict(seq=32, d_model=16, d_ff=32, block=8)


def _counters(res) -> list:
    return [
        (r.name, r.cycles, [{k: v for k, v in n.items() if k not in ("seg", "crd", "vals")} for n in r.nodes])
        for r in res.regions
    ]


def test_identical_decoders_are_simulated_once():
    """Two decoders of one size: every region of the second is a memo hit, nothing changes."""
    model, args, formats = gpt_bigbird.build(**SMALL_GPT, layers=2)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    plain = prog.simulate()
    memo = prog.simulate(memo=True)
    assert _counters(memo) == _counters(plain)
    hits = [r.name for r in memo.regions if r.memoised]
    assert len(hits) >= len(prog.graphs) // 2, hits
    assert memo.to_json()["regions"][-1].get("memoised") is True
    plain.check()
    memo.check()
    # memo hits take their values from the index notation: same outputs as the simulator within f32 noise
    for got, want in zip(memo.outputs, plain.outputs):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["comal", "sam"])
def test_heads_of_one_region_are_memoised_apart(arch, monkeypatch):
    """The attention region holds three heads sharing only the mask's root: each head is a part
    (`sim/components.py`), the first simulated, the others memo hits, and the region's cycles and
    counters are the whole region's."""
    from fuseflow.sim import components

    model, args, formats = gpt_bigbird.build(**SMALL_GPT, heads=3, layers=2)
    prog = fuseflow.compile(model, args, formats=formats, schedule=gpt_bigbird.transformer_schedule())
    mha = [g for g in prog.graphs if g.name.endswith("mha")]
    assert [len(components.parts(g)) for g in mha] == [3, 3]
    runs: list[str] = []
    real = components.run_packed

    def counted(spec, *a, **k):
        runs.append(spec.name)
        return real(spec, *a, **k)

    monkeypatch.setattr(components, "run_packed", counted)
    plain = prog.simulate(arch=arch)
    memo = prog.simulate(arch=arch, memo=True)
    assert _counters(memo) == _counters(plain)
    assert runs.count("blocks.0.mha") == 1 and "blocks.1.mha" not in runs  # one head simulated
    memo.check()
    for got, want in zip(memo.outputs, plain.outputs):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_a_checkpoint_keeps_each_simulated_head_as_a_piece(tmp_path):
    """`checkpoint` with the memo: a region of independent heads still runs head by head (a
    123,041-node region of GPT-3 Small does not fit whole), each simulated head one kept piece;
    the same call again takes every one from the directory. Cycles and counters are the plain run's."""
    model, args, formats = gpt_bigbird.build(**SMALL_GPT, heads=3, layers=2)
    prog = fuseflow.compile(model, args, formats=formats, schedule=gpt_bigbird.transformer_schedule())
    plain = prog.simulate()
    first = prog.simulate(memo=True, checkpoint=tmp_path)
    assert _counters(first) == _counters(plain)
    first.check()
    mha = next(r for r in first.regions if r.name == "blocks.0.mha")
    assert mha.pieces is not None and (mha.pieces.pieces, mha.pieces.resumed) == (1, 0)  # one head run, two hits
    assert (tmp_path / "blocks.0.mha.part0").is_dir() and not (tmp_path / "blocks.0.mha.part1").exists()
    again = prog.simulate(memo=True, checkpoint=tmp_path)
    assert _counters(again) == _counters(plain)
    ran = [r for r in again.regions if r.pieces is not None]
    assert ran and all(r.pieces.resumed == r.pieces.pieces for r in ran)


def test_parts_are_not_run_apart_with_a_memory_model():
    """Memory channels are shared by a region's nodes: the region is simulated whole."""
    from fuseflow.sim import components

    assert components.independent(Arch.resolve("comal"))
    assert not components.independent(Arch.resolve("rda"))


@pytest.mark.parametrize(
    "build, options, schedule",
    [
        (gpt_bigbird.build, SMALL_GPT, "layer"),
        (gpt_bigbird.build, SMALL_GPT, "fuseflow"),
        (sae.build, dict(n_in=64, n_hidden=16), "full"),
        (gcn.build, {}, "full"),
        (gcn.build, {}, "unfused"),
    ],
)
def test_parallel_path_matches_the_plain_run(build, options, schedule):
    """Every region simulated on evaluated inputs, checked against the evaluation; cycles and
    counters equal to the plain run's, outputs equal to PyTorch's."""
    model, args, formats = build(**options)
    if schedule == "fuseflow":
        schedule = gpt_bigbird.schedules()["fuseflow"]
    prog = fuseflow.compile(model, args, formats=formats, schedule=schedule)
    plain = prog.simulate()
    shared = prog.simulate(executor=INLINE, memo=True)
    assert _counters(shared) == _counters(plain)
    shared.check()


def test_two_worker_processes_give_the_plain_run():
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    plain = prog.simulate()
    par = prog.simulate(jobs=2)
    assert _counters(par) == _counters(plain)
    assert not any(r.memoised for r in par.regions)  # no memo asked: every region simulated
    par.check()


def test_a_memo_directory_serves_another_run(tmp_path):
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    first = prog.simulate(memo=tmp_path)
    again = prog.simulate(memo=tmp_path)
    assert all(r.memoised for r in again.regions)
    assert _counters(again) == _counters(first)
    again.check()
    assert len(list(tmp_path.glob("*.json"))) == len({r.name for r in first.regions if not r.memoised})


def test_other_sparse_coordinates_are_another_key():
    """Same graph, same shapes, a different sparsity pattern: the memo must not serve it."""
    model, args, formats = gcn.build()
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    memo = memo_mod.RegionMemo()
    first = prog.simulate(memo=memo)
    A = args[0].to_dense()
    moved = torch.roll(A, shifts=1, dims=1).to_sparse_csr()
    other = prog.simulate(moved, *args[1:], memo=memo)
    plain = prog.simulate(moved, *args[1:])
    assert _counters(other) == _counters(plain)
    by_name = {g.name: g for g in prog.graphs}
    for r in other.regions:
        g = by_name[r.name]
        if "A" in g.tensors:  # A's coordinates moved: simulated again
            assert not r.memoised, r.name
        elif all("compressed" not in t.fmt.levels for t in g.tensors.values() if t.role == "input"):
            assert r.memoised, r.name  # dense inputs only: the same tokens go the same way
    other.check()
    assert _counters(first) != _counters(other)


def test_value_dependent_graphs_are_never_memoised():
    """A sparse activation drops zeros (sam.val_drop): its tokens depend on values."""

    class Sparse(torch.nn.Module):
        def forward(self, x, w):
            return (torch.relu(x @ w).to_sparse_csr() @ w.t()).sum(1)

    x, w = torch.randn(6, 5), torch.randn(5, 4)
    prog = fuseflow.compile(Sparse(), (x, w), schedule="unfused")
    dropping = [g for g in prog.graphs if any(n.kind in memo_mod.VALUE_DEPENDENT for n in g.nodes)]
    assert dropping
    packed = {}
    assert memo_mod.structure_key(dropping[0], packed, Arch.resolve("comal")) is None
    res = prog.simulate(memo=True)
    assert not any(r.memoised for r in res.regions)
    res.check()


def test_a_disagreeing_evaluation_is_an_error(monkeypatch):
    """No silent wrong answer: a region whose simulation and evaluation differ stops the run."""
    model, args, formats = gcn.build()
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")

    def wrong(assigns, env):
        return {k: v + 1.0 for k, v in region_values(assigns, env).items()}

    monkeypatch.setattr("fuseflow.simulation.region_values", wrong)
    with pytest.raises(MismatchError, match="differs from its index-notation values"):
        prog.simulate(executor=INLINE)


def test_record_needs_the_plain_run():
    model, args, formats = gcn.build()
    prog = fuseflow.compile(model, args, formats=formats)
    with pytest.raises(FuseflowError, match="record and spans"):
        prog.simulate(record=True, memo=True)


def _shortcut_oracle(case: fuzz.Case) -> str:
    """The fuzzer's programs through the parallel path with a memo: same counters as the plain
    run, every region agreeing with its index-notation values, outputs matching PyTorch."""
    import warnings

    mod = fuzz.load(case.source())
    model, args, formats = mod.build()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = fuseflow.compile(model, args, formats=formats, schedule=case.schedule, order=case.order)
    except fuseflow.UnsupportedError:
        return "unsupported"
    plain = prog.simulate()
    try:
        shared = prog.simulate(executor=INLINE, memo=True)
        shared.check()
    except fuseflow.FuseflowError as e:
        raise fuzz.Failure(f"{type(e).__name__}: {e}") from e
    if _counters(shared) != _counters(plain):
        raise fuzz.Failure("memoised/parallel counters differ from the plain run")
    return "ok"


def test_random_programs_agree_region_by_region(tmp_path):
    report = fuzz.run(30, seed=21, out=tmp_path / "repro.py", check=_shortcut_oracle)
    assert report.failure is None, (report.failure, (tmp_path / "repro.py").read_text())
    assert report.outcomes["ok"] >= 20


def test_regions_on_ray_give_the_plain_run():
    """The dse executors are the one executor interface: regions mapped on a local Ray."""
    ray = pytest.importorskip("ray")
    from fuseflow.executor import RayExecutor

    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    plain = prog.simulate()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = prog.simulate(executor=RayExecutor(), memo=True)
    finally:
        ray.shutdown()
    assert _counters(remote) == _counters(plain)
    remote.check()


def test_intermediates_are_released_after_their_last_reader():
    """simulate drops each intermediate once no later region reads it (GPT-3 Small kept ~4 GB
    alive): every tensor a region reads is released exactly once, at its last reader."""
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    released = [n for names in prog.last_readers.values() for n in names]
    assert len(released) == len(set(released))
    for k, names in prog.last_readers.items():
        for n in names:
            readers = [i for i, g in enumerate(prog.graphs) if n in {t.copy_of or m for m, t in g.tensors.items()}]
            assert max(readers) == k
    env = prog.bind(args)
    env.update({n: None for n in released})
    for k in range(len(prog.graphs)):
        simulation._release(prog, env, k)
    kept = {n for n in released if n in env}
    assert kept == {n for n in released if n in set(prog.output_names) | set(prog.imported.input_names)}
    prog.simulate().check()
