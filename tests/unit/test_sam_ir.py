"""The one API for sam IR: graphs built with `GraphBuilder` parse, verify and read back through
`read_module` with decoded attributes; the rest of the package writes no sam text of its own."""

import ast
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from fuseflow.dialects.sam import new_context
from fuseflow.dialects.sam_ir import REF, GraphBuilder, TensorEntry, module_text, parse_module, read_module
from fuseflow.mlir import MLIRError
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import parse_graphs, run_graph

PKG = Path(__file__).resolve().parents[2] / "fuseflow"


def _spmv() -> str:
    """y(i) = sum_j A(i,j) x(j) with A CSR, x dense, built with the typed builder."""
    g = GraphBuilder()
    ra, rx = g.root("A"), g.root("x")
    ra_i, ci = g.scan(ra, tensor="A", mode=0, level=0, format="dense", dim=3, index_var="i")
    rx_i = g.repeat(rx, g.repsiggen(ci), tensor="x", index_var="i")
    ra_j, cj = g.scan(ra_i, tensor="A", mode=1, level=1, format="compressed", dim=4, index_var="j")
    rx_j = g.locate(cj, rx_i, tensor="x", mode=0, level=0, dim=4, index_var="j")
    prod = g.alu(g.load(ra_j, tensor="A"), g.load(rx_j, tensor="x"), op="mul")
    y = g.reduce(prod, ci, kind="sum", index_var="j")
    g.write_crd(ci, tensor="y", mode=0, level=0, format="dense")
    g.write_val(y, tensor="y")
    assert g.root("A") == ra, "pure ops are hash-consed"
    tensors = [
        TensorEntry("A", "input", (3, 4), ("dense", "compressed"), (0, 1)),
        TensorEntry("x", "input", (4,), ("dense",), (0,)),
        TensorEntry("y", "output", (3,), ("dense",), (0,)),
    ]
    return module_text([g.graph("spmv", tensors)], ["y"])


def test_built_graph_reads_back_with_typed_attributes():
    with new_context():
        read = read_module(parse_module(_spmv()))
    assert read.outputs == ["y"]
    (graph,) = read.graphs
    assert [t.name for t in graph.tensors] == ["A", "x", "y"] and graph.tensors[0].levels == ("dense", "compressed")
    kinds = [op.kind for op in graph.ops]
    assert kinds.count("root") == 2 and kinds[-2:] == ["write_crd", "write_val"]
    scan = next(op for op in graph.ops if op.kind == "scan" and op.index_var == "j")
    assert scan.get("format") == "compressed" and scan.get("dim") == 4 and scan.tensor == "A"
    alu = next(op for op in graph.ops if op.kind == "alu")
    assert alu.get("op") == "mul" and isinstance(alu.get("scalar"), float) and len(alu.operands) == 2
    reduce = next(op for op in graph.ops if op.kind == "reduce")
    assert len(reduce.operands) == 2, "the parent coordinate stream is the second operand"


def test_built_graph_simulates_to_numpy():
    rng = np.random.default_rng(0)
    a = scipy.sparse.random(3, 4, density=0.5, format="csr", random_state=1, dtype=np.float32)
    x = rng.standard_normal(4).astype(np.float32)
    with new_context():
        (spec,), _ = parse_graphs(parse_module(_spmv()))
    run = run_graph(spec, {"A": a, "x": x}, Arch.resolve("comal"))
    np.testing.assert_allclose(run.outputs["y"], a @ x, rtol=1e-6, atol=1e-6)


def test_the_dialect_verifies_what_the_builder_is_given():
    g = GraphBuilder()
    r = g.root("A")
    g.scan(r, tensor="A", mode=0, level=0, format="bitmap", dim=3, index_var="i")
    text = module_text([g.graph("bad", [TensorEntry("A", "input", (3,), ("dense",), (0,))])])
    with new_context(), pytest.raises(MLIRError, match="unknown level format 'bitmap'"):
        parse_module(text)


