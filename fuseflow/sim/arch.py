"""Architecture parameters for a simulation: presets, TOML files or dicts (DESIGN §6, §11)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from fuseflow.errors import FuseflowError

UNBOUNDED = 10_240_000
PRESETS = ("comal", "rda")


@dataclass(frozen=True)
class Arch:
    """FIFO depth, node latency and a cycle limit; `name` says where it came from."""

    name: str = "comal"
    fifo_depth: int = UNBOUNDED
    latency: int = 1
    max_cycles: int = 1_000_000_000

    @staticmethod
    def resolve(arch: "str | Path | Mapping[str, Any] | Arch | None") -> "Arch":
        if arch is None:
            arch = "comal"
        if isinstance(arch, Arch):
            return arch
        if isinstance(arch, Mapping):
            return Arch._from_dict(dict(arch), "dict")
        text_name = str(arch)
        if text_name in PRESETS:
            data = resources.files("fuseflow").joinpath("configs", f"{text_name}.toml").read_text()
            return Arch._from_dict(tomllib.loads(data), text_name)
        path = Path(text_name)
        if not path.exists():
            raise FuseflowError(f"unknown architecture {text_name!r}: not a preset ({', '.join(PRESETS)}) "
                                "or an existing TOML file")
        try:
            return Arch._from_dict(tomllib.loads(path.read_text()), str(path))
        except tomllib.TOMLDecodeError as e:
            raise FuseflowError(f"{path}: invalid TOML: {e}") from None

    @staticmethod
    def _from_dict(d: dict, name: str) -> "Arch":
        d = dict(d.get("arch", d))
        known = {f.name for f in fields(Arch)} - {"name"}
        bad = sorted(set(d) - known)
        if bad:
            raise FuseflowError(f"architecture {name}: unknown setting {bad[0]!r}; known: {', '.join(sorted(known))}")
        for k, v in d.items():
            if not isinstance(v, int) or v < 1:
                raise FuseflowError(f"architecture {name}: {k} must be a positive integer, got {v!r}")
        return Arch(name=name, **d)
