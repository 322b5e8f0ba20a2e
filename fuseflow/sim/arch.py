"""Architecture parameters for a simulation: presets, TOML files or dicts
(docs/architecture.md, "Design: the simulator").

A TOML file has an ``[arch]`` table; ``preset`` starts it from a shipped preset, whose keys the
table's own then override (tables such as ``memory`` and ``fabric`` key by key)::

    [arch]
    preset = "rda"            # optional: comal, sam, rda or amber
    fifo_depth = 8            # tokens per edge (10240000 = effectively unbounded)
    latency = 1               # cycles from a node's action to its outputs' visibility
    ii = 1                    # cycles between two actions of one node
    scan_emit_on_pop = false  # scanner emits a fiber's first coordinate the cycle it pops the ref
    reduce_split_stop = false # reduce spends a second cycle on a stop above S0
    max_cycles = 1000000000   # the run fails (never hangs) past this
    max_fifo_mib = 8192       # the run fails (never exhausts memory) when queued tokens pass this
    max_seconds = 3600        # the run fails past this much wall-clock time (default: no limit)
    spill_tokens = 65536      # a FIFO longer than this keeps its middle in a temporary file (exact)
    [arch.kinds.alu]          # per primitive kind (sam op mnemonic): latency, ii
    latency = 3
    [arch.memory]             # off-chip memory model, off unless this table is present
    channels = 4
    bytes_per_request = 64
    latency = 80
    ii = 1
    startup = 0
    [arch.fabric]             # a finite array (fuseflow/fabric): unbounded unless this table is present
    compute = 384             # compute units (PE tiles)
    memory = 128              # memory units (MEM tiles)
    reconfig_cycles = 1000    # cycles to load a region's configuration onto its units
    max_lanes = 16            # the most lanes schedule="auto" gives a region (default 16)
    max_block = 16            # the largest blocks (b x b) schedule="auto" gives a region (1: none)
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from fuseflow.errors import FuseflowError
from fuseflow.primitives import ARCH_KEYS, KINDS  # the simulator's tables (fork and join included)

UNBOUNDED = 10_240_000
PRESETS = ("comal", "sam", "rda", "amber")
INT_KEYS = {k for k, t in ARCH_KEYS["arch"].items() if t == "int"}
BOOL_KEYS = {k for k, t in ARCH_KEYS["arch"].items() if t == "bool"}
KIND_KEYS = set(ARCH_KEYS["kinds"])
MEMORY_KEYS = set(ARCH_KEYS["memory"])


FABRIC_KEYS = ("compute", "memory", "reconfig_cycles", "max_lanes", "max_block")
RESOURCES = ("compute", "memory")
"""Fabric resource classes; each primitive's comes from the simulator's table (`primitives.RESOURCE`)."""


@dataclass(frozen=True)
class Fabric:
    """A finite array: units per resource class, and what loading a region's configuration costs."""

    compute: int
    memory: int
    reconfig_cycles: int = 0
    max_lanes: int = 16  # the most lanes the planner gives one region (fuseflow/planning/lanes.py)
    max_block: int = 16  # the largest b x b blocks the planner gives one region (1: none)

    def capacity(self, resource: str) -> int:
        """Units of one resource class (`compute` or `memory`)."""
        return int(getattr(self, resource))


