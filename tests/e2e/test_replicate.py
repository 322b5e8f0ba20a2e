"""Identical blocks exported and lowered once, their copies spliced (`frontend/replicate.py`,
`frontend/linalg_copies.py`).

The replicated import must give the very module the whole-model import gives: the same linalg
text with the same op locations (node names, module paths, source ops, frames), so every
schedule, digest and golden figure is unchanged. Two kinds of location may differ, and nothing
reads either (`_ops_only`): a ``linalg.generic`` body's block arguments (torch-mlir names them
after the torch value feeding the op, which for a copy's input is the block's argument rather
than the outer op) and constants the copies share. Where a block cannot be lowered once, it is copied before lowering;
where it cannot be copied, the model is exported whole; the compiled program still matches
eager PyTorch (`SimResult.check`'s tolerance)."""

from __future__ import annotations

import gpt_bigbird  # noqa: E402
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.frontend import linalg_copies, replicate
from fuseflow.frontend.export import import_model


def _text(model, args, formats, replicate_blocks: bool, locations: bool = True) -> str:
    """The imported module, locations inline (alias numbers follow where a location is first
    printed, block arguments included), block arguments' locations left out (`_ops_only`)."""
    imported = import_model(model, args, formats, replicate=replicate_blocks)
    return _ops_only(imported.module.operation.get_asm(enable_debug_info=locations, use_local_scope=True))


def _ops_only(text: str) -> str:
    """`text` without the locations of block arguments (``^bb0(%in: f32 loc(...), ...)``) and of
    constants (a constant the copies share keeps the first copy's location where torch-mlir's
    folder, uniquing it over the whole model, may leave none)."""
    return "\n".join(
        _without_locations(ln) if ln.lstrip().startswith("^bb") or " = arith.constant " in ln else ln
        for ln in text.split("\n")
    )


def _without_locations(line: str) -> str:
    """`line` without its `` loc(...)`` parts (nested parentheses; quoted strings hold none)."""
    out, at = [], 0
    while (start := line.find(" loc(", at)) >= 0:
        out.append(line[at:start])
        depth, i = 0, start + 4
        while True:
            depth += {"(": 1, ")": -1}.get(line[i], 0)
            i += 1
            if depth == 0:
                break
        at = i
    return "".join(out) + line[at:]


def _spy(monkeypatch) -> list[str]:
    """The modules whose blocks were lowered once (``once``) or copied before lowering (``copied``)."""
    seen: list[str] = []
    templated, copied = replicate.export_templated, replicate.export_replicated
    splice = linalg_copies.splice

    def spy_templated(model, *a, **k):
        out = templated(model, *a, **k)
        seen.append(type(model).__name__)
        return out

    def spy_splice(*a, **k):
        out = splice(*a, **k)
        seen[-1] += " once"
        return out

    def spy_copied(model, *a, **k):
        ep = copied(model, *a, **k)
        seen.append(type(model).__name__ + " copied")
        return ep

    monkeypatch.setattr("fuseflow.frontend.export.export_templated", spy_templated)
    monkeypatch.setattr("fuseflow.frontend.export.export_replicated", spy_copied)
    monkeypatch.setattr(linalg_copies, "splice", spy_splice)
    return seen


def test_decoders_and_heads_replicated_give_the_whole_models_module(monkeypatch):
    """Three decoders of two heads each: decoders and heads are copies, the decoder is lowered
    once, and the module (text and op locations) is the one importing the whole model gives."""
    model, args, formats = gpt_bigbird.build(seq=32, d_model=16, heads=2, d_ff=32, block=8, layers=3)
    whole = _text(model, args, formats, False)
    seen = _spy(monkeypatch)
    assert _text(model, args, formats, True) == whole
    assert seen == ["Decoder once"]  # lowered once, not copied or exported whole after a failure


@pytest.mark.parametrize(
    "failure",
    [replicate.NotReplicable("refused by the test"), ValueError("an unforeseen failure, raised by the test")],
    ids=["refused", "unforeseen"],
)
def test_a_block_that_cannot_be_lowered_alone_is_copied_before_lowering(monkeypatch, failure):
    """When splicing refuses (a lowered block of an unexpected shape) or fails in a way nobody
    foresaw, the blocks are copied before lowering, and the module is still the whole model's."""
    model, args, formats = gpt_bigbird.build(seq=16, d_model=8, heads=2, d_ff=8, block=4, layers=2)
    whole = _text(model, args, formats, False)

    def refuse(text, outermost):
        raise failure

    monkeypatch.setattr(linalg_copies, "cut", refuse)
    seen = _spy(monkeypatch)
    assert _text(model, args, formats, True) == whole
    assert seen == ["Decoder", "Decoder copied"]


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
    assert seen == ["TwoShapes once"]
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


class Clamped(torch.nn.Module):
    """A block with constants of its own (scale, bound, offset)."""

    def __init__(self, width: int):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.clamp(self.lin(x) * 0.25, min=-3.0) + 1.5


class Around(torch.nn.Module):
    """Ops of the model before and after its blocks: the blocks' constants are not the first
    ones of the function, and the spliced blocks sit between the model's own ops."""

    def __init__(self, width: int, depth: int):
        super().__init__()
        self.pre = torch.nn.Linear(width, width)
        self.blocks = torch.nn.ModuleList(Clamped(width) for _ in range(depth))

    def forward(self, x):
        x = torch.relu(self.pre(x)) * 0.75
        for b in self.blocks:
            x = b(x)
        return torch.tanh(x) * 2.0


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(2, 3), width=st.integers(2, 5), seed=st.integers(0, 99))
def test_blocks_between_the_models_own_ops_are_spliced_where_a_whole_import_puts_them(depth, width, seed):
    """The blocks' constants are hoisted beside the model's, as torch-mlir's canonicalizer puts
    them; the spliced module is the whole import's; the program matches PyTorch."""
    torch.manual_seed(seed)
    model, args = Around(width, depth).eval(), (torch.randn(3, width),)
    whole = _text(model, args, {}, False)
    with pytest.MonkeyPatch.context() as mp:
        seen = _spy(mp)
        assert _text(model, args, {}, True) == whole
    assert seen == ["Around once"]
    assert fuseflow.compile(model, args, schedule="unfused").simulate(*args).check() < 1e-5


class TopKBlock(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.topk(self.lin(x), 2, dim=1).values.sum(1, keepdim=True) + x  # the line the error names


class TopKStack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(TopKBlock(4) for _ in range(3))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_an_unsupported_op_inside_repeated_blocks_is_reported_as_for_the_whole_model():
    """The blocks are checked before anything is lowered once; the error is the one importing
    the model whole gives: the op and the block's own source line."""
    model, args = TopKStack().eval(), (torch.randn(3, 4),)
    with pytest.raises(fuseflow.UnsupportedError) as whole:
        import_model(model, args, {}, replicate=False)
    with pytest.raises(fuseflow.UnsupportedError) as once:
        fuseflow.compile(model, args, schedule="unfused")
    line = TopKBlock.forward.__code__.co_firstlineno + 1
    assert str(once.value) == str(whole.value)
    assert str(once.value).startswith(f"{__file__}:{line}:0: error: aten.topk is not supported"), str(once.value)
