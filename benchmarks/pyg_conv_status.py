"""Every convolution class of `torch_geometric.nn.conv`, tried as a user would: does it compile
unmodified and match PyTorch?

    python benchmarks/pyg_conv_status.py [-o docs/results/pyg_conv_status.json] [--only GATConv,TAGConv]

Each class is built as `cls(34, 8)` then `cls(8, 4)` (or with the few arguments the table
`ARGS` gives: an inner network, heads, hops), put in a two-layer model with a ReLU between,
compiled from KarateClub's `edge_index` under `unfused` (order=auto), simulated and checked
against eager PyTorch (`SimResult.check`). A class whose forward takes more than `(x,
edge_index)` is given what it takes (`WITH`), seeded: edge features `edge_attr` (E, 3), edge
pseudo-coordinates, edge weights, edge types, node positions and normals, initial features `x_0`,
or the edges split into positive and negative sets. Those that need what no tensor input gives
(CUDA, a kNN graph built inside, heterogeneous graphs, batches) are marked and not tried.
Prints JSON and a Markdown table (docs/pyg_convs.md).
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
    "MixHopConv": lambda c, i, o: c(i, o // 2, powers=[0, 1]),  # one block of o // 2 per power
    "DNAConv": None,  # forward takes (N, L, C) layer stacks
    "LGConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c())),
    "SimpleConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c())),
    "AGNNConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c())),
    "GATConv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "GATv2Conv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "TransformerConv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "SuperGATConv": lambda c, i, o: c(i, o, heads=2, concat=False),
    "AntiSymmetricConv": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c(o, num_iters=1))),
    "DirGNNConv": lambda c, i, o: c(_gcn(i, o)),
    "GENConv": lambda c, i, o: c(i, o),  # softmax aggregation, fixed temperature
    "WLConvContinuous": lambda c, i, o: torch.nn.Sequential(torch.nn.Linear(i, o), _Apply(c())),
    "EGConv": lambda c, i, o: c(i, o, aggregators=["symnorm"], num_heads=2, num_bases=2),
    "HypergraphConv": lambda c, i, o: c(i, o),  # edge_index read as (node, hyperedge) incidence
    "WLConv": None,  # integer colours
    "HeteroConv": None,  # heterogeneous graphs
}
"""How to build the classes `cls(in, out)` does not build; None: forward needs more than (x, edge_index)."""

NEEDS_MORE = {
    "MessagePassing": "the base class",
    "CuGraphRGCNConv": "edge types, CUDA",
    "CuGraphSAGEConv": "CUDA",
    "CuGraphGATConv": "CUDA",
    "FusedGATConv": "CSC tensors from dgNN",
    "XConv": "a kNN graph built inside (torch-cluster)",
    "GravNetConv": "a kNN graph built inside",
    "DynamicEdgeConv": "a kNN graph built inside",
    "HGTConv": "heterogeneous graphs",
    "HEATConv": "node and edge types",
    "HANConv": "heterogeneous graphs",
    "GPSConv": "a graph transformer block with batches",
    "MeshCNNConv": "meshes",
}
"""Classes not tried, and why: no tensor input gives what their forward needs."""


def _gcn(i: int, o: int) -> torch.nn.Module:
    from torch_geometric.nn import GCNConv

    return GCNConv(i, o)


Call = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, tuple], torch.Tensor]


def _after(m: torch.nn.Module, x: torch.Tensor, e: torch.Tensor, extra: tuple) -> torch.Tensor:
    return m(x, e, *extra)


def _before(m: torch.nn.Module, x: torch.Tensor, e: torch.Tensor, extra: tuple) -> torch.Tensor:
    return m(x, *extra, e)  # point convs: (x, pos, [normal,] edge_index)


WITH: dict[str, tuple[Callable[[type, int, int], torch.nn.Module], tuple[str, ...], Call]] = {
    "GINEConv": (lambda c, i, o: c(torch.nn.Linear(i, o), edge_dim=3), ("edge_attr",), None),
    "CGConv": (lambda c, i, o: _Seq(torch.nn.Sequential(torch.nn.Linear(i, o), c(o, dim=3))), ("edge_attr",), None),
    "NNConv": (lambda c, i, o: c(i, o, torch.nn.Linear(3, i * o)), ("edge_attr",), None),
    "PDNConv": (lambda c, i, o: c(i, o, edge_dim=3, hidden_channels=4), ("edge_attr",), None),
    "GMMConv": (lambda c, i, o: c(i, o, dim=3, kernel_size=2), ("pseudo",), None),
    "SplineConv": (lambda c, i, o: c(i, o, dim=3, kernel_size=2), ("pseudo",), None),
    "RGCNConv": (lambda c, i, o: c(i, o, num_relations=2), ("edge_type",), None),
    "FastRGCNConv": (lambda c, i, o: c(i, o, num_relations=2), ("edge_type",), None),
    "FiLMConv": (lambda c, i, o: c(i, o, num_relations=2), ("edge_type",), None),
    "RGATConv": (lambda c, i, o: c(i, o, num_relations=2), ("edge_type",), None),
    "PointNetConv": (lambda c, i, o: c(torch.nn.Linear(i + 3, o), torch.nn.Linear(o, o)), ("pos",), _before),
    "PointTransformerConv": (lambda c, i, o: c(i, o), ("pos",), _before),
    "PointGNNConv": (
        lambda c, i, o: _Seq(torch.nn.Sequential(torch.nn.Linear(i, o), c(_mlp(o, 3), _mlp(o + 3, o), _mlp(o, o)))),
        ("pos",),
        _before,
    ),
    "PPFConv": (lambda c, i, o: c(torch.nn.Linear(i + 4, o)), ("pos", "normal"), _before),
    "GCN2Conv": (lambda c, i, o: _Initial(torch.nn.Linear(i, o), c(o, alpha=0.1)), (), None),
    "FAConv": (lambda c, i, o: _Initial(torch.nn.Linear(i, o), c(o)), (), None),
    "SignedConv": (lambda c, i, o: c(i, o, first_aggr=i == 34), ("neg_edge_index",), None),
    "PANConv": (lambda c, i, o: c(i, o, filter_size=2), (), lambda m, x, e, k: m(x, e)[0]),
    "PNAConv": (
        lambda c, i, o: c(i, o, ["mean", "min", "max"], ["identity", "amplification"], _degree_histogram()),
        (),
        None,
    ),
}
"""Classes whose forward takes more than (x, edge_index): how to build one layer, the named extra
inputs (`extra_inputs`) it takes, and how to call it (None: ``conv(x, edge_index, *extras)``)."""


def _karate():
    from torch_geometric.datasets import KarateClub

    return KarateClub()[0]


def _degree_histogram() -> torch.Tensor:
    from torch_geometric.utils import degree

    d = degree(_karate().edge_index[1], 34, dtype=torch.long)
    return torch.bincount(d)


def extra_inputs(edge_index: torch.Tensor, n: int) -> dict[str, torch.Tensor]:
    """The seeded extra inputs a layer may take, for `n` nodes and `edge_index`'s edges."""
    g = torch.Generator().manual_seed(0)
    e = edge_index.shape[1]
    return {
        "edge_attr": torch.randn(e, 3, generator=g),
        "pseudo": torch.rand(e, 3, generator=g),
        "edge_type": torch.randint(0, 2, (e,), generator=g),
        "pos": torch.randn(n, 3, generator=g),
        "normal": torch.nn.functional.normalize(torch.randn(n, 3, generator=g), dim=1),
        "neg_edge_index": edge_index.flip(0)[:, ::2].contiguous(),
    }


