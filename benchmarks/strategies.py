"""Strategies on a finite fabric: what micro-batches and pipelining across regions buy.

For SAE, a two-layer GCN and GraphSAGE on a power-law stand-in graph (Cora-ML's size, see
examples/graphs.py) and GPT-BigBird, on a finite preset with the memory model on (default
``amber``), it simulates every strategy: ``sequential``, ``concurrent``, ``pipeline:2/4/8``
(micro-batches of equal work) and ``auto`` (the cycle model's choice, confirmed by simulation).
Every run's outputs are checked against PyTorch. It also prints the balance of the ``nnz`` and
``rows`` splits on the ogbl-collab stand-in (235,868 nodes) at K = 4, and why each region that
runs whole could not be cut. One JSON line per row, then a table.

    python benchmarks/strategies.py -o docs/results/strategies.json [--arch amber] [--quick]
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

import numpy as np  # noqa: E402

import fuseflow  # noqa: E402
from fuseflow.model_files import example  # noqa: E402

STRATEGIES = ("sequential", "concurrent", "pipeline:2", "pipeline:4", "pipeline:8", "auto")


def _cases(quick: bool):
    gcn = example("gcn", EXAMPLES)
    gpt_bigbird = example("gpt_bigbird", EXAMPLES)
    graphsage = example("graphsage", EXAMPLES)
    sae = example("sae", EXAMPLES)

    graph = {} if quick else {"graph": "standin:cora-ml"}
    return [
        ("SAE", sae, {}, "unfused"),
        ("SAE", sae, {}, "layer"),
        ("GCN " + ("karate" if quick else "cora-ml stand-in"), gcn, graph, "unfused"),
        ("GraphSAGE " + ("karate" if quick else "cora-ml stand-in"), graphsage, graph, "unfused"),
        ("GPT-BigBird seq32", gpt_bigbird, {"seq": 32}, "unfused"),
        ("GPT-BigBird seq32 FFN", gpt_bigbird, {"seq": 32}, "ffn"),
    ]


def measure(name: str, mod, options: dict, schedule: str, arch: str) -> dict:
    from fuseflow.fabric.run import info_for

    model, args, formats = mod.build(**options)
    if schedule == "ffn":  # the feed-forward block alone: row-local from end to end
        model, args, formats = _ffn(mod, options)
        schedule = "unfused"
    prog = fuseflow.compile(model, args, formats=formats, schedule=schedule, arch=arch)
    info = info_for(prog, prog.bind(prog.example_args))
    whole = {r: why for r, why in info.regions.items() if why is not None}
    row: dict = {"model": name, "schedule": schedule, "arch": arch, "regions": len(prog.graphs), "whole": whole}
    cycles, wall, chosen = {}, {}, None
    for s in STRATEGIES:
        t0 = time.perf_counter()
        res = prog.simulate(strategy=s)
        res.check()
        wall[s] = round(time.perf_counter() - t0, 2)
        cycles[s] = res.cycles
        if s == "auto":
            chosen = res.strategy
            row["auto_considered"] = res.considered
    seq = cycles["sequential"]
    row.update(
        cycles=cycles,
        speedup={s: round(seq / c, 3) for s, c in cycles.items()},
        auto=chosen,
        sim_s=wall,
    )
    return row


def _ffn(mod, options):
    """GPT-BigBird's feed-forward block (LayerNorm, two linears, GELU, residual) on the block's
    input: row-local from end to end."""
    import torch

    model, args, _ = mod.build(**options)

    class FFNBlock(torch.nn.Module):
        def __init__(self, block):
            super().__init__()
            self.ln2, self.ffn = block.ln2, block.ffn

        def forward(self, x):
            return x + self.ffn(self.ln2(x))

    return FFNBlock(model).eval(), (args[0],), {}


def balance() -> dict:
    """ogbl-collab stand-in, K = 4: max/mean work of the nnz and the rows split."""
    graphs = example("graphs", EXAMPLES)
    import scipy.sparse as sp

    from fuseflow.fabric.split import SplitInfo, split_nnz, split_rows

    adj, _ = graphs.standin("ogbl-collab")
    counts = np.diff(sp.csr_matrix(adj).indptr).astype(float)
    info = SplitInfo("rows", adj.shape[0], {"A": counts})
    nnz, rows = split_nnz(info, 4), split_rows(info, 4)
    return {
        "graph": "ogbl-collab stand-in",
        "nodes": adj.shape[0],
        "entries": int(counts.sum()),
        "k": 4,
        "nnz_imbalance": round(nnz.imbalance, 4),
        "rows_imbalance": round(rows.imbalance, 4),
        "nnz_bounds": [list(b) for b in nnz.bounds],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="amber")
    ap.add_argument("--quick", action="store_true", help="karate instead of the Cora-ML stand-in")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    rows = []
    for name, mod, options, schedule in _cases(a.quick):
        try:
            row = measure(name, mod, options, schedule, a.arch)
        except fuseflow.FuseflowError as e:  # recorded; the other rows still run
            row = {"model": name, "schedule": schedule, "arch": a.arch, "error": str(e).splitlines()[0][:200]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    bal = balance()
    print(json.dumps(bal), flush=True)
    if a.output:
        Path(a.output).write_text(json.dumps({"rows": rows, "balance": bal}, indent=1) + "\n")
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"strategies on the fabric of {a.arch} (cycles; speedup over sequential)")
    for h in ["model", "schedule", *STRATEGIES, "auto chose"]:
        t.add_column(h, justify="left" if h in ("model", "schedule", "auto chose") else "right")
    for r in rows:
        if "error" in r:
            t.add_row(r["model"], r["schedule"], r["error"][:80], *[""] * len(STRATEGIES))
            continue
        cells = [f"{r['cycles'][s]:,} ({r['speedup'][s]:.2f}x)" for s in STRATEGIES]
        t.add_row(r["model"], r["schedule"], *cells, r["auto"])
    Console(width=220).print(t)
    print(
        f"balance, {bal['graph']} ({bal['nodes']:,} nodes, {bal['entries']:,} entries), K = 4: "
        f"nnz split max/mean work {bal['nnz_imbalance']:.3f}, rows split {bal['rows_imbalance']:.3f}"
    )
    for r in rows:
        for region, why in r.get("whole", {}).items():
            print(f"  {r['model']} {r['schedule']}: {region} runs whole ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
