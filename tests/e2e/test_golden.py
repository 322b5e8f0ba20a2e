"""Golden behaviour: the figures recorded in docs/results/*.json reproduce exactly.

Studies and sweeps recorded before `order="auto"` became the default ran in the lowering's own
order, so they are re-run with `order="plain"` (or the named order they swept). Cycles, ALU ops,
reductions and memory bytes must be identical: a refactor or a new pass must not move them.
"""

import json
from pathlib import Path

import pytest

import fuseflow

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"

import gcn  # noqa: E402
import sae  # noqa: E402
import spgemm_chain  # noqa: E402

CORA = ROOT.parent / "shared" / "data" / "planetoid" / "cora.npz"
COUNTERS = ("alu_ops", "reductions", "mem_read_bytes", "mem_write_bytes")


def _totals(res) -> dict:
    t = {k: 0 for k in COUNTERS}
    for r in res.regions:
        for k, v in r.totals().items():
            if k in t:
                t[k] += v
    return t


def _study(path: Path, mod, **options):
    recorded = json.loads(path.read_text())
    model, args, formats = mod.build(**options)
    for row in recorded["schedules"]:
        prog = fuseflow.compile(model, args, formats=formats, schedule=row["schedule"], order="plain")
        res = prog.simulate(arch=recorded["arch"])
        res.check()
        assert res.cycles == row["cycles"], row["schedule"]
        assert len(prog.graphs) == row["regions"]
        got = _totals(res)
        assert {k: got[k] for k in COUNTERS} == {k: row[k] for k in COUNTERS}, row["schedule"]


def test_sae_study_reproduces():
    _study(RESULTS / "sae.json", sae)


@pytest.mark.skipif(not CORA.exists(), reason="../shared/data not present")
def test_cora_gcn_study_reproduces():
    _study(RESULTS / "cora_gcn.json", gcn, graph=str(CORA))


@pytest.mark.parametrize("density", ["0.1", "0.3"])
def test_spgemm_chain_order_sweep_reproduces(density):
    recorded = json.loads((RESULTS / f"order_sweep_karate_d{density}.json").read_text())
    model, args, formats = spgemm_chain.build(density=float(density))
    base = fuseflow.compile(model, args, formats=formats, schedule="full", order="plain")
    for row in recorded["orders"]:
        res = base.reorder({"full": row["order"]}).simulate(arch=recorded["arch"])
        res.check()
        fused = next(r for r in res.regions if r.name == "full")
        assert fused.cycles == row["region_cycles"], row["order"]
