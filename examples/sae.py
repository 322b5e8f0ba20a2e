"""Sparse autoencoder: Linear -> ReLU -> Linear with 90% (magnitude-pruned) weight sparsity.

Default batch 32, input 1024, hidden 256; the reference study's 50176/256 by `build(full_size=True)`.
"""

from __future__ import annotations

import torch
from graphs import prune


class SAE(torch.nn.Module):
    def __init__(self, n_in: int, n_hidden: int):
        super().__init__()
        self.encoder = torch.nn.Linear(n_in, n_hidden)
        self.decoder = torch.nn.Linear(n_hidden, n_in)

    def forward(self, x):
        return self.decoder(torch.relu(self.encoder(x)))


def build(
    batch: int = 32,
    n_in: int = 1024,
    n_hidden: int = 256,
    weight_sparsity: float = 0.9,
    full_size: bool = False,
    seed: int = 0,
    block_pruned: int = 0,
):
    """`block_pruned=b` prunes whole b x b weight blocks (block-structured sparsity) instead of
    single weights; either way the weights are declared CSR (the block pass re-blocks them)."""
    if full_size:
        n_in, n_hidden = 50176, 256
    torch.manual_seed(seed)
    model = SAE(n_in, n_hidden).eval()
    prune(model, weight_sparsity, block=block_pruned or None)
    x = torch.rand(batch, n_in)
    return model, (x,), {"encoder.weight": "csr", "decoder.weight": "csr"}
