"""Graph inputs shared by the GNN examples: networkx's karate club by default, or a file."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import scipy.io
import scipy.sparse as sp
import torch


class TwoLayerGNN(torch.nn.Module):
    """conv2(A, relu(conv1(A, X))) for any conv module class taking (fin, fout)."""

    def __init__(self, conv: type, fin: int, hidden: int, classes: int):
        super().__init__()
        self.conv1 = conv(fin, hidden)
        self.conv2 = conv(hidden, classes)

    def forward(self, A, X):
        return self.conv2(A, torch.relu(self.conv1(A, X)))


def load_graph(path: str | None, max_features: int | None = 256) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Adjacency (dense torch, 0/1) and node features if the file has them."""
    if path is None:
        a = nx.to_scipy_sparse_array(nx.karate_club_graph(), weight=None, format="csr")
        return torch.tensor(a.toarray(), dtype=torch.float32), None
    p = Path(path)
    X = None
    if p.suffix == ".npz":
        z = np.load(p)
        if "adj_indptr" in z:  # the planetoid CSR layout
            n = int(z["num_nodes"])
            a = sp.csr_matrix(
                (np.ones(len(z["adj_indices"]), np.float32), z["adj_indices"], z["adj_indptr"]), shape=(n, n)
            )
            if "feat_indptr" in z:
                f = sp.csr_matrix((z["feat_values"], z["feat_indices"], z["feat_indptr"]), shape=tuple(z["feat_shape"]))
                if max_features:
                    f = f[:, :max_features]
                X = torch.tensor(f.toarray(), dtype=torch.float32)
        else:
            a = sp.load_npz(p)
    elif p.suffix == ".mtx":
        a = sp.csr_matrix(scipy.io.mmread(p))
    else:
        edges = np.loadtxt(p, dtype=np.int64, comments="#").reshape(-1, 2)
        n = int(edges.max()) + 1
        a = sp.csr_matrix((np.ones(len(edges), np.float32), (edges[:, 0], edges[:, 1])), shape=(n, n))
        a = ((a + a.T) > 0).astype(np.float32)
    return torch.tensor(a.toarray(), dtype=torch.float32), X


def normalise(A: torch.Tensor) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2, the GCN propagation matrix."""
    a = A + torch.eye(A.shape[0])
    d = a.sum(1).rsqrt()
    return a * d[:, None] * d[None, :]


def sparse_features(n: int, f: int, density: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, f, generator=g)
    return x * (torch.rand(n, f, generator=g) < density)


def prune(model: torch.nn.Module, sparsity: float, block: int | None = None) -> None:
    """Zero the smallest-magnitude fraction `sparsity` of every Linear weight (in place):
    single entries, or with `block`, whole block x block tiles by their norm (block-structured
    sparsity, what sparsity blocking can exploit)."""
    with torch.no_grad():
        for m in model.modules():
            if not isinstance(m, torch.nn.Linear) or sparsity <= 0:
                continue
            w = m.weight
            if block:
                r, c = w.shape[0] // block, w.shape[1] // block
                norms = w[: r * block, : c * block].reshape(r, block, c, block).pow(2).sum((1, 3))
                k = int(norms.numel() * sparsity)
                if k:
                    thresh = norms.flatten().kthvalue(k).values
                    keep = (norms > thresh).repeat_interleave(block, 0).repeat_interleave(block, 1)
                    w[: r * block, : c * block] *= keep
                continue
            k = int(w.numel() * sparsity)
            if k:
                thresh = w.abs().flatten().kthvalue(k).values
                w[w.abs() <= thresh] = 0.0
