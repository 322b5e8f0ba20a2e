"""Export a model whose blocks repeat once per distinct block, and splice renamed copies.

Tracing and decomposing dominate the compile of a deep model (GPT-3 Small: 12 identical decoders,
each with 12 identical heads), and both cost the same for every copy of a block. Members of a
container (``nn.ModuleList``/``nn.Sequential``) that are structurally identical (same classes,
plain attributes, parameter and buffer shapes) form a group. The model is exported with each
member's call replaced by one opaque op (``fuseflow::replica``, shape-propagated by running the
member on fake tensors); the group's first member is exported once (recursively: its own repeats
are replicated too) and decomposed; each opaque call is replaced by a copy of that graph, reading
the call's activations and the member's own parameters.

A copy's module stack and stack trace are the call's followed by the template's, and the
spliced graph is renamed as one trace of the whole model names it: inputs ``flat_0``, ... in
`Lifted`'s order, FX node names numbered per base name in graph order, and each node's source
op recorded in its meta (``fuseflow_origin``, which `node_meta.origin` reads first). The imported
module is then the whole-model export's, text and locations alike (tests/e2e/test_replicate.py).
Anything this cannot do (a member called with non-tensor arguments, returning several tensors,
reading tensors that are neither its inputs nor its state) raises `NotReplicable`, and the
caller exports the model whole.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from fuseflow.frontend.node_meta import ORIGIN, module_path, origin, stack_path

_KEY = "fuseflow_origin_key"  # which source op a node came from, unique in the whole model
_FRAME = re.compile(r"""File "([^"]+)", line ([0-9]+),""")  # a trace's frames, as torch-mlir's importer reads them


class NotReplicable(Exception):
    """The model's repeats cannot be exported once and copied; export it whole."""


@dataclass
class _Group:
    """Identical members of one container: the first one is exported, the others are copies."""

    members: list[torch.nn.Module]
    paths: list[str]  # each member's path in the exported module
    state_names: list[str]  # the template's parameters then buffers, relative names
    state_meta: list[tuple[tuple[int, ...], torch.dtype]] = field(default_factory=list)
    outputs: dict[tuple, tuple] = field(default_factory=dict)  # input shapes -> output shape, stride, dtype


_GROUPS: dict[int, _Group] = {}
_IDS = itertools.count()


@torch.library.custom_op("fuseflow::replica", mutates_args=())
def _replica(xs: list[torch.Tensor], group: int, member: int) -> torch.Tensor:
    """One call of a replicated block: its activations in, the block's output out (its state is
    the member's own, bound when the call is replaced by the template's graph)."""
    g = _GROUPS[group]
    return g.members[member](*xs)


@_replica.register_fake
def _replica_fake(xs: list[torch.Tensor], group: int, member: int) -> torch.Tensor:
    """The output's shape, from running the template on fake tensors once per input shapes."""
    g = _GROUPS[group]
    key = tuple((tuple(x.shape), x.dtype) for x in xs)
    if key not in g.outputs:
        state = {n: torch.empty(shape, dtype=dtype) for n, (shape, dtype) in zip(g.state_names, g.state_meta)}
        out = torch.func.functional_call(g.members[0], state, tuple(xs))
        if not isinstance(out, torch.Tensor):
            raise NotReplicable(f"{type(g.members[0]).__name__} returns a {type(out).__name__}, not one tensor")
        g.outputs[key] = (tuple(out.shape), out.stride(), out.dtype)
    shape, stride, dtype = g.outputs[key]
    return xs[0].new_empty_strided(shape, stride, dtype=dtype)


def _plain(v: Any) -> bool:
    if isinstance(v, (int, float, bool, str, type(None))):
        return True
    return isinstance(v, tuple) and all(_plain(x) for x in v)


def signature(module: torch.nn.Module) -> tuple | None:
    """What makes two modules trace to the same graph up to their parameters' values; None when
    that cannot be told (a tensor attribute, a hook, a tied parameter)."""
    items: list[tuple] = []
    for name, sub in module.named_modules(remove_duplicate=False):
        if sub._forward_hooks or sub._forward_pre_hooks or "forward" in vars(sub):
            return None
        attrs = []
        for k, v in vars(sub).items():
            if k.startswith("_") or k == "training":
                continue
            if isinstance(v, torch.Tensor):
                return None
            attrs.append((k, v) if _plain(v) else (k, "id", id(v)))
        items.append((name, type(sub), tuple(attrs)))
    state = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    if len({id(t) for _, t in state}) != len(state):
        return None
    items.extend((n, tuple(t.shape), t.dtype, t.layout) for n, t in state)
    return tuple(items)


