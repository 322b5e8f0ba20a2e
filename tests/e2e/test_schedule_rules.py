"""Schedules as rules: the built-ins are rule sets with byte-identical output, rules select the
intended regions (also on a model they were not written for), schedules save and load, and bad
rules are reported. Outputs are checked against eager PyTorch (rtol = atol = 1e-5 x the longest
dimension, as in test_applications)."""

import hashlib
import json
import re

import gcn
import gpt_bigbird
import graphsage
import pytest
import sae
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow import Match, Rule, Schedule
from fuseflow.errors import FuseflowError, UnsupportedError
from fuseflow.schedule import BUILTIN, ScheduleWarning

SMALL_GPT = dict(seq=32, d_model=16, heads=2, d_ff=32, block=16)

# sha256 (first 16 hex digits) of prog.mlir("sam") with order="plain", recorded from the
# schedule code before schedules became rule sets (the path-and-index region assignment).
GOLDEN = {
    ("gcn", "full"): "30c42b16d9d1177e",
    ("gcn", "layer"): "e4a12929934412ef",
    ("gcn", "op"): "ac47363263ed75a8",
    ("gcn", "unfused"): "d6e3a9dca19d9d07",
    ("graphsage", "full"): "1cfaa10847cb7fc6",
    ("graphsage", "layer"): "bedee513cc5e1bdf",
    ("graphsage", "op"): "37064bdae70adcb1",
    ("graphsage", "unfused"): "addf241679d920cc",
    ("sae", "full"): "06d4b3ac74b13c36",
    ("sae", "layer"): "03e1ecab133ebb21",
    ("sae", "op"): "8bbbb3071764640a",
    ("sae", "unfused"): "4705f58501d48267",
}
APPS = {"gcn": gcn, "graphsage": graphsage, "sae": sae}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("app, schedule", sorted(GOLDEN))
def test_builtin_schedules_as_rule_sets_give_byte_identical_sam(app, schedule):
    model, args, formats = APPS[app].build()
    prog = fuseflow.compile(model, args, formats, schedule=schedule, order="plain")
    assert _digest(prog.mlir("sam")) == GOLDEN[(app, schedule)]
    # the same rules given as a Schedule object (not by name) partition identically
    custom = Schedule.rules(*BUILTIN[schedule].ruleset)
    again = fuseflow.compile(model, args, formats, schedule=custom, order="plain")
    assert [r for r in again.summary] == [r for r in prog.summary]


def test_gpt_transformer_rules_reproduce_fuseflows_split_and_apply_to_two_blocks():
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    rules = gpt_bigbird.transformer_schedule()
    prog = fuseflow.compile(model, args, formats, schedule=rules, order="plain")
    assert list(prog.summary) == ["ln_qkv", "mha", "proj_ffn"]
    prog.simulate().check(rtol=1e-5 * 64, atol=1e-5 * 64)
    # A model the rules were not written for: two decoder blocks in a ModuleList.
    model2, args2, formats2 = gpt_bigbird.build(**SMALL_GPT, layers=2)
    prog2 = fuseflow.compile(model2, args2, formats2, schedule=rules, order="plain")
    assert list(prog2.summary) == [f"blocks.{b}.{r}" for b in (0, 1) for r in ("ln_qkv", "mha", "proj_ffn")]
    prog2.simulate().check(rtol=1e-5 * 64, atol=1e-5 * 64)


def test_rules_by_kind_class_and_sequence():
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    # everything fused except the softmaxes, which are regions of their own
    s = Schedule.rules(Rule(Match(kind="softmax"), tag="no-fuse"), Rule(name="rest"))
    prog = fuseflow.compile(model, args, formats, schedule=s, order="plain")
    softmax = [f"r{o.index}_{o.node}" for o in prog.op_infos if o.node.startswith("softmax")]
    assert list(prog.summary) == ["rest", softmax[0], softmax[1], "rest.1", "rest.2"]
    prog.simulate().check(rtol=1e-5 * 64, atol=1e-5 * 64)
    # a module class: both LayerNorms materialize (their result is written; consumers start anew)
    s = Schedule.rules(Rule(Match(module_class="nn.LayerNorm"), tag="materialize"), Rule(name="all"))
    prog = fuseflow.compile(model, args, formats, schedule=s, order="plain")
    assert list(prog.summary) == ["all", "all.1", "all.2"]
    prog.simulate().check(rtol=1e-5 * 64, atol=1e-5 * 64)
    # a sequence: each q-k-matmul occurrence (one per head) is a region
    qk = Match(seq=(Match(kind="linear"), Match(kind="linear"), Match(kind="matmul")))
    s = Schedule.rules(Rule(qk, by="match", name="qk"))
    prog = fuseflow.compile(model, args, formats, schedule=s, order="plain")
    assert {"qk0", "qk1"} <= set(prog.summary)


