"""The packers' fast paths (all-dense formats; matrices through scipy's CSR) write exactly the
arrays of the general coordinate-sorting packer, dtypes included."""

from __future__ import annotations

import numpy as np
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fuseflow.formats import Format, _pack_general, pack, pack_coo

LEVELS = [("dense", "compressed"), ("compressed", "compressed"), ("compressed", "dense"), ("dense", "dense")]


def _same(a, b) -> bool:
    for u, v in zip(a.segs + a.crds, b.segs + b.crds):
        if (u is None) != (v is None) or (u is not None and (u.dtype != v.dtype or not np.array_equal(u, v))):
            return False
    return a.shape == b.shape and a.vals.dtype == b.vals.dtype and np.array_equal(a.vals, b.vals, equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 7), st.integers(1, 7)),
        elements=st.sampled_from([0.0, 0.0, 1.5, -2.0, 3.25, float("nan"), float("-inf")]),
    ),
    st.sampled_from(LEVELS),
    st.sampled_from([(0, 1), (1, 0)]),
)
def test_matrix_fast_paths_equal_the_general_packer(a, levels, mode_order):
    fmt = Format(levels, mode_order)
    assert _same(pack(a, fmt), _pack_general(np.transpose(a, mode_order), fmt, a.shape))


@settings(max_examples=100, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))))
def test_all_dense_fast_path_equals_the_general_packer(a):
    fmt = Format(("dense", "dense", "dense"), (2, 0, 1))
    assert _same(pack(a, fmt), _pack_general(np.transpose(a, (2, 0, 1)), fmt, a.shape))


@st.composite
def _nd_case(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    a = draw(arrays(np.float32, shape, elements=st.sampled_from([0.0, 0.0, 0.0, 1.5, -2.0, 7.0])))
    levels = tuple(draw(st.lists(st.sampled_from(["dense", "compressed"]), min_size=rank, max_size=rank)))
    order = tuple(draw(st.permutations(range(rank))))
    return a, Format(levels, order)


@settings(max_examples=300, deadline=None)
@given(_nd_case())
def test_packing_nd_coordinates_equals_packing_the_dense_array(case):
    """N-D COO inputs (torch COO, batched and hybrid CSR) are packed from their coordinates:
    the same levels and values as the dense array, any rank, level kinds and mode order."""
    a, fmt = case
    coo = scipy.sparse.coo_array(a)
    got, want = pack_coo(coo, fmt), pack(a, fmt)
    assert _same(got, want)


def test_duplicate_coordinates_are_summed_and_zero_sums_dropped():
    coo = scipy.sparse.coo_array(
        (
            np.array([1.0, 2.0, 5.0, -5.0], np.float32),
            (np.array([0, 0, 3, 3]), np.array([1, 1, 2, 2]), np.array([0, 0, 1, 1])),
        ),
        shape=(4, 3, 2),
    )
    p = pack_coo(coo, Format(("compressed",) * 3, (0, 1, 2)))
    assert p.vals.tolist() == [3.0]
    assert [c.tolist() for c in p.crds] == [[0], [1], [0]]