def test_joiner_payloads_are_refs_then_values():
    g = GraphBuilder()
    r = g.root("A")
    _, c = g.scan(r, tensor="A", mode=0, level=0, format="compressed", dim=3, index_var="i")
    v = g.load(r, tensor="A")
    crd, outs = g.union([c, c], [r, v], index_var="i")
    assert g.type_of(outs[0]) == REF and g.type_of(outs[1]).startswith("!sam.val")
    with pytest.raises(ValueError, match="ref payloads must precede value payloads"):
        g.intersect([c, c], [v, r], index_var="i")


def _sources(folder: str):
    for path in sorted((PKG / folder).rglob("*.py")):
        yield path, ast.parse(path.read_text())


def test_no_module_outside_the_dialect_writes_sam_op_text():
    """Generic-form sam text ('"sam.scan"(...)') is produced only behind dialects/sam_ir.py."""
    offenders = []
    for path, tree in _sources("."):
        if path.parent.name == "dialects":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and '"sam.' in node.value:
                offenders.append(f"{path.relative_to(PKG)}:{node.lineno}")
            if isinstance(node, ast.JoinedStr) and any(
                isinstance(v, ast.Constant) and '"sam.' in str(v.value) for v in node.values
            ):
                offenders.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert not offenders, offenders


def test_the_analysis_package_imports_no_mlir():
    """analysis/ is pure Python over plain data: index notation, nests, orders, the cycle model."""
    for path, tree in _sources("analysis"):
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for n in names:
                assert not n.startswith(("torch_mlir", "fuseflow.mlir", "fuseflow.dialects", "fuseflow._simulator")), (
                    f"{path.name} imports {n}"
                )


def _spmv_graph(x: str = "x", y: str = "y", name: str = "spmv", op: str = "mul"):
    """_spmv's graph, typed, with its vector, result, name and ALU op chosen."""
    g = GraphBuilder()
    ra, rx = g.root("A"), g.root(x)
    ra_i, ci = g.scan(ra, tensor="A", mode=0, level=0, format="dense", dim=3, index_var="i")
    rx_i = g.repeat(rx, g.repsiggen(ci), tensor=x, index_var="i")
    ra_j, cj = g.scan(ra_i, tensor="A", mode=1, level=1, format="compressed", dim=4, index_var="j")
    rx_j = g.locate(cj, rx_i, tensor=x, mode=0, level=0, dim=4, index_var="j")
    prod = g.alu(g.load(ra_j, tensor="A"), g.load(rx_j, tensor=x), op=op)
    g.write_crd(ci, tensor=y, mode=0, level=0, format="dense")
    g.write_val(g.reduce(prod, ci, kind="sum", index_var="j"), tensor=y)
    tensors = [
        TensorEntry("A", "input", (3, 4), ("dense", "compressed"), (0, 1)),
        TensorEntry(x, "input", (4,), ("dense",), (0,)),
        TensorEntry(y, "output", (3,), ("dense",), (0,)),
    ]
    return g.typed(name, tensors)


def test_the_structure_digest_is_the_graph_up_to_the_names_it_is_told_to_ignore():
    import re

    intermediate = lambda n: re.fullmatch(r"t\d+|out\d+", n) is not None  # noqa: E731
    base = _spmv_graph("t3", "out0").digest(intermediate)
    assert _spmv_graph("t7", "out2", name="other").digest(intermediate) == base  # renamed intermediates
    assert _spmv_graph("w", "out0").digest(intermediate) != base  # another model input: other data
    assert _spmv_graph("t3", "out0", op="add").digest(intermediate) != base  # another op
    assert _spmv_graph("w", "z").digest() == _spmv_graph("x", "y").digest()  # every name ignored
    assert _spmv_graph("w", "z").digest(lambda _n: False) != _spmv_graph("x", "y").digest(lambda _n: False)
