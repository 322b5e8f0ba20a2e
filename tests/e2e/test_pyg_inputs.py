"""PyG convolutions whose forward takes more than (x, edge_index), or that reverse the edge list,
reduce with min, or normalise with 1 / deg: compiled as written, simulated and checked against
eager PyTorch (`SimResult.check`: max abs error within the comparison's stated tolerance)."""

from __future__ import annotations

import os

import pytest
import torch

import fuseflow

if os.environ.get("FUSEFLOW_REQUIRE_EXTRAS"):  # make test installs the extra: never skip there
    import torch_geometric  # noqa: F401
else:
    pytest.importorskip("torch_geometric")
from torch_geometric.datasets import KarateClub  # noqa: E402
from torch_geometric.nn import (  # noqa: E402
    CGConv,
    DirGNNConv,
    GCNConv,
    GENConv,
    GMMConv,
    MessagePassing,
    NNConv,
    PDNConv,
    PNAConv,
    PointNetConv,
    SignedConv,
    WLConvContinuous,
)
from torch_geometric.utils import degree  # noqa: E402

from fuseflow.models import TwoLayer  # noqa: E402


def karate():
    return KarateClub()[0]


def directed() -> tuple[torch.Tensor, torch.Tensor]:
    """KarateClub's features and its edges from the lower id to the higher only: reversing the
    list changes the graph (KarateClub itself is symmetric), and node 0 has no incoming edge."""
    d = karate()
    keep = d.edge_index[0] < d.edge_index[1]
    return d.x, d.edge_index[:, keep]


class WithExtra(torch.nn.Module):
    """Two layers with a ReLU between, each called with (x, edge_index, extra)."""

    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2

    def forward(self, x, edge_index, extra):
        return self.conv2(self.conv1(x, edge_index, extra).relu(), edge_index, extra)


@pytest.mark.parametrize("schedule", ["unfused", "full"])
def test_a_reversed_edge_list_is_the_transposed_pattern(schedule):
    """DirGNNConv runs its inner conv on ``edge_index.flip([0])`` too: on a directed graph the
    reversed list is another graph, and the result equals PyTorch's only if it is read as such."""
    x, ei = directed()
    torch.manual_seed(0)
    model = TwoLayer(DirGNNConv(GCNConv(34, 8)), DirGNNConv(GCNConv(8, 4))).eval()
    prog = fuseflow.compile(model, (x, ei), schedule=schedule)
    prog.simulate().check()
    assert any(n.endswith("_t") for n in prog.imported.input_names)  # the reversed list's pattern


class Lin(torch.nn.Module):
    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module):
        super().__init__()
        self.lin, self.conv1, self.conv2 = torch.nn.Linear(34, 8), conv1, conv2

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(self.lin(x), edge_index).relu(), edge_index)


@pytest.mark.parametrize("schedule", ["unfused", "layer", "full"])
def test_a_reciprocal_degree_with_its_zero_degree_guard_matches_pyg(schedule):
    """WLConvContinuous: ``1 / deg`` then ``masked_fill(deg_inv == inf, 0)``; node 0 has no
    incoming edge, so its weight is 0 (not inf, not NaN)."""
    x, ei = directed()
    assert degree(ei[1], 34)[0] == 0
    torch.manual_seed(0)
    res = fuseflow.compile(Lin(WLConvContinuous(), WLConvContinuous()).eval(), (x, ei), schedule=schedule).simulate()
    res.check()
    assert torch.isfinite(torch.as_tensor(res.outputs[0])).all()


def test_softmax_aggregation_with_a_batch_norm_mlp_matches_pyg():
    """GENConv: softmax aggregation at a fixed temperature, then an MLP with batch norm (eval)."""
    d = karate()
    torch.manual_seed(0)
    model = TwoLayer(GENConv(34, 8), GENConv(8, 4)).eval()
    with torch.no_grad():  # running statistics other than the identity's
        for bn in (m for m in model.modules() if isinstance(m, torch.nn.BatchNorm1d)):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    fuseflow.compile(model, (d.x, d.edge_index), schedule="unfused").simulate().check()