class _Initial(torch.nn.Module):
    """A layer of a conv that reads the initial features `x_0` (GCNII, FAConv): a linear map
    gives x_0, which the conv then reads beside x."""

    def __init__(self, lin: torch.nn.Module, conv: torch.nn.Module):
        super().__init__()
        self.lin, self.conv = lin, conv

    def forward(self, x, edge_index):
        h = self.lin(x)
        return self.conv(h, h, edge_index)


class _TwoWith(torch.nn.Module):
    """Two layers with a ReLU between, each called with (x, edge_index) and the extra inputs."""

    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module, call: Call | None):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2
        self.call = call or _after

    def forward(self, x, edge_index, a=None, b=None):
        extra = tuple(t for t in (a, b) if t is not None)
        h = self.call(self.conv1, x, edge_index, extra).relu()
        return self.call(self.conv2, h, edge_index, extra)


class _Apply(torch.nn.Module):
    """A parameter-free conv called with (x, edge_index), after a linear map."""

    def __init__(self, conv: torch.nn.Module):
        super().__init__()
        self.conv = conv

    def forward(self, x, edge_index=None):
        return self.conv(x, edge_index)


class _Seq(torch.nn.Module):
    """`Sequential`-built layers called with (x, edge_index, ...): the linear map, then the conv."""

    def __init__(self, seq: torch.nn.Sequential):
        super().__init__()
        self.lin, self.conv = seq[0], seq[1]

    def forward(self, x, *rest):
        return self.conv(self.lin(x), *rest)


