"""Layering the import-linter contracts cannot express: no module imports another package's
private names (a leading underscore), so a package's internals can change without its users."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "fuseflow"


def _package(module: str) -> str:
    """The package a module belongs to: ``fuseflow.search.rank`` -> ``fuseflow.search``;
    top-level modules (``fuseflow.program``) are their own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_private_name_is_imported_across_packages():
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        here = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fuseflow"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private and _package(node.module) != _package(here):
                    offenders.append(f"{path.relative_to(PKG)}:{node.lineno}: {node.module}.{private[0]}")
    assert not offenders, offenders


def _functions():
    """(path, function node) of every function in the package."""
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


def test_no_function_is_longer_than_80_lines():
    long = [
        f"{p.relative_to(PKG)}:{f.lineno}: {f.name} ({f.end_lineno - f.lineno + 1} lines)"
        for p, f in _functions()
        if f.end_lineno - f.lineno + 1 > 80
    ]
    assert not long, long


def test_every_function_local_import_says_why():
    """An import inside a function is there for a reason the reader should see (an optional
    extra, the CLI's lazy start, MLIR or torch.export loaded when first needed): a comment on
    its first line names it. Everything else imports at the top of its module."""
    silent = []
    for path, fn in _functions():
        lines = path.read_text().splitlines()
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and "#" not in lines[node.lineno - 1]:
                silent.append(f"{path.relative_to(PKG)}:{node.lineno}: {ast.unparse(node)}")
    assert not silent, silent
