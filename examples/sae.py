"""Sparse autoencoder: Linear -> ReLU -> Linear with 90% (magnitude-pruned) weight sparsity.

Default batch 32, input 1024, hidden 256; the reference study's 50176/256 by `build(full_size=True)`.
`build(sparse_weights=True)` holds the weights as torch sparse CSR parameters, made without a
dense copy: the paper's 1024x1024 images (two 1M x 512 weights, 4 GB dense) then take 1.3 GB.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse
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
    sparse_weights: bool = False,
):
    """`block_pruned=b` prunes whole b x b weight blocks (block-structured sparsity) instead of
    single weights; either way the weights are declared CSR (the block pass re-blocks them).
    `sparse_weights`: torch sparse CSR weights with a random `1 - weight_sparsity` of entries kept
    (what magnitude pruning of a uniform initialisation keeps), never dense."""
    if full_size:
        n_in, n_hidden = 50176, 256
    if sparse_weights:
        return _with_sparse_weights(batch, n_in, n_hidden, 1.0 - weight_sparsity, seed)
    torch.manual_seed(seed)
    model = SAE(n_in, n_hidden).eval()
    prune(model, weight_sparsity, block=block_pruned or None)
    x = torch.rand(batch, n_in)
    return model, (x,), {"encoder.weight": "csr", "decoder.weight": "csr"}


def _random_csr(rows: int, cols: int, density: float, bound: float, gen: np.random.Generator) -> torch.Tensor:
    """A rows x cols torch CSR tensor, each entry kept with probability `density`, values uniform in
    +-`bound` (nn.Linear's initialisation), built a few million entries at a time."""
    chunk = max(1, 4_000_000 // max(cols, 1))
    parts = []
    for r in range(0, rows, chunk):
        n = min(chunk, rows - r)
        keep = gen.random((n, cols), dtype=np.float32) < density
        vals = (gen.random(int(keep.sum()), dtype=np.float32) * 2 - 1) * bound
        m = scipy.sparse.csr_matrix(keep, dtype=np.float32)
        m.data = vals
        parts.append(m)
    w = scipy.sparse.vstack(parts, format="csr")
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.from_numpy(w.indptr.astype(np.int64)),
            torch.from_numpy(w.indices.astype(np.int64)),
            torch.from_numpy(w.data),
            (rows, cols),
        )


def _with_sparse_weights(batch: int, n_in: int, n_hidden: int, density: float, seed: int):
    gen = np.random.default_rng(seed)
    with torch.device("meta"):  # no dense weights, ever
        model = SAE(n_in, n_hidden).eval()
    for lin, fan_in in ((model.encoder, n_in), (model.decoder, n_hidden)):
        bound = 1.0 / fan_in**0.5
        w = _random_csr(lin.out_features, lin.in_features, density, bound, gen)
        lin.weight = torch.nn.Parameter(w, requires_grad=False)
        b = torch.from_numpy((gen.random(lin.out_features, dtype=np.float32) * 2 - 1) * bound)
        lin.bias = torch.nn.Parameter(b, requires_grad=False)
    x = torch.from_numpy(gen.random((batch, n_in), dtype=np.float32))
    return model, (x,), {}
