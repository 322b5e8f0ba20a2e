"""Cycles of a parallelized region per lane count (sam-parallelize at the outermost variable).

Cases: the masked attention of GPT-BigBird (one head, BigBird mask, the `mha` region of the
FuseFlow schedule in isolation), the fused GCN layer (karate club), and the SpGEMM chain.
Every run is checked against PyTorch. Prints JSON and a table:

    python benchmarks/parallel_scaling.py [--seq 256 --d 64 --block 16] [-o out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

import fuseflow  # noqa: E402
from fuseflow.model_files import example  # noqa: E402


def lane_sweep(model, args, formats, factors, level: str = "i"):
    """(lanes, result, max abs error vs PyTorch) of the fused program at each lane count, the
    lanes splitting index variable `level`."""
    for p in factors:
        prog = fuseflow.compile(
            model, args, formats=formats, schedule="full", passes=f"sam-parallelize{{level={level} factor={p}}}"
        )
        res = prog.simulate()
        yield p, res, res.check()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--factors", default="1,2,4,8")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    gcn_layer = example("gcn_layer", EXAMPLES)
    spgemm_chain = example("spgemm_chain", EXAMPLES)

    from fuseflow.models import masked_attention as attention

    cases = {
        f"masked attention seq {a.seq} d {a.d} block {a.block}": lambda: attention(a.seq, a.d, a.block),
        "GCN layer (karate)": gcn_layer.build,
        "SpGEMM chain (karate)": spgemm_chain.build,
    }
    factors = [int(x) for x in a.factors.split(",")]
    rows = []
    for name, build in cases.items():
        model, args, formats = build()
        base = None
        for p, res, err in lane_sweep(model, args, formats, factors):
            base = base or res.cycles
            rows.append(
                {
                    "case": name,
                    "factor": p,
                    "cycles": res.cycles,
                    "speedup": round(base / res.cycles, 2),
                    "max_abs_error": err,
                }
            )
            print(f"{name:45s} P={p:<3d} {res.cycles:>10d} cycles  {base / res.cycles:5.2f}x", file=sys.stderr)
        if name.startswith("masked attention"):  # two levels: rows, then head dim and key loops
            pipe = "sam-parallelize{level=i factor=4},sam-parallelize{level=j,m,p,k factor=4}"
            res = fuseflow.compile(model, args, formats=formats, schedule="full", passes=pipe).simulate()
            rows.append(
                {
                    "case": name,
                    "factor": "4 x 4 (i; j,m,p,k)",
                    "cycles": res.cycles,
                    "speedup": round(base / res.cycles, 2),
                    "max_abs_error": res.check(),
                }
            )
            print(f"{name:45s} 4x4  {res.cycles:>10d} cycles  {base / res.cycles:5.2f}x", file=sys.stderr)
    print(json.dumps(rows, indent=2))
    if a.output:
        Path(a.output).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
