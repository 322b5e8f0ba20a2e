"""The table of PyTorch ops fuseflow compiles, checked on the exported graph before torch-mlir runs.

Ops are named as they appear in the graph ``torch.export`` gives after torch-mlir's decomposition
table (``aten.linear`` is already ``permute`` + ``mm`` + ``add`` there, ``softmax`` is
``_softmax``). Every entry carries a PyTorch expression that uses it; ``tests/e2e/test_ops.py``
compiles each one and compares it with eager PyTorch, so the table only lists what works, and
``docs/ops.md`` is generated from it (``fuseflow ops --markdown``; a test keeps the two equal).

An op outside the table is reported with the source line that wrote it, all of them at once,
before torch-mlir sees the model (where an unsupported op used to end as "failed to legalize"
or, for some, a native crash).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass

from fuseflow.errors import UnsupportedError
from fuseflow.formats import FORMAT_DOCS


@dataclass(frozen=True)
class OpSupport:
    """One supported op: its graph name, how it lowers, and an expression that uses it.

    `example` is a Python expression over ``a`` (4x6, sparse), ``b`` (6x5), ``c`` (4x6), ``m``
    (a 0/1 4x6 mask), ``ids`` (int64 ``[0, 2, 2, 5]``) and ``torch``; the op must occur in its export."""

    name: str
    kind: str
    lowers_to: str
    example: str


def _ops(kind: str, lowers_to: str, *pairs: tuple[str, str]) -> list[OpSupport]:
    return [OpSupport(n, kind, lowers_to, ex) for n, ex in pairs]


SUPPORTED: tuple[OpSupport, ...] = tuple(
    _ops(
        "contraction",
        "an index-notation sum (scan/intersect, mul, reduce or spacc)",
        ("aten.mm", "a @ b"),
        ("aten.bmm", "torch.bmm(a.unsqueeze(0), b.unsqueeze(0))"),
    )
    + _ops(
        "elementwise",
        "an ALU node; `mul` intersects its operands, the others union them",
        ("aten.add.Tensor", "a + c"),
        ("aten.sub.Tensor", "a - c"),
        ("aten.mul.Tensor", "a * c"),
        ("aten.div.Tensor", "a / (c + 2.0)"),
        ("aten.neg", "-a"),
        ("aten.exp", "torch.exp(a)"),
        ("aten.sqrt", "torch.sqrt(a + 1.0)"),
        ("aten.rsqrt", "torch.rsqrt(a + 1.0)"),
        ("aten.tanh", "torch.tanh(a)"),
        ("aten.erf", "torch.erf(a)"),
        ("aten.abs", "torch.abs(a - c)"),
        ("aten.relu", "torch.relu(a - c)"),
        ("aten.gelu", "torch.nn.functional.gelu(a)"),
        ("aten.clamp", "a.sum(dim=1).clamp(min=1.0)"),
        ("aten.pow.Tensor_Scalar", "a ** 2"),
        ("aten.reciprocal", "torch.reciprocal(a + 1.0)"),
        ("aten.log", "torch.log(a + 1.0)"),
        ("aten.sigmoid", "torch.sigmoid(a - c)"),
        ("aten.leaky_relu", "torch.nn.functional.leaky_relu(a - c, 0.1)"),
        ("aten.maximum", "torch.maximum(a, c)"),
        ("aten.minimum", "torch.minimum(a - c, c)"),
    )
    + _ops(
        "reduction",
        "a reduce (innermost) or spacc (outer) node; hoisted or recomputed inside a fused consumer",
        ("aten.sum.dim_IntList", "a.sum(dim=1)"),
        ("aten.mean.dim", "a.mean(dim=1)"),
        ("aten.mean", "(a * c).mean()"),
        ("aten.amax", "torch.amax(a, dim=1)"),
        ("aten._softmax", "torch.softmax(a, dim=1)"),
        ("aten.var_mean.correction", "torch.nn.functional.layer_norm(a, (6,))"),
    )
    + _ops(
        "mask",
        "`masked_fill(mask == 0, -inf)` / `where(mask != 0, x, -inf)`: iterate only the mask's nonzeros",
        ("aten.eq.Scalar", "torch.softmax(a.masked_fill(m == 0, float('-inf')), dim=1)"),
        ("aten.ne.Scalar", "torch.softmax(torch.where(m != 0, a, float('-inf')), dim=1)"),
        ("aten.where.self", "torch.where(m != 0, a, float('-inf')).amax(dim=1)"),
        ("aten.scalar_tensor", "a.masked_fill(m == 0, float('-inf')).amax(dim=1)"),
    )
    + _ops(
        "constant",
        "a constant operand (splat constants only; other tensors are arguments or parameters)",
        ("aten.full_like", "a @ torch.ones(6, 5)"),
        ("aten.empty_strided", "a @ torch.full((6, 5), 0.5)"),
    )
    + _ops(
        "sparse result",
        "the producing region writes the value in that format, dropping zeros (`val_drop`, `crd_drop`); "
        "its consumers iterate only the nonzeros",
        ("aten._to_sparse_csr", "torch.relu(a - c).to_sparse_csr() @ b"),
        ("aten._to_sparse", "torch.relu(a - c).to_sparse() @ b"),
    )
    + _ops(
        "data movement",
        "a tensor of its own read by name (`fuseflow/views.py`): the region before it ends, and the slice, "
        "concatenation, reshape or gather (rows of a table by integer ids) is made from its sources' data "
        "between regions",
        ("aten.slice.Tensor", "torch.relu(a.narrow(1, 1, 3)) * c[:, :3]"),
        ("aten.select.int", "a[:, 2] * c[:, 0]"),
        ("aten.split_with_sizes", "a.chunk(2, dim=1)[1] @ b[:3]"),
        ("aten.cat", "torch.cat([a, c * 2], dim=1) @ torch.cat([b, b], dim=0)"),
        ("aten.index_select", "torch.relu(b.index_select(0, ids)) * a[:, :5]"),
        ("aten.embedding", "torch.nn.functional.embedding(ids, b) @ b.t()"),
    )
    + _ops(
        "view",
        "no node: index variables are permuted, added or dropped",
        ("aten.permute", "a.permute(1, 0) @ c"),
        ("aten.view", "a.unsqueeze(0).view(4, 6) + c + (a.view(4, 2, 3) * c.view(4, 2, 3)).sum(2).sum(1, True)"),
        ("aten.unsqueeze", "(a.unsqueeze(0) * c.unsqueeze(0)).sum(0)"),
        ("prims.squeeze", "a.sum(dim=1, keepdim=True).squeeze(1)"),
        ("aten.expand", "a.sum(dim=1, keepdim=True).expand(4, 6) * c"),
        ("aten.clone", "a.clone() * c"),
    )
)
"""Every op fuseflow lowers, by kind. Formats: see `fuseflow.formats` (`FORMATS`)."""

COMPOSITES: tuple[tuple[str, str], ...] = (
    ("torch.nn.functional.silu", "torch.nn.functional.silu(a - c)"),
    ("torch.log_softmax", "torch.log_softmax(a + c, dim=1)"),
    ("torch.nn.functional.dropout (eval)", "torch.nn.functional.dropout(a, 0.5, training=False) * c"),
    (
        "multi-head attention (view, transpose, matmul)",
        "(a.view(4, 2, 3).transpose(0, 1) @ c.view(4, 2, 3).transpose(0, 1).transpose(1, 2)).sum(0)",
    ),
    ("torch.stack", "torch.stack([a, c]).sum(0) * 2"),
    ("torch.diag(v) of a vector (a diagonal CSR matrix)", "torch.diag(1 / (a.sum(1) + 1.0)).to_sparse() @ a"),
    ("torch.linalg.vector_norm (orders 1, 2, inf)", "torch.linalg.vector_norm(a - c, 2, dim=1)"),
    ("torch.nn.functional.normalize", "torch.nn.functional.normalize(a + c, p=2.0, dim=-1)"),
    ("torch.nn.functional.softplus", "torch.nn.functional.softplus(a - c)"),
    ("torch.log1p", "torch.log1p(a * a + c * c)"),
    (
        "torch.nn.functional.batch_norm (eval: running statistics)",
        "torch.nn.functional.batch_norm(a, c[0], c[1] * c[1] + 1.0, training=False)",
    ),
    ("Tensor.repeat by ones", "a.repeat(1, 1) * c"),
)
"""PyTorch functions that export as ops of the table (checked the same way): what users write."""

STRUCTURAL = frozenset(
    {"getitem", "sym_size.int", "_assert_scalar", "_assert_tensor_metadata", "alias", "detach", "lift_fresh_copy"}
)
"""Graph plumbing that computes nothing: multi-result access, shape facts, aliases."""

_BY_NAME = {s.name: s for s in SUPPORTED}


def graph_name(target) -> str:
    """``aten.mm`` for ``aten.mm.default``; overload kept when it matters (``aten.sum.dim_IntList``)."""
    if target is operator.getitem:
        return "getitem"
    text = str(target)
    if text in _BY_NAME:
        return text
    base = re.sub(r"\.default$", "", text)
    if base in _BY_NAME:
        return base
    packet = ".".join(text.split(".")[:2])
    return packet if packet in _BY_NAME else base


def is_supported(name: str) -> bool:
    """Whether the op table (or the structural ops) has the aten op `name`."""
    return name in _BY_NAME or name.split(".", 1)[-1] in STRUCTURAL or name in STRUCTURAL


def node_location(node) -> str | None:
    """``file:line:col`` of the user's source line that created an FX node (the innermost frame)."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    if not frames:
        return None
    path, line = frames[-1]
    return f"{path}:{line}:0"


