"""A region's demand per resource class, and the check that it fits the fabric."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from fuseflow.errors import FuseflowError
from fuseflow.primitives import RESOURCE
from fuseflow.sim.arch import RESOURCES, Fabric
from fuseflow.sim.graph import GraphSpec


class FitError(FuseflowError):
    """A region needs more units of a resource class than the fabric has."""


def demand_of(spec: GraphSpec) -> dict[str, int]:
    """Units per resource class: one per primitive (a region with P lanes holds every lane's),
    and b per compute primitive of a blocked region's tiles (`tile_units`)."""
    counts: Counter[str] = Counter()
    for n in spec.nodes:
        counts[RESOURCE[n.kind]] += tile_units(spec) if _computes_tiles(spec, n) else 1
    return {r: counts.get(r, 0) for r in RESOURCES}


def tile_units(spec: GraphSpec) -> int:
    """Compute units one tile primitive of a blocked region holds: b. A b x b product tile runs
    on a b x b matmul unit at one tile every b cycles, and any other tile on a b-lane vector unit
    at one b x b tile every b cycles: b element operations a cycle either way, what b scalar
    units do (docs/fabric.md, "Blocks"). 1 in a region that is not blocked."""
    return max(int(spec.block), 1)


def _computes_tiles(spec: GraphSpec, node) -> bool:
    return bool(spec.block) and RESOURCE[node.kind] == "compute" and "axes" in node.params


def lanes_of(spec: GraphSpec) -> int:
    """The region's lanes: the product, over the index variables it is parallelized at, of the
    widest fork at each (1 for a region without forks)."""
    widest: dict[str, int] = {}
    for n in spec.nodes:
        if n.kind == "fork":
            var = n.var or n.name.rsplit("_", 1)[-1]
            widest[var] = max(widest.get(var, 1), int(n.params.get("factor", 1)))
    lanes = 1
    for f in widest.values():
        lanes *= f
    return lanes


def check_fits(regions: Iterable[tuple[str, dict[str, int]]], fabric: Fabric | None, arch_name: str) -> None:
    """Raise `FitError` for the first region that does not fit `fabric` (None: unbounded)."""
    if fabric is None:
        return
    for name, need in regions:
        for r in RESOURCES:
            if need.get(r, 0) > fabric.capacity(r):
                raise FitError(
                    f"region {name} needs {need[r]} {r} units; the fabric of {arch_name} has {fabric.capacity(r)} "
                    f"(use a schedule with smaller regions, fewer lanes, or a larger [arch.fabric])"
                )


def fits(need: dict[str, int], fabric: Fabric | None) -> bool:
    """Whether a region needing `need` units fits `fabric` (no fabric: an unbounded one)."""
    return fabric is None or all(need.get(r, 0) <= fabric.capacity(r) for r in RESOURCES)
