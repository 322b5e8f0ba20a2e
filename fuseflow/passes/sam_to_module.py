"""``sam-to-module``: the portable form of sam graphs, which C++ MLIR tools verify.

A ``sam.graph`` body has no terminator. The Python-defined dialect marks the op
``NoTerminator``, but an IRDL file cannot carry that trait, so ``torch-mlir-opt
--irdl-file=`` rejects every graph body ("block with no terminator"). ``builtin.module`` is
terminator-free, isolated from above and a graph region in C++ itself, so the portable form
puts each graph's ops, unchanged, in a nested module ``module @full attributes {sam.tensors =
[...]} { ... }``. The graph's ``sym_name`` becomes the module's; every other graph attribute ``k`` becomes the
dialect attribute ``sam.k`` (a module takes only dialect-prefixed attributes). ``module-to-sam``
is the inverse; the pair round-trips byte for byte (``tests/e2e/test_sam_digests.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.mlir import ir
from fuseflow.passes.context import PassContext

PREFIX = "sam."
"""What a graph attribute's name gains on the portable module."""


@dataclass(frozen=True)
class Options:
    """``sam-to-module`` takes no options."""


def named_attributes(op: ir.Operation) -> list[tuple[str, ir.Attribute]]:
    """`op`'s attributes as (name, value) pairs (iterating the map yields names only)."""
    return [(a.name, a.attr) for a in (op.attributes[i] for i in range(len(op.attributes)))]


def move_body(source: ir.Operation, target: ir.Operation) -> None:
    """Move every op of `source`'s single-block region into a new block of `target`'s region."""
    block = target.regions[0].blocks.append()
    for op in list(source.regions[0].blocks[0].operations):
        block.append(op.operation)


def run(module, options: Options, ctx: PassContext | None = None):
    """Put each ``sam.graph``'s ops in a nested ``builtin.module`` named after the graph, its
    attributes as ``sam.``-prefixed module attributes: a form ``torch-mlir-opt --irdl-file=``
    parses and verifies. ``module-to-sam`` restores the graphs."""
    with module.context:
        for graph in [op.operation for op in module.body.operations if op.operation.name == "sam.graph"]:
            attributes = {(k if k == "sym_name" else PREFIX + k): a for k, a in named_attributes(graph)}
            with ir.InsertionPoint(graph), graph.location:
                portable = ir.Operation.create("builtin.module", regions=1, attributes=attributes)
            move_body(graph, portable)
            graph.erase()
    return module
