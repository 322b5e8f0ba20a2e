"""The linalg function fuseflow lowers, and the ``fuseflow.*`` annotations it carries.

One owner for every annotation the compiler writes on linalg, with typed get and set: the
frontend names the arguments and results and records input densities, the schedule puts a
region on each compute op, a declared sparse result carries its format, and the order and block
passes record their choices on the function. The lowering reads them all from here.

| annotation | on | written by | value |
|---|---|---|---|
| ``fuseflow.region`` | a compute op | ``fuseflow-partition``, `compile` | region name |
| ``fuseflow.format`` | a compute op | `formats=` on a result | a format spec (``csr``) |
| ``fuseflow.orders`` | the function | ``fuseflow-order`` | {region: ``"i,k,j"``} |
| ``fuseflow.block`` | the function | ``block{size=}`` | {region or ``"*"``: size} |
| ``fuseflow.name`` | argument, result | the frontend | tensor name |
| ``fuseflow.density`` | argument | the frontend | stored fraction |
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from fuseflow.conversion.linalg_to_index import COMPUTE_OPS, IGNORED_OPS, VIEW_OPS, is_inlined
from fuseflow.errors import UnsupportedError
from fuseflow.mlir import ir, location_str

REGION_ATTR = "fuseflow.region"
FORMAT_ATTR = "fuseflow.format"
ORDERS_ATTR = "fuseflow.orders"
BLOCK_ATTR = "fuseflow.block"
NAME_ATTR = "fuseflow.name"
DENSITY_ATTR = "fuseflow.density"

DEFAULT_DENSITY = 0.1
"""Fraction of a compressed input's entries assumed stored when the frontend recorded none."""


def main_func(module: ir.Module):
    """The module's one function (``func.func @main``)."""
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    if len(funcs) != 1:
        raise UnsupportedError(f"expected exactly one func.func in the module, found {len(funcs)}")
    return funcs[0].operation


def body_ops(func) -> list[ir.Operation]:
    """The operations of a function's body."""
    return [op.operation for op in func.regions[0].blocks[0].operations]


def compute_ops(func) -> list[ir.Operation]:
    """The function's compute ops that form regions (inlined ones fold into their consumer)."""
    return [op for op in body_ops(func) if op.name in COMPUTE_OPS and not is_inlined(op)]


# -- ops -------------------------------------------------------------------------------------


def region_of(op: ir.Operation) -> str | None:
    """The region a compute op belongs to (``fuseflow.region``), if assigned."""
    return ir.StringAttr(op.attributes[REGION_ATTR]).value if REGION_ATTR in op.attributes else None


def set_region(op: ir.Operation, name: str) -> None:
    """Put a compute op in region `name`."""
    with op.context:
        op.attributes[REGION_ATTR] = ir.StringAttr.get(name)


def declared_format(op: ir.Operation) -> str | None:
    """The sparse format declared on an op's result (``fuseflow.format``), if any."""
    return ir.StringAttr(op.attributes[FORMAT_ATTR]).value if FORMAT_ATTR in op.attributes else None


def set_declared_format(op: ir.Operation, spec: str) -> None:
    """Declare the op's result sparse, stored in format `spec`."""
    with op.context:
        op.attributes[FORMAT_ATTR] = ir.StringAttr.get(spec)


# -- the function ----------------------------------------------------------------------------


def _dict_attr(func, name: str) -> dict[str, ir.Attribute]:
    """A dictionary attribute of the function as {key: attribute} ({} when absent)."""
    if name not in func.attributes:
        return {}
    return {k.name: k.attr for k in ir.DictAttr(func.attributes[name])}


def orders(func) -> dict[str, str]:
    """The dataflow order ``fuseflow-order`` recorded per region ({} when none)."""
    return {k: ir.StringAttr(v).value for k, v in _dict_attr(func, ORDERS_ATTR).items()}


def set_orders(func, chosen: Mapping[str, str] | None) -> None:
    """Record each region's order (``None`` removes the record)."""
    if ORDERS_ATTR in func.attributes:
        del func.attributes[ORDERS_ATTR]
    if chosen is not None:
        with func.context:
            func.attributes[ORDERS_ATTR] = ir.DictAttr.get({r: ir.StringAttr.get(o) for r, o in chosen.items()})


def blocks(func) -> dict[str, int]:
    """The block size recorded per region (``"*"``: every region; {} when none)."""
    return {k: ir.IntegerAttr(v).value for k, v in _dict_attr(func, BLOCK_ATTR).items()}


def set_block(func, region: str, size: int) -> None:
    """Record block size `size` for `region` (``"*"``: every region), keeping the others."""
    with func.context:
        current = _dict_attr(func, BLOCK_ATTR)
        current[region] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), size)
        func.attributes[BLOCK_ATTR] = ir.DictAttr.get(current)


