"""The compile driver: `compile` a PyTorch model into a `Program` (export, partition, the pass
pipeline, lowering, parsing), and `plan`, the planner with this driver's lowering.

The planner (`planning/planner.py`) lowers many candidate schedules; it imports neither the
frontend nor this driver: `plan` and `space` export the model here and hand it over with
`lower_program` (`planning.space.Exported`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch

from fuseflow.conversion.linalg_attrs import main_func
from fuseflow.dialects.sam_ir import module_outputs, parse_module
from fuseflow.errors import FuseflowError
from fuseflow.fabric.resources import check_fits
from fuseflow.frontend.export import ImportedModel, import_model
from fuseflow.frontend.torch_sparse import copy_module
from fuseflow.heap import old_objects_frozen
from fuseflow.mlir import ir
from fuseflow.passes import PASSES, PassStep, as_steps, lower_to_sam, pipeline_text, run_pipeline, step
from fuseflow.passes.context import PassContext
from fuseflow.planning import planner
from fuseflow.planning import space as search_space
from fuseflow.program import Program, Relayout, bind_args
from fuseflow.schedule.regions import assign_regions, listing
from fuseflow.schedule.rules import Resolution, Schedule, as_schedule, builtin_name
from fuseflow.search.rank import OrderRanker, ranker_options
from fuseflow.sim.arch import Arch
from fuseflow.sim.graph import GraphSpec, graph_specs, parse_graphs


def compile(
    model: torch.nn.Module,
    example_args: Sequence[Any],
    formats: Mapping[str, Any] | None = None,
    schedule: str | Schedule = "unfused",
    node_budget: int = 100_000,
    order: str | Mapping[str, str] | None = None,
    passes: str | Sequence[PassStep] | None = None,
    arch: Any = None,
    max_lanes: int | None = None,
    max_block: int | None = None,
    strategy: Any = None,
) -> Program:
    """Compile `model` on `example_args` into sam graphs, one per fusion region of `schedule`.

    `schedule`: ``unfused`` (one region per PyTorch op), ``layer`` (one per top-level child
    module, descending through containers), ``full`` (one region), ``op`` (one per linalg op),
    ``auto`` (the planner: `fuseflow.plan`), a schedule file (``.json``/``.py``), or a
    ``fuseflow.Schedule`` of rules (``Schedule.rules(Rule(...), ...)``) or module paths / op
    indices. Rules may set per-region ``order``, ``par`` and ``block`` options.
    `order`: each region's dataflow order: ``auto`` (the default unless `passes` has a
    ``fuseflow-order`` pass: the order the cycle model predicts
    fastest on `example_args`, re-layouts of model inputs charged), ``plain`` (the lowering's own
    deterministic order, what studies of fixed graphs use), ``K`` (the K-th enumerated order) or
    ``i,k,j``; or a mapping {region name: that} (unnamed regions: ``plain``). Shorthand for the
    pass ``fuseflow-order{order=...}``. `passes`: a pipeline of fuseflow passes run after the
    schedule's partition, as text (``"fuseflow-order{order=auto cap=32}"``) or as steps
    (``[fuseflow.passes.step("block", size=16)]``).
    `arch`: the machine (a preset name, a TOML file, a dict or an `Arch`) that ``order=auto``
    and ``schedule=auto`` rank for, with its timing, FIFOs and memory model; the program's
    `simulate()` and `estimate()` default to it. Default: ``comal``. On a finite fabric,
    ``schedule="auto"`` also gives each region its lanes, at most `max_lanes` (default: the
    arch's ``[arch.fabric] max_lanes``, 16), or b x b blocks, b at most `max_block` (default:
    ``[arch.fabric] max_block``, 16; 1: no blocks). `strategy`: how the regions will run
    (``sequential``, ``concurrent``, ``pipeline:K``, ``auto``; docs/fabric.md), which
    ``schedule="auto"`` plans for: its candidates are simulated under it, and lanes and blocks
    weighed one region at a time (``sequential``) or side by side (any other). Default:
    ``sequential``. It does not change what `simulate()` runs (pass it there too).
    """
    with old_objects_frozen():
        caps = (max_lanes, max_block)
        return _compile(model, example_args, formats, schedule, node_budget, order, passes, arch, caps, strategy)


def _compile(
    model: torch.nn.Module,
    example_args: Sequence[Any],
    formats: Mapping[str, Any] | None,
    schedule: str | Schedule,
    node_budget: int,
    order: str | Mapping[str, str] | None,
    passes: str | Sequence[PassStep] | None,
    arch: Any,
    caps: tuple[int | None, int | None] = (None, None),
    strategy: Any = None,
) -> Program:
    if schedule == "auto" or (isinstance(schedule, Schedule) and schedule.is_auto):
        found = plan(
            model,
            example_args,
            formats,
            node_budget=node_budget,
            order=order,
            passes=passes,
            constraints=schedule if isinstance(schedule, Schedule) else None,
            arch=arch,
            max_lanes=caps[0],
            max_block=caps[1],
            strategy=strategy or "sequential",
        )
        found.program.plan = found
        return found.program
    schedule = as_schedule(schedule)
    args = tuple(example_args)
    imported = import_model(model, args, formats)
    prog = lower_program(
        copy_module(model),
        args,
        imported,
        imported.module.operation.get_asm(enable_debug_info=True),
        schedule,
        node_budget,
        order,
        passes,
        ranker_options(arch),
        arch,
    )
    if arch is not None:  # a region the named machine cannot hold is refused here, not at run time
        arch_ = Arch.resolve(arch)
        check_fits(prog.resources().items(), arch_.fabric, arch_.name)
    return prog


def lower_program(
    model: torch.nn.Module,
    args: tuple,
    imported: ImportedModel,
    linalg_text: str,
    schedule: str | Schedule,
    node_budget: int,
    order,
    passes: str | Sequence[PassStep] | None,
    ranker_options: Mapping[str, Any] | None = None,
    arch: Any = None,
    lowering_cache: dict | None = None,
) -> Program:
    """Partition, run passes, lower and parse: everything of `compile` after torch.export.
    `ranker_options` go to the `OrderRanker` (the planner shares a memo and a shorter shortlist);
    `lowering_cache`: region lowerings shared by the planner's compiles, by structure."""
    module = imported.module
    schedule = as_schedule(schedule)
    user = as_steps(passes)
    with module.context:
        listed = listing(main_func(module))
        infos = listed.infos
        res = assign_regions(main_func(module), schedule, imported.containers, imported.module_classes, listed)
        region_ops: dict[str, set[int]] = {}
        for name, op in zip(res.names, listed.index_of, strict=True):
            region_ops.setdefault(name, set()).add(op)
        steps = user + _region_steps(res.options)
        order = _with_region_orders(_order_spec(order, steps), res)
        pipeline = _pipeline(steps, order)
        ranker = _ranker(imported, args, pipeline, ranker_options)
        ctx = PassContext(
            schedule=schedule if isinstance(schedule, Schedule) else None,
            containers=imported.containers,
            module_classes=imported.module_classes,
            ranker=ranker,
            order=order if isinstance(order, Mapping) else None,
            node_budget=node_budget,
            regions_assigned=True,  # assign_regions above annotated the module: the partition keeps it
            lowering_cache=lowering_cache,
        )
        full = full_pipeline(schedule, pipeline, node_budget)
        sam_source, sam_printed, graphs, outs = _run_full(module, full, ctx)
        summary, chosen, assigns = ctx.summary, ctx.chosen, ctx.assigns
    sched_name = builtin_name(schedule) or "custom"
    relayouts = _relayouts(graphs, imported)

    def relower(new_order: str | Mapping[str, str]) -> Program:
        """`Program.reorder`: the same module re-parsed (no re-export), lowered under `new_order`."""
        module = ir.Module.parse(linalg_text, context=imported.module.context)
        return lower_program(
            model, args, replace(imported, module=module), linalg_text, schedule, node_budget, new_order, tuple(user)
        )

    return Program(
        model,
        args,
        imported,
        sched_name,
        linalg_text,
        sam_source,
        summary,
        graphs,
        outs,
        infos,
        ", ".join(s.text() for s in pipeline),
        {r: c.name for r, c in chosen.items()},
        {r: c.alternatives for r, c in chosen.items() if c.alternatives},
        relayouts,
        pipeline_text(full),
        assigns=assigns,
        arch=arch,
        relower=relower,
        region_ops={r: tuple(sorted(ops)) for r, ops in region_ops.items()},
        _sam_printed=sam_printed,
    )


