"""`compile()` and `fuseflow-opt` run one registered pipeline: the sam `compile` produces is what
`fuseflow-opt --pass-pipeline=<prog.pipeline>` makes of the program's linalg module."""

import gcn_layer
import pytest

import fuseflow
from fuseflow.cli import opt
from fuseflow.frontend.export import import_model


@pytest.mark.parametrize(
    "schedule, passes",
    [
        ("full", None),
        ("unfused", None),
        ("op", "block{size=2}"),
        ("full", "sam-parallelize{level=i factor=2}"),
    ],
)
def test_compile_and_fuseflow_opt_give_the_same_sam(tmp_path, capsys, schedule, passes):
    model, args, formats = gcn_layer.build(features=4, hidden=2)
    prog = fuseflow.compile(model, args, formats, schedule=schedule, order="plain", passes=passes)
    assert prog.pipeline.startswith(f"builtin.module(fuseflow-partition{{schedule={schedule}}}")
    assert "lower-to-sam" in prog.pipeline and "fuseflow-order" not in prog.pipeline
    src = tmp_path / "in.mlir"  # with locations: region names and `unfused` groups come from them
    src.write_text(import_model(model, args, formats).module.operation.get_asm(enable_debug_info=True))
    assert opt.main([str(src), f"--pass-pipeline={prog.pipeline}"]) == 0
    assert capsys.readouterr().out == prog.mlir("sam")
    prog.simulate().check()


def test_auto_order_runs_as_the_ordering_pass_and_lowers_once(monkeypatch):
    """order=auto is `fuseflow-order` in the pipeline; `lower-to-sam` reuses its winner's lowering."""
    from fuseflow.passes import lower_to_sam

    calls = []
    real = lower_to_sam.search_orders
    monkeypatch.setattr(lower_to_sam, "search_orders", lambda *a, **k: calls.append(1) or real(*a, **k))
    model, args, formats = gcn_layer.build(features=4, hidden=2)
    prog = fuseflow.compile(model, args, formats, schedule="full")
    assert "fuseflow-order{order=auto cap=" in prog.pipeline
    assert calls == [], "lower-to-sam lowered again after fuseflow-order"
    assert prog.orders and prog.order_candidates
    prog.simulate().check()


def test_steps_and_text_are_one_pipeline(monkeypatch):
    """compile() takes typed steps or text alike, prints text that parses back to equal steps, and
    assigns the regions once (the partition pass keeps compile's assignment)."""
    from fuseflow.passes import fuseflow_partition, parse_pipeline, pipeline_text, step
    from fuseflow.schedule import regions

    model, args, formats = gcn_layer.build(features=4, hidden=2)
    steps = [step("block", size=2), step("sam-parallelize", level="i", factor=2)]
    calls = []
    real = regions.assign_regions
    monkeypatch.setattr(fuseflow_partition, "assign_regions", lambda *a, **k: calls.append(1) or real(*a, **k))
    typed = fuseflow.compile(model, args, formats, schedule="op", order="plain", passes=steps)
    assert calls == [], "fuseflow-partition assigned the regions compile() had assigned"
    spelled = "block{size=2},sam-parallelize{level=i}"
    text = fuseflow.compile(model, args, formats, schedule="op", order="plain", passes=spelled)
    assert typed.mlir("sam") == text.mlir("sam") and typed.pipeline == text.pipeline
    parsed = parse_pipeline(typed.pipeline)
    assert [s.name for s in parsed] == ["fuseflow-partition", "block", "lower-to-sam", "sam-parallelize"]
    assert parsed[1:2] + parsed[3:] == steps and pipeline_text(parsed) == typed.pipeline
    assert parse_pipeline("builtin.module(canonicalize,func.func(cse))")[1].text() == "func.func(cse)"
    with pytest.raises(fuseflow.FuseflowError, match="options"):
        step("block", width=2)
    with pytest.raises(fuseflow.FuseflowError, match="expected pipeline text or PassStep"):
        fuseflow.compile(model, args, formats, passes=[("block", 2)])


def test_reorder_keeps_the_schedules_regions():
    """reorder() re-lowers the imported module with its locations: `unfused` still groups the
    linalg ops by PyTorch op (it once regrouped them by linalg op, 7 regions instead of 5)."""
    model, args, formats = gcn_layer.build(features=4, hidden=2)
    prog = fuseflow.compile(model, args, formats, schedule="unfused", order="plain")
    again = prog.reorder("plain")
    assert list(again.summary) == list(prog.summary) and again.mlir("sam") == prog.mlir("sam")
    assert "loc(" not in prog.mlir("linalg")


def test_lower_to_sam_lowers_again_when_a_pass_runs_after_fuseflow_order(monkeypatch, tmp_path, capsys):
    """`lower-to-sam` reuses `fuseflow-order`'s lowering only when nothing ran between them: any
    other pass may have changed the module, so the kept lowering is dropped."""
    from fuseflow.passes import lower_to_sam

    calls = []
    real = lower_to_sam.search_orders
    monkeypatch.setattr(lower_to_sam, "search_orders", lambda *a, **k: calls.append(1) or real(*a, **k))
    model, args, formats = gcn_layer.build(features=4, hidden=2)
    src = tmp_path / "in.mlir"
    src.write_text(import_model(model, args, formats).module.operation.get_asm(enable_debug_info=True))
    head = "builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=0}"
    assert opt.main([str(src), f"--pass-pipeline={head},lower-to-sam)"]) == 0
    direct = capsys.readouterr().out
    assert calls == []
    assert opt.main([str(src), f"--pass-pipeline={head},canonicalize,lower-to-sam)"]) == 0
    assert calls == [1]
    assert capsys.readouterr().out == direct  # canonicalize changed nothing here: the same sam


def test_lowering_at_given_orders_is_the_search_at_those_orders():
    """`conversion.lower_module` lowers each region at the order it is given and searches none:
    at the orders `compile` chose, its sam is the compiled program's, region for region; a
    region it is given no order for takes the lowering's default."""
    from fuseflow.conversion.linalg_attrs import main_func
    from fuseflow.conversion.lower_module import lower_module
    from fuseflow.mlir import ir
    from fuseflow.schedule.regions import assign_regions

    model, args, formats = gcn_layer.build(features=4, hidden=2)
    prog = fuseflow.compile(model, args, formats, schedule="full")
    imported = import_model(model, args, formats)
    module = ir.Module.parse(prog.linalg_text, context=imported.module.context)
    with module.context:
        assign_regions(main_func(module), "full")
        given = lower_module(module, {r: o.split(",") for r, o in prog.orders.items()})
        default = lower_module(module)
    assert given.text == prog.sam_source != default.text  # the search chose another order than the default
    assert default.text == fuseflow.compile(model, args, formats, schedule="full", order="plain").sam_source
