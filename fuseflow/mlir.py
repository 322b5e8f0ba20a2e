"""The one import point for MLIR: torch-mlir's embedded upstream bindings.

Everything else in fuseflow imports ``ir``, ``PassManager`` and friends from here, so a move to
upstream ``mlir`` wheels touches this file only.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from torch_mlir import ir  # noqa: F401
from torch_mlir.dialects import (
    ext,  # noqa: F401
    sparse_tensor,  # noqa: F401
)
from torch_mlir.passmanager import PassManager  # noqa: F401

MLIRError = ir.MLIRError


def location_str(loc: ir.Location) -> str | None:
    """``file:line:col`` of the innermost frame inside `loc` that is the user's code (not a
    library's: torch's LayerNorm is not where the user can act), else the innermost frame."""
    return _frame_of(str(loc))


@functools.lru_cache(maxsize=65536)
def _frame_of(text: str) -> str | None:
    """`location_str` of a location's text (a model's copies of one block share their texts)."""
    found = re.findall(r'"([^"]+)":(\d+):(\d+)', text)
    if not found:
        return None
    # callsite(callee at caller): file locations run from the innermost frame outwards.
    user = [f for f in found if not _library(f[0])]
    f, line, col = (user or found)[0]
    return f"{f}:{line}:{col}"


_HERE = str(Path(__file__).parent)


@functools.lru_cache(maxsize=4096)
def _library(path: str) -> bool:
    return "site-packages" in path or "dist-packages" in path or path.startswith(_HERE)
