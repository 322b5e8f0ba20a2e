"""PyTorch Geometric models as written: message passing over edge_index (or a torch.sparse
adjacency) compiles to sparse algebra and matches eager PyG under every schedule.

Skipped only when the optional extra is missing (`pip install .[pyg]`); `make test` installs it.
Tolerance: `SimResult.check()`'s default, rtol = atol = 1e-5 x the longest reduction.
"""

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import fuseflow

if os.environ.get("FUSEFLOW_REQUIRE_EXTRAS"):  # make test installs the extra: never skip there
    import torch_geometric as pyg  # noqa: F401
else:
    pyg = pytest.importorskip("torch_geometric")
from torch_geometric.datasets import KarateClub  # noqa: E402
from torch_geometric.nn import (  # noqa: E402
    AGNNConv,
    ChebConv,
    EdgeConv,
    FeaStConv,
    GATConv,
    GATv2Conv,
    GCNConv,
    GINEConv,
    MessagePassing,
    TAGConv,
)
from torch_geometric.utils import to_torch_csr_tensor  # noqa: E402

from fuseflow.models import TwoLayer, pyg_convs, pyg_two_layer  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "planetoid"


CONVS = pyg_convs()


def karate():
    return KarateClub()[0]


def model(kind: str, f_in: int, hidden: int = 8, out: int = 4, seed: int = 0) -> torch.nn.Module:
    return pyg_two_layer(kind, f_in, hidden, out, seed)


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
@pytest.mark.parametrize("kind", list(CONVS))
def test_two_layer_model_on_edge_index_matches_pyg(kind, schedule):
    d = karate()
    prog = fuseflow.compile(model(kind, 34), (d.x, d.edge_index), schedule=schedule)
    res = prog.simulate()
    res.check()
    assert res.cycles > 0
    # the edge list became pattern matrices, stored CSR
    assert any(n.startswith("edge_index") for n in prog.imported.input_names)


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
@pytest.mark.parametrize("kind", ["gcn", "sage-mean"])
def test_torch_sparse_adjacency_matches_pyg(kind, schedule):
    d = karate()
    adj_t = to_torch_csr_tensor(d.edge_index.flip(0), size=(34, 34))  # PyG's adj_t: row = target
    prog = fuseflow.compile(model(kind, 34), (d.x, adj_t), schedule=schedule)
    prog.simulate().check()


def test_new_edge_list_at_simulate_is_rebuilt_and_checked():
    d = karate()
    prog = fuseflow.compile(model("gcn", 34), (d.x, d.edge_index), schedule="layer")
    keep = d.edge_index[0] < d.edge_index[1]  # one direction only: a directed graph
    fewer = d.edge_index[:, keep]
    res = prog.simulate(d.x, fewer)
    res.check()
    assert res.cycles != prog.simulate().cycles


def test_gcn_on_cora_matches_pyg():
    path = SHARED / "cora.npz"
    if not path.exists():
        pytest.skip("../shared/data is not present")
    z = np.load(path)
    n = int(z["num_nodes"])
    rows = np.repeat(np.arange(n), np.diff(z["adj_indptr"]))
    edge_index = torch.tensor(np.stack([z["adj_indices"], rows]), dtype=torch.int64)
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(n, 32, generator=g) < 0.1).float()
    prog = fuseflow.compile(model("gcn", 32, hidden=16, out=7), (x, edge_index), schedule="layer")
    prog.simulate().check()


@pytest.mark.parametrize(
    ("heads", "schedule"), [(1, "unfused"), (1, "layer"), (2, "unfused"), (2, "layer"), (2, "full"), (2, "auto")]
)
def test_gat_matches_pyg(heads, schedule):
    """GATConv unmodified: attention scores per edge (leaky_relu of gathered sums), softmax over
    each node's incoming edges (a scatter max gathered back, exp, a scatter sum gathered back as
    a reciprocal), then the weighted sum; PyTorch's outputs within check()'s tolerance."""
    d = karate()
    torch.manual_seed(0)
    model = TwoLayer(GATConv(34, 8, heads=heads), GATConv(8 * heads, 4)).eval()
    prog = fuseflow.compile(model, (d.x, d.edge_index), schedule=schedule)
    prog.simulate().check()


