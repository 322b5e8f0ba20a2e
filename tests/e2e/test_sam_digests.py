"""Every example's sam text under every built-in schedule is what it was when recorded
(`tests/e2e/sam_digests.json`: the first 16 hex digits of its sha256), so a refactor of the
lowering that changes a graph by one byte fails here. Orders are the lowering's own (`plain`):
`order="auto"` chooses by predicted cycles, and a near-tie could break differently on another
machine's float arithmetic. Re-record on purpose only:

    python tests/e2e/test_sam_digests.py --record
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path

import pytest

import fuseflow

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("sam_digests.json")
OPTIONS = {"gpt_bigbird": dict(seq=32, d_model=16, d_ff=32, block=8)}
EXAMPLES = ("gcn_layer", "gcn", "graphsage", "sae", "spgemm_chain", "kernels", "gpt_bigbird", "pyg_gnn")
SCHEDULES = ("unfused", "layer", "full", "op")


def digests(example: str) -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "examples"))
    model, args, formats = importlib.import_module(example).build(**OPTIONS.get(example, {}))
    out = {}
    for schedule in SCHEDULES:
        try:
            prog = fuseflow.compile(model, args, formats=formats, schedule=schedule, order="plain")
            out[f"{example}/{schedule}"] = hashlib.sha256(prog.mlir("sam").encode()).hexdigest()[:16]
        except fuseflow.FuseflowError as e:
            out[f"{example}/{schedule}"] = "refused: " + str(e).splitlines()[0][:80]
    return out


@pytest.mark.parametrize("example", EXAMPLES)
def test_sam_text_is_byte_identical_to_the_recorded(example):
    if example == "pyg_gnn":
        pytest.importorskip("torch_geometric")
    recorded = json.loads(RECORDED.read_text())
    got = digests(example)
    assert got == {k: v for k, v in recorded.items() if k.startswith(example + "/")}


if __name__ == "__main__" and "--record" in sys.argv:
    RECORDED.write_text(json.dumps({k: v for e in EXAMPLES for k, v in digests(e).items()}, indent=1) + "\n")