def test_rule_options_set_region_order_block_and_lanes():
    model, args, formats = gcn.build()
    s = Schedule.rules(
        Rule(Match(path="conv1(\\..*)?"), name="l1", order="plain", par="i:2"),
        Rule(Match(path="conv2(\\..*)?"), name="l2", block=2),
    )
    prog = fuseflow.compile(model, args, formats, schedule=s)
    assert "sam-parallelize{level=i factor=2 region=l1}" in prog.passes
    assert "block{size=2 region=l2}" in prog.passes
    assert "l1" not in prog.orders  # plain: the lowering's own order, not ranked
    assert "sam.fork" in prog.mlir("sam")
    prog.simulate().check()


def test_schedules_print_and_load_as_python_and_json(tmp_path):
    s = gpt_bigbird.transformer_schedule()
    ns = {"Schedule": Schedule, "Rule": Rule, "Match": Match}
    assert eval(repr(s), ns) == s
    for name in ("plan.json", "plan.py"):
        s.save(tmp_path / name)
        assert Schedule.load(tmp_path / name) == s
    assert json.loads((tmp_path / "plan.json").read_text())["rules"][0]["name"] == "ln_qkv"
    model, args, formats = gpt_bigbird.build(**SMALL_GPT)
    prog = fuseflow.compile(model, args, formats, schedule=str(tmp_path / "plan.json"), order="plain")
    assert list(prog.summary) == ["ln_qkv", "mha", "proj_ffn"]


def test_a_rule_matching_nothing_warns_and_names_it():
    model, args, formats = gcn.build()
    s = Schedule.rules(Rule(Match(kind="softmax"), tag="no-fuse"), Rule(name="all"))
    with pytest.warns(ScheduleWarning, match=re.escape("Rule(match=Match(kind='softmax'), tag='no-fuse')")):
        prog = fuseflow.compile(model, args, formats, schedule=s, order="plain")
    assert list(prog.summary) == ["all"]


def test_conflicting_rules_are_an_error_naming_both():
    model, args, formats = gcn.build()
    s = Schedule.rules(Rule(Match(path="conv1.*"), name="l1"), Rule(Match(kind="linear"), tag="no-fuse"))
    with pytest.raises(FuseflowError, match=r"conflicting rules: Rule\(.*name='l1'\) fuses .* but Rule\(.*no-fuse"):
        fuseflow.compile(model, args, formats, schedule=s)
    s = Schedule.rules(Rule(Match(path="conv1.*"), name="l1", order="i,j,k"), Rule(Match(kind="linear"), order="plain"))
    with pytest.raises(FuseflowError, match=r"region l1: Rule\(.*order='i,j,k'\) sets .* but Rule\(.*order='plain'\)"):
        fuseflow.compile(model, args, formats, schedule=s)


def test_a_cyclic_partition_from_rules_is_an_error():
    model, args, formats = gcn.build()
    # conv1's two ops and conv2 in one region, the relu between them in another: a cycle
    s = Schedule.rules(Rule(Match(path="conv1.*|conv2.*"), name="a"))
    with pytest.raises(UnsupportedError, match="cycle"):
        fuseflow.compile(model, args, formats, schedule=s)


def test_bad_rules_are_rejected_when_written():
    with pytest.raises(FuseflowError, match="not a valid regex"):
        Match(kind="soft(max")
    with pytest.raises(FuseflowError, match="unknown rule tag"):
        Rule(tag="fusee")
    with pytest.raises(FuseflowError, match="par='4'"):
        Rule(par="4")
    with pytest.raises(UnsupportedError, match="unknown schedule 'layers'"):
        fuseflow.compile(*gcn.build(), schedule="layers")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 2), min_size=5, max_size=5))
def test_random_groupings_of_ops_match_pytorch_or_report_a_cycle(labels):
    """Any assignment of GCN's five ops to three groups either runs and matches PyTorch or is
    refused as cyclic; never a wrong answer or a crash."""
    model, args, formats = gcn.build()
    groups = [[i for i, g in enumerate(labels) if g == k] for k in range(3)]
    s = Schedule([g for g in groups if g], names=[f"g{k}" for k, g in enumerate(groups) if g])
    try:
        prog = fuseflow.compile(model, args, formats, schedule=s, order="plain")
    except UnsupportedError as e:
        assert "cycle" in str(e)
        return
    res = prog.simulate()
    res.check()
    with torch.no_grad():
        ref = model(*args)
    assert torch.allclose(res.outputs[0].to_dense(), ref, rtol=1e-4, atol=1e-4)
