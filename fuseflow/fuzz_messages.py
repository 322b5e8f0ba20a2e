"""Differential fuzzing of message passing with values on the edges (`fuseflow.fuzz`'s oracle).

``python -m fuseflow.fuzz --messages --cases 500`` draws PyTorch Geometric `MessagePassing`
layers whose messages compute per-edge values: sums and products of the two endpoints' features,
`leaky_relu`, `exp`, `sigmoid` gates, edge features (`edge_attr`), a per-head score summed over
channels and normalised by PyG's segment softmax over each node's incoming edges (GAT-like),
edge weights with self loops appended at a fill value (`add_self_loops(edge_index, w,
fill_value=)`, as PyG's `get_laplacian` does) and their loops' values changed through a
self-loop mask, on random graphs (a ring, so every node has an incoming edge, plus random edges;
with or without self loops added, possibly reversed: `edge_index.flip([0])`), aggregated by sum,
mean, max or min, under a random schedule; per-edge `softplus` and `log1p` too. Each case is
compiled, simulated and compared with eager PyTorch like any fuzz case (`fuzz.run_case`).
Needs the extra: ``pip install '.[pyg]'``.
"""

from __future__ import annotations

from dataclasses import dataclass

EDGE_OPS = {  # statements over the running edge value `e` (E, H, C); `h_i` / `h_j`: the endpoints
    "sum_ij": "e = e + h_i",
    "mul_ij": "e = e * h_i",
    "leaky": "e = torch.nn.functional.leaky_relu(e, 0.2)",
    "exp": "e = torch.exp(e * 0.1)",
    "gate": "e = torch.sigmoid(e) * h_j",
    "edge_attr": "e = e + edge_attr.view(-1, {heads}, {channels})",
    "softplus": "e = torch.nn.functional.softplus(e)",
    "log1p": "e = torch.log1p(e * e)",
}
AGGRS = ("add", "mean", "max", "min")
SCHEDULES = ("unfused", "layer", "full")


