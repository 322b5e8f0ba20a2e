"""Identical blocks exported once and copied (`frontend/replicate.py`).

The replicated export must give the very module the whole-model export gives: the same linalg
text with the same locations (node names, module paths, source ops), so every schedule, digest
and golden figure is unchanged. Where replication cannot copy a block, the model is exported
whole, and the compiled program still matches eager PyTorch (`SimResult.check`'s tolerance)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.frontend import replicate
from fuseflow.frontend.export import import_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gpt_bigbird  # noqa: E402


def _text(model, args, formats, replicate_blocks: bool, locations: bool = True) -> str:
    imported = import_model(model, args, formats, replicate=replicate_blocks)
    return imported.module.operation.get_asm(enable_debug_info=locations)


def _spy(monkeypatch) -> list[str]:
    """The modules `export_replicated` exports (it raises when it cannot replicate)."""
    seen: list[str] = []
    real = replicate.export_replicated

    def spy(model, *a, **k):
        ep = real(model, *a, **k)
        seen.append(type(model).__name__)
        return ep

    monkeypatch.setattr("fuseflow.frontend.export.export_replicated", spy)
    return seen


def test_decoders_and_heads_replicated_give_the_whole_models_module(monkeypatch):
    """Three decoders of two heads each: decoders and heads are copies, and the module (text and
    locations) is byte for byte the one exporting the whole model gives."""
    model, args, formats = gpt_bigbird.build(seq=32, d_model=16, heads=2, d_ff=32, block=8, layers=3)
    whole = _text(model, args, formats, False)
    seen = _spy(monkeypatch)
    assert _text(model, args, formats, True) == whole
    assert seen == ["Decoder"]  # replicated, not exported whole after a failure


def test_replicated_decoders_match_pytorch():
    model, args, formats = gpt_bigbird.build(seq=16, d_model=8, heads=2, d_ff=8, block=4, layers=2)
    prog = fuseflow.compile(model, args, formats=formats, schedule="unfused")
    assert prog.simulate(*args).check() < 1e-4
    # module paths survive the copy: every head of every decoder is named in the locations
    for d in range(2):
        for h in range(2):
            assert f"|blocks.{d}.attn.heads.{h}.q|" in prog.linalg_text


class Scale(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(d))

    def forward(self, x):
        return torch.relu(x * self.w) + x


class TwoShapes(torch.nn.Module):
    """Identical members called on inputs of different shapes: one template per shape."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Scale(4) for _ in range(3))

    def forward(self, x, y):
        return self.blocks[0](x).sum(0) + self.blocks[1](y).sum(0) + self.blocks[2](x).sum(0)


class ScalarArgument(torch.nn.Module):
    """A member called with a Python float: not replicable, exported whole."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Gain(4) for _ in range(2))

    def forward(self, x):
        return self.blocks[1](self.blocks[0](x, 2.0), 0.5)


class Gain(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)

    def forward(self, x, gain: float):
        return self.lin(x) * gain


def test_members_called_on_different_shapes(monkeypatch):
    torch.manual_seed(0)
    model, args = TwoShapes().eval(), (torch.randn(3, 4), torch.randn(5, 4))
    # the same ops; the whole trace numbers its `sum`s from 1 (a node it drops), copies from 0
    whole = _text(model, args, {}, False, locations=False)
    seen = _spy(monkeypatch)
    assert _text(model, args, {}, True, locations=False) == whole
    assert seen == ["TwoShapes"]
    fuseflow.compile(model, args, schedule="unfused").simulate(*args).check()


def test_a_member_called_with_a_float_is_exported_whole(monkeypatch):
    torch.manual_seed(0)
    model, args = ScalarArgument().eval(), (torch.randn(3, 4),)
    with pytest.raises(replicate.NotReplicable, match="non-tensor arguments"):
        state = dict(model.named_parameters())
        replicate.export_replicated(model, 1, list(state), [*args, *state.values()], _stub_export)
    seen = _spy(monkeypatch)
    fuseflow.compile(model, args, schedule="unfused").simulate(*args).check()
    assert seen == []


def _stub_export(model, n_args, state_names, inputs):
    """Export with the members stubbed: the stub refuses the float before anything is traced."""
    return model(*inputs[:n_args])


def test_tied_or_differing_members_are_not_grouped():
    a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    assert [len(g.members) for g in replicate.find_groups(torch.nn.ModuleList([a, b]))] == [2]
    assert replicate.find_groups(torch.nn.ModuleList([a, torch.nn.Linear(4, 3)])) == []
    tied = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    tied[1].weight = tied[0].weight  # one weight read twice: not two copies of a block
    assert replicate.find_groups(tied) == []


class Stack(torch.nn.Module):
    def __init__(self, depth: int, width: int, act: str):
        super().__init__()
        self.layers = torch.nn.Sequential(*(Layer(width, act) for _ in range(depth)))

    def forward(self, x):
        return self.layers(x)


class Layer(torch.nn.Module):
    def __init__(self, width: int, act: str):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.act = act

    def forward(self, x):
        y = self.lin(x)
        return (torch.relu(y) if self.act == "relu" else torch.tanh(y)) + x


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(2, 4), width=st.integers(2, 6), act=st.sampled_from(["relu", "tanh"]), seed=st.integers(0, 99))
def test_random_stacks_replicate_to_the_whole_models_module(depth, width, act, seed):
    torch.manual_seed(seed)
    model, args = Stack(depth, width, act).eval(), (torch.randn(3, width),)
    assert _text(model, args, {}, True) == _text(model, args, {}, False)