@dataclass(frozen=True)
class Arch:
    """A validated architecture: `settings` is what the C++ graph is built from; `fabric` (None:
    unbounded) is what regions share (fuseflow/fabric), which the C++ graph of one region never sees."""

    name: str = "comal"
    settings: dict = field(default_factory=lambda: {"fifo_depth": UNBOUNDED})
    max_cycles: int = 1_000_000_000
    fabric: Fabric | None = None

    @property
    def memory_model(self) -> bool:
        """Whether off-chip memory is modelled (regions running together then share its channels)."""
        return "memory" in self.settings

    @property
    def fifo_depth(self) -> int:
        """Every FIFO's depth in tokens (unbounded by default)."""
        return int(self.settings.get("fifo_depth", UNBOUNDED))

    @staticmethod
    def resolve(arch: str | Path | Mapping[str, Any] | Arch | None) -> Arch:
        """An arch from a preset name, a TOML file, a dict or an Arch (None: comal)."""
        if arch is None:
            arch = "comal"
        if isinstance(arch, Arch):
            return arch
        if isinstance(arch, Mapping):
            return Arch.from_dict(dict(arch), "dict")
        text_name = str(arch)
        if text_name in PRESETS:
            return _preset(text_name)
        path = Path(text_name)
        if not path.exists():
            raise FuseflowError(
                f"unknown architecture {text_name!r}: not a preset ({', '.join(PRESETS)}) or an existing TOML file"
            )
        try:
            return Arch.from_dict(tomllib.loads(path.read_text()), str(path))
        except tomllib.TOMLDecodeError as e:
            raise FuseflowError(f"{path}: invalid TOML: {e}") from None

    @staticmethod
    def from_dict(d: dict, name: str) -> Arch:
        """An arch from a TOML-shaped dict (`[arch]` table, optionally `preset = ...`)."""
        d = dict(d.get("arch", d))
        if "preset" in d:
            base = d.pop("preset")
            if base not in PRESETS:
                raise FuseflowError(f"architecture {name}: preset {base!r} is not one of {', '.join(PRESETS)}")
            d = _merged(_preset_table(base), d)
        settings: dict[str, Any] = {"fifo_depth": UNBOUNDED}
        max_cycles = 1_000_000_000
        fabric = _fabric(d.pop("fabric"), name) if "fabric" in d else None
        for k, v in d.items():
            if k in INT_KEYS:
                settings[k] = _positive(v, f"architecture {name}: {k}")
            elif k in BOOL_KEYS:
                if not isinstance(v, bool):
                    raise FuseflowError(f"architecture {name}: {k} must be true or false, got {v!r}")
                settings[k] = v
            elif k == "kinds":
                settings["kinds"] = {}
                for kind, kv in dict(v).items():
                    if kind not in KINDS:
                        raise FuseflowError(f"architecture {name}: unknown primitive kind {kind!r} in [arch.kinds]")
                    bad = set(kv) - KIND_KEYS
                    if bad:
                        raise FuseflowError(f"architecture {name}: kinds.{kind}: unknown setting {sorted(bad)[0]!r}")
                    settings["kinds"][kind] = {
                        x: _positive(y, f"architecture {name}: kinds.{kind}.{x}") for x, y in kv.items()
                    }
            elif k == "memory":
                bad = set(v) - MEMORY_KEYS
                if bad:
                    raise FuseflowError(
                        f"architecture {name}: memory: unknown setting {sorted(bad)[0]!r}; "
                        f"known: {', '.join(sorted(MEMORY_KEYS))}"
                    )
                types = ARCH_KEYS["memory"]
                mem = {
                    x: (
                        bool(y)
                        if types[x] == "bool"
                        else _positive(y, f"architecture {name}: memory.{x}", zero=types[x] == "uint")
                    )
                    for x, y in v.items()
                }
                if mem.get("enabled", True):
                    settings["memory"] = mem
            else:
                known = sorted([*ARCH_KEYS["arch"], "fabric"])
                raise FuseflowError(f"architecture {name}: unknown setting {k!r}; known: {', '.join(known)}")
        if "max_cycles" in settings:
            max_cycles = settings.pop("max_cycles")
        return Arch(name, settings, max_cycles, fabric)


def _fabric(v: Any, name: str) -> Fabric:
    if not isinstance(v, Mapping):
        raise FuseflowError(f"architecture {name}: fabric must be a table of {', '.join(FABRIC_KEYS)}")
    bad = set(v) - set(FABRIC_KEYS)
    if bad:
        raise FuseflowError(
            f"architecture {name}: fabric: unknown setting {sorted(bad)[0]!r}; known: {', '.join(FABRIC_KEYS)}"
        )
    missing = [k for k in RESOURCES if k not in v]
    if missing:
        raise FuseflowError(f"architecture {name}: fabric: {missing[0]} (a unit count) is missing")
    return Fabric(
        compute=_positive(v["compute"], f"architecture {name}: fabric.compute"),
        memory=_positive(v["memory"], f"architecture {name}: fabric.memory"),
        reconfig_cycles=_positive(
            v.get("reconfig_cycles", 0), f"architecture {name}: fabric.reconfig_cycles", zero=True
        ),
        max_lanes=_positive(v.get("max_lanes", 16), f"architecture {name}: fabric.max_lanes"),
        max_block=_positive(v.get("max_block", 16), f"architecture {name}: fabric.max_block"),
    )


@functools.cache
def _preset(name: str) -> Arch:
    """A shipped preset, read once per process (a simulate call on a small kernel took ~0.4 ms to
    re-read and re-validate its TOML). Arch is frozen; its settings dict is only read."""
    return Arch.from_dict(_preset_table(name), name)


def _preset_table(name: str) -> dict:
    data = resources.files("fuseflow").joinpath("configs", f"{name}.toml").read_text()
    return dict(tomllib.loads(data)["arch"])


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _positive(v: Any, what: str, zero: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < (0 if zero else 1):
        raise FuseflowError(f"{what} must be a {'non-negative' if zero else 'positive'} integer, got {v!r}")
    return v
