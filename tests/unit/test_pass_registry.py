"""Every fuseflow pass has a docstring (what --help prints) and a lit test of its name."""

from pathlib import Path

import pytest

from fuseflow.passes import PASSES

LIT = Path(__file__).resolve().parents[1] / "lit" / "passes"


@pytest.mark.parametrize("name", sorted(PASSES))
def test_pass_is_documented_and_lit_tested(name):
    p = PASSES[name]
    assert p.summary, f"{name} has no docstring"
    assert (LIT / f"{name}.mlir").exists(), f"no lit test tests/lit/passes/{name}.mlir"


@pytest.mark.parametrize("name", sorted(PASSES))
def test_pass_logic_lives_in_the_module_named_after_it(name):
    """`sam-parallelize` -> fuseflow/passes/sam_parallelize.py: a reader finds a pass by its name."""
    assert PASSES[name].run.__module__ == f"fuseflow.passes.{name.replace('-', '_')}"
    assert PASSES[name].options.__module__ == PASSES[name].run.__module__


def test_pass_options_parse_and_reject_unknown_keys():
    from fuseflow.errors import FuseflowError

    assert PASSES["fuseflow-partition"].parse_options("schedule=full").schedule == "full"
    assert PASSES["lower-to-sam"].parse_options("node-budget=7").node_budget == 7
    with pytest.raises(FuseflowError, match="unknown option 'foo'"):
        PASSES["lower-to-sam"].parse_options("foo=1")
