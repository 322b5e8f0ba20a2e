"""``torch.diag(v)`` of a vector: a diagonal sparse matrix, ``v(j) * I(i, j)``.

torch-mlir's decomposition builds the diagonal from two ``arange`` tensors and an equality
test, which sam cannot express. Instead ``aten.diag`` is kept out of the decomposition and
replaced by ``unsqueeze(v, 0) * I`` where ``I`` is an n x n identity stored as CSR, a model
input the frontend adds (``diag_eye<n>``, one per size) and binds itself. The product intersects
with I, so the lowering iterates only the diagonal: what ``torch.diag(1 / F.sum(1)).to_sparse()``
means in a feature normalisation.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.sparse
import torch

DIAG = torch.ops.aten.diag.default


def without_diag(table: Mapping) -> dict:
    """A decomposition table that leaves ``aten.diag`` for `rewrite_diag`."""
    return {op: fn for op, fn in table.items() if op is not DIAG}


def eye_name(n: int) -> str:
    """The name of the n x n identity a ``diag(v)`` reads."""
    return f"diag_eye{n}"


def identity(n: int) -> scipy.sparse.csr_array:
    """The n x n identity, stored CSR."""
    return scipy.sparse.identity(n, dtype=np.float32, format="csr")


def rewrite_diag(ep) -> list[int]:
    """Replace every ``diag`` of a vector (main diagonal) in an exported graph by a product with an
    identity input; returns the sizes of the identities added as trailing placeholders. A
    ``diag`` of a matrix (extracting its diagonal) or off the main diagonal is left for the op
    check to report."""
    g = ep.graph
    sizes: dict[int, torch.fx.Node] = {}
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    for node in list(g.nodes):
        if node.op != "call_function" or node.target is not DIAG:
            continue
        v = node.args[0]
        offset = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
        val = v.meta.get("val")
        if offset != 0 or val is None or val.dim() != 1:
            continue
        n = int(val.shape[0])
        fake_mode = val.fake_mode
        if n not in sizes:
            with g.inserting_after(placeholders[-1] if not sizes else list(sizes.values())[-1]):
                eye = g.placeholder(eye_name(n))
            with fake_mode:
                eye.meta["val"] = torch.empty(n, n, dtype=val.dtype)
            sizes[n] = eye
        with g.inserting_before(node):
            row = g.call_function(torch.ops.aten.unsqueeze.default, (v, 0))
            prod = g.call_function(torch.ops.aten.mul.Tensor, (row, sizes[n]))
        with fake_mode:
            row.meta["val"] = val.unsqueeze(0)
            prod.meta["val"] = row.meta["val"] * sizes[n].meta["val"]
        for key in ("stack_trace", "nn_module_stack", "from_node"):
            if key in node.meta:
                row.meta[key] = prod.meta[key] = node.meta[key]
        node.replace_all_uses_with(prod)
        g.erase_node(node)
    if sizes:
        ep.graph_module.recompile()
    return list(sizes)