def find_groups(model: torch.nn.Module) -> list[_Group]:
    """The outermost groups of identical members of containers (two or more each)."""
    groups: list[_Group] = []
    taken: list[str] = []
    for path, m in model.named_modules():
        if any(path == t or path.startswith(t + ".") for t in taken):
            continue
        if not isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        by_sig: dict[tuple, list[tuple[str, torch.nn.Module]]] = {}
        for name, child in m.named_children():
            sig = signature(child)
            if sig is not None:
                by_sig.setdefault(sig, []).append((f"{path}.{name}" if path else name, child))
        for members in by_sig.values():
            state = [id(t) for _, c in members for t in itertools.chain(c.parameters(), c.buffers())]
            if len(members) < 2 or len(set(state)) != len(state):  # members sharing state
                continue
            first = members[0][1]
            names = [n for n, _ in first.named_parameters(remove_duplicate=False)]
            names += [n for n, _ in first.named_buffers(remove_duplicate=False)]
            groups.append(_Group([c for _, c in members], [p for p, _ in members], names))
            taken.extend(p for p, _ in members)
    return groups


class _Stub(torch.nn.Module):
    """Stands in a container for one member while its parent is exported: a call of
    ``fuseflow::replica`` on the activations, holding none of the member's state."""

    def __init__(self, member: torch.nn.Module, gid: int, index: int):
        super().__init__()
        self.kind = type(member)
        self.gid = gid
        self.index = index

    def forward(self, *args, **kwargs):
        if kwargs or not args or not all(isinstance(a, torch.Tensor) for a in args):
            raise NotReplicable(f"{self.kind.__name__} is called with non-tensor arguments")
        return torch.ops.fuseflow.replica(list(args), self.gid, self.index)


@contextlib.contextmanager
def _stubbed(model: torch.nn.Module, groups: list[_Group]) -> Iterator[dict[int, _Group]]:
    """Members replaced in their containers by `_Stub`s while `model` is exported."""
    ids: dict[int, _Group] = {}
    swapped: list[tuple[torch.nn.Module, str, torch.nn.Module]] = []
    try:
        for g in groups:
            gid = next(_IDS)
            _GROUPS[gid] = ids[gid] = g
            for k, (path, member) in enumerate(zip(g.paths, g.members)):
                parent_path, _, name = path.rpartition(".")
                parent = model.get_submodule(parent_path)
                parent._modules[name] = _Stub(member, gid, k)
                swapped.append((parent, name, member))
        yield ids
    finally:
        for parent, name, member in swapped:
            parent._modules[name] = member
        for gid in ids:
            _GROUPS.pop(gid, None)


Exporter = Callable[[torch.nn.Module, int, list[str], list[torch.Tensor]], Any]
"""(module, number of activations, state names, inputs) -> a decomposed ExportedProgram whose user
inputs are the activations then the state, in that order."""


def export_replicated(
    model: torch.nn.Module,
    n_args: int,
    state_names: list[str],
    inputs: list[torch.Tensor],
    export: Exporter,
):
    """The decomposed program of `model` (state lifted to inputs, as `export` gives it), with
    each group of identical members exported once. Raises `NotReplicable` when the model has no
    repeats or they cannot be copied."""
    if not find_groups(model):
        raise NotReplicable("no repeated blocks")
    ep = _export_level(model, n_args, state_names, inputs, export)
    _rename(ep)
    return ep


@dataclass
class Copy:
    """One call of a block left in the program (`export_templated`): which template it runs and
    what the whole-model trace would call each of its nodes."""

    template: int  # index into `Templated.templates`
    names: dict[str, str]  # template node name -> this copy's location name, "node|module path|origin"
    frames: list[tuple[str, int]] | None  # the call's frames (file, line), outermost first; None: no trace


@dataclass
class Templated:
    """A program whose outermost repeated blocks stay calls of ``fuseflow::replica`` (each call's
    arguments: its activations then the member's state), with each distinct block's program and,
    per call, the names its copy takes: what `_splice` and `_rename` would have produced."""

    ep: Any
    templates: list[Any]
    copies: list[Copy]


@dataclass
class _Kept:
    template: Any
    index: int  # which template
    k: int  # the call's number at its level (the copies' keys)
    stack: dict  # the call's module stack, ending in the block's own class


