"""Derived tensors are `views.Derived` objects; their IR names are a serialisation that
`views.parse` reads back exactly (the names of nested derivations included)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fuseflow import views

PLAIN = st.sampled_from(["x", "t3", "emb.weight", "A@1", "out0"])
DIMS = st.lists(st.integers(1, 9), min_size=1, max_size=4)


def derived(base: st.SearchStrategy[str]) -> st.SearchStrategy[views.Derived]:
    return st.one_of(
        st.builds(lambda b, d: views.Derived("view", (b,), tuple(d)), base, DIMS),
        st.builds(lambda b, d: views.Derived("perm", (b,), tuple(d)), base, DIMS),
        st.builds(
            lambda b, s: views.Derived("slice", (b,), tuple(s)),
            base,
            st.lists(st.tuples(st.integers(0, 9), st.integers(1, 9), st.integers(1, 3)), min_size=1, max_size=3),
        ),
        st.builds(
            lambda xs, d: views.Derived("cat", tuple(xs), (d,)),
            st.lists(base, min_size=2, max_size=3),
            st.integers(0, 3),
        ),
        st.builds(lambda a, b, d: views.Derived("gather", (a, b), (d,)), base, base, st.integers(0, 2)),
    )


NAMES = st.recursive(PLAIN, lambda inner: derived(inner).map(lambda d: d.name), max_leaves=6)


@given(derived(NAMES))
def test_a_derived_tensors_name_parses_back_to_it(d):
    assert views.parse(d.name) == d


@given(PLAIN)
def test_a_plain_name_is_not_derived(name):
    assert views.parse(name) is None


def test_the_builders_spell_the_documented_names():
    assert views.view_name("t3", (2, 4, 3)) == "t3@view2x4x3"
    assert views.cat_name(["a", views.slice_name("b", [(0, 4, 1), (0, 2, 1)])], 1) == "cat1[a;b@slice0:4:1,0:2:1]"
    assert views.gather_name("emb.weight", "ids", 0) == "gather0[emb.weight;ids]"
