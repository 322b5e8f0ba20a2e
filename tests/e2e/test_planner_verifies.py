"""The cycle model holds on the PyG examples, and the planner does not trust it blindly.

The PyG GCN (KarateClub, PyG's own data) once had full fusion estimated 54x below its
simulation: the adjacency is read for the degree and again for the edges, and the model
intersected the level with itself as if the two reads were independent. Here the estimate must be
within 1.33x of the simulator under every built-in schedule, for GCN, GraphSAGE (mean and max)
and GIN, and `schedule="auto"` within 1.05x of the best built-in. A deliberately wrong model
(monkeypatched) must still lead to the best schedule the planner simulated, with the widened
search reported. Outputs are checked against eager PyTorch by `check()` (tolerance
rtol = atol = 1e-5 x the longest reduction).
"""

import os

import gcn
import pyg_gnn
import pytest

import fuseflow
from fuseflow.compiler import plan
from fuseflow.planning.planner import TRUST

if os.environ.get("FUSEFLOW_REQUIRE_EXTRAS"):  # make test installs the extra: never skip there
    import torch_geometric  # noqa: F401
else:
    pytest.importorskip("torch_geometric")

BUILTINS = ("unfused", "layer", "full", "op")


@pytest.mark.parametrize("conv", ["gcn", "sage", "sage-max", "gin"])
def test_pyg_estimates_are_within_1_33x_of_the_simulator_under_every_builtin(conv):
    model, args, formats = pyg_gnn.build(conv=conv)
    for schedule in BUILTINS:
        prog = fuseflow.compile(model, args, formats, schedule=schedule)
        est, res = prog.estimate().cycles, prog.simulate()
        res.check()
        ratio = res.cycles / est
        assert 1 / 1.33 <= ratio <= 1.33, (conv, schedule, res.cycles, est)


def test_pyg_gcn_regions_intersecting_two_tensors_on_one_pattern_are_estimated_as_one_set():
    """The unfused PyG GCN multiplies per-edge messages by the per-edge normalisation: two
    evaluated tensors on one adjacency pattern. Intersected as independent sets, the edge product
    `r7_mul_2` was estimated 5.9x below its simulation (580 vs 3,433 cycles). Every region of
    1,000 cycles or more must now be within 1.33x, on `comal` and on `rda`."""
    model, args, formats = pyg_gnn.build(conv="gcn")
    prog = fuseflow.compile(model, args, formats, schedule="unfused")
    for arch in ("comal", "rda"):
        res, est = prog.simulate(arch=arch), prog.estimate(arch=arch)
        res.check()
        by_name = {r.name: r.cycles for r in est.regions}
        big = [(g.name, g.cycles, by_name[g.name]) for g in res.regions if g.cycles >= 1000 and g.name in by_name]
        assert any(name.endswith("mul_2") for name, *_ in big)
        if arch == "comal":
            off = [(n, s, e) for n, s, e in big if not 1 / 1.33 <= s / e <= 1.33]
            assert not off, off
        else:  # rda: the edge products only (its memory stalls are approximate elsewhere, docs/cycle-model.md)
            mul = [(n, s, e) for n, s, e in big if "_mul_" in n and not 1 / 1.33 <= s / e <= 1.33]
            assert not mul, mul


def test_a_dense_matrix_stored_compressed_is_read_a_line_per_row_like_a_dense_one():
    """The unfused PyG GCN gathers the features per edge (`P[:, :, None] * x[None, :, :]`) from
    x written compressed with every 16-float row full, so each row is one aligned line read
    again for each neighbour. The model once charged a line per fiber start and its steps
    (x's scan 321 lines, its load 318; simulated 53 and 34): within 1.5x of the simulator now."""
    model, args, formats = pyg_gnn.build(conv="gcn")
    prog = fuseflow.compile(model, args, formats, schedule="unfused", arch="rda")
    res, est = prog.simulate(arch="rda"), prog.estimate(arch="rda")
    res.check()
    gather = next(g for g in res.regions if g.name.endswith("index_select"))
    model_lines = {n.name: n.lines for r in est.regions if r.name == gather.name for n in r.nodes}
    reads = [(n["name"], n["mem_lines"], model_lines[n["name"]]) for n in gather.nodes if n["mem_lines"] >= 20]
    assert len(reads) >= 2, reads
    assert all(1 / 1.5 <= s / m <= 1.5 for _, s, m in reads), reads


def test_pyg_gcn_auto_is_within_5_percent_of_the_best_builtin():
    model, args, formats = pyg_gnn.build()
    builtin = {s: fuseflow.compile(model, args, formats, schedule=s).simulate().cycles for s in BUILTINS}
    prog = fuseflow.compile(model, args, formats, schedule="auto")
    res = prog.simulate()
    res.check()
    assert res.cycles <= 1.05 * min(builtin.values()), (prog.plan.explain(), builtin)
    simulated = [c for c in prog.plan.candidates if c.simulated_cycles is not None]
    assert any(c.builtin for c in simulated)  # the best built-in by estimate is always confirmed
    assert res.cycles == min(c.simulated_cycles for c in simulated)


def test_a_wrong_model_widens_the_search_and_still_returns_the_best_simulated(monkeypatch):
    """The estimate is inverted (the fastest schedule looks slowest): the finalists' simulations
    disagree with it far beyond TRUST, so the planner simulates on until the rest cannot win."""
    from fuseflow.planning.estimate import ProgramEstimate

    true_cycles = ProgramEstimate.cycles.fget
    monkeypatch.setattr(ProgramEstimate, "cycles", property(lambda self: int(1e12 / max(true_cycles(self), 1))))
    model, args, formats = gcn.build()
    found = plan(model, args, formats)
    simulated = [c for c in found.candidates if c.simulated_cycles is not None]
    assert found.chosen.simulated_cycles == min(c.simulated_cycles for c in simulated)
    assert any("widened" in c.status for c in simulated)
    text = found.explain()
    assert "widened the search" in text and f"beyond {TRUST}x" in text
    found.program.simulate().check()
    # nothing the planner left unsimulated could have won were the model as optimistic about it
    # as about the most optimistic simulated candidate
    best = found.chosen.simulated_cycles
    optimism = min(c.simulated_cycles / c.estimate_cycles for c in simulated)
    for c in found.candidates:
        if c.simulated_cycles is None and not c.status.startswith("pruned: dominated"):
            assert c.estimate_cycles * optimism >= best, found.explain()


def test_a_segment_that_does_not_compile_is_left_out_with_every_longer_one(monkeypatch):
    """A region the lowering refuses (a fused expression past its operation budget, in the
    2-block GPT) must not end the search: the planner leaves that segment and every segment
    holding it out, says so, and returns the best of the rest. Here GCN's `relu,conv2` is
    refused, through the real `Space.compile`."""
    from fuseflow.errors import UnsupportedError
    from fuseflow.planning.space import Space

    real = Space.compile

    def refusing(self, segments, order=None, quick=False):
        if not isinstance(segments, str) and any(a <= 2 and b >= 4 for a, b in segments):
            raise UnsupportedError("the fused region's expression passes 200,000 operations (test)")
        return real(self, segments, order, quick)

    monkeypatch.setattr(Space, "compile", refusing)
    model, args, formats = gcn.build()
    found = plan(model, args, formats)
    assert [u.label for u in found.units][2:4] == ["relu", "conv2"]
    text = found.explain()
    assert "do not compile, e.g. [relu,conv2]" in text, text
    for c in found.candidates:
        assert not any(a <= 2 and b >= 4 for a, b in c.segments), text
    assert found.chosen.simulated_cycles is not None
    found.program.simulate().check()