def export_templated(
    model: torch.nn.Module,
    n_args: int,
    state_names: list[str],
    inputs: list[torch.Tensor],
    export: Exporter,
) -> Templated:
    """`export_replicated` without copying the outermost blocks: the caller lowers each template
    once and splices its lowered copies (`linalg_copies`). Raises `NotReplicable` as it does."""
    if not find_groups(model):
        raise NotReplicable("no repeated blocks")
    kept: dict[Any, _Kept] = {}
    templates: list[Any] = []
    ep = _export_level(model, n_args, state_names, inputs, export, kept, templates)
    names = _rename(ep, kept)
    copies = []
    for call, c in kept.items():
        copies.append(Copy(c.index, names[call], _call_frames(call.meta.get("stack_trace"))))
    return Templated(ep, templates, copies)


def _call_frames(trace: str | None) -> list[tuple[str, int]] | None:
    """The frames of a call's trace without the stub's own (`_nest_trace`'s cut)."""
    if not trace:
        return None
    frames = [(f, int(line)) for f, line in _FRAME.findall(trace)]
    while len(frames) > 1 and frames[-1][0] == __file__:
        frames.pop()
    return frames


def _export_level(
    model,
    n_args: int,
    state_names: list[str],
    inputs: list[torch.Tensor],
    export: Exporter,
    kept: dict | None = None,
    kept_templates: list | None = None,
):
    """`model` exported with its groups' members replaced by copies of each group's first; with
    `kept`, the calls stay (reading the member's state too) and are recorded there instead."""
    groups = find_groups(model)
    if not groups:
        ep = export(model, n_args, state_names, inputs)
        _key(ep, origin)
        return ep
    value = dict(zip(state_names, inputs[n_args:]))
    owned = {f"{p}.{n}" for g in groups for p in g.paths for n in g.state_names}
    if not owned <= value.keys():  # a member's state is also reached by another name
        raise NotReplicable("a block shares its parameters with the rest of the model")
    own_names = [n for n in state_names if n not in owned]
    for g in groups:
        first = [value[f"{g.paths[0]}.{n}"] for n in g.state_names]
        g.state_meta = [(tuple(t.shape), t.dtype) for t in first]
    with _stubbed(model, groups) as ids:
        ep = export(model, n_args, own_names, list(inputs[:n_args]) + [value[n] for n in own_names])
    _key(ep, origin)
    user = _user_placeholders(ep)
    by_name = dict(zip(own_names, user[n_args:]))
    calls = [n for n in ep.graph.nodes if n.op == "call_function" and n.target is torch.ops.fuseflow.replica.default]
    templates: dict[tuple, Any] = {}  # (group, its inputs' shapes) -> the first member's program
    for k, node in enumerate(calls):
        xs, gid, index = node.args
        g = ids[gid]
        key = (gid, tuple((tuple(x.meta["val"].shape), x.meta["val"].dtype) for x in xs))
        if key not in templates:
            acts = [torch.zeros(shape, dtype=dtype) for shape, dtype in key[1]]
            first = [value[f"{g.paths[0]}.{n}"] for n in g.state_names]
            templates[key] = _export_level(g.members[0], len(xs), g.state_names, acts + first, export)
        state = [f"{g.paths[index]}.{n}" for n in g.state_names]
        if kept is None or kept_templates is None:
            _splice(ep, node, templates[key], k, state, by_name, type(g.members[index]))
            continue
        template = templates[key]
        at = next((i for i, t in enumerate(kept_templates) if t is template), len(kept_templates))
        if at == len(kept_templates):
            template.graph.eliminate_dead_code()  # a copy's dead nodes are gone after splicing too
            kept_templates.append(template)
        kept[node] = _Kept(template, at, k, _block_stack(node, type(g.members[index])))
        _bind_state(ep, node, template, state, by_name)
    ep.graph.eliminate_dead_code()
    _order_inputs(ep, user[:n_args] + [by_name[n] for n in state_names])
    ep.graph.lint()  # the program is imported, never run: its Python code is not regenerated
    return ep


def _user_placeholders(ep) -> list:
    """The program's user-input placeholders, in order."""
    user = torch.export.graph_signature.InputKind.USER_INPUT
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == user]
    nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    return [nodes[n] for n in names]


