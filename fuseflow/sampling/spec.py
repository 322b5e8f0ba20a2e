"""What a sampled simulation is asked for: a relative half-width at a confidence, and how units
are sized (docs/sampling.md)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from fuseflow.errors import FuseflowError


@dataclass(frozen=True)
class SampleSpec:
    """A sampled run's target and unit sizing.

    `error`/`confidence`: each sampled region's interval is asked to be within ``±error`` of its
    estimate at `confidence` (units are added until it is, or every unit has run; ``error=0``
    runs every unit, which measures what the estimator leaves: its bias).
    `unit_cycles`: the cycle model's cycles per unit; a unit's warm-up (the unit before it) must
    outlast the pipeline's memory of earlier rows, so units are not made smaller than this.
    `min_units`: a region with fewer units than this runs whole (sampling would not save time).
    `max_units`: the most units a region is cut into. `seed`: the draw's random seed.
    """

    error: float = 0.02
    confidence: float = 0.95
    unit_cycles: float = 100_000.0
    min_units: int = 40
    max_units: int = 4000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.error < 1:
            raise FuseflowError(f"sample error must be a fraction in [0, 1), not {self.error}")
        if not 0 < self.confidence < 1:
            raise FuseflowError(f"sample confidence must be in (0, 1), not {self.confidence}")
        if self.min_units < 3 or self.max_units < self.min_units:
            raise FuseflowError(
                f"sample units: min_units ({self.min_units}) must be at least 3 and at most max_units "
                f"({self.max_units})"
            )
        if self.unit_cycles < 0:
            raise FuseflowError(f"sample unit_cycles must be >= 0, not {self.unit_cycles}")

    def describe(self) -> str:
        """``±2% at 95%``."""
        return f"±{self.error * 100:.3g}% at {self.confidence * 100:.3g}%"

    @staticmethod
    def of(value: Any) -> SampleSpec | None:
        """`simulate(sample=)`'s argument: None/False (no sampling), True (the default target), a
        dict of fields, a `SampleSpec`, or text ``"2%"``, ``"1%@99%"``, ``"0.01@0.99"``."""
        if value is None or value is False:
            return None
        if value is True:
            return SampleSpec()
        if isinstance(value, SampleSpec):
            return value
        if isinstance(value, dict):
            known = {f.name for f in fields(SampleSpec)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise FuseflowError(f"unknown sample option(s) {unknown}; known: {sorted(known)}")
            return replace(SampleSpec(), **value)
        if isinstance(value, str):
            return parse(value)
        raise FuseflowError(f"sample= takes True, a dict, a SampleSpec or 'ERROR[@CONFIDENCE]', not {value!r}")


def parse(text: str) -> SampleSpec:
    """``ERROR[@CONFIDENCE]``, each a fraction or a percentage: ``2%``, ``1%@99%``, ``0.05@0.9``."""
    head, _, tail = text.strip().partition("@")
    try:
        error = _fraction(head) if head else SampleSpec.error
        confidence = _fraction(tail) if tail else SampleSpec.confidence
    except ValueError:
        raise FuseflowError(f"--sample {text!r}: expected ERROR[@CONFIDENCE], e.g. 2% or 1%@99%") from None
    return SampleSpec(error=error, confidence=confidence)


def _fraction(text: str) -> float:
    text = text.strip()
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)
