"""Templates: a hand-built sam graph run in place of a region (`ctx.issue(task, template=...)`).

A strategy may know a better graph for a region than the compiler's, e.g. a hand-written
SDDMM -> softmax -> SpMM attention. The template must read and write the region's tensors
(same names and shapes; its own level formats), and its outputs are checked against the
region's index-notation values, with the program's tolerance: a template is trusted for its
timing only after it computes what the region computes. Its cycles replace the region's on
the timeline; `res.regions` keeps the compiled region's own run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fuseflow.errors import FuseflowError, MismatchError
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec, parse_graphs, run_graph

Template = str | Path | GraphSpec
"""A `.mlir` file holding a sam module, sam MLIR text, or a parsed graph."""


def load_template(template: Template, region: GraphSpec, strategy: str) -> GraphSpec:
    """The template's graph for `region`, checked against the region's tensors: a module with
    several graphs gives the one named like the region (or its only one)."""
    if isinstance(template, GraphSpec):
        spec, where = template, template.name
    else:
        text, where = _text_of(template, strategy)
        spec = _parse(text, where, region, strategy)
    _check_tensors(spec, region, where, strategy)
    return spec


def _text_of(template: str | Path, strategy: str) -> tuple[str, str]:
    s = str(template)
    if "sam.graph" in s or "\n" in s:
        return s, "template"
    path = Path(s)
    if not path.exists():
        raise FuseflowError(f"strategy {strategy}: template {s}: no such file")
    return path.read_text(), path.name


def _parse(text: str, where: str, region: GraphSpec, strategy: str) -> GraphSpec:
    from fuseflow.dialects.sam import new_context  # loaded with MLIR or torch.export, when first needed
    from fuseflow.mlir import MLIRError, ir  # loaded with MLIR or torch.export, when first needed

    with new_context():
        try:
            module = ir.Module.parse(text)
        except MLIRError as e:
            m = re.search(r'"-":(\d+):(\d+): (?:error: )?(.*)', str(e))
            at = f" at {where}:{m.group(1)}:{m.group(2)}: {m.group(3).strip()}" if m else ""
            raise FuseflowError(f"strategy {strategy}: template {where} does not parse{at}") from None
        graphs, _ = parse_graphs(module)
    named = [g for g in graphs if g.name == region.name]
    if named or len(graphs) == 1:
        return (named or graphs)[0]
    raise FuseflowError(
        f"strategy {strategy}: template {where} holds {len(graphs)} graphs and none is named {region.name}"
    )


def _check_tensors(spec: GraphSpec, region: GraphSpec, where: str, strategy: str) -> None:
    def roles(g: GraphSpec, role: str) -> dict[str, tuple[int, ...]]:
        return {n: t.shape for n, t in g.tensors.items() if t.role == role}

    for role, verb in (("input", "read"), ("output", "write")):
        have, want = roles(spec, role), roles(region, role)
        for name in sorted(set(have) ^ set(want)):
            does = "does" if name in have else "does not"
            raise FuseflowError(
                f"strategy {strategy}: template {where} {does} {verb} {name}, which region {region.name} "
                f"{'does not' if name in have else 'does'}"
            )
        for name, shape in have.items():
            if shape != want[name]:
                raise FuseflowError(
                    f"strategy {strategy}: template {where}: {name} has shape {shape}, region {region.name} "
                    f"{verb}s it as {want[name]}"
                )


class TemplateRunner:
    """Runs a task's template alone on the machine: `inputs(i)` and `expected(i)` are what task
    i reads and what it must write (its region's index-notation values, or their rows)."""

    def __init__(
        self,
        specs: list[GraphSpec | None],
        inputs: Callable[[int], Mapping[str, Any]],
        expected: Callable[[int], Mapping[str, np.ndarray]],
        arch: Arch,
        tolerance: float,
        strategy: str,
    ):
        self.specs, self.inputs, self.expected = specs, inputs, expected
        self.arch, self.tolerance, self.strategy = arch, tolerance, strategy
        self.names: dict[int, str] = {}  # task -> the template it ran

    def run(self, i: int, template: Template) -> int:
        """Run task `i` as `template` prescribes, refusing a template that writes other values; returns its cycles."""
        region = self.specs[i]
        if region is None:
            raise FuseflowError(f"strategy {self.strategy}: a relayout runs no template")
        spec = load_template(template, region, self.strategy)
        run = run_graph(spec, self.inputs(i), self.arch)
        for name, want in self.expected(i).items():
            got = run.outputs[name]
            if not np.allclose(got, want, rtol=self.tolerance, atol=self.tolerance, equal_nan=True):
                worst = float(np.nanmax(np.abs(np.asarray(got, np.float64) - want)))
                raise MismatchError(
                    f"strategy {self.strategy}: template {spec.name} in place of region {region.name} writes "
                    f"other values for {name} (max abs error {worst:.3g}, tolerance {self.tolerance:g})"
                )
        self.names[i] = spec.name
        return run.cycles
