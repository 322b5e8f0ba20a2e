"""Regions identical up to their tensors' names are lowered once and copied (`lower_module`).

A copy must be what lowering the region itself gives: the same sam text, summary (orders and
re-layout notes, renamed), simulator graphs and typed graphs. Each case compiles twice, with
copies and with every copy refused (`SamLowering.renamed` returning None), and compares."""

from __future__ import annotations

import gpt_bigbird  # noqa: E402
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.conversion.index_to_sam import SamLowering
from fuseflow.dialects.sam_ir import GraphBuilder


def _compiled(model, args, formats, schedule, monkeypatch, copies: bool):
    real = SamLowering.renamed
    made: list[str] = []

    def renamed(self, name, names):
        out = real(self, name, names) if copies else None
        if out is not None:
            made.append(name)
        return out

    with monkeypatch.context() as m:
        m.setattr(SamLowering, "renamed", renamed)
        prog = fuseflow.compile(model, args, formats=formats, schedule=schedule)
    return prog, made


def _same(a, b) -> None:
    assert a.mlir("sam") == b.mlir("sam")
    assert a.summary == b.summary
    assert a.graphs == b.graphs


def test_decoder_regions_are_copies_of_the_first_decoders(monkeypatch):
    """Also: `compile` parses the graphs that are not copies (the verifiers run on each
    distinct one), and the printed module is MLIR's printing of the whole text."""
    import fuseflow.compiler as compiler
    from fuseflow.dialects.sam_ir import parse_module

    parsed: list[str] = []
    real = compiler.parse_module
    monkeypatch.setattr(compiler, "parse_module", lambda text, *a: parsed.append(text) or real(text, *a))
    model, args, formats = gpt_bigbird.build(seq=32, d_model=16, heads=3, d_ff=32, block=8, layers=3)
    copied, made = _compiled(model, args, formats, "unfused", monkeypatch, True)
    assert len(parsed) == 1 and parsed[0].count('"sam.graph"') == len(copied.graphs) - len(made)
    with copied.imported.module.context:
        assert copied.mlir("sam") == str(parse_module(copied.sam_source))
    lowered, none = _compiled(model, args, formats, "unfused", monkeypatch, False)
    _same(copied, lowered)
    assert none == []
    assert len(made) > len(copied.graphs) / 2  # most of the 3 x 3 heads and decoders are copies
    notes = [n for r in made for n in copied.summary[r] if n.startswith("note:")]
    assert notes and all(n.startswith(f"note: {r}: ") for r in made for n in copied.summary[r] if "note" in n)
    assert copied.simulate(*args).check() < 1e-4


def test_region_copies_match_under_the_layer_schedule(monkeypatch):
    model, args, formats = gpt_bigbird.build(seq=16, d_model=8, heads=1, d_ff=8, block=4, layers=3)
    copied, made = _compiled(model, args, formats, "layer", monkeypatch, True)
    lowered, _ = _compiled(model, args, formats, "layer", monkeypatch, False)
    _same(copied, lowered)
    # the first decoder reads the model's input, the others an intermediate: the third is the copy
    assert made == ["blocks.2"]


class Stack(torch.nn.Module):
    def __init__(self, depth: int, width: int, relu: bool):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.relu = relu

    def forward(self, x, a):
        for lin in self.layers:
            y = a @ lin(x)
            x = (torch.relu(y) if self.relu else y) + x
        return x


_SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]  # the fixture only patches per call


@settings(max_examples=4, deadline=None, suppress_health_check=_SLOW)
@given(depth=st.integers(2, 3), width=st.integers(2, 5), relu=st.booleans(), seed=st.integers(0, 99))
def test_random_stacks_copy_to_what_lowering_gives(monkeypatch, depth, width, relu, seed):
    torch.manual_seed(seed)
    a = torch.rand(6, 6) * (torch.rand(6, 6) < 0.4)
    model, args = Stack(depth, width, relu).eval(), (torch.randn(6, width), a)
    copied, made = _compiled(model, args, {"a": "csr"}, "unfused", monkeypatch, True)
    lowered, _ = _compiled(model, args, {"a": "csr"}, "unfused", monkeypatch, False)
    _same(copied, lowered)
    assert made
    copied.simulate(*args).check()


def test_graph_builder_rename_is_building_with_the_new_names():
    def build(x: str, w: str, out: str) -> GraphBuilder:
        g = GraphBuilder()
        rx, rw = g.root(x), g.root(w)
        ref, crd = g.scan(rx, tensor=x, mode=0, level=0, format="dense", dim=4, index_var="i")
        ref_w = g.locate(crd, rw, tensor=w, mode=0, level=0, dim=4, index_var="i")
        val = g.alu(g.load(ref, tensor=x), g.load(ref_w, tensor=w), op="mul")
        g.write_crd(crd, tensor=out, mode=0, level=0, format="dense")
        g.write_val(val, tensor=out)
        return g

    renamed = build("x", "w", "y").renamed({"x": "blocks.1.x", "w": "w@1", "y": "t7"})
    direct = build("blocks.1.x", "w@1", "t7")
    assert renamed.graph("r", []) == direct.graph("r", [])
    assert renamed.typed("r", []) == direct.typed("r", [])


def test_a_distinct_graph_that_does_not_verify_is_refused(monkeypatch):
    real = SamLowering.text
    done: list[str] = []

    def broken(self):  # the first graph lowered loses a field of its tensors schema
        text = real(self)
        if not done:
            done.append(self.name)
        return text.replace("levels = ", "lvls = ", 1) if self.name == done[0] else text

    monkeypatch.setattr(SamLowering, "text", broken)
    x = torch.rand(6, 6)
    with pytest.raises(Exception, match="missing field 'levels'"):
        fuseflow.compile(Stack(2, 6, True), (x, (x > 0.5).float().to_sparse_csr()), schedule="unfused")
    assert done
