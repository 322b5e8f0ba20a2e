"""Registry of fuseflow's own passes (name -> Pass) and the one pipeline runner that
`fuseflow-opt` and `fuseflow.compile` share.

Each pass lives in its own module, named after the pass (`sam-parallelize` ->
`sam_parallelize.py`), takes a module, a frozen options dataclass and a `PassContext`, and returns
the (possibly new) module. A pipeline is a list of `PassStep`s (a pass and its typed options);
upstream MLIR passes are handed to the PassManager by name.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from fuseflow.errors import FuseflowError
from fuseflow.mlir import MLIRError, PassManager
from fuseflow.passes import (
    block,
    fuseflow_order,
    fuseflow_partition,
    lower_to_sam,
    module_to_sam,
    sam_parallelize,
    sam_to_module,
)
from fuseflow.passes.context import PassContext


@dataclass(frozen=True)
class Pass:
    """A fuseflow pass: its name in pipelines, its function, its options dataclass, the IR it reads."""

    name: str
    run: Callable[[Any, Any, PassContext], Any]
    options: type
    stage: str = "linalg"  # the IR it reads: "linalg" (before lower-to-sam) or "sam" (after)

    @property
    def doc(self) -> str:
        """The pass function's docstring: what ``fuseflow-opt --help`` prints for it."""
        return (self.run.__doc__ or "").strip()

    @property
    def summary(self) -> str:
        """The docstring's first line."""
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
        Pass("sam-to-module", sam_to_module.run, sam_to_module.Options, stage="sam"),
        Pass("module-to-sam", module_to_sam.run, module_to_sam.Options, stage="sam"),
    )
}


@dataclass(frozen=True)
class PassStep:
    """One element of a pipeline: a fuseflow pass with its typed options, or an upstream MLIR pass
    (``canonicalize``, ``func.func(cse)``) kept as the text MLIR's PassManager parses.

    Callers build steps (`step`); only `parse_pipeline` reads pipeline text (fuseflow-opt, and
    `compile(passes=)` given as text). `text()` prints the mlir-opt spelling, which
    `parse_pipeline` reads back to an equal step.
    """

    name: str
    options: Any = None  # the pass's frozen Options (fuseflow passes); None for upstream passes
    upstream: str = ""  # the element's text (upstream passes)

    @property
    def stage(self) -> str:
        """The IR the step reads: ``linalg`` (before lower-to-sam) or ``sam``; upstream passes: ``linalg``."""
        return PASSES[self.name].stage if self.name in PASSES else "linalg"

    def text(self) -> str:
        """The step as pipeline text, ``name{key=value ...}``, that `parse_pipeline` reads back."""
        if self.options is None:
            return self.upstream or self.name
        shown = [  # every option but the empty ones (no region: every region)
            f"{f.name.replace('_', '-')}={getattr(self.options, f.name)}"
            for f in fields(self.options)
            if getattr(self.options, f.name) != ""
        ]
        return self.name + ("{" + " ".join(shown) + "}" if shown else "")


def step(name: str, **options: Any) -> PassStep:
    """A fuseflow pass with typed options, e.g. ``step("block", size=16, region="r2")``."""
    if name not in PASSES:
        raise FuseflowError(f"unknown fuseflow pass {name!r}; known: {', '.join(PASSES)}")
    try:
        return PassStep(name, PASSES[name].options(**options))
    except TypeError:
        known = ", ".join(f.name for f in fields(PASSES[name].options))
        raise FuseflowError(f"pass {name}: options {sorted(options)}; known: {known}") from None


def as_steps(passes: str | Sequence[PassStep] | None) -> list[PassStep]:
    """What `compile(passes=)` takes, as steps: pipeline text (parsed), or steps already."""
    if passes is None:
        return []
    if isinstance(passes, str):
        return parse_pipeline(passes) if passes.strip() else []
    bad = [p for p in passes if not isinstance(p, PassStep)]
    if bad:
        raise FuseflowError(f"passes: expected pipeline text or PassStep objects, got {type(bad[0]).__name__}")
    return list(passes)


def pipeline_text(steps: list[PassStep]) -> str:
    """``builtin.module(a, b{x=1})``: what ``fuseflow-opt --pass-pipeline`` takes."""
    return "builtin.module(" + ",".join(s.text() for s in steps) + ")"


def parse_pipeline(text: str) -> list[PassStep]:
    """The steps of pipeline text (``builtin.module(a, b{x=1}, func.func(cse))`` or its inner list);
    fuseflow passes' options are parsed and checked here."""
    out = []
    for element in _split_pipeline(text):
        name, options = _split_element(element)
        out.append(
            PassStep(name, PASSES[name].parse_options(options)) if name in PASSES else PassStep(name, None, element)
        )
    return out


def _split_pipeline(text: str) -> list[str]:
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


def _split_element(element: str) -> tuple[str, str]:
    """``name{opt=1 other=x}`` -> (name, "opt=1 other=x")."""
    m = re.fullmatch(r"([\w.-]+)(?:\{(.*)\})?", element.strip(), re.S)
    return (m.group(1), m.group(2) or "") if m else (element.strip(), "")


def run_pipeline(
    module: Any, steps: list[PassStep], ctx: PassContext | None = None, print_after_all: bool = False
) -> Any:
    """Run pipeline `steps` in order: fuseflow passes as Python functions, consecutive upstream
    passes as one PassManager run. `ctx` carries what a caller knows beyond the IR (example
    inputs for ranking orders, a Schedule object, module containers) and collects what passes
    report; `fuseflow-opt` passes an empty one."""
    ctx = ctx or PassContext()
    upstream: list[str] = []

    def flush(mod):
        if upstream:
            ctx.lowered = None  # the module changes: a lowering kept for it no longer holds
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

    for s in steps:
        if s.options is not None:
            module = flush(module)
            if s.name != "lower-to-sam":  # only lower-to-sam reads what fuseflow-order kept
                ctx.lowered = None
            module = PASSES[s.name].run(module, s.options, ctx) or module
            if print_after_all:
                print(f"// -----// IR Dump After {s.name} //----- //\n{module}", file=sys.stderr)
        else:
            upstream.append(s.text())
    return flush(module)
