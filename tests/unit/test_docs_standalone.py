"""The repository cites no document outside itself: a user's clone has no design file beside it.
Sources, tests, benchmarks, examples and docs cite docs/ sections instead."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"DESIGN(\.md| §)|\.\./shared/(DESIGN|STYLE|LOWERING)")
SUFFIXES = {".py", ".md", ".h", ".cpp", ".toml", ".mlir"}


def test_no_citation_of_a_document_outside_the_repo():
    found = []
    for top in ("fuseflow", "simulator", "tests", "benchmarks", "examples", "docs", "configs"):
        for path in (ROOT / top).rglob("*"):
            if path.suffix in SUFFIXES and path.is_file() and path != Path(__file__).resolve():
                for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if OUTSIDE.search(line):
                        found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    for name in ("README.md", "CHANGELOG.md"):
        for n, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{name}:{n}: {line.strip()[:80]}")
    assert not found, "\n".join(found[:10])


def test_the_pattern_sees_a_citation():
    assert OUTSIDE.search("the nests (DESIGN §5.4)") and OUTSIDE.search("see ../shared/DESIGN.md")
    assert not OUTSIDE.search('docs/architecture.md, "Design: lowering"')


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_in_the_docs_resolve():
    """Every relative Markdown link (pages, plots) in docs/ and the README names a file that exists."""
    broken = []
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    for page in pages:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                if "://" in target or target.startswith("mailto:"):
                    continue
                if not (page.parent / target).exists():
                    broken.append(f"{page.relative_to(ROOT)}:{n}: {target}")
    assert not broken, "\n".join(broken[:10])