def build(name: str, cls: type, i: int, o: int) -> torch.nn.Module:
    """One layer of class `cls`, `i` features in and `o` out."""
    layer = ARGS[name](cls, i, o) if name in ARGS else cls(i, o)
    return _Seq(layer) if isinstance(layer, torch.nn.Sequential) else layer


def status(name: str) -> dict:
    """Whether `name` compiles, simulates and matches PyTorch (or why not)."""
    import torch_geometric.nn.conv as convs

    if name in NEEDS_MORE or ARGS.get(name, 0) is None:
        return {"conv": name, "status": "not tried", "why": NEEDS_MORE.get(name, "forward needs more inputs")}
    d = _karate()
    extra = extra_inputs(d.edge_index, d.num_nodes)
    t0 = time.perf_counter()
    try:
        torch.manual_seed(0)
        cls = getattr(convs, name)
        if name in WITH:
            make, names, call = WITH[name]
            model: torch.nn.Module = _TwoWith(make(cls, 34, 8), make(cls, 8, 4), call).eval()
            args = (d.x, d.edge_index, *(extra[k] for k in names))
        else:
            model, args = TwoLayer(build(name, cls, 34, 8), build(name, cls, 8, 4)).eval(), (d.x, d.edge_index)
        model(*args)
    except Exception as e:  # a constructor this script does not know how to call, or a missing package
        return {"conv": name, "status": "not built", "why": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    row: dict = {"conv": name, "inputs": ["x", "edge_index", *(WITH[name][1] if name in WITH else ())]}
    try:
        prog = fuseflow.compile(model, args, schedule="unfused")
        res = prog.simulate()
        res.check()
    except fuseflow.FuseflowError as e:
        first = str(e).splitlines()[0]
        why = first.split(" error: ")[-1][:160]
        return {**row, "status": "internal error" if why.startswith("internal") else "refused", "why": why}
    except Exception as e:  # anything else is a fuseflow bug worth listing
        return {**row, "status": "crashed", "why": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    return {**row, "status": "matches PyTorch", "cycles": res.cycles, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    """Try every class (or `--only`), print JSON and a table."""
    import torch_geometric.nn.conv as convs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--output", help="also write the JSON here")
    p.add_argument("--only", help="comma-separated class names")
    p.add_argument("--md", help="also write the Markdown page here (docs/pyg_convs.md)")
    p.add_argument("--from", dest="source", help="a saved JSON: write its table (--md) without running")
    a = p.parse_args(argv)
    if a.source:
        rows = json.loads(Path(a.source).read_text())["rows"]
    else:
        names = a.only.split(",") if a.only else list(convs.__all__)
        rows = []
        for name in names:
            rows.append(status(name))
            print(f"{name}: {rows[-1]['status']}", file=sys.stderr)
        text = json.dumps({"graph": "KarateClub", "schedule": "unfused", "rows": rows}, indent=1)
        print(text)
        if a.output:
            Path(a.output).write_text(text + "\n")
    table = ["| conv | status | inputs | cycles (unfused) / why |", "|---|---|---|---|"]
    for r in rows:
        why = str(r.get("cycles", r.get("why", ""))).replace("|", "\\|")
        inputs = ", ".join(r.get("inputs", [])[2:]) or "-"
        table.append(f"| `{r['conv']}` | {r['status']} | {inputs} | {why} |")
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
    "A conv whose forward takes more is given it, seeded (*inputs*): edge features `edge_attr` (156 x 3),",
    "edge pseudo-coordinates, edge types, node positions and normals, or a second edge list",
    "(`neg_edge_index`). Generated by `python benchmarks/pyg_conv_status.py -o",
    "docs/results/pyg_conv_status.json --md docs/pyg_convs.md`. *not tried*: no tensor input gives",
    "what the forward needs (CUDA, a kNN graph built inside, heterogeneous graphs, meshes); *not",
    "built*: PyG cannot build it here (a missing optional package); *refused*: a located",
    "compile-time error naming what is missing; *internal error*: a refusal by a check that should",
    'not fire (a bug). The message-passing rewrite is described in docs/architecture.md, "Message',
    'passing over edge lists".',
    "",
]
"""The page's opening, before the counts and the table."""


if __name__ == "__main__":
    sys.exit(main())
