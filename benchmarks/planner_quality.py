"""Planner quality: schedule="auto" against the exhaustive sweep of its own space (every
segmentation simulated) where that is small enough, else against the fixed schedules.

Per app it prints one JSON line and, at the end, a table: the chosen schedule's simulated cycles,
the best the sweep found, their ratio, and what each costs in simulated cycles and wall time.

    python benchmarks/planner_quality.py -o docs/results/planner_quality.json [--cora PATH] [--arch rda]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.compiler import plan  # noqa: E402
from fuseflow.compiler import space as planning_space  # noqa: E402
from fuseflow.model_files import example  # noqa: E402

EXHAUSTIVE_LIMIT = 64
"""Spaces up to this many segmentations are swept exhaustively."""


def _cases(cora: str | None):
    gcn = example("gcn", EXAMPLES)
    gpt_bigbird = example("gpt_bigbird", EXAMPLES)
    graphsage = example("graphsage", EXAMPLES)
    sae = example("sae", EXAMPLES)

    out = [
        ("GCN karate", gcn, {}),
        ("PyG GCN karate", "pyg_gnn", {}),
        ("PyG GraphSAGE karate", "pyg_gnn", {"conv": "sage"}),
        ("GraphSAGE karate", graphsage, {}),
        ("SAE", sae, {}),
        ("GPT-BigBird seq32 d16", gpt_bigbird, dict(seq=32, d_model=16, heads=2, d_ff=32, block=16)),
    ]
    if cora and Path(cora).exists():
        out.insert(1, ("GCN Cora", gcn, {"graph": cora}))
        out.insert(3, ("GraphSAGE Cora", graphsage, {"graph": cora}))
    return out


def measure(name: str, mod, options: dict, arch: str) -> dict:
    if isinstance(mod, str):  # an optional extra's example (pyg)
        mod = example(mod, EXAMPLES)
    model, args, formats = mod.build(**options)
    t0 = time.perf_counter()
    found = plan(model, args, formats, arch=arch)
    plan_s = time.perf_counter() - t0
    found.program.simulate(arch=arch).check()
    space = planning_space(model, args, formats, arch=arch)
    segs = space.segmentations()
    row = {
        "app": name,
        "units": len(space.units),
        "space": len(segs),
        "chosen_cycles": found.chosen.simulated_cycles,
        "chosen": found.chosen.describe(found.units),
        "planner_simulated_cycles": found.simulated_cycles,
        "planner_compiles": found.compiles,
        "planner_s": round(plan_s, 1),
        "arch": arch,
        "simulated_candidates": sum(c.simulated_cycles is not None for c in found.candidates),
        "widened": any("widened" in n for n in found.notes),
    }
    t0 = time.perf_counter()
    if len(segs) <= EXHAUSTIVE_LIMIT:
        sweep = {s: space.compile(s).simulate(arch=arch).cycles for s in segs}
        best = min(sweep, key=sweep.get)
        row.update(
            reference="exhaustive sweep",
            best_cycles=sweep[best],
            best=", ".join(f"{a}-{b}" for a, b in best),
            sweep_simulated_cycles=sum(sweep.values()),
        )
    else:
        fixed = {"unfused": "unfused", "layer": "layer", "full": "full", "op": "op"}
        if hasattr(mod, "schedules"):
            fixed.update(mod.schedules())
        cycles = {
            k: fuseflow.compile(model, args, formats, schedule=s, arch=arch).simulate().cycles for k, s in fixed.items()
        }
        best = min(cycles, key=cycles.get)
        row.update(
            reference=f"best fixed schedule of {', '.join(cycles)} (space of {len(segs)} too large to sweep)",
            best_cycles=cycles[best],
            best=best,
            fixed_cycles=cycles,
            sweep_simulated_cycles=None,
        )
    row["reference_s"] = round(time.perf_counter() - t0, 1)
    row["chosen_over_best"] = round(row["chosen_cycles"] / row["best_cycles"], 4)
    if row["sweep_simulated_cycles"]:
        row["cost_fraction"] = round(row["planner_simulated_cycles"] / row["sweep_simulated_cycles"], 4)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output")
    ap.add_argument("--cora", default=str(ROOT.parent / "shared" / "data" / "planetoid" / "cora.npz"))
    ap.add_argument("--arch", default="comal", help="the machine planned for and simulated")
    ap.add_argument("--skip", default="", help="comma-separated apps to leave out (substring match)")
    a = ap.parse_args()
    rows = []
    skip = [x for x in a.skip.split(",") if x]
    for name, mod, options in _cases(a.cora):
        if any(x in name for x in skip):
            continue
        row = measure(name, mod, options, a.arch)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if a.output:
        Path(a.output).write_text(json.dumps({"command": " ".join(sys.argv), "apps": rows}, indent=2) + "\n")
    print(
        f"\n{'app':24} {'units':>5} {'space':>6} {'chosen':>10} {'best':>10} {'ratio':>6} {'plan sim':>10} "
        f"{'sweep sim':>11} {'plan s':>7}"
    )
    for r in rows:
        sweep = f"{r['sweep_simulated_cycles']:,}" if r["sweep_simulated_cycles"] else "-"
        print(
            f"{r['app']:24} {r['units']:>5} {r['space']:>6} {r['chosen_cycles']:>10,} {r['best_cycles']:>10,} "
            f"{r['chosen_over_best']:>6.3f} {r['planner_simulated_cycles']:>10,} {sweep:>11} {r['planner_s']:>7}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
