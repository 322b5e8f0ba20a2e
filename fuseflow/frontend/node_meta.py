"""What an exported FX node says of where it came from: its module path and its source op.

The importer wraps each op's location in these (``node|module path|origin``), and the ``unfused``
schedule groups by them. A replicated block's copies carry their source op in their meta
(`replicate.py`), named as a whole-model trace would name it.
"""

from __future__ import annotations

ORIGIN = "fuseflow_origin"
"""Node meta: the name of the PyTorch op a node came from (as a whole-model trace names it)."""


def module_path(node) -> str:
    """The innermost nn.Module path of an FX node, relative to the user's model."""
    return stack_path(node.meta.get("nn_module_stack") or {})


def stack_path(stack: dict) -> str:
    """`module_path` of a node with this ``nn_module_stack``."""
    paths = [p for p, _ in stack.values()]
    path = paths[-1] if paths else ""
    if path == "model":
        return ""
    return path[len("model.") :] if path.startswith("model.") else path


def origin(node) -> str:
    """The PyTorch op the user wrote that this (possibly decomposed) node came from."""
    if ORIGIN in node.meta:
        return node.meta[ORIGIN]
    chain = node.meta.get("from_node") or []
    while chain:
        src = chain[0]
        if not getattr(src, "from_node", None):
            return src.name
        chain = src.from_node
    return node.name
