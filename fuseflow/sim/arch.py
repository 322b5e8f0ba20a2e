"""Architecture parameters for a simulation: presets, TOML files or dicts (DESIGN §6, §11).

A TOML file has an ``[arch]`` table::

    [arch]
    fifo_depth = 8            # tokens per edge (10240000 = effectively unbounded)
    latency = 1               # cycles from a node's action to its outputs' visibility
    ii = 1                    # cycles between two actions of one node
    scan_emit_on_pop = false  # scanner emits a fiber's first coordinate the cycle it pops the ref
    reduce_split_stop = false # reduce spends a second cycle on a stop above S0
    max_cycles = 1000000000   # the run fails (never hangs) past this
    max_fifo_mib = 8192       # the run fails (never exhausts memory) when queued tokens pass this
    max_seconds = 3600        # the run fails past this much wall-clock time (default: no limit)
    [arch.kinds.alu]          # per primitive kind (sam op mnemonic): latency, ii
    latency = 3
    [arch.memory]             # off-chip memory model, off unless this table is present
    channels = 4
    bytes_per_request = 64
    latency = 80
    ii = 1
    startup = 0
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
import functools
from typing import Any, Mapping

from fuseflow.errors import FuseflowError
from fuseflow.primitives import ARCH_KEYS, KINDS  # the simulator's tables (fork and join included)

UNBOUNDED = 10_240_000
PRESETS = ("comal", "sam", "rda")
INT_KEYS = {k for k, t in ARCH_KEYS["arch"].items() if t == "int"}
BOOL_KEYS = {k for k, t in ARCH_KEYS["arch"].items() if t == "bool"}
KIND_KEYS = set(ARCH_KEYS["kinds"])
MEMORY_KEYS = set(ARCH_KEYS["memory"])


@dataclass(frozen=True)
class Arch:
    """A validated architecture: `settings` is what the C++ graph is built from."""

    name: str = "comal"
    settings: dict = field(default_factory=lambda: {"fifo_depth": UNBOUNDED})
    max_cycles: int = 1_000_000_000

    @property
    def fifo_depth(self) -> int:
        return int(self.settings.get("fifo_depth", UNBOUNDED))

    @staticmethod
    def resolve(arch: "str | Path | Mapping[str, Any] | Arch | None") -> "Arch":
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
    def from_dict(d: dict, name: str) -> "Arch":
        d = dict(d.get("arch", d))
        settings: dict[str, Any] = {"fifo_depth": UNBOUNDED}
        max_cycles = 1_000_000_000
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
                known = sorted(ARCH_KEYS["arch"])
                raise FuseflowError(f"architecture {name}: unknown setting {k!r}; known: {', '.join(known)}")
        if "max_cycles" in settings:
            max_cycles = settings.pop("max_cycles")
        return Arch(name, settings, max_cycles)


@functools.lru_cache(maxsize=None)
def _preset(name: str) -> Arch:
    """A shipped preset, read once per process (a simulate call on a small kernel took ~0.4 ms to
    re-read and re-validate its TOML). Arch is frozen; its settings dict is only read."""
    data = resources.files("fuseflow").joinpath("configs", f"{name}.toml").read_text()
    return Arch.from_dict(tomllib.loads(data), name)


def _positive(v: Any, what: str, zero: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < (0 if zero else 1):
        raise FuseflowError(f"{what} must be a {'non-negative' if zero else 'positive'} integer, got {v!r}")
    return v
