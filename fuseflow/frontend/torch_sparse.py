"""torch sparse tensors of every layout: the storage format they imply and their stored entries.

torch offers COO of any rank (optionally *hybrid*: trailing dense dims inside each value), CSR
and CSC (optionally *batched*: leading dense dims, and hybrid) and 2-D BSR/BSC. Each maps to
per-level storage: a sparse dim of COO is a compressed level (CSF), a batch dim a dense level,
CSR's row/column pair a dense and a compressed level, a hybrid dim a dense level. Entries are
read from torch's own index and value arrays (never densified): a hybrid value block is stored
densely by torch already, so expanding it costs what torch stores.

2-D tensors of the plain layouts keep their scipy form (`program.bind_args`); every other sparse
tensor becomes an N-D ``scipy.sparse.coo_array`` with duplicates summed and zeros dropped, the
same entries `formats.pack` would keep.
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse
import torch

from fuseflow.errors import UnsupportedError
from fuseflow.formats import Format

SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
_COMPRESSED = {torch.sparse_csr: "CSR", torch.sparse_csc: "CSC", torch.sparse_bsr: "BSR", torch.sparse_bsc: "BSC"}


def is_sparse(t: object) -> bool:
    """Whether `t` is a torch tensor with a sparse layout."""
    return isinstance(t, torch.Tensor) and t.layout in SPARSE_LAYOUTS


def layout_name(t: torch.Tensor) -> str:
    """How a user would name the layout: ``batched hybrid CSR (batch 1, dense 1)``."""
    base = "COO" if t.layout == torch.sparse_coo else _COMPRESSED[t.layout]
    batch, dense = batch_dims(t), t.dense_dim()
    kinds = [k for k, n in (("batched", batch), ("hybrid", dense)) if n]
    extra = ", ".join(f"{k} {n}" for k, n in (("batch", batch), ("dense", dense)) if n)
    return " ".join([*kinds, base]) + (f" ({extra})" if extra else "")


def batch_dims(t: torch.Tensor) -> int:
    """Leading dense (batch) dims of a compressed layout; 0 for COO."""
    return 0 if t.layout == torch.sparse_coo else t.dim() - t.dense_dim() - 2


def is_plain_2d(t: torch.Tensor) -> bool:
    """A 2-D tensor with both dims sparse: scipy holds it as it is (CSR/CSC/COO/BSR)."""
    return t.dim() == 2 and t.dense_dim() == 0 and batch_dims(t) == 0


def implied_format(t: torch.Tensor, name: str) -> Format | str:
    """The storage a torch sparse layout implies (a format name for the plain 2-D layouts)."""
    validate(t, name)
    if t.layout in (torch.sparse_bsr, torch.sparse_bsc):
        b = tuple(t.values().shape[-2:])
        kind = "bsr" if t.layout == torch.sparse_bsr else "bsc"
        if not is_plain_2d(t):
            raise UnsupportedError(
                f"input {name!r}: {layout_name(t)} is not supported; blocked inputs must be 2-D "
                f"(convert with .to_sparse_coo() or .to_sparse_csr())"
            )
        if b[0] != b[1]:
            raise UnsupportedError(
                f"input {name!r}: {kind.upper()} with {b[0]}x{b[1]} blocks is not supported; square blocks map to "
                f"bc{kind[1:]}<b> (to_sparse_{kind}(blocksize=(b, b)))"
            )
        return f"bc{kind[1:]}<{b[0]}>"
    rank, dense = t.dim(), t.dense_dim()
    if t.layout == torch.sparse_coo:
        sparse = t.sparse_dim()
        return Format(("compressed",) * sparse + ("dense",) * dense, tuple(range(rank)))
    batch = batch_dims(t)
    levels = ("dense",) * batch + ("dense", "compressed") + ("dense",) * dense
    pair = (batch, batch + 1) if t.layout == torch.sparse_csr else (batch + 1, batch)
    return Format(levels, tuple(range(batch)) + pair + tuple(range(batch + 2, rank)))


def validate(t: torch.Tensor, name: str) -> None:
    """Refuse a tensor whose index arrays break torch's invariants (out-of-range coordinates,
    unsorted compressed indices): torch builds such tensors unchecked by default, and packing
    them would read outside the tensor."""
    try:
        with torch.sparse.check_sparse_tensor_invariants():
            if t.layout == torch.sparse_coo:
                torch.sparse_coo_tensor(t._indices(), t._values(), t.shape)
            else:
                compressed, plain = _compressed_indices(t)
                torch.sparse_compressed_tensor(compressed, plain, t.values(), t.shape, layout=t.layout)
    except RuntimeError as e:
        raise UnsupportedError(f"input {name!r}: invalid {layout_name(t)} tensor: {str(e).splitlines()[0]}") from None


def _compressed_indices(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return t.crow_indices(), t.col_indices()
    return t.ccol_indices(), t.row_indices()


def stored_entries(t: torch.Tensor) -> int:
    """Nonzero scalar entries of a torch sparse tensor, without densifying it."""
    if t.layout == torch.sparse_coo:
        t = t.coalesce()
    return int(torch.count_nonzero(t.values()))


def to_coo_array(t: torch.Tensor, name: str) -> scipy.sparse.coo_array:
    """Every nonzero scalar entry of `t` as an N-D scipy COO array (duplicates summed, sorted)."""
    validate(t, name)
    t = t.detach()
    coo = t if t.layout == torch.sparse_coo else t.to_sparse_coo()
    coo = coo.coalesce()
    idx = coo.indices().numpy().astype(np.int64)  # (sparse dims, nnz)
    vals = coo.values().float().numpy()  # (nnz, *dense dims)
    dense_shape = tuple(vals.shape[1:])
    if dense_shape:  # hybrid: one entry per element of each stored value block
        inner = np.indices(dense_shape).reshape(len(dense_shape), -1)
        n_inner = inner.shape[1]
        idx = np.concatenate([np.repeat(idx, n_inner, axis=1), np.tile(inner, (1, idx.shape[1]))], axis=0)
        vals = vals.reshape(-1)
    keep = vals != 0
    arr = scipy.sparse.coo_array((vals[keep].astype(np.float32), tuple(idx[:, keep])), shape=tuple(t.shape))
    arr.sum_duplicates()
    return arr


def to_scipy(t: torch.Tensor):
    """A plain 2-D sparse tensor as the scipy matrix of its layout (its arrays as they are)."""
    sp = scipy.sparse
    t = t.detach().float()
    if t.layout == torch.sparse_bsc:  # its arrays are the BSR of the transpose, tiles transposed
        v = t.values().transpose(1, 2).contiguous().numpy()
        shape = (t.shape[1], t.shape[0])
        at = sp.bsr_matrix((v, t.row_indices().numpy(), t.ccol_indices().numpy()), shape=shape, blocksize=v.shape[1:])
        return at.T.tobsr(blocksize=v.shape[1:])
    if t.layout == torch.sparse_bsr:
        v = t.values().numpy()
        return sp.bsr_matrix(
            (v, t.col_indices().numpy(), t.crow_indices().numpy()), shape=t.shape, blocksize=v.shape[1:]
        )
    if t.layout == torch.sparse_csr:
        return sp.csr_matrix((t.values().numpy(), t.col_indices().numpy(), t.crow_indices().numpy()), shape=t.shape)
    if t.layout == torch.sparse_csc:
        return sp.csc_matrix((t.values().numpy(), t.row_indices().numpy(), t.ccol_indices().numpy()), shape=t.shape)
    t = t.coalesce()
    return sp.coo_matrix((t.values().numpy(), tuple(t.indices().numpy())), shape=t.shape)


def copy_module(model: torch.nn.Module) -> torch.nn.Module:
    """`copy.deepcopy` of a module, in eval mode, that also copies torch sparse parameters and
    buffers (deepcopy reaches for their storage, which sparse compressed tensors do not have)."""

    memo: dict[int, object] = {id(t): t.detach().clone() for t in model.buffers() if is_sparse(t)}
    memo.update(
        {id(p): torch.nn.Parameter(p.detach().clone(), p.requires_grad) for p in model.parameters() if is_sparse(p)}
    )
    return copy.deepcopy(model, memo).eval()
