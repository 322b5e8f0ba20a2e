"""Facts about ops are read off one definition: zero preservation comes from the ops' semantics,
so the ordering's density model and the simulator agree on every unary ALU op."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fuseflow
from fuseflow.analysis.index_notation import fold, preserves_zero
from fuseflow.primitives import ALU_UNARY
from fuseflow.search.ordering import RegionVars, estimate_density

UNARY = {
    "erf": torch.erf,
    "tanh": torch.tanh,
    "relu": torch.relu,
    "abs": torch.abs,
    "neg": torch.neg,
    "sqrt": torch.sqrt,
    "exp": torch.exp,
}


class Unary(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a):
        return self.fn(a)


def test_zero_preservation_is_the_semantics():
    for op in ALU_UNARY:
        try:
            at_zero = fold(op, (0.0,))
        except (ValueError, ZeroDivisionError):
            at_zero = None
        assert preserves_zero(op) == (at_zero == 0.0), op
    assert preserves_zero("erf") and preserves_zero("nez") and not preserves_zero("exp")


@pytest.mark.parametrize("name", sorted(UNARY))
def test_density_model_agrees_with_the_simulator(name):
    torch.manual_seed(0)
    a = torch.rand(24, 24) * (torch.rand(24, 24) < 0.2)
    prog = fuseflow.compile(Unary(UNARY[name]), (a,), formats={"a": "csr"}, schedule="unfused")
    res = prog.simulate()
    res.check()
    out = res.outputs[0].to_dense().numpy()
    measured = float(np.count_nonzero(out)) / out.size
    region = prog.graphs[-1].name
    (asg,) = [x for x in prog.assigns[region] if x.out == prog.output_names[0]]
    rv = RegionVars(
        region,
        [asg],
        lambda t: (0, 1),
        lambda t: ("dense", "compressed"),
        {"a": float(np.count_nonzero(a.numpy())) / a.numel()},
    )
    assert estimate_density(rv, asg) == pytest.approx(measured, abs=1e-9), (name, measured)
