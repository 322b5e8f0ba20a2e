"""A design-space description: schedules x orders x lanes x block sizes x architectures.

From TOML (``fuseflow dse MODEL --space space.toml``)::

    [dse]
    schedule = ["unfused", "layer", "full"]   # names, auto, or schedule files
    order = ["auto"]                          # auto | plain | K | i,k,j
    par = ["", "i:2"]                         # sam-parallelize level:factor ("" = none)
    block = [0, 16]                           # block size (0 = none)
    arch = ["comal"]                          # presets or TOML files
    strategy = ["sequential", "concurrent"]   # how regions share the fabric (or FILE.py:Class)
    prune = false                             # simulate only points the estimate does not dominate
    [dse.arch_params]                         # [arch] keys swept over every arch above
    fifo_depth = [16, 10240000]

or from command-line lists (``--schedule unfused,layer``), which override the file.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fuseflow.errors import FuseflowError
from fuseflow.passes import PassStep, step
from fuseflow.sim.arch import Arch

AXES = ("schedule", "order", "par", "block", "arch", "strategy", "sample")


@dataclass(frozen=True)
class Point:
    """One configuration of the sweep."""

    schedule: str = "unfused"
    order: str = "auto"
    par: str = ""
    block: int = 0
    arch: str = "comal"
    arch_params: tuple[tuple[str, Any], ...] = ()
    strategy: str = "sequential"
    sample: str = ""  # sampled simulation's target (``2%@95%``); empty: simulated exactly

    def passes(self) -> list[PassStep]:
        """The fuseflow passes this point adds after partitioning."""
        out = []
        if self.block:
            out.append(step("block", size=self.block))
        if self.par:
            level, factor = self.par.rsplit(":", 1)
            out.append(step("sam-parallelize", level=level, factor=int(factor)))
        return out

    def arch_spec(self) -> Any:
        """What `simulate(arch=)` takes: the preset/file, or it with the swept keys overridden."""
        if not self.arch_params:
            return self.arch

        base = Arch.resolve(self.arch)
        settings = {**base.settings, "max_cycles": base.max_cycles, **dict(self.arch_params)}
        if base.fabric is not None:  # the swept keys leave the array as it was
            settings["fabric"] = asdict(base.fabric)
        return {"arch": settings}

    def as_dict(self) -> dict[str, Any]:
        """The point as a JSON row's fields."""
        d = asdict(self)
        d["arch_params"] = dict(self.arch_params)
        if not self.sample:  # exact points keep the rows (and cache keys) they always had
            d.pop("sample")
        return d


@dataclass
class Space:
    """A design space: the swept axes and architecture parameters, and whether to prune."""

    axes: dict[str, list[Any]] = field(
        default_factory=lambda: {
            "schedule": ["unfused"],
            "order": ["auto"],
            "par": [""],
            "block": [0],
            "arch": ["comal"],
            "strategy": ["sequential"],
            "sample": [""],
        }
    )
    arch_params: dict[str, list[Any]] = field(default_factory=dict)
    prune: bool = False

    def points(self) -> list[Point]:
        """Every design point of the space (the product of its axes and architecture parameters)."""
        keys = sorted(self.arch_params)
        params = [tuple(zip(keys, combo)) for combo in itertools.product(*(self.arch_params[k] for k in keys))]
        out = []
        for s, o, p, b, a, st, sm in itertools.product(*(self.axes[k] for k in AXES)):
            for ap in params or [()]:
                out.append(Point(str(s), str(o), str(p), int(b), str(a), ap, str(st), str(sm)))
        return out

    @property
    def size(self) -> int:
        """How many points the space has."""
        return len(self.points())


def load_space(path: str | None, overrides: dict[str, list[Any]] | None = None, prune: bool | None = None) -> Space:
    """A `Space` from a TOML file (optional) with command-line axis lists on top."""
    space = Space()
    if path:
        try:
            data = tomllib.loads(Path(path).read_text())
        except OSError as e:
            raise FuseflowError(f"cannot read space {path}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise FuseflowError(f"{path}: invalid TOML: {e}") from None
        d = data.get("dse", data)
        unknown = set(d) - set(AXES) - {"arch_params", "prune"}
        if unknown:
            raise FuseflowError(
                f"{path}: unknown [dse] key {sorted(unknown)[0]!r}; known: {', '.join(AXES)}, arch_params, prune"
            )
        for k in AXES:
            if k in d:
                space.axes[k] = _as_list(d[k], f"{path}: {k}")
        space.arch_params = {k: _as_list(v, f"{path}: arch_params.{k}") for k, v in d.get("arch_params", {}).items()}
        space.prune = bool(d.get("prune", False))
    for k, v in (overrides or {}).items():
        if v:
            if k in AXES:
                space.axes[k] = v
            else:
                space.arch_params[k] = v
    if prune is not None:
        space.prune = prune
    for k in AXES:
        if not space.axes[k]:
            raise FuseflowError(f"dse: axis {k!r} has no values")
    return space


def _as_list(v: Any, what: str) -> list[Any]:
    if isinstance(v, list):
        return v
    if isinstance(v, (str, int, float, bool)):
        return [v]
    raise FuseflowError(f"{what}: expected a value or a list, got {type(v).__name__}")
