"""`fuseflow compile -o DIR` is a complete hand-off: `fuseflow simulate DIR/x.sam.mlir --data DIR`
gives the cycles and outputs of `fuseflow run`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fuseflow.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _json_out(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("example", ["gcn.py", "sae.py"])
def test_compile_writes_what_simulate_reads(tmp_path, capsys, example):
    model = str(ROOT / "examples" / example)
    assert main(["compile", model, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    stem = Path(example).stem
    assert (tmp_path / f"{stem}.sam.mlir").exists()
    sim = _json_out(
        capsys,
        [
            "simulate",
            str(tmp_path / f"{stem}.sam.mlir"),
            "--data",
            str(tmp_path),
            "--json",
            "-o",
            str(tmp_path / "out"),
        ],
    )
    run = _json_out(capsys, ["run", model, "--json"])
    assert sim["total_cycles"] == run["total_cycles"]
    assert [r["cycles"] for r in sim["regions"]] == [r["cycles"] for r in run["regions"]]
    # the simulated output equals eager PyTorch on the written data
    import importlib.util

    spec = importlib.util.spec_from_file_location(stem, model)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m, args, _ = mod.build()
    with torch.no_grad():
        want = m(*args)
    want = want[0] if isinstance(want, tuple) else want
    (out,) = list((tmp_path / "out").glob("*.npy"))
    np.testing.assert_allclose(np.load(out), want.to_dense().numpy(), rtol=1e-4, atol=1e-4)


def test_version_is_the_package_version_and_the_changelog_lists_it(capsys):
    import tomllib

    import fuseflow

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out.strip() == f"fuseflow {declared}" == f"fuseflow {fuseflow.__version__}"
    assert f"\n## {declared}\n" in (ROOT / "CHANGELOG.md").read_text()
