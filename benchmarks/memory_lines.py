"""Memory lines per node: the simulator's count (`mem_lines`, lines requested from the memory
model for reads) beside the cycle model's (`NodeEstimate.lines`), on an arch with the memory
model on. The cycle model's memory stalls scale with its line count, so a node counted short
here is a region estimated short on such machines (docs/cycle-model.md, "Memory").

    python benchmarks/memory_lines.py [--arch rda] [-o lines.json]

Prints one JSON line per memory node, then a table of the nodes furthest off.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.model_files import example  # noqa: E402


def _cases():
    """(label, build module, its options, schedule, orders)."""
    gcn = example("gcn", EXAMPLES)
    kernels = example("kernels", EXAMPLES)
    spgemm_chain = example("spgemm_chain", EXAMPLES)

    return [
        ("spmm", kernels, {"kernel": "spmm"}, "full", ["i,k,j", "j,k,i", "k,i,j", "k,j,i"]),
        ("spgemm-chain", spgemm_chain, {}, "full", ["i,l,k,j", "i,j,l,k", "j,k,l,i", "k,l,i,j"]),
        ("gcn", gcn, {}, "unfused", ["plain"]),
    ]


def rows(arch: str):
    """One row per node that reads memory, in every case's regions."""
    for label, mod, options, schedule, orders in _cases():
        model, args, formats = mod.build(**options)
        for order in orders:
            spec = order if "," not in order else {"full": order}
            prog = fuseflow.compile(model, args, formats=formats, schedule=schedule, order=spec, arch=arch)
            res = prog.simulate(arch=arch)
            est = prog.estimate(arch=arch)
            for region, predicted in zip(res.regions, est.regions):
                model_lines = {n.name: n.lines for n in predicted.nodes}
                for node in region.nodes:
                    sim = int(node.get("mem_lines", 0))
                    if sim == 0 and not model_lines.get(node["name"]):
                        continue
                    yield {
                        "case": label,
                        "order": order,
                        "region": region.name,
                        "node": node["name"],
                        "simulated_lines": sim,
                        "model_lines": round(model_lines.get(node["name"], 0.0), 1),
                        "tokens": int(node["tokens_out"]),
                    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="rda", help="a preset or TOML with the memory model on")
    ap.add_argument("-o", "--output", help="write the rows as JSON here")
    a = ap.parse_args(argv)
    out = []
    for r in rows(a.arch):
        out.append(r)
        print(json.dumps(r), flush=True)
    for r in out:
        r["ratio"] = r["model_lines"] / r["simulated_lines"] if r["simulated_lines"] else None
    worst = sorted((r for r in out if r["ratio"] is not None), key=lambda r: abs(r["ratio"] - 1.0), reverse=True)
    print("\n| case | order | region | node | simulated lines | model lines | model / simulated |")
    print("|---|---|---|---|---:|---:|---:|")
    for r in worst[:20]:
        print(
            f"| {r['case']} | {r['order']} | {r['region']} | {r['node']} | {r['simulated_lines']:,} "
            f"| {r['model_lines']:,.0f} | {r['ratio']:.2f} |"
        )
    if a.output:
        Path(a.output).write_text(json.dumps({"arch": a.arch, "rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