def _order_inputs(ep, order: list) -> None:
    """Make `order` the program's user inputs (after its lifted state), named ``flat_0``, ... as
    `Lifted`'s export names them."""
    from torch.export.graph_signature import (  # loaded with MLIR or torch.export, when first needed
        InputKind,
        InputSpec,
        TensorArgument,
    )

    g = ep.graph
    specs = [s for s in ep.graph_signature.input_specs if s.kind != InputKind.USER_INPUT]
    lifted = [n for n in g.nodes if n.op == "placeholder" and n not in set(order)]
    anchor = lifted[-1] if lifted else None
    for node in order:
        if anchor is None:
            next(iter(g.nodes)).prepend(node)
        else:
            anchor.append(node)
        anchor = node
    for i, node in enumerate(order):
        node._rename(f"__fuseflow_in{i}")
    for i, node in enumerate(order):
        node.name = node.target = f"flat_{i}"
        g._graph_namespace._rename_object(node, node.name)
        specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None))
    ep.graph_signature.input_specs[:] = specs


def _key(ep, origin: Callable) -> None:
    """Each op node's source op, as this trace names it (renamed when spliced, `_rename`)."""
    for node in ep.graph.nodes:
        if node.op not in ("placeholder", "output") and _KEY not in node.meta:
            node.meta[_KEY] = (origin(node),)


def _splice(ep, call, template, k: int, state: list[str], by_name: dict, kind: type) -> None:
    """Replace the opaque `call` by a copy of `template`'s graph reading the call's activations
    and the member's state (`state`: its names; placeholders made on first use, in `by_name`)."""
    xs = call.args[0]
    g = ep.graph
    inputs = _user_placeholders(template)
    placeholders = [p for p in template.graph.nodes if p.op == "placeholder"]
    _state_placeholders(ep, call, template, state, by_name)
    val_map = dict.fromkeys(placeholders)
    val_map.update(zip(inputs, list(xs) + [by_name[n] for n in state]))
    with g.inserting_before(call):
        out = g.graph_copy(template.graph, val_map)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]  # one (`_state_placeholders`)
    stack = _block_stack(call, kind)
    for src, dst in val_map.items():
        if src.op == "placeholder" or dst is None:
            continue
        dst.meta[_KEY] = (("copy", k),) + src.meta[_KEY]
        dst.meta["nn_module_stack"] = _nest_stack(stack, src.meta.get("nn_module_stack") or {})
        dst.meta["stack_trace"] = _nest_trace(call.meta.get("stack_trace"), src.meta.get("stack_trace"))
    call.replace_all_uses_with(outs[0])
    for spec in ep.graph_signature.output_specs:  # the signature names outputs by node name
        if getattr(spec.arg, "name", None) == call.name:
            spec.arg.name = outs[0].name
    g.erase_node(call)


def _state_placeholders(ep, call, template, state: list[str], by_name: dict) -> None:
    """The member's state as the program's placeholders (made on first use, kept in `by_name`)."""
    xs = call.args[0]
    g = ep.graph
    inputs = _user_placeholders(template)
    placeholders = [p for p in template.graph.nodes if p.op == "placeholder"]
    # the wrapped module's own state is lifted too but unread (`Lifted` passes it as inputs)
    if len(inputs) != len(xs) + len(state) or any(p.users for p in placeholders if p not in inputs):
        raise NotReplicable("a block reads tensors other than its inputs and state")
    out = next(n for n in reversed(template.graph.nodes) if n.op == "output").args[0]
    if len(out if isinstance(out, (tuple, list)) else [out]) != 1:
        raise NotReplicable("a block returns several tensors")
    last = [n for n in g.nodes if n.op == "placeholder"][-1]
    for name, p in zip(state, inputs[len(xs) :]):
        if name not in by_name:
            with g.inserting_after(last):
                last = by_name[name] = g.placeholder(name)
            last.meta = dict(p.meta)


def _bind_state(ep, call, template, state: list[str], by_name: dict) -> None:
    """A kept call reads the member's state after its activations: ``replica(xs + state, ...)``."""
    _state_placeholders(ep, call, template, state, by_name)
    xs, gid, index = call.args
    call.args = (list(xs) + [by_name[n] for n in state], gid, index)


def _block_stack(call, kind: type) -> dict:
    """The call's module stack: it ran in the stub, so its last entry is given the block's class."""
    stack = dict(call.meta.get("nn_module_stack") or {})
    if stack:
        last_key = list(stack)[-1]
        stack[last_key] = (stack[last_key][0], f"{kind.__module__}.{kind.__qualname__}")
    return stack


def _nest_stack(outer: dict, inner: dict) -> dict:
    """The module stack of a template node copied into the block the call ran: the call's
    stack (ending in the block) and the template's entries below its root, re-rooted there."""
    root = list(outer.values())[-1][0] if outer else "model"
    out = dict(outer)
    for path, kind in inner.values():
        if path.startswith(_ROOT + "."):
            full = root + path[len(_ROOT) :]
            out[f"L__self__{full}"] = (full, kind)
    return out


