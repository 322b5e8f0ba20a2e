"""Registry of fuseflow's own passes (name -> Pass) and the one pipeline runner that
`fuseflow-opt` and `fuseflow.compile` share.

Each pass lives in its own module, named after the pass (`sam-parallelize` ->
`sam_parallelize.py`), takes a module, an options dataclass and a `PassContext`, and returns the
(possibly new) module. Upstream MLIR passes are handed to the PassManager by name.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from fuseflow.errors import FuseflowError
from fuseflow.mlir import MLIRError, PassManager
from fuseflow.passes import block, fuseflow_order, fuseflow_partition, lower_to_sam, sam_parallelize
from fuseflow.passes.context import PassContext


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Any, Any, PassContext], Any]
    options: type
    stage: str = "linalg"  # the IR it reads: "linalg" (before lower-to-sam) or "sam" (after)

    @property
    def doc(self) -> str:
        return (self.run.__doc__ or "").strip()

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else ""

    def parse_options(self, text: str) -> Any:
        """`key=value key2=value2` (mlir-opt style) into the options dataclass."""
        kinds = {f.name.replace("_", "-"): f for f in fields(self.options)}
        values = {}
        for item in text.split():
            if "=" not in item:
                raise FuseflowError(f"pass {self.name}: option {item!r} must be key=value")
            k, v = item.split("=", 1)
            if k not in kinds:
                raise FuseflowError(f"pass {self.name}: unknown option {k!r}; known: {', '.join(kinds) or 'none'}")
            f = kinds[k]
            try:
                values[f.name] = int(v) if f.type in (int, "int") else v
            except ValueError:
                raise FuseflowError(f"pass {self.name}: option {k} expects an integer, got {v!r}") from None
        return self.options(**values)


PASSES: dict[str, Pass] = {
    p.name: p
    for p in (
        Pass("fuseflow-partition", fuseflow_partition.run, fuseflow_partition.Options),
        Pass("fuseflow-order", fuseflow_order.run, fuseflow_order.Options),
        Pass("block", block.run, block.Options),
        Pass("lower-to-sam", lower_to_sam.run, lower_to_sam.Options),
        Pass("sam-parallelize", sam_parallelize.run, sam_parallelize.Options, stage="sam"),
    )
}


def split_pipeline(text: str) -> list[str]:
    """Top-level elements of `builtin.module(a, b{x=1}, func.func(cse))`."""
    text = text.strip()
    m = re.fullmatch(r"builtin\.module\((.*)\)", text, re.S)
    inner = m.group(1) if m else text
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def split_element(element: str) -> tuple[str, str]:
    """``name{opt=1 other=x}`` -> (name, "opt=1 other=x")."""
    m = re.fullmatch(r"([\w.-]+)(?:\{(.*)\})?", element.strip(), re.S)
    return (m.group(1), m.group(2) or "") if m else (element.strip(), "")


def run_pipeline(
    module: Any, elements: list[str], ctx: PassContext | None = None, print_after_all: bool = False
) -> Any:
    """Run pipeline `elements` in order: fuseflow passes as Python functions, consecutive upstream
    passes as one PassManager run. `ctx` carries what a caller knows beyond the IR (example
    inputs for ranking orders, a Schedule object, module containers) and collects what passes
    report; `fuseflow-opt` passes an empty one."""
    ctx = ctx or PassContext()
    upstream: list[str] = []

    def flush(mod):
        if upstream:
            pipeline = "builtin.module(" + ",".join(upstream) + ")"
            try:
                pm = PassManager.parse(pipeline, context=mod.context)
            except (ValueError, MLIRError) as e:
                raise FuseflowError(f"invalid pass pipeline {pipeline!r}: {str(e).splitlines()[0]}") from None
            if print_after_all:
                pm.enable_ir_printing()
            pm.run(mod.operation)
            upstream.clear()
        return mod

    for el in elements:
        name, options = split_element(el)
        if name in PASSES:
            module = flush(module)
            p = PASSES[name]
            module = p.run(module, p.parse_options(options), ctx) or module
            if print_after_all:
                print(f"// -----// IR Dump After {name} //----- //\n{module}", file=sys.stderr)
        else:
            upstream.append(el)
    return flush(module)
