"""Layering the import-linter contracts cannot express: no module imports another package's
private names (a leading underscore), so a package's internals can change without its users."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "fuseflow"


def _package(module: str) -> str:
    """The package a module belongs to: ``fuseflow.search.rank`` -> ``fuseflow.planning``;
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