def _ranker(
    imported: ImportedModel, args: tuple, pipeline: list[PassStep], options: Mapping[str, Any] | None
) -> OrderRanker:
    """The order ranker bound to the example inputs; it keeps the variables a later
    ``sam-parallelize`` names (an order that renames them would leave the pass nothing to split)."""
    levels = {
        v for s in pipeline if s.name == "sam-parallelize" and s.options.level for v in s.options.level.split(",")
    }
    return OrderRanker(
        bind_args(imported, args), model_inputs=set(imported.input_names), keep_vars=levels, **dict(options or {})
    )


def _run_full(module, full: list[PassStep], ctx: PassContext) -> tuple[str, str | None, list[GraphSpec], list]:
    """Run the full pipeline: the sam module's text, its printed form (None until asked), its
    graphs and outputs. When the pipeline ends with the lowering, its own text and typed graphs
    (what reading the text back gives) are kept: parsed only to verify the distinct graphs (a
    renamed copy verifies as its original does), printed when asked (`Program.sam_text`): 1.4 s
    of GPT-3 Small's 1,380 regions."""
    if full and full[-1].name == "lower-to-sam":
        before = run_pipeline(module, full[:-1], ctx)
        sam_source, distinct = lower_to_sam.lower(before, full[-1].options, ctx)
        verified = parse_module(distinct)
        return sam_source, None, graph_specs(ctx.typed or []), module_outputs(verified) or []
    sam_module = run_pipeline(module, full, ctx)
    graphs, outs = parse_graphs(sam_module)
    text = str(sam_module)
    return text, text, graphs, outs


