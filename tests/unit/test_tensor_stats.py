"""Per-level statistics of stored tensors (`cost/tensor_stats.py`), against numpy counts.

A dense array and the same matrix held as scipy sparse must give the same statistics: the dense
path counts on the array, the sparse one on its compressed form.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.cost.tensor_stats import level_counts


@st.composite
def matrices(draw):
    rows, cols = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    seed = draw(st.integers(0, 2**31 - 1))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    rng = np.random.default_rng(seed)
    a = rng.random((rows, cols)) * (rng.random((rows, cols)) < density)
    return a.astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(matrices(), st.sampled_from([(0, 1), (1, 0)]), st.sampled_from([("dense", "compressed"), ("compressed",) * 2]))
def test_dense_and_sparse_data_give_the_same_statistics(a, mode_order, levels):
    dense = level_counts(a, levels, mode_order)
    sparse = level_counts(sp.csr_array(a), levels, mode_order)
    stored = a if mode_order == (0, 1) else a.T
    per_fiber = np.count_nonzero(stored, axis=1)
    assert dense.level_counts[-1] == sparse.level_counts[-1] == np.count_nonzero(a)
    assert np.array_equal(dense.fiber_lengths, per_fiber)
    assert np.array_equal(sparse.fiber_lengths, per_fiber)
    for key, freq in dense.frequencies.items():
        assert np.array_equal(freq, sparse.frequencies[key]), key
    assert np.array_equal(dense.frequencies[(1, 1)], np.count_nonzero(stored, axis=0))


@settings(max_examples=60, deadline=None)
@given(matrices(), st.sampled_from([(0, 1), (1, 0)]), st.integers(0, 2**31 - 1))
def test_structure_digests_name_the_pattern_not_the_values_or_the_container(a, mode_order, seed):
    """Two tensors on one pattern (other values, one of them scipy) share every level's digest;
    moving one stored entry changes the digest of the levels whose prefixes it changes."""
    levels = ("compressed", "compressed")
    rescaled = a * np.random.default_rng(seed).uniform(0.5, 2.0, a.shape).astype(np.float32)
    one = level_counts(a, levels, mode_order).structure
    assert one == level_counts(sp.csr_array(rescaled), levels, mode_order).structure
    assert one == level_counts(rescaled, levels, mode_order).structure
    stored = a if mode_order == (0, 1) else a.T
    nz, zero = np.argwhere(stored != 0), np.argwhere(stored == 0)
    if len(nz) and len(zero):
        moved = stored.copy()
        (r, c), (r2, c2) = nz[0], zero[0]
        moved[r2, c2], moved[r, c] = moved[r, c], 0.0
        other = level_counts(moved if mode_order == (0, 1) else moved.T, levels, mode_order).structure
        assert other[1] != one[1]  # the entries moved
        rows_before, rows_after = set(nz[:, 0]), set(np.argwhere(moved != 0)[:, 0])
        assert (other[0] == one[0]) == (rows_before == rows_after)


@settings(max_examples=40, deadline=None)
@given(matrices(), st.sampled_from([(0, 1), (1, 0)]), st.integers(0, 700))
def test_the_kept_pattern_is_the_stored_nonzeros_in_storage_order(a, mode_order, limit):
    """`TensorStats.pattern`: an array's mask while it is small, a CSR of its nonzeros while they
    are few, nothing beyond (`PATTERN_ENTRIES`, lowered here); the same nonzeros either way."""
    from unittest import mock

    expected = (a != 0) if mode_order == (0, 1) else (a != 0).T
    for data in (a, sp.csr_matrix(a)):
        with mock.patch("fuseflow.cost.tensor_stats.PATTERN_ENTRIES", limit):
            got = level_counts(data, ("dense", "compressed"), mode_order).pattern
        if np.count_nonzero(a) > limit:
            assert got is None
            continue
        assert got is not None
        if not sp.issparse(data) and a.size > limit:
            assert sp.issparse(got)  # a large array keeps only its nonzeros
        dense = got.toarray() if sp.issparse(got) else np.asarray(got)
        np.testing.assert_array_equal(dense.astype(bool), expected)
