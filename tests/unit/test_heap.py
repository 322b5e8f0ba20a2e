"""fuseflow/heap.py: a compile sets aside the objects alive before it and gives them back; a
caller's own frozen objects stay frozen; the program still matches PyTorch."""

from __future__ import annotations

import gc

import pytest
import torch

import fuseflow
from fuseflow import compiler
from fuseflow.heap import old_objects_frozen


@pytest.fixture
def tiny():
    import gcn_layer

    return gcn_layer.build()


def _frozen_during_lowering(monkeypatch) -> list[int]:
    seen: list[int] = []
    real = compiler.lower_program

    def spy(*args, **kwargs):
        seen.append(gc.get_freeze_count())
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler, "lower_program", spy)
    return seen


def test_a_compile_freezes_the_old_heap_while_it_lowers_and_unfreezes_it_after(monkeypatch, tiny):
    model, args, formats = tiny
    assert gc.get_freeze_count() == 0
    seen = _frozen_during_lowering(monkeypatch)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full")
    assert seen and seen[0] > 1000  # torch alone is more than this
    assert gc.get_freeze_count() == 0
    res = prog.simulate()
    assert res.check() < 1e-4  # check(): the outputs against eager PyTorch
    expected = model(*args)
    assert torch.allclose(torch.as_tensor(res.outputs[0]), expected, atol=1e-4)


def test_a_callers_frozen_objects_stay_frozen_and_the_compile_freezes_nothing_more(monkeypatch, tiny):
    model, args, formats = tiny
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        seen = _frozen_during_lowering(monkeypatch)
        fuseflow.compile(model, args, formats=formats, schedule="full")
        # frozen objects freed by reference counting leave the count; none joins it
        assert len(seen) == 1 and 0.9 * before < seen[0] <= before
        assert 0.9 * before < gc.get_freeze_count() <= before
    finally:
        gc.unfreeze()


def test_the_heap_is_given_back_when_the_compile_fails():
    with pytest.raises(RuntimeError), old_objects_frozen():
        assert gc.get_freeze_count() > 0
        raise RuntimeError("lowering failed")
    assert gc.get_freeze_count() == 0
