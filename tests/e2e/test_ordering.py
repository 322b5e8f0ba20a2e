"""Dataflow ordering: every enumerated order of a region computes the same result as PyTorch,
orders differ in cycles by large factors, and order=auto (static estimate, no simulation) picks
one within 1.5x of the best simulated order.

Tolerance: the default of `SimResult.check` (rtol = atol = 1e-5 x the longest dimension); the
property test uses small integers, exact in f32.
"""

import numpy as np
import pytest
import spgemm_chain
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuseflow
from fuseflow.search.ordering import linear_extensions


@pytest.mark.parametrize("density", [0.1, 0.3])
def test_every_order_of_the_karate_chain_matches_pytorch_and_auto_is_near_best(density):
    model, args, formats = spgemm_chain.build(density=density)
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", order="auto")
    cands = prog.order_candidates["full"]
    assert len(cands) >= 6
    cycles = {}
    for c in cands:
        res = prog.reorder({"full": c.name}).simulate()
        res.check()
        cycles[c.name] = res.cycles
    best = min(cycles.values())
    assert max(cycles.values()) > 5 * best, cycles
    assert cycles[prog.orders["full"]] <= 1.5 * best, (prog.orders, cycles)


def test_result_records_the_pass_and_the_order():
    model, args, formats = spgemm_chain.build()
    prog = fuseflow.compile(model, args, formats=formats, schedule="full", order="i,k,j,l")
    js = prog.simulate().to_json()
    assert js["orders"] == {"full": "i,k,j,l"}
    assert js["passes"] == "fuseflow-order{order=i,k,j,l cap=64}"  # every option that is not empty
    assert "B stored as csc" in prog.regions()  # discordant for B: re-laid out, and said so


def test_orders_the_lowering_cannot_build_are_refused_with_the_reason():
    model, args, formats = spgemm_chain.build()
    with pytest.raises(fuseflow.FuseflowError, match="outer-product accumulation"):
        fuseflow.compile(model, args, formats=formats, schedule="full", order="l,i,k,j")
    with pytest.raises(fuseflow.FuseflowError, match="leaves out l"):
        fuseflow.compile(model, args, formats=formats, schedule="full", order="i,k,j")
    with pytest.raises(fuseflow.FuseflowError, match="not both"):
        fuseflow.compile(model, args, formats=formats, order="auto", passes="fuseflow-order{order=1}")


def test_linear_extensions_are_complete_and_lexicographic():
    assert list(linear_extensions("abc", [])) == [tuple(p) for p in ("abc", "acb", "bac", "bca", "cab", "cba")]
    assert list(linear_extensions("abc", [("a", "b")])) == [("a", "b", "c"), ("a", "c", "b"), ("c", "a", "b")]
    assert list(linear_extensions("iklj", [("i", "l"), ("l", "k"), ("k", "j")])) == [("i", "l", "k", "j")]


