"""Every example's sam text under every built-in schedule is what it was when recorded
(`tests/e2e/sam_digests.json`: the first 16 hex digits of its sha256), so a refactor of the
lowering that changes a graph by one byte fails here. Orders are the lowering's own (`plain`):
`order="auto"` chooses by predicted cycles, and a near-tie could break differently on another
machine's float arithmetic. Re-record on purpose only:

    python tests/e2e/test_sam_digests.py --record

The same texts also go through the C++ tool: in their portable form (``sam-to-module``),
``torch-mlir-opt --irdl-file=<fuseflow-opt --emit-irdl> --verify-each`` parses, verifies and
re-prints every graph, and ``module-to-sam`` gives back the text compile() emitted, byte for byte.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch_mlir

import fuseflow

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("sam_digests.json")
OPTIONS = {"gpt_bigbird": dict(seq=32, d_model=16, d_ff=32, block=8)}
EXAMPLES = ("gcn_layer", "gcn", "graphsage", "sae", "spgemm_chain", "kernels", "gpt_bigbird", "pyg_gnn")
SCHEDULES = ("unfused", "layer", "full", "op")


@functools.cache
def texts(example: str) -> dict[str, str]:
    """`example/schedule` -> the sam text compile() emits, or ``refused: <first line>``."""
    sys.path.insert(0, str(ROOT / "examples"))
    model, args, formats = importlib.import_module(example).build(**OPTIONS.get(example, {}))
    out = {}
    for schedule in SCHEDULES:
        try:
            prog = fuseflow.compile(model, args, formats=formats, schedule=schedule, order="plain")
            out[f"{example}/{schedule}"] = prog.mlir("sam")
        except fuseflow.FuseflowError as e:
            out[f"{example}/{schedule}"] = "refused: " + str(e).splitlines()[0][:80]
    return out


def digests(example: str) -> dict[str, str]:
    return {
        k: t if t.startswith("refused: ") else hashlib.sha256(t.encode()).hexdigest()[:16]
        for k, t in texts(example).items()
    }


def cpp_round_trip(sam_texts: list[str], workdir: Path) -> list[str]:
    """Each text to its portable form, through torch-mlir-opt (one run, split input) and back."""
    from fuseflow.cli.opt import process
    from fuseflow.dialects.sam import irdl_text
    from fuseflow.passes import step

    portable = [str(process(t, [step("sam-to-module")], False)) for t in sam_texts]
    irdl = workdir / "sam.irdl.mlir"
    irdl.write_text(irdl_text())
    tool = Path(torch_mlir.__path__[0]) / "_mlir_libs" / "torch-mlir-opt"
    run = subprocess.run(
        [str(tool), f"--irdl-file={irdl}", "--verify-each", "--split-input-file"],
        input="\n// -----\n".join(portable),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[:2000]
    printed = run.stdout.split("// -----\n")
    assert len(printed) == len(sam_texts)
    return [str(process(p, [step("module-to-sam")], False)) for p in printed]


@pytest.mark.parametrize("example", EXAMPLES)
def test_sam_text_is_recorded_and_cpp_tools_read_it_back(example, tmp_path):
    if example == "pyg_gnn":
        pytest.importorskip("torch_geometric")
    recorded = json.loads(RECORDED.read_text())
    assert digests(example) == {k: v for k, v in recorded.items() if k.startswith(example + "/")}
    compiled = {k: t for k, t in texts(example).items() if not t.startswith("refused: ")}
    assert compiled, "every schedule refused"
    back = dict(zip(compiled, cpp_round_trip(list(compiled.values()), tmp_path), strict=True))
    for key, text in compiled.items():
        assert back[key] == text, key


if __name__ == "__main__" and "--record" in sys.argv:
    RECORDED.write_text(json.dumps({k: v for e in EXAMPLES for k, v in digests(e).items()}, indent=1) + "\n")