@pytest.mark.parametrize(
    ("conv", "schedule"),
    [
        (lambda i, o: GATv2Conv(i, o, heads=2, concat=False), "full"),  # scores from both ends, then att
        (lambda i, o: TAGConv(i, o, K=2), "layer"),  # two hops of normalised propagation
        (lambda i, o: EdgeConv(torch.nn.Linear(2 * i, o)), "layer"),  # max over nn([x_i, x_j - x_i])
    ],
    ids=["gatv2-full", "tag-layer", "edgeconv-layer"],
)
def test_more_pyg_convs_match_pyg(conv, schedule):
    d = karate()
    torch.manual_seed(0)
    prog = fuseflow.compile(TwoLayer(conv(34, 8), conv(8, 4)).eval(), (d.x, d.edge_index), schedule=schedule)
    prog.simulate().check()


@pytest.mark.parametrize(
    "conv",
    [lambda i, o: GATConv(i, o, heads=2, concat=False), lambda i, o: GATv2Conv(i, o), lambda i, o: TAGConv(i, o, K=2)],
    ids=["gat", "gatv2", "tag"],
)
def test_attention_and_hops_on_a_torch_sparse_adj_t_match_pyg(conv):
    d = karate()
    adj = to_torch_csr_tensor(d.edge_index.flip(0), size=(34, 34))  # PyG's adj_t
    torch.manual_seed(0)
    prog = fuseflow.compile(TwoLayer(conv(34, 8), conv(8, 4)).eval(), (d.x, adj), schedule="unfused")
    prog.simulate().check()


class OneGAT(torch.nn.Module):
    def __init__(self, heads: int):
        super().__init__()
        self.conv = GATConv(34, 4, heads=heads)

    def forward(self, x, edge_index):
        return self.conv(x, edge_index)


def test_gat_fused_attention_needs_the_search_fallback_and_a_named_bad_order_is_refused_shortly():
    """The fused attention region (23 index variables) has one enumerated order, which places a
    channel sum before the head it reads: the search falls back to one that nests each
    reduction inside its enclosing one. Named by the user, the bad order is refused with the
    source line and a shortened order."""
    d = karate()
    torch.manual_seed(0)
    prog = fuseflow.compile(OneGAT(2).eval(), (d.x, d.edge_index), schedule="full")
    prog.simulate().check()
    bad = "i,n,q,w,x,y,z,a,j,m,p,l,k,r,s,t,u,v,b,c,d,e,f"
    assert prog.orders["full.1"] != bad
    short = r"test_pyg\.py:\d+:0: error: order i,n,q,w,x,y,z,a,j,m,p,l,\.\.\. \(23 variables\)"
    with pytest.raises(fuseflow.UnsupportedError, match=short) as e:
        fuseflow.compile(OneGAT(2).eval(), (d.x, d.edge_index), schedule="full", order={"full.1": bad})
    assert len(str(e.value)) < 400


class Gated(MessagePassing):
    """Messages gated by a sigmoid of both endpoints: sigmoid(x_i + x_j) * x_j."""

    def __init__(self, f_in: int, f_out: int):
        super().__init__(aggr="add")
        self.lin = torch.nn.Linear(f_in, f_out)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))

    def message(self, x_i, x_j):
        return torch.sigmoid(x_i + x_j) * x_j


@pytest.mark.parametrize("schedule", ["unfused", "layer"])
def test_sigmoid_gated_messages_match_pyg(schedule):
    d = karate()
    torch.manual_seed(0)
    prog = fuseflow.compile(TwoLayer(Gated(34, 8), Gated(8, 4)).eval(), (d.x, d.edge_index), schedule=schedule)
    prog.simulate().check()


def test_out_of_range_node_id_is_an_error_naming_the_edge():
    d = karate()
    prog = fuseflow.compile(model("sage-mean", 34), (d.x, d.edge_index), schedule="layer")
    bad = d.edge_index.clone()
    bad[0, 5] = 40
    with pytest.raises(fuseflow.FuseflowError, match=r"edge_index: edge 5 names node 40, but the graph has 34 nodes"):
        prog.simulate(d.x, bad)
    with pytest.raises(fuseflow.FuseflowError, match=r"edge 5 names node 40"):
        fuseflow.compile(model("sage-mean", 34), (d.x, bad))