def check_graph(nodes: Iterable, origin) -> None:
    """Raise one `UnsupportedError` naming every unsupported op in an exported graph, each with its line.

    `origin(node)` names the PyTorch op the user wrote (a decomposed op is reported by its source)."""
    problems: dict[tuple[str | None, str], None] = {}
    for node in nodes:
        if node.op != "call_function":
            continue
        name = graph_name(node.target)
        if is_supported(name):
            continue
        written = re.sub(r"_[0-9]+$", "", origin(node))
        what = name if written in name else f"{name} (from PyTorch op '{written}')"
        problems[(node_location(node), what)] = None
    if not problems:
        return
    lines = [
        f"{loc}: error: {what} is not supported" if loc else f"error: {what} is not supported" for loc, what in problems
    ]
    first_loc, first = next(iter(problems))
    more = "" if len(lines) == 1 else "\n" + "\n".join(lines[1:])
    raise UnsupportedError(f"{first} is not supported (supported ops: fuseflow ops){more}", first_loc)


def markdown() -> str:
    """docs/ops.md: the table above, with the formats."""

    out = [
        "# Supported ops and formats",
        "",
        "Generated by `fuseflow ops --markdown` from `fuseflow/frontend/ops.py`; `tests/e2e/test_ops.py`",
        "compiles every example below and compares it with eager PyTorch, and keeps this file equal to",
        "the table. Ops are named as they appear in the exported graph after torch-mlir's decompositions",
        "(`nn.Linear` is `permute` + `mm` + `add`, LayerNorm is `var_mean` + elementwise ops).",
        "Which PyTorch Geometric convolutions compile as written: docs/pyg_convs.md.",
        "",
    ]
    kind = None
    for s in SUPPORTED:
        if s.kind != kind:
            kind = s.kind
            out += [f"## {kind}", "", f"Lowers to {s.lowers_to}.", "", "| op | example |", "|---|---|"]
        out.append(f"| `{s.name}` | `{s.example}` |")
        if s is SUPPORTED[-1] or SUPPORTED[SUPPORTED.index(s) + 1].kind != kind:
            out.append("")
    out += [
        "## composites",
        "",
        "PyTorch functions that export as the ops above.",
        "",
        "| function | example |",
        "|---|---|",
    ]
    out += [f"| `{name}` | `{example}` |" for name, example in COMPOSITES]
    out.append("")
    out += ["## formats", "", "| format | meaning |", "|---|---|"]
    out += [f"| `{name}` | {text} |" for name, text in FORMAT_DOCS]
    return "\n".join(out) + "\n"
