"""`SamOp.typed`: each op kind's typed attributes agree with the dialect's declarations, and a
lowered graph's ops read back as them."""

from __future__ import annotations

import inspect
from dataclasses import MISSING, fields

import pytest
import torch

import fuseflow
import fuseflow.dialects.sam as dialect
from fuseflow.dialects.sam_attrs import ATTRS, ScanAttrs, SpaccAttrs, typed_attrs

PYTHON_TYPE = {"StringAttr": "str", "IntegerAttr": "int", "FloatAttr": "float"}


def _declared() -> dict[str, dict[str, str]]:
    """Each op kind's attributes as the dialect declares them: name -> Python type."""
    out = {}
    for cls in vars(dialect).values():
        name = getattr(cls, "OPERATION_NAME", None)
        if not inspect.isclass(cls) or not name or name == "sam.graph":
            continue
        ann: dict[str, str] = {}
        for base in reversed(cls.__mro__):
            for k, v in getattr(base, "__annotations__", {}).items():
                if getattr(v, "__name__", "") in PYTHON_TYPE:
                    ann[k] = PYTHON_TYPE[v.__name__]
        out[name.split(".", 1)[1]] = ann
    return out


def test_every_dialect_op_has_typed_attributes_that_match_its_declaration():
    declared = _declared()
    assert set(declared) == set(ATTRS)
    for kind, attrs in declared.items():
        required = {f.name: f.type for f in fields(ATTRS[kind]) if f.default is MISSING}
        assert required == attrs, kind


def test_typed_attributes_of_a_lowered_graph():
    class SpMM(torch.nn.Module):
        def forward(self, a, b):
            return a @ b

    a = (torch.rand(6, 5) < 0.4).float() * torch.rand(6, 5)
    prog = fuseflow.compile(SpMM(), (a, torch.rand(5, 3)), formats={"a": "csr"})
    from fuseflow.dialects.sam_ir import parse_module, read_module

    graph = read_module(parse_module(prog.sam_source, context=prog.imported.module.context)).graphs[0]
    scans = [op.typed for op in graph.ops if op.kind == "scan"]
    assert scans and all(isinstance(s, ScanAttrs) for s in scans)
    assert {s.format for s in scans} <= {"dense", "compressed"} and "compressed" in {s.format for s in scans}
    for op in graph.ops:
        assert type(op.typed) is ATTRS[op.kind]


def test_an_unknown_kind_has_no_typed_attributes():
    with pytest.raises(KeyError, match="sam.nope"):
        typed_attrs("nope", {})
    assert typed_attrs("spacc", {"order": 1, "kind": "sum", "index_var": "k", "axes": ["i", "j"]}) == SpaccAttrs(
        1, "sum", "k", ("i", "j")
    )