@pytest.mark.parametrize("schedule", ["unfused", "full"])
def test_softplus_and_sigmoid_of_edge_features_match_pyg(schedule):
    """CGConv: ``sigmoid(z W_f) * softplus(z W_s)`` per edge, z = [x_i, x_j, edge_attr]."""
    d = karate()
    attr = torch.randn(d.edge_index.shape[1], 3, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)

    class CG(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.conv1, self.conv2 = torch.nn.Linear(34, 8), CGConv(8, dim=3), CGConv(8, dim=3)

        def forward(self, x, edge_index, edge_attr):
            return self.conv2(self.conv1(self.lin(x), edge_index, edge_attr).relu(), edge_index, edge_attr)

    fuseflow.compile(CG().eval(), (d.x, d.edge_index, attr), schedule=schedule).simulate().check()


@pytest.mark.parametrize("schedule", ["unfused", "full"])
def test_a_matrix_per_edge_from_edge_features_matches_pyg(schedule):
    """NNConv: each edge's weight matrix is a network of its features, and the message is
    ``x_j.unsqueeze(1) @ W(e)``: a product of two edge tensors per edge."""
    d = karate()
    attr = torch.randn(d.edge_index.shape[1], 3, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = WithExtra(NNConv(34, 8, torch.nn.Linear(3, 34 * 8)), NNConv(8, 4, torch.nn.Linear(3, 8 * 4))).eval()
    fuseflow.compile(model, (d.x, d.edge_index, attr), schedule=schedule).simulate().check()


def test_min_max_and_mean_aggregators_with_degree_scalers_match_pyg():
    """PNAConv: min (as -max(-e)), max and mean over each node's incoming edges, scaled by degree."""
    d = karate()
    hist = torch.bincount(degree(d.edge_index[1], 34, dtype=torch.long))
    torch.manual_seed(0)
    aggs, scalers = ["mean", "min", "max"], ["identity", "amplification"]
    model = TwoLayer(PNAConv(34, 8, aggs, scalers, hist), PNAConv(8, 4, aggs, scalers, hist)).eval()
    fuseflow.compile(model, (d.x, d.edge_index), schedule="unfused").simulate().check()


class MinConv(MessagePassing):
    def __init__(self):
        super().__init__(aggr="min")

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=x)


def test_a_min_aggregation_over_a_node_without_edges_is_refused_naming_it():
    """PyG's min over no edges is 0; as sparse algebra it would be inf. Refused, naming the node."""
    x, ei = directed()
    prog_ok = fuseflow.compile(Lin(MinConv(), MinConv()).eval(), (x, karate().edge_index), schedule="unfused")
    prog_ok.simulate().check()
    with pytest.raises(fuseflow.FuseflowError, match=r"node 0 has no incoming edge; a max or min aggregation"):
        fuseflow.compile(Lin(MinConv(), MinConv()).eval(), (x, ei), schedule="unfused").simulate()


def test_point_positions_and_signed_edge_lists_match_pyg():
    """Extra node inputs (PointNetConv's positions) and two edge lists in one layer (SignedConv)."""
    d = karate()
    pos = torch.randn(34, 3, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)

    class Point(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = PointNetConv(torch.nn.Linear(34 + 3, 8), torch.nn.Linear(8, 8))
            self.conv2 = PointNetConv(torch.nn.Linear(8 + 3, 4))

        def forward(self, x, pos, edge_index):
            return self.conv2(self.conv1(x, pos, edge_index).relu(), pos, edge_index)

    fuseflow.compile(Point().eval(), (d.x, pos, d.edge_index), schedule="unfused").simulate().check()
    neg = d.edge_index.flip(0)[:, ::2].contiguous()
    signed = WithExtra(SignedConv(34, 8, first_aggr=True), SignedConv(8, 4, first_aggr=False)).eval()
    fuseflow.compile(signed, (d.x, d.edge_index, neg), schedule="unfused").simulate().check()


@pytest.mark.parametrize("x_scale", [1.0, 40.0])
def test_softplus_and_eval_batch_norm_in_a_plain_model_match_pytorch(x_scale):
    """The decompositions outside message passing: softplus in its stable form (large inputs
    included, where PyTorch returns x itself) and batch norm with running statistics."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.Softplus(), torch.nn.Linear(8, 3)
    ).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2.0)
    x = torch.randn(16, 6) * x_scale
    fuseflow.compile(model, (x,), schedule="full").simulate().check()


def test_gaussian_kernels_over_edge_pseudo_coordinates_match_pyg():
    """GMMConv: ``pseudo.view(E, 1, D) - mu.view(1, K, D)``, a node-space parameter broadcast
    against the edges' trailing dimensions, then a Gaussian weight per edge and kernel."""
    d = karate()
    pseudo = torch.rand(d.edge_index.shape[1], 3, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = WithExtra(GMMConv(34, 8, dim=3, kernel_size=2), GMMConv(8, 4, dim=3, kernel_size=2)).eval()
    fuseflow.compile(model, (d.x, d.edge_index, pseudo), schedule="unfused").simulate().check()


def test_a_weighted_torch_sparse_adjacency_is_refused_naming_the_edge_weight_form():
    """PyG reads a weighted adj_t's values as edge weights; the rewrite traces the edge_index
    path, which has none, so it refuses rather than drop them."""
    d = karate()
    adj = torch.sparse_coo_tensor(d.edge_index.flip(0), torch.rand(d.edge_index.shape[1]) + 0.5, (34, 34))
    model = TwoLayer(GCNConv(34, 8), GCNConv(8, 4)).eval()
    with pytest.raises(fuseflow.FuseflowError, match=r"values other than 1 .* pass edge_index with the weights"):
        fuseflow.compile(model, (d.x, adj.to_sparse_csr()), schedule="unfused")


def test_edge_features_with_existing_self_loops_kept_match_pyg():
    """PDNConv: ``add_remaining_self_loops(edge_index, edge_attr)`` keeps the features of the
    loops a graph has (here nodes 2 and 7) and fills the others; the features then weigh edges
    through an MLP."""
    d = karate()
    edges = torch.cat([d.edge_index, torch.tensor([[2, 7], [2, 7]])], 1)
    attr = torch.randn(edges.shape[1], 3, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = WithExtra(PDNConv(34, 8, edge_dim=3, hidden_channels=4), PDNConv(8, 4, edge_dim=3, hidden_channels=4))
    fuseflow.compile(model.eval(), (d.x, edges, attr), schedule="unfused").simulate().check()
