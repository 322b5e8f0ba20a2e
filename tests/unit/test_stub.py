"""The committed type stub of the C++ extension matches a fresh nanobind stubgen run."""

import subprocess
import sys
from pathlib import Path

import fuseflow

STUB = Path(fuseflow.__file__).parent / "_simulator.pyi"


def test_committed_stub_matches_the_built_extension(tmp_path):
    out = tmp_path / "_simulator.pyi"
    subprocess.run(
        [sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "fuseflow._simulator", "-o", str(out)],
        check=True,
        capture_output=True,
    )
    assert out.read_text() == STUB.read_text(), (
        "regenerate with: python -m nanobind.stubgen -m fuseflow._simulator -o fuseflow/_simulator.pyi"
    )
