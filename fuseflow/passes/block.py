"""``block{size=b}``: sparsity blocking — lower regions over b x b blocks with dense tile values."""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.conversion.linalg_attrs import compute_ops, main_func, region_of, set_block
from fuseflow.errors import FuseflowError
from fuseflow.passes.context import PassContext


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
            regions = {r for op in compute_ops(func) if (r := region_of(op)) is not None}
            if options.region not in regions:
                raise FuseflowError(
                    f"block: no region {options.region!r}; regions: {', '.join(sorted(regions)) or 'none'} "
                    "(run fuseflow-partition first)"
                )
        set_block(func, options.region or "*", options.size)
    return module
