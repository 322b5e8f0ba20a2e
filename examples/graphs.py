"""Graph inputs shared by the GNN examples: networkx's karate club by default, a file, or a
seeded stand-in for a paper graph that is not shipped (``standin:dblp``, see `STANDINS`).

Adjacencies up to `DENSE_LIMIT` nodes come back as dense torch tensors (declared CSR by the
models); larger ones as torch sparse CSR, since a dense PubMed adjacency alone is 1.5 GB and an
ogbn-mag one 2 TB. Either way the simulator reads the same CSR arrays.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import scipy.io
import scipy.sparse as sp
import torch


class TwoLayerGNN(torch.nn.Module):
    """conv2(A, relu(conv1(A, X))) for any conv module class taking (fin, fout); `softmax` ends
    in a softmax over the classes, as FuseFlow's study models do."""

    def __init__(self, conv: type, fin: int, hidden: int, classes: int, softmax: bool = False):
        super().__init__()
        self.conv1 = conv(fin, hidden)
        self.conv2 = conv(hidden, classes)
        self.softmax = softmax

    def forward(self, A, X):
        out = self.conv2(A, torch.relu(self.conv1(A, X)))
        return torch.softmax(out, dim=1) if self.softmax else out


DENSE_LIMIT = 4096
"""Largest graph (nodes) whose adjacency is handed over dense."""

STANDINS: dict[str, tuple[int, int, int, float]] = {
    # name: (nodes, directed adjacency entries, feature width, feature density; 1.0 = dense)
    # from ../shared/data/STANDINS.md; the bag-of-words density is Cora's (49,216 / (2,708 x 1,433))
    "cora-ml": (2_995, 16_316, 2_879, 0.0127),
    "dblp": (17_716, 105_734, 1_639, 0.0127),
    "ogbl-collab": (235_868, 2 * 1_285_465, 128, 1.0),
    "ogbn-mag": (736_389, 5_416_271, 128, 1.0),
}


def standin(name: str, seed: int = 0) -> tuple[sp.csr_matrix, torch.Tensor]:
    """A seeded stand-in for a graph not shipped here: the node count, (within one) the number of
    adjacency entries, and a power-law degree distribution (Chung-Lu: an edge joins two nodes
    with probability proportional to their weights, weights ~ rank^-1/(2.5-1)), symmetric, no
    self loops; features as the paper's (bag-of-words at Cora's density, or dense 128-wide)."""
    if name not in STANDINS:
        raise ValueError(f"unknown stand-in {name!r}; one of {', '.join(STANDINS)}")
    n, entries, width, density = STANDINS[name]
    rng = np.random.default_rng(seed)
    w = (np.arange(1, n + 1) ** (-1 / 1.5)).astype(np.float64)
    p = rng.permutation(w / w.sum())  # hubs anywhere, not at the first ids
    pairs = entries // 2
    keys = np.zeros(0, np.int64)
    while len(keys) < pairs:
        k = 2 * (pairs - len(keys)) + 1024
        i, j = rng.choice(n, k, p=p), rng.choice(n, k, p=p)
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        new = (lo * n + hi)[lo != hi]
        both = np.concatenate([keys, new])
        _, first = np.unique(both, return_index=True)
        keys = both[np.sort(first)][:pairs]  # first occurrences, in generation order
    lo, hi = keys // n, keys % n
    ones = np.ones(2 * pairs, np.float32)
    a = sp.csr_matrix((ones, (np.concatenate([lo, hi]), np.concatenate([hi, lo]))), shape=(n, n))
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, width, generator=g)
    if density < 1.0:
        x = x * (torch.rand(n, width, generator=g) < density)
    return a, x


def _as_torch(a: sp.spmatrix) -> torch.Tensor:
    a = sp.csr_matrix(a, dtype=np.float32)
    if a.shape[0] <= DENSE_LIMIT:
        return torch.tensor(a.toarray(), dtype=torch.float32)
    a.sort_indices()
    return torch.sparse_csr_tensor(
        torch.from_numpy(a.indptr.astype(np.int64)),
        torch.from_numpy(a.indices.astype(np.int64)),
        torch.from_numpy(a.data),
        size=a.shape,
    )


def load_graph(path: str | None, max_features: int | None = 256) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Adjacency (0/1; dense torch up to `DENSE_LIMIT` nodes, else torch sparse CSR) and node
    features if the source has them (at most `max_features` columns; None keeps them all)."""
    if path is None:
        a = nx.to_scipy_sparse_array(nx.karate_club_graph(), weight=None, format="csr")
        return _as_torch(a), None
    if path.startswith("standin:"):
        a, x = standin(path.split(":", 1)[1])
        return _as_torch(a), (x[:, :max_features] if max_features else x)
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
    return _as_torch(a), X


def normalise(A: torch.Tensor) -> torch.Tensor:
    """D^-1/2 (A + I) D^-1/2, the GCN propagation matrix (in the layout `A` came in)."""
    if A.layout == torch.strided:
        a = A + torch.eye(A.shape[0])
        d = a.sum(1).rsqrt()
        return a * d[:, None] * d[None, :]
    n = A.shape[0]
    a = sp.csr_matrix((A.values().numpy(), A.col_indices().numpy(), A.crow_indices().numpy()), shape=(n, n))
    a = (a + sp.eye(n, dtype=np.float32, format="csr")).tocsr()
    d = np.asarray(a.sum(1)).ravel() ** -0.5
    return _as_torch(sp.diags(d.astype(np.float32)) @ a @ sp.diags(d.astype(np.float32)))


def feature_format(X: torch.Tensor) -> str:
    """Bag-of-words features are declared CSR; dense embeddings (the OGB graphs') dense."""
    return "csr" if float(torch.count_nonzero(X)) < 0.5 * X.numel() else "dense"


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