def _relayouts(graphs: list[GraphSpec], imported: ImportedModel) -> list[Relayout]:
    """Model inputs some graph reads in another level order than declared (parameters are laid
    out at compile time, free); one conversion per (input, stored order)."""
    out: dict[tuple, Relayout] = {}
    for g in graphs:
        for name, t in g.tensors.items():
            source = t.copy_of or name
            declared = imported.input_formats.get(source)
            if t.role != "input" or source not in imported.input_names[: imported.n_user_args] or declared is None:
                continue
            if declared.mode_order != t.fmt.mode_order and (source, t.fmt.mode_order) not in out:
                out[(source, t.fmt.mode_order)] = Relayout(f"relayout_{name}", name, source, declared, t.fmt, t.block)
    return list(out.values())


def _order_spec(order: str | Mapping[str, str] | None, steps: list[PassStep]) -> str | Mapping[str, str] | None:
    """None means ``auto`` unless the pipeline orders; ``plain`` is the lowering's own
    deterministic order (no ordering pass)."""
    if order is None:
        return None if any(s.name == "fuseflow-order" for s in steps) else "auto"
    if isinstance(order, str) and order.strip() == "plain":
        return None
    if isinstance(order, Mapping):
        return {r: o for r, o in order.items() if o.strip() != "plain"} or None
    return order


def _region_steps(options: Mapping[str, Mapping[str, Any]]) -> list[PassStep]:
    """Rules' per-region ``block`` and ``par`` options as ``block{region=}`` / ``sam-parallelize{region=}``."""
    extra = []
    for region, opts in options.items():
        if "block" in opts:
            extra.append(step("block", size=int(opts["block"]), region=region))
        if "par" in opts:
            level, factor = opts["par"].rsplit(":", 1)
            extra.append(step("sam-parallelize", level=level, factor=int(factor), region=region))
    return extra


def _with_region_orders(order: str | Mapping[str, str] | None, res: Resolution) -> str | Mapping[str, str] | None:
    """Rules' per-region ``order`` options over the global order (a mapping when any is given)."""
    given = {r: o["order"] for r, o in res.options.items() if "order" in o}
    if not given:
        return order
    base = dict(order) if isinstance(order, Mapping) else {r: order or "plain" for r in set(res.names)}
    base.update(given)
    return {r: o for r, o in base.items() if o.strip() != "plain"} or None


def _pipeline(steps: list[PassStep], order: str | Mapping[str, str] | None) -> list[PassStep]:
    """The user's steps and the rules' region steps, then the ordering step `order` asks for."""
    out = list(steps)
    if order is not None:
        if any(s.name == "fuseflow-order" for s in out):
            raise FuseflowError("give the order either as order= or as a fuseflow-order pass, not both")
        shown = order if isinstance(order, str) else ";".join(f"{r}:{o}" for r, o in order.items())
        out.append(step("fuseflow-order", order=shown))
    return out


def full_pipeline(schedule: str | Schedule, pipeline: list[PassStep], node_budget: int) -> list[PassStep]:
    """The registered pipeline `compile` runs (what `fuseflow-opt --pass-pipeline` would take):
    partition, the user's linalg passes and ordering, ``lower-to-sam``, the user's sam passes."""

    stages: dict[str, list[PassStep]] = {"linalg": [], "sam": []}
    for s in pipeline:
        if s.name not in PASSES or s.name in ("lower-to-sam", "fuseflow-partition"):
            allowed = sorted(set(PASSES) - {"lower-to-sam", "fuseflow-partition"})
            raise FuseflowError(
                f"passes: {s.name!r} cannot run here; compile() runs the partition and "
                f"lowering itself, around these: {', '.join(allowed)}"
            )
        stages[s.stage].append(s)
    name = schedule if isinstance(schedule, str) else builtin_name(schedule) or "custom"
    return (
        [step("fuseflow-partition", schedule=name)]
        + stages["linalg"]
        + [step("lower-to-sam", node_budget=node_budget)]
        + stages["sam"]
    )


def exported(
    model: torch.nn.Module, example_args: Sequence[Any], formats: Mapping[str, Any] | None = None, lower: Any = None
) -> search_space.Exported:
    """`model` exported for the planner: a copy of it, its inputs, its linalg, and this driver's
    lowering (or `lower`, a wrapper of `lower_program`)."""
    args = tuple(example_args)
    imported = import_model(model, args, formats)
    return search_space.Exported(copy_module(model), args, imported, lower or lower_program)


def plan(model: torch.nn.Module, example_args: Sequence[Any], formats: Mapping[str, Any] | None = None, **options: Any):
    """``schedule="auto"``'s planner (`planning.planner.plan`, same options, and `lower`: a
    wrapper of this driver's lowering) on `model`."""
    with old_objects_frozen():
        return planner.plan(exported(model, example_args, formats, options.pop("lower", None)), **options)


def space(
    model: torch.nn.Module, example_args: Sequence[Any], formats: Mapping[str, Any] | None = None, **options: Any
):
    """The planner's search space (`planning.space.Space`, same options) for `model`."""
    return search_space.Space(exported(model, example_args, formats), **options)