class Chain3(torch.nn.Module):
    def forward(self, A, B, C):
        return A @ B @ C


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dims=st.lists(st.integers(2, 7), min_size=4, max_size=4),
    fmts=st.lists(st.sampled_from(["csr", "csc", "dcsr", "dense"]), min_size=3, max_size=3),
    density=st.sampled_from([0.0, 0.2, 0.5, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_every_order_of_a_random_chain_equals_numpy(dims, fmts, density, seed):
    rng = np.random.default_rng(seed)
    shapes = [(dims[0], dims[1]), (dims[1], dims[2]), (dims[2], dims[3])]
    mats = [(rng.integers(-3, 4, s) * (rng.random(s) < density)).astype(np.float32) for s in shapes]
    want = mats[0] @ mats[1] @ mats[2]
    prog = fuseflow.compile(
        Chain3(), [torch.tensor(m) for m in mats], formats=dict(zip("ABC", fmts)), schedule="full", order="auto"
    )
    for c in prog.order_candidates["full"]:
        got = prog.reorder({"full": c.name}).simulate().outputs[0].numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"order {c.name}")


def test_auto_always_considers_the_default_order_of_a_many_variable_region():
    # GraphSAGE fused whole has 14 index variables: the first few thousand linear extensions are
    # all unbuildable, so auto must still see the lowering's own order (it once found none).
    import graphsage

    model, args, formats = graphsage.build()
    default = fuseflow.compile(model, args, formats=formats, schedule="full")
    auto = fuseflow.compile(model, args, formats=formats, schedule="full", order="auto")
    res = auto.simulate()
    res.check()
    assert res.cycles <= default.simulate().cycles


def test_cyclic_storage_orders_have_no_extension_and_are_found_at_once():
    """x(i,j) read as CSR next to its transpose x(j,i) orders i before j and j before i. The
    search used to try every prefix of the other variables before finding none (a fuzzed program
    with 12 variables never finished compiling); the cycle is now found first. The alarm only
    turns a regression into a failure instead of a hung suite."""
    import signal

    items = [f"v{k}" for k in range(12)] + ["i", "j"]

    def hung(*_):
        raise AssertionError("linear_extensions did not return")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        assert list(linear_extensions(items, [("i", "j"), ("j", "i")])) == []
        assert next(linear_extensions(items, [("i", "j")]))  # acyclic: the first order at once
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class SymmetricSoftmax(torch.nn.Module):
    def forward(self, x, w1, w2):
        return torch.softmax(torch.softmax((x + x.t()) @ w1, dim=1) @ w2, dim=1)


def test_model_reading_a_tensor_and_its_transpose_compiles_and_matches():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(5, 5, generator=g) * (torch.rand(5, 5, generator=g) < 0.5)
    args = (x, torch.rand(5, 4, generator=g), torch.rand(4, 3, generator=g))
    prog = fuseflow.compile(SymmetricSoftmax(), args, formats={"x": "csr"}, schedule="full")
    prog.simulate().check()


def _fused_regions():
    """The assignments of fused regions with many variables and nested reductions: GCN's two
    layers (Gustavson inside), the masked attention (softmax statistics hoisted per row)."""
    import gcn
    from test_parallelize import attention

    out = []
    for model, args, formats in (gcn.build(), attention(32, 8, 16)):
        prog = fuseflow.compile(model, args, formats=formats, schedule="full", order="plain")
        out += list(prog.assigns["full"])
    return out


_REGIONS = None


@given(data=st.data())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_orders_that_agree_on_every_view_share_one_plan(data):
    """The order search plans one order per class of orders that agree on the variable sets
    `nests.plan` reads (`_order_views`); any order's plan through that shared cache must be the
    plan computed for that order alone, or both must refuse it."""
    global _REGIONS
    from fuseflow.errors import UnsupportedError
    from fuseflow.search.ordering import RegionVars, _plans

    if _REGIONS is None:
        _REGIONS = [(RegionVars("r", [a], lambda t: (), lambda t: ()), {}) for a in _fused_regions()]
    rv, cache = data.draw(st.sampled_from(_REGIONS))
    order = data.draw(st.permutations(rv.variables))

    def shape(plans):
        return [
            (
                p.root_nest,
                sorted(p.body_nest.values()),
                sorted(set(p.access_nest.values())),
                sorted(p.spacc.values()),
                sorted(p.renamed.items()),
            )
            for p in plans
        ]

    try:
        alone = shape(_plans(rv, order))
    except UnsupportedError:
        alone = None
    try:
        shared = shape(_plans(rv, order, cache))
    except UnsupportedError:
        shared = None
    assert shared == alone, order


class _Chain(torch.nn.Module):
    """Dense layers, then a CSR graph multiply: only the multiply reads an intermediate sparse."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(6, 6) for _ in range(3))

    def forward(self, x, g):
        h = torch.relu(self.c(torch.relu(self.b(torch.relu(self.a(x))))))
        return g @ h


def test_ranking_evaluates_only_what_a_sparse_read_needs(monkeypatch):
    """An all-dense read's statistics are its extents: ranking the layers after the first
    evaluates none of the regions before them; the orders are those ranking with every
    intermediate evaluated gives (statistics of all-dense reads do not depend on values)."""
    import fuseflow.search.rank as rank
    import fuseflow.sim.values as values

    x, g = torch.rand(8, 6) - 0.5, (torch.rand(8, 8) < 0.3).float().to_sparse_csr()
    calls: list[int] = []
    real = values.evaluate_into
    monkeypatch.setattr(rank, "evaluate_into", lambda data, assigns: calls.append(1) or real(data, assigns))
    prog = fuseflow.compile(_Chain(), (x, g), schedule="unfused")
    assert calls == []
    prog.simulate().check()
    with monkeypatch.context() as m:  # resolve every input, dense or not: the same orders
        real_resolve = rank.OrderRanker._resolve
        m.setattr(rank.OrderRanker, "_resolve", lambda self, names: real_resolve(self, list(self._pending)))
        eager = fuseflow.compile(_Chain(), (x, g), schedule="unfused")
    assert calls and eager.orders == prog.orders and eager.sam_source == prog.sam_source
