"""The exceptions fuseflow raises for user-facing problems.

Every error a user can cause derives from :class:`FuseflowError`, so the CLI can print one
readable line (``file:line:col: error: ...`` when a source location is known) and exit non-zero.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from types import TracebackType


class FuseflowError(Exception):
    """Base class of fuseflow's user-facing errors; `location` is ``file:line:col`` or ``None``."""

    def __init__(self, message: str, location: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: error: {self.message}" if self.location else self.message


class FormatError(FuseflowError):
    """An unknown or inconsistent sparse format specification."""


class UnsupportedError(FuseflowError):
    """Input the compiler cannot lower (an op, a pattern, an index map)."""


class DiscordantError(UnsupportedError):
    """A tensor would be traversed against its storage order; `wanted` is the order that works."""

    def __init__(self, message: str, location: str | None, tensor: str, wanted: tuple[int, ...], use: int = 0):
        super().__init__(message, location)
        self.tensor = tensor
        self.wanted = wanted
        self.use = use


class VerificationError(FuseflowError):
    """Malformed IR: a parse failure or a verifier diagnostic."""


class SimulationError(FuseflowError):
    """The simulator stopped: deadlock, cycle limit or a stream protocol violation; `region`
    names the graph that stopped, when one did."""

    def __init__(self, message: str, location: str | None = None, region: str | None = None):
        super().__init__(message, location)
        self.region = region


class MismatchError(FuseflowError):
    """Simulated outputs differ from eager PyTorch beyond the stated tolerance."""


class EagerError(UnsupportedError):
    """The model fails in eager PyTorch on the given inputs: nothing to compare with."""


_LIBRARY_ROOTS = ("site-packages", "dist-packages", "/fuseflow/", "<frozen", "<string>")


def user_location(tb: TracebackType | None) -> str | None:
    """``file:line:0`` of the innermost frame of a traceback in the user's code (not torch's,
    numpy's or fuseflow's own), so an error in a model can be reported at the line that raised it."""
    here = str(Path(__file__).resolve().parent)
    for frame in reversed(traceback.extract_tb(tb)):
        name = frame.filename
        if name.startswith(here) or any(root in name for root in _LIBRARY_ROOTS):
            continue
        return f"{name}:{frame.lineno}:0"
    return None
