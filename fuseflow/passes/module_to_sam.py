"""``module-to-sam``: sam graphs back from their portable form (see ``sam-to-module``)."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.errors import FuseflowError
from fuseflow.mlir import ir, location_str
from fuseflow.passes.context import PassContext
from fuseflow.passes.sam_to_module import PREFIX, move_body, named_attributes


@dataclass(frozen=True)
class Options:
    """``module-to-sam`` takes no options."""


def run(module, options: Options, ctx: PassContext | None = None):
    """Turn each nested ``builtin.module`` that carries ``sam.tensors`` back into a ``sam.graph``
    (``sam.k`` attributes become ``k``; the module's name becomes ``sym_name``). Nested modules
    without ``sam.tensors`` stay as they are."""
    with module.context:
        for portable in [op.operation for op in module.body.operations if _is_portable(op.operation)]:
            if "sym_name" not in portable.attributes:
                raise FuseflowError(
                    "module-to-sam: a portable sam graph needs a name (module @name)", location_str(portable.location)
                )
            attributes = {(k[len(PREFIX) :] if k.startswith(PREFIX) else k): a for k, a in named_attributes(portable)}
            with ir.InsertionPoint(portable), portable.location:
                graph = ir.Operation.create("sam.graph", regions=1, attributes=attributes)
            move_body(portable, graph)
            portable.erase()
        module.operation.verify()
    return module


def _is_portable(op: ir.Operation) -> bool:
    return op.name == "builtin.module" and PREFIX + "tensors" in op.attributes
