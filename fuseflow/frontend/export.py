"""PyTorch → linalg-on-tensors with ``#sparse_tensor.encoding`` on declared-sparse operands.

Everything is exported dense through ``torch.export`` (torch has no DCSR layout and CSC does not
import); formats are attached to the imported function's arguments afterwards. Parameters and
buffers are lifted to named function arguments (``lin.weight``) with ``torch.func.functional_call``,
so every tensor a graph reads is bound by name, sparse or not; a torch sparse parameter or buffer
is traced like a sparse input (a zero view, its format implied by its layout) and bound from its
stored entries. Each imported op's location is
wrapped in a NameLoc carrying its FX node name, which the ``unfused`` schedule groups by.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fuseflow.conversion.linalg_attrs import set_signature
from fuseflow.dialects.sam import new_context
from fuseflow.errors import EagerError, UnsupportedError, user_location
from fuseflow.formats import Format, encoding_attr, parse_format
from fuseflow.frontend import decompositions, linalg_copies
from fuseflow.frontend.diag import eye_name, identity, rewrite_diag, without_diag
from fuseflow.frontend.edge_lists import edge_positions
from fuseflow.frontend.lifted import Lifted
from fuseflow.frontend.message_passing import translate
from fuseflow.frontend.node_meta import module_path, origin
from fuseflow.frontend.ops import check_graph
from fuseflow.frontend.replicate import NotReplicable, Templated, export_replicated, export_templated, outermost_frame
from fuseflow.frontend.sparse_results import mark, strip_to_sparse
from fuseflow.frontend.torch_lowering import lower_parts, lower_to_linalg
from fuseflow.frontend.torch_sparse import (
    implied_format,
    is_plain_2d,
    is_sparse,
    stored_entries,
    to_coo_array,
    to_scipy,
    validate,
)
from fuseflow.mlir import ir

log = logging.getLogger(__name__)


@dataclass
class ImportedModel:
    """The imported linalg module plus what is needed to feed and check it."""

    module: ir.Module
    input_names: list[str]
    input_formats: dict[str, Format]
    param_values: dict[str, np.ndarray]
    n_user_args: int
    output_names: list[str]
    single_output: bool
    containers: set[str] = field(default_factory=set)
    module_classes: dict[str, str] = field(default_factory=dict)  # module path ("" = the model) -> class name
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)  # as eager PyTorch returns them (0-d too)
    notes: list[str] = field(default_factory=list)
    adapt: Callable[[Sequence[Any]], tuple] | None = None  # user's arguments -> the imported function's
    n_call_args: int | None = None  # how many arguments the user's model takes (when `adapt` changes it)


def arg_names(model: torch.nn.Module, n: int) -> list[str]:
    """Names of forward's positional parameters (falls back to arg0, arg1, ...)."""
    try:
        params = [
            p
            for p in inspect.signature(model.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        names = [p.name for p in params][:n]
    except (TypeError, ValueError):
        names = []
    return names + [f"arg{i}" for i in range(len(names), n)]


def densify(arg: Any, name: str) -> tuple[torch.Tensor, Format | str | None]:
    """What torch.export traces an input as, and the format implied by a torch sparse layout
    (`torch_sparse.implied_format`: N-D COO, batched and hybrid CSR/CSC, 2-D BSR/BSC).

    A sparse input is traced as a zero-stride view of one zero: export reads only its shape and
    dtype, and a dense copy of a paper-scale graph (736k nodes: 2 TB) would not fit."""
    if not isinstance(arg, torch.Tensor):
        raise UnsupportedError(f"input {name!r} is a {type(arg).__name__}; only tensors are supported")
    if not is_sparse(arg):
        return arg.detach(), None
    implied = implied_format(arg, name)
    dtype = torch.float32 if arg.is_floating_point() else arg.dtype
    return torch.zeros((), dtype=dtype).expand(arg.shape), implied


def _normalise_sparse_mm(ep: torch.export.ExportedProgram) -> None:
    """torch.sparse.mm exports as aten._sparse_mm, which torch-mlir cannot lower: use aten.mm."""
    changed = False
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten._sparse_mm.default:
            node.target = torch.ops.aten.mm.default
            changed = True
    if changed:
        ep.graph_module.recompile()


def _named_location_cache(importer):
    """The importer's ContextCache, with each location wrapped in NameLoc("node|module path|origin")."""
    from torch_mlir.extras.fx_importer import ContextCache  # loaded with MLIR or torch.export, when first needed

    class NamedLocationCache(ContextCache):
        __slots__ = ()

        def get_node_location(self, node):
            loc = super().get_node_location(node) or ir.Location.unknown(context=self._c)
            return ir.Location.name(f"{node.name}|{module_path(node)}|{origin(node)}", childLoc=loc, context=self._c)

    return NamedLocationCache(importer._c, py_attr_tracker=importer._py_attr_tracker)


def _decomposed(module: torch.nn.Module, n_args: int, state_names: list[str], inputs: list[torch.Tensor]):
    """`module` exported with its state lifted to inputs (`Lifted`) and decomposed for torch-mlir."""
    from torch_mlir.extras.fx_decomp_util import (  # loaded with MLIR or torch.export, when first needed
        get_decomposition_table,  # loaded with MLIR or torch.export, when first needed
    )

    lifted = Lifted(module, n_args, state_names).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        try:
            ep = torch.export.export(lifted, tuple(inputs))
        except Exception as e:  # torch.export reports many kinds of errors
            raise UnsupportedError(f"torch.export failed: {str(e).splitlines()[0]}") from None
        _normalise_sparse_mm(ep)
        # The program is never run, so it needs no input guards; generating them is quadratic
        # in the number of inputs (every parameter is one), 2-5 s of GPT-3 Small's export.
        ep.example_inputs = None
        try:
            return ep.run_decompositions(without_diag(decompositions.table(get_decomposition_table())))
        except Exception as e:
            raise UnsupportedError(f"torch.export's decomposition failed: {str(e).splitlines()[0]}") from None


def _to_linalg(
    ep: torch.export.ExportedProgram, verbose: bool = False, templated: Templated | None = None
) -> tuple[ir.Module, dict[str, str], list[int]]:
    """Check every op of a decomposed program against the table, import it to the torch dialect
    in process, and lower to linalg in a child process (`torch_lowering`): a crash there cannot
    kill the caller. Also returns the results that ``to_sparse*()`` declared sparse ({FX node:
    format}). With `templated` (`ep` is its program), each distinct block is lowered once and
    its copies spliced in (`linalg_copies`); raises `NotReplicable` where that cannot be done."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        sparse_results = strip_to_sparse(ep)
        eyes = rewrite_diag(ep)  # diag(v) = v(j) * I(i, j): identities become trailing inputs
        ctx = new_context()
        if templated is not None:
            return _templated_to_linalg(templated, ctx), sparse_results, eyes
        check_graph(ep.graph.nodes, origin)
        module = _fx_import(ep, ctx)
    text = lower_to_linalg(module.operation.get_asm(enable_debug_info=True), verbose)
    return _parsed(text, ctx), sparse_results, eyes


def _fx_import(ep: torch.export.ExportedProgram, ctx: ir.Context) -> ir.Module:
    """`ep` imported to the torch dialect as ``main``, each op's location named (`_named_location_cache`)."""
    from torch_mlir.dialects import torch as torch_d  # loaded with MLIR or torch.export, when first needed
    from torch_mlir.extras.fx_importer import FxImporter  # loaded with MLIR or torch.export, when first needed

    torch_d.register_dialect(ctx)
    importer = FxImporter(context=ctx)
    importer._cc = _named_location_cache(importer)
    try:
        importer.import_frozen_program(ep, func_name="main")
    except Exception as e:
        raise UnsupportedError(f"torch-mlir's FX importer failed: {str(e).splitlines()[0]}") from None
    return importer.module


def _parsed(text: str, ctx: ir.Context) -> ir.Module:
    try:
        return ir.Module.parse(text, context=ctx)
    except ir.MLIRError as e:
        raise UnsupportedError(f"torch-mlir's linalg output did not parse: {str(e).splitlines()[0]}") from None


def _templated_to_linalg(templated: Templated, ctx: ir.Context) -> ir.Module:
    """The program with its blocks as calls, lowered beside each distinct block, then spliced."""
    replica = torch.ops.fuseflow.replica.default
    for t in templated.templates:  # what the spliced path rewrites in the graph is not copied here
        if strip_to_sparse(t) or rewrite_diag(t):
            raise NotReplicable("a block declares sparse results or takes a diagonal")
        try:
            check_graph(t.graph.nodes, origin)
        except UnsupportedError as e:  # reported from the whole program, with its names
            raise NotReplicable(str(e)) from None
    check_graph((n for n in templated.ep.graph.nodes if n.target is not replica), origin)
    outer = _fx_import(templated.ep, ctx)
    linalg_copies.declare_calls(outer, [c.template for c in templated.copies])
    texts = [outer.operation.get_asm(enable_debug_info=True)]
    texts += [_fx_import(t, ctx).operation.get_asm(enable_debug_info=True) for t in templated.templates]
    lowered = lower_parts(texts, [True] + [False] * len(templated.templates))
    if lowered is None:
        raise NotReplicable("a block or the model around it did not lower alone")
    blocks = [linalg_copies.cut(text, outermost_frame(t)) for text, t in zip(lowered[1:], templated.templates)]
    try:
        module = ir.Module.parse(linalg_copies.splice(lowered[0], blocks, templated.copies, ctx), context=ctx)
    except ir.MLIRError as e:
        raise NotReplicable(f"the spliced module did not parse: {str(e).splitlines()[0]}") from None
    linalg_copies.merge_shared(module)
    return module


def import_model(
    model: torch.nn.Module,
    args: Sequence[Any],
    formats: Mapping[str, Any] | None = None,
    verbose: bool = False,
    replicate: bool = True,
) -> ImportedModel:
    """Export `model` on `args`, import it to linalg and attach the declared formats. With
    `replicate`, identical blocks are traced once and copied (the same program, faster)."""
    formats = dict(formats or {})
    names = arg_names(model, len(args))
    source, n_call, adapt, user_args = model, len(args), None, tuple(args)
    edge_args = edge_positions(model, args)
    if edge_args:  # message passing over an edge list: rewritten to pattern matrices
        tr = translate(model, args, names)
        for p in edge_args:
            fmt = formats.pop(names[p], "csr")
            formats.update({s.name: fmt for s in tr.adapter.sets if s.arg == names[p]})
        model, args, names, adapt = tr.module, tr.adapter(args), tr.input_names, tr.adapter
    dense_args, implied = _traced_args(names, args)
    state: dict[str, torch.Tensor] = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    state_names = list(state)
    all_names = names + state_names
    intermediate = {k: formats.pop(k) for k in list(formats) if k not in all_names}  # op results
    notes = []
    state_inputs = []
    for n in state_names:  # sparse parameters and buffers are traced like sparse inputs: no dense copy
        d, fmt = densify(state[n], n)
        state_inputs.append(d.float())
        if fmt:
            implied[n] = fmt
    inputs = dense_args + state_inputs
    for name, t in zip(all_names, inputs):
        if t.dtype != torch.float32:
            notes.append(f"{name}: {t.dtype} cast to float32 for the simulator")
    lifted = Lifted(model, len(args), state_names).eval()
    ep, templated = _exported(model, len(args), state_names, inputs, adapt is None and replicate)
    traced = None if (adapt is not None or implied) else traced_outputs(ep)
    module, sparse_results, eyes = _lowered(ep, templated, model, len(args), state_names, inputs, verbose)
    eye_values = {eye_name(n): identity(n) for n in eyes}  # diag(v): bound like parameters, stored CSR
    graph_names = all_names + list(eye_values)
    graph_inputs = inputs + [torch.zeros(n, n) for n in eyes]
    formats.update({name: "csr" for name in eye_values})
    if sparse_results or intermediate:
        with module.context:
            mark(module.body.operations[0].operation, sparse_results, intermediate, graph_names)

    fmts: dict[str, Format] = {}
    for name, t in zip(graph_names, graph_inputs):
        spec = formats.get(name, implied.get(name, "dense"))
        fmts[name] = _size_one_levels_dense(parse_format(spec, t.dim(), what=f"{name!r}"), tuple(t.shape), name, notes)
    given = {**dict(zip(names, args)), **{n: state[n] for n in state_names if n in implied}}
    density = _densities(all_names, inputs, given, implied, fmts)
    density.update({name: 1.0 / max(1, v.shape[0]) for name, v in eye_values.items()})
    out_names = _attach(module, graph_names, fmts, density)
    if traced is None:  # a rewritten model would run its (N, N, F) edge tensors densely, and sparse
        # inputs are traced as zero views: run the user's model on the user's arguments then
        single, shapes = _eager_outputs(
            (lambda: lifted(*inputs)) if adapt is None and not implied else (lambda: source(*user_args))
        )
    else:
        single, shapes = traced
    containers = {name for name, m in source.named_modules() if isinstance(m, _CONTAINERS)}
    return ImportedModel(
        module,
        graph_names,
        fmts,
        {**{n: _param_value(n, state[n]) for n in state_names}, **eye_values},
        len(args),
        out_names,
        single,
        containers=containers,
        module_classes={name: type(m).__name__ for name, m in source.named_modules()},
        output_shapes=shapes,
        notes=notes,
        adapt=adapt,
        n_call_args=n_call,
    )


_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)
"""Modules whose children are the `layer` schedule's layers."""


def _traced_args(names: list[str], args: Sequence[Any]) -> tuple[list[torch.Tensor], dict[str, Any]]:
    """What torch.export traces each argument as (`densify`), and the formats sparse layouts
    imply; a tensor without elements is refused, naming it."""
    dense_args, implied = [], {}
    for name, a in zip(names, args):
        d, fmt = densify(a, name)
        dense_args.append(d.float() if d.is_floating_point() else d)
        if fmt:
            implied[name] = fmt
        if 0 in d.shape:
            raise UnsupportedError(
                f"input {name!r} has shape {tuple(d.shape)}: tensors without elements (a size-0 dimension) "
                "are not supported"
            )
    return dense_args, implied


def _exported(model, n_args: int, state_names: list[str], inputs: list, replicate: bool):
    """The exported program, and its templated form when identical blocks are traced once
    (`replicate.py`; anything replication cannot copy is exported whole)."""
    if replicate:
        try:
            templated = export_templated(model, n_args, state_names, inputs, _decomposed)
            return templated.ep, templated
        except Exception as e:
            log.debug("identical blocks not replicated: %s", e)
    return _decomposed(model, n_args, state_names, inputs), None


def _lowered(ep, templated, model, n_args: int, state_names: list[str], inputs: list, verbose: bool):
    """`_to_linalg` of the exported program; where its blocks cannot be lowered once, they are
    copied before lowering instead (or the model exported whole), which reports any error."""
    try:
        return _to_linalg(ep, verbose, templated)
    except Exception as e:
        if templated is None:
            raise
        log.debug("identical blocks not lowered once: %s", e)
    try:
        ep = export_replicated(model, n_args, state_names, inputs, _decomposed)
    except Exception as copy_error:
        log.debug("identical blocks not replicated: %s", copy_error)
        ep = _decomposed(model, n_args, state_names, inputs)
    return _to_linalg(ep, verbose)


def _densities(
    names: list[str], inputs: list, given: Mapping[str, Any], implied: Mapping[str, Any], fmts: Mapping[str, Format]
) -> dict[str, float]:
    """The stored fraction of each compressed input: its stored entries where the user gave a
    sparse tensor (explicit zeros count), else its nonzeros."""
    return {
        name: (stored_entries(given[name]) if name in implied else float(torch.count_nonzero(t))) / max(1, t.numel())
        for name, t in zip(names, inputs)
        if "compressed" in fmts[name].levels
    }


VALUE_CHECKED = frozenset({torch.ops.aten.embedding.default, torch.ops.aten.index_select.default})
"""Supported ops that eager PyTorch refuses on values a trace never sees (ids out of range)."""


def traced_outputs(ep: torch.export.ExportedProgram) -> tuple[bool, list[tuple[int, ...]]] | None:
    """Whether the model returns one tensor, and its outputs' shapes, read off the trace: the
    eager run that would tell the same is skipped (2 s of BLAS on GPT-3 Small). None where an
    eager run could fail on these inputs although the trace did not: ops checking values
    (`VALUE_CHECKED`), or outputs that are not all tensors."""
    from torch.export.graph_signature import OutputKind  # loaded with MLIR or torch.export, when first needed

    if any(n.op == "call_function" and n.target in VALUE_CHECKED for n in ep.graph.nodes):
        return None
    nodes = {n.name: n for n in ep.graph.nodes}
    user = [s.arg for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    vals = [nodes[a.name].meta.get("val") if hasattr(a, "name") and a.name in nodes else None for a in user]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if not vals or len(tensors) != len(vals):
        return None
    return ep.call_spec.out_spec.is_leaf(), [tuple(int(d) for d in v.shape) for v in tensors]


def _eager_outputs(run: Callable[[], Any]) -> tuple[bool, list[tuple[int, ...]]]:
    """Whether the model returns one tensor, and its outputs' shapes, from running it in eager
    PyTorch; a model that fails there has no reference to compare with (`EagerError`)."""
    with torch.no_grad():
        try:
            example = run()
        except Exception as e:  # the user's model, as PyTorch runs it: no reference to compare with
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise EagerError(
                f"the model fails in eager PyTorch on these inputs: {type(e).__name__}: {first}",
                user_location(e.__traceback__),
            ) from None
    single = not isinstance(example, (tuple, list))
    return single, [tuple(t.shape) for t in ([example] if single else example) if isinstance(t, torch.Tensor)]


def _param_value(name: str, t: torch.Tensor) -> Any:
    """A parameter or buffer as the simulator binds it: dense as a float32 array, sparse as the
    scipy matrix (plain 2-D) or COO array of its stored entries, never densified."""
    if not is_sparse(t):
        return t.detach().float().numpy()
    if is_plain_2d(t):
        validate(t, name)
        return to_scipy(t)
    return to_coo_array(t, name)


def _size_one_levels_dense(fmt: Format, shape: tuple[int, ...], name: str, notes: list[str]) -> Format:
    """A compressed level over a dimension of size 1 is stored dense: the loop over it is a
    unit loop that the lowering does not iterate, and one position holds what one coordinate would."""
    if fmt.block or all(shape[m] != 1 or k == "dense" for k, m in zip(fmt.levels, fmt.mode_order)):
        return fmt
    levels = tuple("dense" if shape[m] == 1 else k for k, m in zip(fmt.levels, fmt.mode_order))
    notes.append(f"{name}: size-1 compressed level(s) stored dense ({fmt} -> {'/'.join(levels)})")
    return Format(levels, fmt.mode_order)


def _attach(
    module: ir.Module, names: Sequence[str], fmts: Mapping[str, Format], density: Mapping[str, float]
) -> list[str]:
    """Set argument encodings, names and (sparse ones) densities on @main; returns output names.

    The density of the example data is what the ordering pass's static estimate reads."""
    func = module.body.operations[0]
    with module.context, ir.Location.unknown():
        block = func.regions[0].blocks[0]
        for arg, name in zip(block.arguments, names):
            enc = encoding_attr(fmts[name])
            if enc:
                t = ir.RankedTensorType(arg.type)
                arg.set_type(ir.RankedTensorType.get(list(t.shape), t.element_type, ir.Attribute.parse(enc)))
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        ret = block.operations[len(block.operations) - 1]  # a returned input now has its encoding
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in block.arguments], [v.type for v in ret.operands])
        )
        outs = [f"out{i}" for i in range(len(ftype.results))]
        set_signature(func, names, density, outs)
    return outs