def test_duplicate_edges_are_refused():
    d = karate()
    dup = torch.cat([d.edge_index, d.edge_index[:, :1]], 1)
    with pytest.raises(fuseflow.UnsupportedError, match="duplicate edges"):
        fuseflow.compile(model("gin", 34), (d.x, dup))


def test_max_aggregation_over_a_node_without_edges_is_refused():
    d = karate()
    prog = fuseflow.compile(model("sage-max", 34), (d.x, d.edge_index), schedule="layer")
    lonely = d.edge_index[:, (d.edge_index[1] != 3)]  # node 3 loses its incoming edges
    with pytest.raises(fuseflow.FuseflowError, match="node 3 has no incoming edge"):
        prog.simulate(d.x, lonely)


def test_formats_name_the_edge_list():
    d = karate()
    prog = fuseflow.compile(model("gin", 34), (d.x, d.edge_index), formats={"edge_index": "dcsr"}, schedule="full")
    assert str(prog.imported.input_formats["edge_index"]) == "dcsr"
    prog.simulate().check()


def test_torch_mlir_crash_is_an_error_not_a_dead_process():
    """PyG's GCNConv imported as is (no message-passing rewrite) segfaults inside torch-mlir's
    lowering; run out of process, that is an error naming the step."""
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table
    from torch_mlir.extras.fx_importer import FxImporter

    from fuseflow.dialects.sam import new_context
    from fuseflow.frontend.torch_lowering import lower_to_linalg

    class One(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GCNConv(34, 4)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    d = karate()
    ep = torch.export.export(One().eval(), (d.x, d.edge_index)).run_decompositions(get_decomposition_table())
    ctx = new_context()
    torch_d.register_dialect(ctx)
    importer = FxImporter(context=ctx)
    importer.import_frozen_program(ep, func_name="main")
    with pytest.raises(fuseflow.FuseflowError, match=r"torch-mlir: torch backend -> linalg-on-tensors crashed \(SIG"):
        lower_to_linalg(importer.module.operation.get_asm(enable_debug_info=True))


@pytest.mark.parametrize("options", [["-O", "conv=sage"], ["-O", "conv=gcn", "-O", "adjacency=sparse"]])
def test_example_runs_from_the_cli(options, capsys):
    from fuseflow.cli.main import main

    root = Path(__file__).resolve().parents[2]
    assert main(["run", str(root / "examples" / "pyg_gnn.py"), "--schedule", "layer", *options]) == 0
    assert "outputs match eager PyTorch" in capsys.readouterr().out


def test_gat_example_runs_from_the_cli_with_fewer_heads(capsys):
    from fuseflow.cli.main import main

    root = Path(__file__).resolve().parents[2]
    args = ["run", str(root / "examples" / "gat.py"), "-O", "heads=2", "--schedule", "unfused"]
    assert main(args) == 0
    assert "outputs match eager PyTorch" in capsys.readouterr().out


class GINE(torch.nn.Module):
    """GINEConv twice: edge features added to the gathered sources as given, then through the
    layer's own linear map (``edge_dim``)."""

    def __init__(self):
        super().__init__()
        self.conv1 = GINEConv(torch.nn.Linear(34, 8))
        self.conv2 = GINEConv(torch.nn.Linear(8, 4), edge_dim=34)

    def forward(self, x, edge_index, edge_attr):
        return self.conv2(self.conv1(x, edge_index, edge_attr).relu(), edge_index, edge_attr)


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
def test_edge_features_match_pyg_in_pyg_edge_order(schedule):
    """`edge_attr` (E, d) binds to the edges in PyG's order: permuting the edge list and its
    features together gives the same outputs, both equal to PyTorch's."""
    d = karate()
    torch.manual_seed(0)
    attr = torch.rand(d.edge_index.shape[1], 34)
    prog = fuseflow.compile(GINE().eval(), (d.x, d.edge_index, attr), schedule=schedule)
    first = prog.simulate()
    first.check()
    perm = torch.randperm(d.edge_index.shape[1], generator=torch.Generator().manual_seed(1))
    again = prog.simulate(d.x, d.edge_index[:, perm], attr[perm])
    again.check()
    assert again.cycles == first.cycles


def test_edge_features_of_another_length_are_an_error_naming_the_edge_list():
    d = karate()
    attr = torch.rand(d.edge_index.shape[1], 34)
    prog = fuseflow.compile(GINE().eval(), (d.x, d.edge_index, attr), schedule="unfused")
    with pytest.raises(fuseflow.FuseflowError, match=r"edge values of edge_index: expected 156 rows"):
        prog.simulate(d.x, d.edge_index, attr[:-1])


@pytest.mark.parametrize("schedule", ["unfused", "full"])
def test_gcn_without_self_loops_gives_an_isolated_node_weight_zero(schedule):
    """GCNConv(add_self_loops=False) guards deg ** -0.5 with masked_fill(inf, 0): a node nothing
    points to has degree 0 and weight 0 (not inf), as in PyG."""
    d = karate()
    into_5 = d.edge_index[1] == 5
    edges = d.edge_index[:, ~into_5]  # node 5 keeps its outgoing edges only
    torch.manual_seed(0)
    model = TwoLayer(GCNConv(34, 8, add_self_loops=False), GCNConv(8, 4, add_self_loops=False)).eval()
    prog = fuseflow.compile(model, (d.x, edges), schedule=schedule)
    res = prog.simulate()
    res.check()
    assert torch.isfinite(torch.as_tensor(res.outputs[0])).all()
    prog.simulate(d.x, d.edge_index).check()  # and every degree positive


class Weighted(torch.nn.Module):
    def __init__(self, normalize: bool):
        super().__init__()
        self.conv1 = GCNConv(34, 8, normalize=normalize)
        self.conv2 = GCNConv(8, 4, normalize=normalize)

    def forward(self, x, edge_index, edge_weight):
        return self.conv2(self.conv1(x, edge_index, edge_weight).relu(), edge_index, edge_weight)


@pytest.mark.parametrize("schedule", ["unfused", "full"])
def test_edge_weights_are_the_pattern_matrix_values(schedule):
    d = karate()
    g = torch.Generator().manual_seed(1)
    w = torch.rand(d.edge_index.shape[1], generator=g)
    torch.manual_seed(0)
    prog = fuseflow.compile(Weighted(False).eval(), (d.x, d.edge_index, w), schedule=schedule)
    prog.simulate().check()
    prog.simulate(d.x, d.edge_index, torch.rand(d.edge_index.shape[1], generator=g)).check()  # new weights
    with pytest.raises(fuseflow.FuseflowError, match=r"edge values of edge_index: expected 156 rows \(one per edge\)"):
        prog.simulate(d.x, d.edge_index, w[:10])


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
def test_gcn_normalisation_with_edge_weights_keeps_the_weights_of_existing_self_loops(schedule):
    """GCNConv(normalize=True) with edge weights: ``add_remaining_self_loops`` appends a loop of
    weight 1 where a node has none and keeps the weight of a loop it has. The same program runs
    a list without self loops and one with three, weighted 2, 3 and 0.5."""
    d = karate()
    torch.manual_seed(0)
    w = torch.rand(d.edge_index.shape[1]) + 0.1
    prog = fuseflow.compile(Weighted(True).eval(), (d.x, d.edge_index, w), schedule=schedule)
    prog.simulate().check()
    loops = torch.tensor([[0, 5, 9], [0, 5, 9]])
    with_loops = prog.simulate(d.x, torch.cat([d.edge_index, loops], 1), torch.cat([w, torch.tensor([2.0, 3.0, 0.5])]))
    with_loops.check()


@pytest.mark.parametrize(
    ("k", "schedule"), [(2, "unfused"), (2, "layer"), (2, "full"), (2, "op"), (2, "auto"), (3, "layer")]
)
def test_chebconv_matches_pyg(k, schedule):
    """ChebConv as written: PyG's scaled Laplacian (`get_laplacian`: self loops dropped, degrees
    per source, `add_self_loops` with fill values, `lambda_max = 2 * max`, an inf guard, the
    loops' values put back less one), then K hops. PyG's ChebConv takes no torch.sparse adj_t
    (its `get_laplacian` views the index), so edge_index only."""
    d = karate()
    torch.manual_seed(0)
    prog = fuseflow.compile(
        TwoLayer(ChebConv(34, 8, K=k), ChebConv(8, 4, K=k)).eval(), (d.x, d.edge_index), schedule=schedule
    )
    prog.simulate().check()


class WeightedCheb(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = ChebConv(34, 4, K=2)

    def forward(self, x, edge_index, edge_weight):
        return self.conv(x, edge_index, edge_weight)


def test_chebconv_with_edge_weights_matches_pyg_and_an_infinite_weight_is_refused_at_run_time():
    """Edge weights reach the Laplacian as values on the pattern; the inf guard on the scaled
    weights is a no-op only because the weights are finite, which every run checks."""
    d = karate()
    torch.manual_seed(0)
    w = torch.rand(d.edge_index.shape[1]) + 0.5
    prog = fuseflow.compile(WeightedCheb().eval(), (d.x, d.edge_index, w), schedule="unfused")
    prog.simulate().check()
    bad = w.clone()
    bad[7] = float("inf")
    with pytest.raises(fuseflow.FuseflowError, match="entry 7 is infinite"):
        prog.simulate(d.x, d.edge_index, bad)


class InfGuarded(MessagePassing):
    """Edge weights scaled by their largest, then guarded against inf: the largest may be 0."""

    def __init__(self):
        super().__init__(aggr="add")

    def forward(self, x, edge_index, w):
        w = w / w.max()
        w = w.masked_fill(w == float("inf"), 0)
        return self.propagate(edge_index, x=x, w=w)

    def message(self, x_j, w):
        return w.view(-1, 1) * x_j


def test_an_inf_guard_on_edge_values_that_may_be_inf_is_refused_with_its_line():
    d = karate()
    w = torch.rand(d.edge_index.shape[1])
    with pytest.raises(fuseflow.UnsupportedError, match=r"test_pyg\.py:\d+:\d+: error: masked_fill\(e, e == inf, 0\)"):
        fuseflow.compile(InfGuarded(), (d.x, d.edge_index, w), schedule="unfused")


TARGETS = {
    "gat": lambda i, o: GATConv(i, o, heads=2, concat=False),
    "gatv2": lambda i, o: GATv2Conv(i, o, heads=2, concat=False),
    "tag": lambda i, o: TAGConv(i, o, K=2),
}


@pytest.mark.parametrize(
    ("kind", "schedule"),
    [("gat", "op")]
    + [("gatv2", s) for s in ("unfused", "layer", "op", "auto")]
    + [("tag", s) for s in ("unfused", "full", "op", "auto")]
    + [("gine", s) for s in ("op", "auto")],
)
def test_the_attention_hop_and_edge_feature_convs_match_pyg_under_the_other_schedules(kind, schedule):
    """With the tests above, GATConv, GATv2Conv, TAGConv, GINEConv and ChebConv each run under
    every built-in schedule and `auto`."""
    d = karate()
    torch.manual_seed(0)
    if kind == "gine":
        attr = torch.rand(d.edge_index.shape[1], 34)
        prog = fuseflow.compile(GINE().eval(), (d.x, d.edge_index, attr), schedule=schedule)
    else:
        model_ = TwoLayer(TARGETS[kind](34, 8), TARGETS[kind](8, 4)).eval()
        prog = fuseflow.compile(model_, (d.x, d.edge_index), schedule=schedule)
    prog.simulate().check()


class AGNN(torch.nn.Module):
    """A linear map, then two AGNNConv layers: cosine attention (`F.normalize` of both ends, a
    per-edge dot product, softmax over each node's incoming edges)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(34, 8)
        self.conv1 = AGNNConv()
        self.conv2 = AGNNConv(requires_grad=False)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(self.lin(x), edge_index).relu(), edge_index)


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
def test_agnnconv_matches_pyg(schedule):
    d = karate()
    torch.manual_seed(0)
    fuseflow.compile(AGNN().eval(), (d.x, d.edge_index), schedule=schedule).simulate().check()


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
def test_feastconv_matches_pyg(schedule):
    """FeaStConv: a softmax over heads within each edge, a view of the messages with an inferred
    dimension, and shape assertions on the edge count (`Mod(6 u0 + 204, 2 u0 + 68) == 0`)."""
    d = karate()
    torch.manual_seed(0)
    model_ = TwoLayer(FeaStConv(34, 8, heads=2), FeaStConv(8, 4, heads=2)).eval()
    fuseflow.compile(model_, (d.x, d.edge_index), schedule=schedule).simulate().check()
