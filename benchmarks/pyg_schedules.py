"""Unmodified PyTorch Geometric GNNs under fuseflow's schedules: cycles, error vs PyG, wall time.

    python benchmarks/pyg_schedules.py [-o docs/results/pyg_karate.json] [--graph cora]

Two-layer GCNConv (normalised and not), SAGEConv (mean, max) and GINConv on PyG's KarateClub
(34 nodes, 156 edges, 34 features; or Cora from ../shared/data with 32 random binary features),
each compiled from `edge_index` under unfused / layer / full with order=auto, simulated on the
comal preset and checked against eager PyG (`SimResult.check`, default tolerance). Prints JSON
and a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]

SCHEDULES = ("unfused", "layer", "full")


def graph(name: str):
    from torch_geometric.datasets import KarateClub

    if name == "karate":
        d = KarateClub()[0]
        return d.x, d.edge_index
    z = np.load(ROOT.parent / "shared" / "data" / "planetoid" / f"{name}.npz")
    n = int(z["num_nodes"])
    rows = np.repeat(np.arange(n), np.diff(z["adj_indptr"]))
    g = torch.Generator().manual_seed(0)
    return (torch.rand(n, 32, generator=g) < 0.1).float(), torch.tensor(np.stack([z["adj_indices"], rows]))


def main() -> int:
    from fuseflow.models import pyg_convs
    from fuseflow.models import pyg_two_layer as model

    CONVS = pyg_convs()

    import fuseflow

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output")
    p.add_argument("--graph", default="karate", help="karate, or cora / citeseer from ../shared/data")
    p.add_argument("--schedules", default=",".join(SCHEDULES))
    a = p.parse_args()
    x, edge_index = graph(a.graph)
    rows = []
    for kind in CONVS:
        m = model(kind, x.shape[1], hidden=16, out=4)
        for schedule in a.schedules.split(","):
            t0 = time.perf_counter()
            try:
                prog = fuseflow.compile(m, (x, edge_index), schedule=schedule)
                t1 = time.perf_counter()
                res = prog.simulate()
                t2 = time.perf_counter()
                err = res.check()
                rows.append(
                    {
                        "conv": kind,
                        "schedule": schedule,
                        "regions": len(res.regions),
                        "cycles": res.cycles,
                        "max_abs_error": err,
                        "compile_s": round(t1 - t0, 2),
                        "simulate_s": round(t2 - t1, 2),
                    }
                )
            except fuseflow.FuseflowError as e:
                rows.append({"conv": kind, "schedule": schedule, "error": str(e).splitlines()[0][:200]})
    out = {"graph": a.graph, "nodes": int(x.shape[0]), "edges": int(edge_index.shape[1]), "rows": rows}
    if a.output:
        Path(a.output).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    print(f"\n{a.graph}: {out['nodes']} nodes, {out['edges']} edges")
    print(f"{'conv':<18}" + "".join(f"{s:>14}" for s in a.schedules.split(",")))
    for kind in CONVS:
        cells = []
        for s in a.schedules.split(","):
            r = next(r for r in rows if r["conv"] == kind and r["schedule"] == s)
            cells.append(f"{r['cycles']:>14,}" if "cycles" in r else f"{'error':>14}")
        print(f"{kind:<18}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
