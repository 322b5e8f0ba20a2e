"""Loop-nest planning of nested reductions (analysis/nests.py), on hand-built index notation.

The expression is a second GNN layer with mean aggregation over a first one:
Y(i,j) = sum_k A(i,k) * (sum_l C(k,l) B(l,j)) / (sum_m C(k,m)). The inner sums do not use i, but
are consumed under A's (i, k). Expected nests are written out by hand from the loop-nest rule
(docs/architecture.md, "Design: lowering").
"""

from fuseflow.analysis.index_notation import Access, Call, Reduce
from fuseflow.analysis.nests import plan


def _reductions(e, out=None):
    out = {} if out is None else out
    if isinstance(e, Reduce):
        out[e.vars] = e
        _reductions(e.body, out)
    elif isinstance(e, Call):
        for a in e.args:
            _reductions(a, out)
    return out


def _plan():
    row = Reduce("sum", ("l",), Call("mul", (Access("C", ("k", "l"), 0), Access("B", ("l", "j"), 0))))
    degree = Reduce("sum", ("m",), Access("C", ("k", "m"), 1))
    expr = Reduce("sum", ("k",), Call("mul", (Access("A", ("i", "k"), 0), Call("div", (row, degree)))))
    p = plan(expr, ("i", "j"), lambda acc: list(acc.vars), None)
    return p, _reductions(p.expr)


def test_a_row_under_an_unused_outer_loop_is_accumulated_once_per_iteration_of_it():
    p, red = _plan()
    row = red[("l",)]
    # Gustavson inside A's (i, k): l outside the renamed output variable, one spacc per (i, k)
    assert id(row) in p.spacc
    assert p.body_nest[id(row)] == ("i", "k", "l", "j_l")
    assert p.value_nest[id(row)] == ("i", "k", "j")


def test_a_per_row_statistic_is_hoisted_to_the_shortest_prefix_holding_its_variables():
    p, red = _plan()
    degree = red[("m",)]
    # once per (i, k), not once more per output column j
    assert p.value_nest[id(degree)] == ("i", "k")
    assert p.body_nest[id(degree)] == ("i", "k", "m")
