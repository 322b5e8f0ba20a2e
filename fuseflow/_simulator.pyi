"""fuseflow's cycle-level sparse streaming dataflow simulator (C++ core)."""

from collections.abc import Sequence
from typing import overload


class SimError(Exception):
    pass

class WindowUnsafe(Exception):
    pass

class Graph:
    """A graph of SAM primitives joined by bounded FIFOs."""

    @overload
    def __init__(self, fifo_depth: int, latency: int = 1) -> None:
        """
        Create an empty graph whose edges hold `fifo_depth` tokens and deliver after `latency` cycles.
        """

    @overload
    def __init__(self, arch: dict) -> None:
        """
        Create an empty graph from an architecture dictionary (fifo_depth, latency, ii, kinds, memory, scan_emit_on_pop, reduce_split_stop, tile timing).
        """

    def add_node(self, kind: str, name: str, inputs: Sequence[tuple[int, int]], params: dict) -> int:
        """
        Add a primitive (sam op mnemonic) fed by (node id, output port) pairs; returns the node id.
        """

    def run(self, max_cycles: int, record: bool = False, value_nodes: Sequence[int] = [], spans: bool = False, progress: object | None = None, progress_every: int = 1048576, engine: str = 'event', release: object | None = None) -> dict:
        """
        Run until every writer has seen D. Returns cycles, per-node counters and writer arrays; with `record`, every edge's token trace (edges leaving `value_nodes` print as floats); with `spans`, each node's active cycle intervals; `progress(cycle)` is called every `progress_every` cycles (Ctrl-C stops the run there). `engine` is 'event' (any timing) or 'window' (faster; raises WindowUnsafe for a run it cannot reproduce exactly, e.g. when a FIFO fills; the graph is then spent), or 'window+event' (the window engine until a FIFO could fill within a window, then the event engine from that cycle on; `event_from` in the result says when). A graph with parts needs `release(done, cycle) -> [(part, start cycle)]`: called with -1 before the run and with each part whose writers finished; `parts` in the result is each part's (start, finish).
        """

    def set_checkpoint(self, path: str, key: str, every_seconds: float) -> None:
        """
        Save the run's whole state to `path` at the start of a window every `every_seconds` of wall time (0: every window; the window engine only); `key` names the graph, inputs and build.
        """

    def set_resume(self, path: str, key: str) -> None:
        """
        Continue the next run from a state `set_checkpoint` saved (refused unless its key is `key`).
        """

    def begin_part(self) -> int:
        """
        Nodes added from now on form a new part (one region of a shared run); returns its id.
        """

    @property
    def window_capable(self) -> bool:
        """
        Whether the window engine supports this graph's timing (no memory model).
        """

    def __len__(self) -> int: ...

def arch_keys() -> dict:
    """
    The architecture settings ([arch], [arch.kinds.*], [arch.memory]) and their value types.
    """

def primitive_kinds() -> list[str]:
    """Every primitive kind (sam op mnemonic) the simulator builds."""

def primitive_table() -> list:
    """
    Every primitive: kind, fabric resource class, port counts (-1: variadic), and the parameters it reads ({name: type}) from its op's attributes (params), from tensor data (data) and for tiles (tile).
    """

def alu_ops() -> list[tuple[str, bool]]:
    """Every ALU op name the simulator evaluates, with whether it is unary."""

def alu_apply(op: str, a: float, b: float = 0.0) -> float:
    """
    The ALU's result of `op` on f32 operands (b is ignored by unary ops): the semantics Python's op table is checked against.
    """
