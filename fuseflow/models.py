"""Small models that tests, benchmarks and examples share, importable from an installed package
(a benchmark never imports a test file: it must run without the test extra).

- `bigbird_mask`: BigBird's block mask (window, global and random blocks);
- `MaskedAttention` / `masked_attention`: softmax(mask(Q K^T / sqrt(d))) V over that mask;
- `Chain`: a chain of einsum-style ops (``matmul``, ``mul``, ``add``, ``relu``, ``scale``,
  ``rowsum_bcast``) over one input and a weight per binary op, what the random-chain tests draw;
- `pyg_two_layer`: two PyTorch Geometric convolutions with a ReLU between (needs the ``pyg`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch


def bigbird_mask(
    seq: int, block: int, window: int = 1, n_global: int = 2, n_random: int = 2, seed: int = 0
) -> torch.Tensor:
    """Block mask: a sliding window of ±`window` blocks, `n_global` global blocks (rows and
    columns), and `n_random` random blocks per block row. Every row attends to its own block."""
    nb = seq // block
    rng = np.random.default_rng(seed)
    blocks = np.zeros((nb, nb), dtype=bool)
    for r in range(nb):
        blocks[r, max(0, r - window) : r + window + 1] = True
        others = [c for c in range(nb) if not blocks[r, c]]
        if others:
            blocks[r, rng.choice(others, size=min(n_random, len(others)), replace=False)] = True
    blocks[:n_global, :] = True
    blocks[:, :n_global] = True
    dense = np.kron(blocks, np.ones((block, block), dtype=bool))
    return torch.tensor(dense, dtype=torch.float32)


class MaskedAttention(torch.nn.Module):
    """softmax(mask(Q K^T / sqrt(d))) V with the mask declared sparse (BigBird)."""

    def forward(self, q, k, v, mask):
        """The attention of `q` over `k`, `v` where `mask` is nonzero."""
        s = (q @ k.T) * (q.shape[1] ** -0.5)
        s = s.masked_fill(mask == 0, float("-inf"))
        return torch.softmax(s, dim=-1) @ v


def masked_attention(seq: int = 64, d: int = 32, block: int = 16):
    """(model, args, formats) of `MaskedAttention` on random Q, K, V and a BigBird mask."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(seq, d, generator=gen) for _ in range(3))
    return MaskedAttention(), (q, k, v, bigbird_mask(seq, block, seed=0)), {"mask": "csr"}


class Chain(torch.nn.Module):
    """`ops` applied in turn to the input; each binary op takes the next weight."""

    def __init__(self, ops: Sequence[str]):
        super().__init__()
        self.ops = list(ops)

    def forward(self, x, *ws):
        """`x` through every op, the binary ones taking `ws` in turn."""
        k = 0
        for op in self.ops:
            if op in ("matmul", "mul", "add"):
                w = ws[k]
                k += 1
                x = x @ w if op == "matmul" else (x * w if op == "mul" else x + w)
            elif op == "relu":
                x = torch.relu(x)
            elif op == "scale":
                x = x * 3.0
            else:
                x = x + x.sum(dim=1, keepdim=True)
        return x


class TwoLayer(torch.nn.Module):
    """Two message-passing layers with a ReLU between, called as PyG calls them."""

    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module):
        super().__init__()
        self.conv1 = conv1
        self.conv2 = conv2

    def forward(self, x, edge_index):
        """conv2(relu(conv1(x)))."""
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def pyg_convs() -> dict[str, Callable[[int, int], torch.nn.Module]]:
    """PyG's convolutions as the PyG tests and benchmark use them, by name."""
    from torch_geometric.nn import GCNConv, GINConv, SAGEConv  # optional extra: pip install '.[pyg]'

    return {
        "gcn": lambda i, o: GCNConv(i, o),
        "gcn-no-normalize": lambda i, o: GCNConv(i, o, normalize=False),
        "sage-mean": lambda i, o: SAGEConv(i, o),
        "sage-max": lambda i, o: SAGEConv(i, o, aggr="max"),
        "gin": lambda i, o: GINConv(torch.nn.Linear(i, o)),
    }


def pyg_two_layer(kind: str, f_in: int, hidden: int = 8, out: int = 4, seed: int = 0) -> torch.nn.Module:
    """`TwoLayer` of the `kind` convolution (`pyg_convs`), seeded."""
    convs = pyg_convs()
    torch.manual_seed(seed)
    return TwoLayer(convs[kind](f_in, hidden), convs[kind](hidden, out)).eval()