def _nest_trace(outer: str | None, inner: str | None) -> str | None:
    """The call's frames, then the template's frames below its `Lifted` wrapper's."""
    if not outer or not inner:
        return inner or outer
    calls = outer.split("\n  File ")
    while len(calls) > 1 and calls[-1].startswith(f'"{__file__}"'):  # the stub's own frame
        calls.pop()
    frames = calls + inner.split("\n  File ")[1:]
    return "\n  File ".join(frames)


_ROOT = "model"  # `Lifted` holds the exported module as `model`
_SUFFIX = re.compile(r"_\d+$")


def _numbered(base: str, used: set[str], count: dict[str, int]) -> str:
    """The next name for `base` as FX numbers a trace: base, base_1, base_2, ..."""
    for k in itertools.count(count.get(base, 0)):
        name = base if k == 0 else f"{base}_{k}"
        if name not in used:
            count[base] = k + 1
            used.add(name)
            return name
    raise AssertionError("unreachable")


def _rename(ep, kept: dict | None = None) -> dict:
    """Name nodes and source ops in graph order, as one trace of the whole model does, and
    record each node's origin and path for the importer's locations. A kept call (`kept`)
    stands for its template's nodes: they take the names a copy would, returned per call as
    {template node name: "node|module path|origin"}."""
    g = ep.graph
    nodes = list(g.nodes)
    kept = kept or {}
    used = {n.name for n in nodes if n.op in ("placeholder", "output")}
    count: dict[str, int] = {}
    names = {n: n.name if n.op in ("placeholder", "output") else "" for n in nodes}
    origins: dict[tuple, str] = {}
    o_used: set[str] = set()
    o_count: dict[str, int] = {}

    def origin_of(key: tuple) -> str:
        if key not in origins:
            origins[key] = _numbered(_SUFFIX.sub("", key[-1]), o_used, o_count)
        return origins[key]

    copies: dict = {}
    for n in nodes:
        c = kept.get(n)
        if c is not None:
            copies[n] = {
                t.name: "|".join(
                    (
                        _numbered(_SUFFIX.sub("", t.name), used, count),
                        stack_path(_nest_stack(c.stack, t.meta.get("nn_module_stack") or {})),
                        origin_of((("copy", c.k),) + t.meta[_KEY]),
                    )
                )
                for t in c.template.graph.nodes
                if t.op not in ("placeholder", "output")
            }
            # the block's arguments and return become the call's operands and result: their names label nothing
            copies[n].update(
                {
                    t.name: f"{t.name}|{module_path(t)}|{origin(t)}"
                    for t in c.template.graph.nodes
                    if t.op in ("placeholder", "output")
                }
            )
            continue
        if not names[n]:
            names[n] = _numbered(_SUFFIX.sub("", n.name), used, count)
        key = n.meta.get(_KEY)
        if key is not None:
            n.meta[ORIGIN] = origin_of(key)
    for k, n in enumerate(copies):  # outside the numbering: a call is not a node of the whole trace
        names[n] = f"fuseflow_copy_call_{k}"
    old_out = {n.name: names[n] for n in nodes}
    # two passes: FX keeps every name it ever gave out, so move everything aside first
    for i, n in enumerate(nodes):
        if n.op not in ("placeholder", "output"):
            n._rename(f"__fuseflow_tmp{i}")
    for n in nodes:
        if n.op not in ("placeholder", "output"):
            n.name = names[n]
            g._graph_namespace._rename_object(n, names[n])
    for spec in ep.graph_signature.output_specs:
        arg = spec.arg
        if hasattr(arg, "name") and arg.name in old_out:
            arg.name = old_out[arg.name]
    return copies


def outermost_frame(template) -> tuple[str, int] | None:
    """The frame (file, line) every op of a block's trace starts from: its exported wrapper's,
    which a copy's locations replace by the call's frames. None when no op has a trace."""
    firsts = set()
    for n in template.graph.nodes:
        if n.op != "call_function":
            continue
        trace = n.meta.get("stack_trace")
        frame = _FRAME.search(trace) if trace else None
        if frame is None:  # its copy would carry the call's own trace: not a renaming of this one
            raise NotReplicable(f"{n.name} has no stack trace")
        firsts.add((frame.group(1), int(frame.group(2))))
    if len(firsts) > 1:
        raise NotReplicable("a block's ops start from different frames")
    return next(iter(firsts), None)
