"""Multi-head attention as people write it: head slices + torch.cat, or view + transpose + bmm.

Both split the model dimension into heads; both compile under every built-in schedule and
match eager PyTorch (`SimResult.check`'s default tolerance), masked and unmasked."""

from __future__ import annotations

import pytest
import torch

import fuseflow


class SlicedHeads(torch.nn.Module):
    """Per-head slices of Q, K, V (`narrow` / indexing), one softmax per head, `torch.cat`."""

    def __init__(self, d: int = 8, heads: int = 2):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.d, self.heads = d, heads

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        dh = self.d // self.heads
        outs = []
        for h in range(self.heads):
            s = q[:, h * dh : (h + 1) * dh] @ k[:, h * dh : (h + 1) * dh].t()
            a = torch.softmax(s.masked_fill(mask == 0, float("-inf")), dim=-1)
            outs.append(a @ v[:, h * dh : (h + 1) * dh])
        return self.out(torch.cat(outs, dim=-1))


class ViewHeads(torch.nn.Module):
    """`view(n, heads, dh).transpose(0, 1)` and batched matmuls, merged back with `reshape`."""

    def __init__(self, d: int = 8, heads: int = 2):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
        self.heads = heads

    def forward(self, x, mask):
        n, d = x.shape
        split = lambda t: t.view(n, self.heads, d // self.heads).transpose(0, 1)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        s = torch.bmm(q, k.transpose(1, 2)) / (d // self.heads) ** 0.5
        a = torch.softmax(s.masked_fill(mask == 0, float("-inf")), dim=-1)
        return torch.bmm(a, v).transpose(0, 1).reshape(n, d)


def _inputs(n: int = 6, d: int = 8):
    g = torch.Generator().manual_seed(5)
    mask = (torch.rand(n, n, generator=g) < 0.5).float()
    mask[:, 0] = 1.0
    return torch.rand(n, d, generator=g), mask


@pytest.mark.parametrize("model", [SlicedHeads, ViewHeads], ids=["slices+cat", "view+bmm"])
@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
def test_multi_head_attention_matches_pytorch(model, schedule):
    torch.manual_seed(0)
    args = _inputs()
    prog = fuseflow.compile(model().eval(), args, formats={"mask": "csr"}, schedule=schedule)
    prog.simulate(*args).check()


@pytest.mark.parametrize("schedule", ["unfused", "full"])
def test_slices_inside_one_pytorch_op_end_its_region(schedule):
    """A GRU cell is one PyTorch op whose gates are slices of one matmul: the slice is read by
    name, so the ops after it move to a region of their own even inside that op (they used to
    stop compile with an internal error)."""
    torch.manual_seed(0)

    class Cell(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRUCell(8, 8)

        def forward(self, x, h):
            return self.gru(x, h)

    prog = fuseflow.compile(Cell().eval(), (torch.rand(4, 8), torch.rand(4, 8)), schedule=schedule)
    assert len(prog.graphs) >= 2
    prog.simulate().check()
