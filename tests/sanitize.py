"""Run simulator tests against the ASan/UBSan build of the extension (``make test-sanitize``).

The sanitized ``_simulator`` (built by CMake with ``FUSEFLOW_SANITIZE=ON`` into build/sanitize)
is loaded as ``fuseflow._simulator`` before anything imports fuseflow, so the tests exercise it
instead of the installed release build. The sanitizer runtimes are preloaded by the Makefile
(Python itself is not instrumented); any report aborts the run with a non-zero exit.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    so = sorted((ROOT / "build" / "sanitize").glob("_simulator*.so"))
    if not so:
        print("tests/sanitize.py: no build/sanitize/_simulator*.so (run make test-sanitize)", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("fuseflow._simulator", so[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["fuseflow._simulator"] = mod
    import fuseflow
    import fuseflow.primitives
    import fuseflow.sim.graph

    fuseflow._simulator = mod
    loaded = (fuseflow.primitives._simulator, fuseflow.sim.graph._simulator)
    assert all(m is mod for m in loaded), "the release extension was loaded instead of the sanitized one"
    print(f"sanitized simulator: {so[0]}", file=sys.stderr)
    return pytest.main(["-q", "-p", "no:cacheprovider", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
