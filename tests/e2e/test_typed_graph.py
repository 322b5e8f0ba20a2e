"""The lowering's typed sam graph (`SamLowering.typed`, what the order ranker estimates) is the
graph `read_graph` reads back from the lowering's text, op for op and attribute for attribute,
on every region of the shipped examples under every built-in schedule."""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

import pytest

import fuseflow
import fuseflow.search.orders as search_orders
from fuseflow.dialects.sam_ir import module_text, parse_module, read_module

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"gpt_bigbird": dict(seq=32, d_model=16, d_ff=32, block=8), "kernels": dict(kernel="sddmm")}


def _ops(g):
    return [(o.kind, o.operands, o.attrs, o.result_types) for o in g.ops]


@pytest.mark.parametrize("example", ["gcn", "sae", "spgemm_chain", "kernels", "gpt_bigbird", "pyg_gnn"])
def test_typed_graph_is_the_text_read_back(example, monkeypatch):
    sys.path.insert(0, str(ROOT / "examples"))
    if example == "pyg_gnn":
        pytest.importorskip("torch_geometric")
    model, args, formats = importlib.import_module(example).build(**OPTIONS.get(example, {}))
    real = search_orders._search_region
    seen = []

    def checked(*a):
        lowering, pick, rv = real(*a)
        typed = lowering.typed()
        read = read_module(parse_module(module_text([lowering.text()]))).graphs[0]
        assert (typed.name, typed.tensors, typed.extra_attrs) == (read.name, read.tensors, read.extra_attrs)
        assert _ops(typed) == _ops(read), typed.name
        seen.append(typed.name)
        return lowering, pick, rv

    monkeypatch.setattr(search_orders, "_search_region", checked)
    for schedule in ("unfused", "full"):
        with contextlib.suppress(fuseflow.FuseflowError):  # a refused schedule lowers nothing to compare
            fuseflow.compile(model, args, formats=formats, schedule=schedule, order="auto")
    assert seen


def _spec(g):
    """A GraphSpec as plain data (tile parameters are numpy arrays)."""
    plain = lambda v: v.tolist() if hasattr(v, "tolist") else v  # noqa: E731
    nodes = [
        (n.kind, n.name, n.inputs, {k: plain(v) for k, v in n.params.items()}, n.tensor, n.level, n.n_out, n.var)
        for n in g.nodes
    ]
    return g.name, nodes, g.tensors, g.value_nodes, g.block


@pytest.mark.parametrize(
    "example, passes",
    [
        ("gcn", None),
        ("gpt_bigbird", None),
        ("gpt_bigbird", "block{size=8}"),
        ("kernels", "sam-parallelize{level=i factor=2}"),
    ],
)
def test_a_programs_graphs_are_its_sam_text_read_back(example, passes):
    """`compile()` builds the simulator's graphs from the lowering's typed graphs when lower-to-sam
    is the last pass (no read-back of the module); they equal what reading its text gives, blocked
    tiles included, and after a later sam pass the module is read back."""
    from fuseflow.dialects.sam import new_context
    from fuseflow.sim.graph import parse_graphs

    sys.path.insert(0, str(ROOT / "examples"))
    model, args, formats = importlib.import_module(example).build(**OPTIONS.get(example, {}))
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", order="auto", passes=passes)
    with new_context():
        read, outs = parse_graphs(parse_module(prog.mlir("sam")))
    assert [_spec(g) for g in prog.graphs] == [_spec(g) for g in read]
    assert prog.output_names == outs
