"""The outputs' structure and shapes come from the trace where an eager run could not fail on the
example inputs (dense inputs, no op checking values): the compile-time eager run is skipped there.
Where it could fail (ids out of range, sparse layouts torch cannot run) it still runs, and a
failure is a located `EagerError` at compile time. Simulated outputs are checked against eager
PyTorch with check()'s default tolerance (rtol = atol = 1e-5 x the longest dimension)."""

import pytest
import torch

import fuseflow
import fuseflow.frontend.export as export


class One(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Two(torch.nn.Module):
    def forward(self, x):
        return x * 2.0, (x @ x.T).sum()


class AsList(torch.nn.Module):
    def forward(self, x):
        return [x.sum(0), torch.exp(x)]


class Scalar(torch.nn.Module):
    def forward(self, x):
        return x.mean()


class Stack(torch.nn.Module):
    """Identical blocks: the replicated export's outputs are read the same way."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(5, 5) for _ in range(3)])

    def forward(self, x):
        for b in self.blocks:
            x = torch.tanh(b(x))
        return x


def _eager(model, x):
    with torch.no_grad():
        out = model(x)
    single = not isinstance(out, (tuple, list))
    return single, [tuple(t.shape) for t in ([out] if single else out)]


class Last(torch.nn.Module):
    """A replicated block computes the model's output: the signature names its copy."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(*[torch.nn.Linear(5, 5) for _ in range(3)])

    def forward(self, x):
        return self.blocks(torch.relu(x))


MODELS = [One(), Two(), AsList(), Scalar(), Stack(), Last()]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_dense_models_take_their_outputs_from_the_trace(model, monkeypatch):
    def no_eager(run):
        raise AssertionError("the compile-time eager run ran")

    monkeypatch.setattr(export, "_eager_outputs", no_eager)
    x = torch.rand(4, 5) - 0.3
    prog = fuseflow.compile(model, (x,))
    single, shapes = _eager(model, x)
    assert (prog.imported.single_output, prog.imported.output_shapes) == (single, shapes)
    res = prog.simulate()
    res.check()
    assert [tuple(t.shape) for t in res.outputs] == shapes


class Lookup(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.rand(6, 4))

    def forward(self, ids):
        return torch.nn.functional.embedding(ids, self.table) @ self.table.T


def test_ids_out_of_range_are_refused_at_compile_time():
    """The trace cannot see the ids' values; the eager run still does, and its failure is one
    line naming torch's error."""
    with pytest.raises(fuseflow.EagerError, match="fails in eager PyTorch.*IndexError") as e:
        fuseflow.compile(Lookup(), (torch.tensor([1, 9, 2]),))
    assert "\n" not in str(e.value)


def test_ids_in_range_run_eager_once_and_match_pytorch(monkeypatch):
    calls = []
    real = export._eager_outputs
    monkeypatch.setattr(export, "_eager_outputs", lambda run: calls.append(1) or real(run))
    prog = fuseflow.compile(Lookup(), (torch.tensor([1, 5, 2]),))
    assert calls == [1]
    prog.simulate().check()


def test_sparse_inputs_still_run_eager(monkeypatch):
    calls = []
    real = export._eager_outputs
    monkeypatch.setattr(export, "_eager_outputs", lambda run: calls.append(1) or real(run))
    a = (torch.rand(6, 6) * (torch.rand(6, 6) < 0.4)).to_sparse_csr()
    prog = fuseflow.compile(One(), (torch.rand(6, 5),))
    assert calls == []
    prog = fuseflow.compile(_MatMul(), (a, torch.rand(6, 5)))
    assert calls == [1]
    prog.simulate().check()


class _MatMul(torch.nn.Module):
    def forward(self, a, x):
        return torch.mm(a, x)