@dataclass
class EdgeCase:
    """One random message-passing layer, its graph and how to compile it."""

    ops: list[str]
    softmax: bool  # normalise a per-head score over each node's incoming edges
    aggr: str
    nodes: int
    extra_edges: list[tuple[int, int]]  # (source, target) beyond the ring
    self_loops: bool
    heads: int
    channels: int
    features: int
    schedule: str
    seed: int
    order: str = "auto"
    loop_fill: float | None = None  # weights (0.5 per edge) with self loops appended at this fill
    loop_shift: bool = False  # then the loops' weights less one (`w[edge_index[0] == edge_index[1]] -= 1`)
    reverse: bool = False  # propagate over the reversed edges (`edge_index.flip([0])`), without edge values

    @property
    def edge_attr(self) -> bool:
        """Whether the layer reads edge features."""
        return "edge_attr" in self.ops

    def edges(self) -> list[tuple[int, int]]:
        """The ring and the extra edges, no duplicates, in drawing order (PyG keeps any order)."""
        out = [(k, (k + 1) % self.nodes) for k in range(self.nodes)]
        for e in self.extra_edges:
            if e not in out and e[0] != e[1]:
                out.append(e)
        if len(out) == self.nodes and (0, 2) not in out:
            out.append((0, 2))  # as many edges as nodes would make edge features read as node values
        return out

    def source(self) -> str:
        """The case as a model file (``build()`` returns model, args, formats)."""
        width = self.heads * self.channels
        attr = ", edge_attr" if self.edge_attr else ""
        body = [EDGE_OPS[op].format(heads=self.heads, channels=self.channels) for op in self.ops]
        if self.softmax:
            body += [
                "score = e.sum(dim=-1)",
                "alpha = segment_softmax(score, index, num_nodes=size_i)",
                "e = h_j * alpha.unsqueeze(-1)",
            ]
        # edge features belong to the given edges: the loops PyG would add have none (no fill here)
        weighted = self.loop_fill is not None and not self.edge_attr
        added = self.self_loops and not self.edge_attr and not weighted
        loops = "edge_index, _ = add_self_loops(edge_index, num_nodes=x.shape[0])" if added else "pass"
        if weighted:
            loops = (
                "edge_index, w = add_self_loops(edge_index, torch.full((edge_index.shape[1],), 0.5), "
                f"fill_value={self.loop_fill}, num_nodes=x.shape[0])"
            )
            if self.loop_shift:
                loops += "\n        w[edge_index[0] == edge_index[1]] -= 1"
            body = ["e = e * w.view(-1, 1, 1)", *body]
        wa = ", w=w" if weighted else ""
        if self.reverse and not weighted and not self.edge_attr:
            loops += "\n        edge_index = edge_index.flip([0])"
        src, dst = zip(*self.edges(), strict=True)
        lines = [
            "import torch",
            "from torch_geometric.nn import MessagePassing",
            "from torch_geometric.utils import add_self_loops",
            "from torch_geometric.utils import softmax as segment_softmax",
            "",
            "",
            "class Fuzzed(MessagePassing):",
            "    def __init__(self):",
            f"        super().__init__(aggr={self.aggr!r}, node_dim=0)",
            f"        self.lin = torch.nn.Linear({self.features}, {width}, bias=False)",
            "",
            f"    def forward(self, x, edge_index{attr}):",
            f"        {loops}",
            f"        h = self.lin(x).view(-1, {self.heads}, {self.channels})",
            f"        out = self.propagate(edge_index, h=h{', edge_attr=edge_attr' if self.edge_attr else ''}{wa})",
            f"        return out.reshape(-1, {width})",
            "",
            f"    def message(self, h_i, h_j, index, size_i{attr}{', w' if weighted else ''}):",
            "        e = h_j",
            *[f"        {line}" for line in body],
            "        return e",
            "",
            "",
            "def build():",
            f"    torch.manual_seed({self.seed})",
            "    model = Fuzzed().eval()",
            "    with torch.no_grad():",
            "        model.lin.weight.copy_(torch.randint(-2, 3, model.lin.weight.shape).float() * 0.25)",
            f"    x = torch.randint(-2, 3, ({self.nodes}, {self.features})).float()",
            f"    edge_index = torch.tensor([{list(src)}, {list(dst)}])",
        ]
        if self.edge_attr:
            lines.append(f"    edge_attr = torch.randint(-2, 3, ({len(src)}, {width})).float() * 0.5")
            lines.append("    return model, (x, edge_index, edge_attr), {}")
        else:
            lines.append("    return model, (x, edge_index), {}")
        return "\n".join(lines) + "\n"


def edge_cases():
    """The hypothesis strategy of message-passing cases (shrinks towards fewer ops, smaller graphs)."""
    from hypothesis import strategies as st  # optional extra (test)

    @st.composite
    def draw(draw):
        nodes = draw(st.integers(3, 6))
        return EdgeCase(
            ops=draw(st.lists(st.sampled_from(sorted(EDGE_OPS)), min_size=0, max_size=3)),
            softmax=draw(st.booleans()),
            aggr=draw(st.sampled_from(AGGRS)),
            nodes=nodes,
            extra_edges=draw(
                st.lists(st.tuples(st.integers(0, nodes - 1), st.integers(0, nodes - 1)), max_size=2 * nodes)
            ),
            self_loops=draw(st.booleans()),
            heads=draw(st.integers(1, 2)),
            channels=draw(st.integers(1, 3)),
            features=draw(st.integers(1, 4)),
            schedule=draw(st.sampled_from(SCHEDULES)),
            seed=draw(st.integers(0, 2**16)),
            loop_fill=draw(st.sampled_from([None, None, 0.5, 1.0, -2.0])),
            loop_shift=draw(st.booleans()),
            reverse=draw(st.booleans()),
        )

    return draw()
