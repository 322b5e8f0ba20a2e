"""The one import point for MLIR: torch-mlir's embedded upstream bindings.

Everything else in fuseflow imports ``ir``, ``PassManager`` and friends from here, so a move to
upstream ``mlir`` wheels touches this file only.
"""

from __future__ import annotations

from torch_mlir import ir  # noqa: F401
from torch_mlir.dialects import ext  # noqa: F401
from torch_mlir.dialects import sparse_tensor  # noqa: F401
from torch_mlir.passmanager import PassManager  # noqa: F401

MLIRError = ir.MLIRError


def location_str(loc: ir.Location) -> str | None:
    """``file:line:col`` of the innermost file location inside `loc` (None if unknown)."""
    text = str(loc)
    import re

    found = re.findall(r'"([^"]+)":(\d+):(\d+)', text)
    if not found:
        return None
    # callsite(callee at caller): the first file location is the innermost frame.
    f, line, col = found[0]
    return f"{f}:{line}:{col}"
