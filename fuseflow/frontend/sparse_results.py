"""Sparse intermediates: ``x.to_sparse*()`` inside a model, or ``formats=`` naming an op's result.

Either way the linalg op that computes the value gets a ``fuseflow.format`` attribute (a format
name, as `formats=` takes). Partitioning then materialises that result (a region boundary after
it), and the producing region writes it in the format, dropping zeros (`sam.val_drop` on the
innermost level, `sam.crd_drop` for outer compressed levels), so consumers iterate only the
nonzeros: dynamic sparsity, as a ReLU or a threshold makes it. The attribute is plain IR, so a
`.mlir` file can carry it through ``fuseflow-opt`` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuseflow.conversion.linalg_attrs import check_supported, set_declared_format
from fuseflow.errors import FormatError, UnsupportedError
from fuseflow.frontend.ops import node_location
from fuseflow.mlir import ir
from fuseflow.schedule.regions import fx_node_name, op_listing

TO_SPARSE = {
    "aten._to_sparse.default": "coo",
    "aten._to_sparse_csr.default": "csr",
    "aten._to_sparse_csc.default": "csc",
}


def strip_to_sparse(ep) -> dict[str, str]:
    """Remove ``_to_sparse*`` nodes from an exported graph; returns {producing FX node: format}."""
    out: dict[str, str] = {}
    for node in list(ep.graph.nodes):
        target = str(node.target)
        if node.op != "call_function" or not target.startswith("aten._to_sparse"):
            continue
        if target not in TO_SPARSE:
            raise UnsupportedError(
                f"{target.rsplit('.', 1)[0]} is not supported "
                "(sparse results: to_sparse, to_sparse_csr, to_sparse_csc)",
                node_location(node),
            )
        src = node.args[0]
        if src.op != "placeholder":  # a conversion of an input is the input (a copy region if returned)
            out[src.name] = TO_SPARSE[target]
        node.replace_all_uses_with(src)
        ep.graph.erase_node(node)
    if out:
        ep.graph_module.recompile()
    return out


def mark(func, by_node: Mapping[str, str], requested: Mapping[Any, str], known_inputs: list[str]) -> None:
    """Put ``fuseflow.format`` on the op computing each requested result.

    `by_node`: {FX node name: format} from `strip_to_sparse`; `requested`: `formats=` entries
    that name no input: an op index of ``prog.ops()``, a PyTorch op's name there (``relu``), or a
    module path (its output: the module's last op)."""
    ops = check_supported(func)
    infos, index_of = op_listing(func)
    last_of_info: dict[int, ir.Operation] = {}
    for i, op in enumerate(ops):
        last_of_info[index_of[i]] = op
    targets: list[tuple[ir.Operation, str]] = []
    for name, fmt in by_node.items():
        hits = [op for op in ops if fx_node_name(op) == name]
        if hits:
            targets.append((hits[-1], fmt))
    for key, fmt in requested.items():
        k = _info_index(key, infos)
        if k is None:
            ops_text = ", ".join(f"{o.index}:{o.node}" for o in infos)
            raise FormatError(
                f"formats names {key!r}, which is neither an argument, a parameter, an op of prog.ops() "
                f"({ops_text}) nor a module path; arguments and parameters: {', '.join(known_inputs)}"
            )
        targets.append((last_of_info[k], fmt))
    for op, fmt in targets:
        set_declared_format(op, str(fmt))


def _info_index(key: Any, infos) -> int | None:
    if isinstance(key, int) and not isinstance(key, bool):
        return key if 0 <= key < len(infos) else None
    if not isinstance(key, str):
        return None
    if key.isdigit():
        return _info_index(int(key), infos)
    named = [o.index for o in infos if o.node == key]
    if named:
        return named[-1]
    inside = [o.index for o in infos if o.path == key or o.path.startswith(key + ".")]
    return inside[-1] if inside else None