@dataclass(frozen=True)
class Signature:
    """The names the frontend gave the function's arguments and results, and the densities it
    recorded for sparse inputs (a name is None where the frontend gave none)."""

    args: list[str | None]
    densities: list[float | None]
    results: list[str | None]


def signature(func) -> Signature:
    """Read the argument and result annotations."""
    n_args = len(func.regions[0].blocks[0].arguments)
    n_res = len(ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).results)

    def dicts(key: str, n: int) -> list[ir.DictAttr | None]:
        # MLIR's attribute map has no .get()
        if key not in func.attributes:
            return [None] * n
        arr = func.attributes[key]
        return [ir.DictAttr(arr[i]) for i in range(n)]

    def name(d: ir.DictAttr | None) -> str | None:
        return ir.StringAttr(d[NAME_ATTR]).value if d is not None and NAME_ATTR in d else None

    args = dicts("arg_attrs", n_args)
    return Signature(
        [name(d) for d in args],
        [ir.FloatAttr(d[DENSITY_ATTR]).value if d is not None and DENSITY_ATTR in d else None for d in args],
        [name(d) for d in dicts("res_attrs", n_res)],
    )


def set_signature(func, args: Sequence[str], densities: Mapping[str, float], results: Sequence[str]) -> None:
    """Name the arguments and results; record the densities of the arguments `densities` names."""
    with func.context:
        f64 = ir.F64Type.get()
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [
                ir.DictAttr.get(
                    {
                        NAME_ATTR: ir.StringAttr.get(n),
                        **({DENSITY_ATTR: ir.FloatAttr.get(f64, densities[n])} if n in densities else {}),
                    }
                )
                for n in args
            ]
        )
        func.attributes["res_attrs"] = ir.ArrayAttr.get(
            [ir.DictAttr.get({NAME_ATTR: ir.StringAttr.get(n)}) for n in results]
        )


# -- regions ---------------------------------------------------------------------------------


def name_loc(op: ir.Operation) -> tuple[str | None, str, str | None]:
    """(fx node, module path, originating PyTorch op) from the frontend's NameLoc (one around
    the op's source location; read through the bindings, not printed: 15k ops on GPT-3 Small)."""
    loc = op.location
    if not isinstance(loc, ir.NameLoc) or isinstance(loc.child_loc, ir.UnknownLoc):
        return None, "", None
    parts = loc.name_str.split("|") + ["", ""]
    return parts[0], parts[1], parts[2] or parts[0]


def check_supported(func) -> list[ir.Operation]:
    """The compute ops of `func`; any op fuseflow cannot lower is reported at its location."""
    compute = []
    for op in body_ops(func):
        if op.name in COMPUTE_OPS and is_inlined(op):
            continue
        if op.name in COMPUTE_OPS:
            compute.append(op)
        elif op.name not in VIEW_OPS and op.name not in IGNORED_OPS:
            origin = name_loc(op)[2]
            written = f" (from PyTorch op '{re.sub(r'_[0-9]+$', '', origin)}')" if origin else ""
            raise UnsupportedError(
                f"unsupported op '{op.name}'{written}: fuseflow cannot lower it to sam", location_str(op.location)
            )
    return compute


def require_regions(func) -> None:
    """Refuse a function with an unsupported op, or a compute op outside every region, naming it."""
    for op in check_supported(func):
        if REGION_ATTR not in op.attributes:
            raise UnsupportedError(
                f"'{op.name}' has no {REGION_ATTR} attribute: run fuseflow-partition first",
                location_str(op.location),
            )


def producers(op: ir.Operation, compute: set) -> list[ir.Operation]:
    """Compute ops whose results `op` reads (looking through views)."""
    out, stack = [], list(op.operands)
    while stack:
        v = stack.pop()
        owner = v.owner
        o = owner.operation if isinstance(owner, ir.OpView) else owner
        if not isinstance(o, ir.Operation):
            continue
        if o in compute:
            out.append(o)
        elif o.name in VIEW_OPS or is_inlined(o):
            stack.extend(o.operands)
    return out


def region_order(func) -> list[str]:
    """Regions in an order that respects their data dependences; a cycle is an error."""
    ops = compute_ops(func)
    region = {op: r for op in ops if (r := region_of(op)) is not None}
    g = nx.DiGraph()
    first: dict[str, int] = {}
    compute = set(ops)
    for i, op in enumerate(ops):
        r = region.get(op)
        if r is None:
            continue
        first.setdefault(r, i)
        g.add_node(r)
        for p in producers(op, compute):
            if region.get(p) not in (None, r):
                g.add_edge(region[p], r)
    try:
        return list(nx.lexicographical_topological_sort(g, key=lambda r: first[r]))
    except nx.NetworkXUnfeasible:
        cyc = " -> ".join(e[0] for e in nx.find_cycle(g))
        raise UnsupportedError(
            f"the schedule's regions depend on each other in a cycle ({cyc}); "
            "merge them or split the groups differently"
        ) from None
