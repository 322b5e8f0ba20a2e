"""Every convolution class of `torch_geometric.nn.conv`, tried as a user would: does it compile
unmodified and match PyTorch?

    python benchmarks/pyg_conv_status.py [-o docs/results/pyg_conv_status.json] [--only GATConv,TAGConv]

Each class is built as `cls(34, 8)` then `cls(8, 4)` (or with the few arguments the table
`ARGS` gives: an inner network, heads, hops), put in a two-layer model with a ReLU between,
compiled from KarateClub's `edge_index` under `unfused` (order=auto), simulated and checked
against eager PyTorch (`SimResult.check`). A class whose forward needs more than `(x,
edge_index)` (edge types, positions, hyperedges, batches) is marked as such and not tried.
Prints JSON and a Markdown table (the one in docs/ops.md, "PyTorch Geometric convolutions").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TMPDIR", str(ROOT / "build" / "tmp"))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import fuseflow  # noqa: E402
from fuseflow.models import TwoLayer  # noqa: E402


def _mlp(i: int, o: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))


ARGS: dict[str, Callable[[type, int, int], torch.nn.Module]] = {
    "GINConv": lambda c, i, o: c(torch.nn.Linear(i, o)),
    "EdgeConv": lambda c, i, o: c(_mlp(2 * i, o)),
    "ChebConv": lambda c, i, o: c(i, o, K=2),
    "TAGConv": lambda c, i, o: c(i, o, K=2),
    "SGConv": lambda c, i, o: c(i, o, K=2),
    "SSGConv": lambda c, i, o: c(i, o, alpha=0.1, K=2),
    "APPNP": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c(K=2, alpha=0.1))),
    "GatedGraphConv": lambda c, i, o: c(34, num_layers=2),  # its width is fixed: 34 in and out, both layers
    "ARMAConv": lambda c, i, o: c(i, o, num_stacks=1, num_layers=1),
    "GCN2Conv": None,  # needs the initial features x_0 in forward
    "MixHopConv": lambda c, i, o: c(i, o // 2, powers=[0, 1]),  # one block of o // 2 per power
    "DNAConv": None,  # forward takes (N, L, C) layer stacks
    "LGConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c())),
    "SimpleConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c())),
    "AGNNConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c())),
    "GATConv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "GATv2Conv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "TransformerConv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "SuperGATConv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "FAConv": None,  # needs the initial features x_0 in forward
    "PNAConv": None,  # needs degree histograms
    "AntiSymmetricConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c(o, num_iters=1))),
    "DirGNNConv": None,  # wraps another conv
    "WLConv": None,  # integer colours
    "HeteroConv": None,  # heterogeneous graphs
}
"""How to build the classes `cls(in, out)` does not build; None: forward needs more than (x, edge_index)."""

NEEDS_MORE = {
    "MessagePassing": "the base class",
    "RGCNConv": "edge types",
    "FastRGCNConv": "edge types",
    "CuGraphRGCNConv": "edge types, CUDA",
    "RGATConv": "edge types",
    "CuGraphSAGEConv": "CUDA",
    "CuGraphGATConv": "CUDA",
    "FusedGATConv": "CSC tensors from dgNN",
    "SignedConv": "positive and negative edges",
    "PointNetConv": "positions",
    "PPFConv": "positions and normals",
    "XConv": "positions",
    "PointTransformerConv": "positions",
    "PointGNNConv": "positions",
    "GMMConv": "edge pseudo-coordinates",
    "SplineConv": "edge pseudo-coordinates",
    "NNConv": "edge features through a network",
    "GINEConv": "edge features (tested with them: tests/e2e/test_pyg.py)",
    "CGConv": "edge features",
    "HypergraphConv": "hyperedges",
    "GravNetConv": "a kNN graph built inside",
    "DynamicEdgeConv": "a kNN graph built inside",
    "HGTConv": "heterogeneous graphs",
    "HEATConv": "node and edge types",
    "HANConv": "heterogeneous graphs",
    "GPSConv": "a graph transformer block with batches",
    "MeshCNNConv": "meshes",
    "PDNConv": "edge features",
    "WLConvContinuous": "edge weights as a separate input",
    "FiLMConv": "edge types",
    "PANConv": "a path filter, MET matrices",
    "EGConv": "aggregator lists with batches",
    "GENConv": "softmax aggregation with learnable temperature",
}
"""Classes not tried, and why: their forward needs inputs beyond (x, edge_index)."""


class _Apply(torch.nn.Module):
    """A parameter-free conv called with (x, edge_index), after a linear map."""

    def __init__(self, conv: torch.nn.Module):
        super().__init__()
        self.conv = conv

    def forward(self, x, edge_index=None):
        return self.conv(x, edge_index)


class _Seq(torch.nn.Module):
    """`Sequential`-built layers called with (x, edge_index): the linear map, then the conv."""

    def __init__(self, seq: torch.nn.Sequential):
        super().__init__()
        self.lin, self.conv = seq[0], seq[1]

    def forward(self, x, edge_index):
        return self.conv(self.lin(x), edge_index)


def build(name: str, cls: type, i: int, o: int) -> torch.nn.Module:
    """One layer of class `cls`, `i` features in and `o` out."""
    layer = ARGS[name](cls, i, o) if name in ARGS else cls(i, o)
    return _Seq(layer) if isinstance(layer, torch.nn.Sequential) else layer


def status(name: str) -> dict:
    """Whether `name` compiles, simulates and matches PyTorch (or why not)."""
    import torch_geometric.nn.conv as convs
    from torch_geometric.datasets import KarateClub

    if name in NEEDS_MORE or ARGS.get(name, 0) is None:
        return {"conv": name, "status": "not tried", "why": NEEDS_MORE.get(name, "forward needs more inputs")}
    d = KarateClub()[0]
    t0 = time.perf_counter()
    try:
        torch.manual_seed(0)
        cls = getattr(convs, name)
        model = TwoLayer(build(name, cls, 34, 8), build(name, cls, 8, 4)).eval()
    except Exception as e:  # a constructor this script does not know how to call
        return {"conv": name, "status": "not built", "why": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    try:
        prog = fuseflow.compile(model, (d.x, d.edge_index), schedule="unfused")
        res = prog.simulate()
        res.check()
    except fuseflow.FuseflowError as e:
        first = str(e).splitlines()[0]
        why = first.split(" error: ")[-1][:160]
        return {"conv": name, "status": "internal error" if why.startswith("internal") else "refused", "why": why}
    except Exception as e:  # anything else is a fuseflow bug worth listing
        return {"conv": name, "status": "crashed", "why": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    return {
        "conv": name,
        "status": "matches PyTorch",
        "cycles": res.cycles,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Try every class (or `--only`), print JSON and a table."""
    import torch_geometric.nn.conv as convs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", help="also write the JSON here")
    p.add_argument("--only", help="comma-separated class names")
    p.add_argument("--md", help="also write the Markdown page here (docs/pyg_convs.md)")
    a = p.parse_args(argv)
    names = a.only.split(",") if a.only else list(convs.__all__)
    rows = []
    for name in names:
        rows.append(status(name))
        print(f"{name}: {rows[-1]['status']}", file=sys.stderr)
    text = json.dumps({"graph": "KarateClub", "schedule": "unfused", "rows": rows}, indent=1)
    print(text)
    if a.output:
        Path(a.output).write_text(text + "\n")
    table = ["| conv | status | cycles (unfused) / why |", "|---|---|---|"]
    for r in rows:
        why = str(r.get("cycles", r.get("why", ""))).replace("|", "\\|")
        table.append(f"| `{r['conv']}` | {r['status']} | {why} |")
    print("\n" + "\n".join(table))
    if a.md:
        counts = {k: sum(r["status"] == k for r in rows) for k in dict.fromkeys(r["status"] for r in rows)}
        Path(a.md).write_text(
            "\n".join([*PAGE, ", ".join(f"{n} {k}" for k, n in counts.items()) + ".", "", *table, ""])
        )
    return 0


PAGE = [
    "# PyTorch Geometric convolutions",
    "",
    "Every class of `torch_geometric.nn.conv`, tried as written: two layers with a ReLU between on",
    "KarateClub's `edge_index`, compiled under `unfused`, simulated and checked against eager PyTorch.",
    "Generated by `python benchmarks/pyg_conv_status.py -o docs/results/pyg_conv_status.json --md",
    "docs/pyg_convs.md`. *not tried*: the forward needs inputs beyond (x, edge_index); *refused*: a",
    "located compile-time error naming what is missing; *internal error*: a refusal by a check that",
    "should not fire (a bug). The message-passing rewrite is described in docs/architecture.md,",
    '"Message passing over edge lists".',
    "",
]
"""The page's opening, before the counts and the table."""


if __name__ == "__main__":
    sys.exit(main())
