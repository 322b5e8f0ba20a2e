"""Benchmarks and examples run on ``pip install '.[plot]'`` without the test extra: they import
no test module and put no test folder on ``sys.path`` (an AST check of every file)."""

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
    onto_path = [line for line in path.read_text().splitlines() if "sys.path" in line and '"tests"' in line]
    assert not onto_path, f"{path.name} puts a test folder on sys.path: {onto_path[0].strip()}"


def test_the_check_sees_a_test_import():
    assert _imported(ast.parse("from test_pyg import CONVS\nimport pytest")) & TEST_MODULES == {"test_pyg", "pytest"}
