"""Alpha-equivalence classes (`analysis/alpha.py`) against the textbook definition: two reductions
are equal up to the names of the variables they bind, compared by renaming every bound variable
to its binder's depth from the compared root (written out here, independently of the bottom-up
keys the compiler uses). Shadowing (a reduction binding a name an enclosing one binds) is drawn
on purpose: a numbering by count of bound names conflates variables there."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.analysis.alpha import AlphaKeys, share_equivalent
from fuseflow.analysis.index_notation import Access, Call, Const, Reduce


def textbook(e, env=None, depth: int = 0) -> tuple:
    """Bound variables named by their binder's depth from the root and their place in it (de
    Bruijn levels); free ones keep their names."""
    env = {} if env is None else env
    if isinstance(e, Access):
        return ("A", e.tensor, tuple(env.get(v, v) for v in e.vars))
    if isinstance(e, Call):
        return ("C", e.op, tuple(textbook(a, env, depth) for a in e.args))
    if isinstance(e, Reduce):
        inner = dict(env)
        for place, v in enumerate(e.vars):
            inner[v] = f"#{depth}.{place}"
        return ("R", e.kind, tuple(inner[v] for v in e.vars), textbook(e.body, inner, depth + 1))
    return ("K", e)


NAMES = ("i", "j", "k", "l")


@st.composite
def exprs(draw, depth: int = 3):
    kind = draw(st.sampled_from(("access", "const", "call", "reduce") if depth else ("access", "const")))
    if kind == "access":
        return Access(
            draw(st.sampled_from("AB")), tuple(draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2))), 0
        )
    if kind == "const":
        return Const(draw(st.sampled_from((0.0, 1.0))))
    if kind == "call":
        return Call(draw(st.sampled_from(("add", "mul"))), (draw(exprs(depth - 1)), draw(exprs(depth - 1))))
    bound = tuple(draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True)))
    return Reduce(draw(st.sampled_from(("sum", "max"))), bound, draw(exprs(depth - 1)))


def rename(e, names: dict[str, str]):
    """`e` with every variable renamed (bound and free alike): equal classes stay equal only
    when `names` keeps the free variables."""
    if isinstance(e, Access):
        return Access(e.tensor, tuple(names.get(v, v) for v in e.vars), e.use)
    if isinstance(e, Call):
        return Call(e.op, tuple(rename(a, names) for a in e.args))
    if isinstance(e, Reduce):
        return Reduce(e.kind, tuple(names.get(v, v) for v in e.vars), rename(e.body, names))
    return e


reductions = st.builds(
    lambda k, vs, b: Reduce(k, vs, b),
    st.sampled_from(("sum", "max")),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True).map(tuple),
    exprs(),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(reductions, min_size=2, max_size=6), st.permutations(NAMES))
def test_classes_are_the_textbook_alpha_equivalence(rs, perm):
    # some pairs renamed apart, so that equal classes are common, not only identical trees
    rs = rs + [rename(r, dict(zip(NAMES, perm))) for r in rs]
    keys = AlphaKeys()
    for a in rs:
        for b in rs:
            assert (keys.of(a) == keys.of(b)) == (textbook(a) == textbook(b)), (a, b)


def test_a_softmax_row_max_named_twice_is_shared():
    x = Access("X", ("i", "m"), 0)
    numerator_max = Reduce("max", ("m",), x)
    denominator_max = Reduce("max", ("r",), Access("X", ("i", "r"), 1))
    e = Call("sub", (numerator_max, Call("exp", (denominator_max,))))
    out = share_equivalent(e)
    assert out.args[0] is out.args[1].args[0]
    # a free variable renamed is another class: nothing shared
    other = Call("sub", (numerator_max, Reduce("max", ("r",), Access("X", ("j", "r"), 1))))
    assert share_equivalent(other) is other


def test_nested_binders_are_keyed_relative_to_their_own_binder():
    inner = Reduce("sum", ("k",), Call("mul", (Access("A", ("i", "k"), 0), Access("B", ("k", "j"), 0))))
    # the same reduction under zero and under two enclosing binders: its class does not change
    keys = AlphaKeys()
    alone = keys.of(inner)
    wrapped = Reduce("max", ("i",), Reduce("sum", ("j",), inner))
    assert keys.of(wrapped) == keys.of(
        Reduce("max", ("a",), Reduce("sum", ("b",), rename(inner, {"i": "a", "j": "b"})))
    )
    assert keys.of(inner) == alone
    assert keys.of(rename(inner, {"k": "z"})) == alone
    assert keys.of(rename(inner, {"i": "z"})) != alone  # i is free in `inner`


def test_a_cached_hash_stays_out_of_pickles():
    """Nodes cache their hash; string hashes differ between processes (PYTHONHASHSEED), so a
    pickle (a worker process, a memo on disk) must carry the fields only."""
    import pickle

    r = Reduce("sum", ("j",), Call("mul", (Access("A", ("i", "j"), 0), Access("B", ("j",), 0))))
    before = hash(r)
    assert "_hash" in r.__dict__ and "_hash" in r.body.__dict__
    back = pickle.loads(pickle.dumps(r))
    assert "_hash" not in back.__dict__ and "_hash" not in back.body.__dict__
    assert back == r and hash(back) == before and {r: 1}[back] == 1
