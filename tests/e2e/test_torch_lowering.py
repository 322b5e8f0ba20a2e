"""torch-mlir's two pipelines run in one child process; the result is what running them one
after the other gives, and a failure is reported by the step it happens in."""

import pytest
import torch
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import FxImporter

import fuseflow
from fuseflow.dialects.sam import new_context
from fuseflow.frontend import torch_lowering


def _torch_ir(model: torch.nn.Module, *args) -> str:
    ep = torch.export.export(model.eval(), args).run_decompositions(get_decomposition_table())
    ctx = new_context()
    torch_d.register_dialect(ctx)
    importer = FxImporter(context=ctx)
    importer.import_frozen_program(ep, func_name="main")
    return importer.module.operation.get_asm(enable_debug_info=True)


def test_one_child_process_gives_what_the_two_steps_give():
    text = _torch_ir(torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU()), torch.rand(4, 5))
    stepwise = text
    for step, pipeline in torch_lowering.STEPS:
        stepwise = torch_lowering.run_step(stepwise, step, pipeline)
    assert torch_lowering.lower_to_linalg(text) == stepwise
    assert "linalg.matmul" in stepwise or "linalg.generic" in stepwise


def test_a_failing_step_is_named(monkeypatch):
    """A pipeline that fails in its first step (an unknown pass there) is reported by that step."""
    text = _torch_ir(torch.nn.Linear(5, 3), torch.rand(4, 5))
    first_name, _ = torch_lowering.STEPS[0]
    monkeypatch.setattr(
        torch_lowering, "STEPS", ((first_name, "builtin.module(no-such-pass)"), torch_lowering.STEPS[1])
    )
    with pytest.raises(fuseflow.UnsupportedError, match=r"TorchFX IR -> torch backend failed"):
        torch_lowering.lower_to_linalg(text)
