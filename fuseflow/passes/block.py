"""``block{size=b}``: sparsity blocking — lower regions over b x b blocks with dense tile values."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.conversion.lower_module import BLOCK_ATTR
from fuseflow.errors import FuseflowError
from fuseflow.mlir import ir
from fuseflow.passes.context import PassContext
from fuseflow.schedule.regions import REGION_ATTR, body_ops, main_func


@dataclass(frozen=True)
class Options:
    """``block{size= region=}``: the block size; the region to block (empty: every region)."""

    size: int = 0
    region: str = ""


def run(module, options: Options, ctx: PassContext | None = None):
    """Block every region (or `region=`) with block size `size`: ``lower-to-sam`` then iterates the
    block levels (a block is present where any entry is nonzero; bcsr<b> tensors store exactly
    that) and streams dense tiles as values (tile ALU, reduce, spacc; the simulator's tile timing).

    Every dimension of a blocked region must be a multiple of `size` (or 1). Records
    ``fuseflow.block = {region = size}`` on the function (``"*"``: every region).
    """
    if options.size < 1:
        raise FuseflowError(f"block: size must be a positive integer, got {options.size}")
    with module.context:
        func = main_func(module)
        if options.region:
            regions = {
                ir.StringAttr(op.attributes[REGION_ATTR]).value for op in body_ops(func) if REGION_ATTR in op.attributes
            }
            if options.region not in regions:
                raise FuseflowError(
                    f"block: no region {options.region!r}; regions: {', '.join(sorted(regions)) or 'none'} "
                    "(run fuseflow-partition first)"
                )
        current = (
            {k.name: k.attr for k in ir.DictAttr(func.attributes[BLOCK_ATTR])} if BLOCK_ATTR in func.attributes else {}
        )
        current[options.region or "*"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), options.size)
        func.attributes[BLOCK_ATTR] = ir.DictAttr.get(current)
    return module
