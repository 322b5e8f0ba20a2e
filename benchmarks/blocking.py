"""Sparsity blocking: cycles blocked vs unblocked (block{size=b}), every run checked against PyTorch.

Cases: BigBird masked attention (one head; the mask's block size = b) at b = 16, 32, 64, and the
sparse autoencoder with 90% weight sparsity, unstructured vs block-pruned (16 x 16 blocks).
Tile timing is the simulator default (docs/architecture.md, "Design: the simulator"): product
tiles on a b x b matmul unit (II b),
other tiles on a b-lane vector unit (II b for a b x b tile). Prints JSON and a table:

    python benchmarks/blocking.py [--seq 256 --d 64] [-o out.json]
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


def simulate(build, passes):
    model, args, formats = build()
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", passes=passes)
    res = prog.simulate()
    err = res.check()
    return res.cycles, sum(r.totals()["alu_ops"] for r in res.regions), err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    sae = example("sae", EXAMPLES)

    from fuseflow.models import masked_attention as attention

    cases = [(f"attention seq {a.seq} d {a.d}, b={b}", lambda b=b: attention(a.seq, a.d, b), b) for b in (16, 32, 64)]
    cases += [
        ("SAE 1024-256, unstructured 90%", lambda: sae.build(), 16),
        ("SAE 1024-256, 16x16 block-pruned 90%", lambda: sae.build(block_pruned=16), 16),
    ]
    rows = []
    for name, build, b in cases:
        plain = simulate(build, None)
        blocked = simulate(build, f"block{{size={b}}}")
        rows.append(
            {
                "case": name,
                "block": b,
                "unblocked_cycles": plain[0],
                "blocked_cycles": blocked[0],
                "speedup": round(plain[0] / blocked[0], 2),
                "unblocked_alu_ops": plain[1],
                "blocked_alu_ops": blocked[1],
                "max_abs_error": max(plain[2], blocked[2]),
            }
        )
        r = rows[-1]
        print(
            f"{name:42s} {r['unblocked_cycles']:>10d} -> {r['blocked_cycles']:>8d} cycles ({r['speedup']:6.2f}x), "
            f"ALU ops {r['unblocked_alu_ops']} -> {r['blocked_alu_ops']}",
            file=sys.stderr,
        )
    print(json.dumps(rows, indent=2))
    if a.output:
        Path(a.output).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
