"""Benchmarks and examples run on ``pip install '.[plot]'`` without the test extra: they import
no test module and change no ``sys.path`` (an AST check of every file): a benchmark loads the
examples it measures with `fuseflow.model_files.example`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_MODULES = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"pytest", "hypothesis", "tests"}
FILES = sorted([*(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "examples").rglob("*.py")])


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_no_test_module(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    assert not _imported(tree) & TEST_MODULES, f"{path.name} imports {sorted(_imported(tree) & TEST_MODULES)}"
    assert not _path_edits(tree), f"{path.name} changes sys.path: line {_path_edits(tree)[0]}"


def _path_edits(tree: ast.AST) -> list[int]:
    """Lines that call a method of ``sys.path`` (insert, append, extend)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "path"
        and isinstance(node.func.value.value, ast.Name)
        and node.func.value.value.id == "sys"
    ]


def test_the_check_sees_a_path_edit():
    assert _path_edits(ast.parse('import sys\nx = 1\nsys.path.insert(0, "examples")')) == [3]


def test_the_check_sees_a_test_import():
    assert _imported(ast.parse("from test_pyg import CONVS\nimport pytest")) & TEST_MODULES == {"test_pyg", "pytest"}
