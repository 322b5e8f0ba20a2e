"""Packed inputs reused between runs (`sim/pack_cache.py`): served only for the same content
and format, never stale after an in-place change, and bounded in size."""

import numpy as np
import scipy.sparse as sp

from fuseflow.formats import Format, pack, pack_sparse
from fuseflow.sim import pack_cache

CSR = Format(("dense", "compressed"), (0, 1))
CSC = Format(("dense", "compressed"), (1, 0))


def _calls():
    made = []

    def make(arr, fmt):
        def go():
            made.append(1)
            return pack_sparse(arr, fmt) if sp.issparse(arr) else pack(arr, fmt)

        return go

    return made, make


def _dense(p, shape):
    """A (dense, compressed) packing back to the dense matrix, through scipy (not fuseflow)."""
    dims = [shape[m] for m in p.fmt.mode_order]
    stored = sp.csr_matrix((p.vals, p.crds[1], p.segs[1]), shape=dims).toarray()
    return stored if p.fmt.mode_order == (0, 1) else stored.T


def test_the_same_content_in_the_same_format_is_packed_once():
    pack_cache.clear()
    made, make = _calls()
    a = np.random.default_rng(0).random((20, 20), dtype=np.float32) * (np.eye(20, dtype=np.float32) + 0.1 > 0.5)
    first = pack_cache.packed(a, ("k", CSR), make(a, CSR))
    again = pack_cache.packed(a.copy(), ("k", CSR), make(a, CSR))  # equal content, another object
    assert again is first and len(made) == 1
    other = pack_cache.packed(a, ("k", CSC), make(a, CSC))  # another format: packed anew
    assert other is not first and len(made) == 2
    np.testing.assert_array_equal(_dense(other, a.shape), a)


def test_an_array_changed_in_place_is_packed_again_with_its_new_values():
    pack_cache.clear()
    made, make = _calls()
    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    pack_cache.packed(a, ("k",), make(a, CSR))
    a[3, 4] = -7.0
    p = pack_cache.packed(a, ("k",), make(a, CSR))
    assert len(made) == 2 and _dense(p, a.shape)[3, 4] == -7.0
    m = sp.random(30, 30, density=0.2, format="csr", random_state=1, dtype=np.float32)
    pack_cache.packed(m, ("k",), make(m, CSR))
    m.data[0] += 1.0
    p = pack_cache.packed(m, ("k",), make(m, CSR))
    assert len(made) == 4
    np.testing.assert_array_equal(_dense(p, m.shape), m.toarray())


def test_the_cache_holds_at_most_its_limit(monkeypatch):
    pack_cache.clear()
    monkeypatch.setattr(pack_cache, "LIMIT_BYTES", 4 * 100 * 100 * 4)  # four 100x100 float32 packings
    made, make = _calls()
    dense = Format(("dense", "dense"), (0, 1))
    for k in range(10):
        a = np.full((100, 100), float(k), dtype=np.float32)
        pack_cache.packed(a, ("k",), make(a, dense))
    assert pack_cache._held[0] <= pack_cache.LIMIT_BYTES and len(pack_cache._cache) <= 4
    a = np.full((100, 100), 9.0, dtype=np.float32)  # the latest is still there
    pack_cache.packed(a, ("k",), make(a, dense))
    assert len(made) == 10
