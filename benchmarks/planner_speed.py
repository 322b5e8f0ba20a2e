"""Wall time of `schedule="auto"` (the planner), with the choice it makes.

For each case: seconds to plan and compile, the number of compiles the planner ran, and the
chosen program's simulated cycles (a faster planner must make the same choice). Prints one JSON
line per case, then a table.

    python benchmarks/planner_speed.py [--cases gcn,gpt] [-o out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.model_files import example  # noqa: E402

gcn = example("gcn", EXAMPLES)
gpt_bigbird = example("gpt_bigbird", EXAMPLES)

SMALL_GPT = dict(seq=32, d_model=16, heads=2, d_ff=32, block=16)
CASES = {
    "gcn": ("GCN karate", gcn, {}),
    "gpt": ("GPT-BigBird seq 32, d 16", gpt_bigbird, SMALL_GPT),
    "gpt2": ("GPT-BigBird seq 32, d 16, 2 blocks", gpt_bigbird, {**SMALL_GPT, "layers": 2}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="gcn,gpt", help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("-o", "--output", help="write the JSON here")
    a = ap.parse_args()
    rows = []
    for key in a.cases.split(","):
        label, mod, opts = CASES[key]
        model, args, formats = mod.build(**opts)
        t0 = time.perf_counter()
        prog = fuseflow.compile(model, args, formats=formats, schedule="auto")
        wall = time.perf_counter() - t0
        res = prog.simulate()
        res.check()
        rows.append(
            {
                "case": label,
                "plan_s": round(wall, 1),
                "compiles": prog.plan.compiles if prog.plan is not None else None,
                "regions": len(prog.graphs),
                "cycles": res.cycles,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    if a.output:
        Path(a.output).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    print("| case | plan s | compiles | regions | chosen cycles |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['plan_s']} | {r['compiles']} | {r['regions']} | {r['cycles']:,} |")


if __name__ == "__main__":
    main()
