"""What a pipeline run knows beyond the IR, shared by its passes (`run_pipeline`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PassContext:
    """Inputs a caller may give passes, and what they leave for the caller.

    `fuseflow-opt` runs with an empty context: everything then comes from the IR (orders are
    ranked from recorded densities). `fuseflow.compile` fills the inputs from the model.
    """

    # given by the caller
    schedule: Any = None  # a Schedule object for fuseflow-partition{schedule=custom}
    containers: set[str] | None = None  # module paths that are containers (the layer schedule)
    module_classes: dict[str, str] | None = None  # module path -> class name (rules by module class)
    ranker: Any = None  # an OrderRanker bound to example inputs (fuseflow-order{order=auto})
    order: Any = None  # a per-region order mapping, which pass options cannot spell (fuseflow-order)
    node_budget: int = 100_000  # the budget fuseflow-order lowers with (lower-to-sam reuses that lowering)
    regions_assigned: bool = False  # the caller annotated the regions already: fuseflow-partition keeps them
    # left by the passes
    summary: dict[str, list[str]] = field(default_factory=dict)  # region -> expressions and notes
    chosen: dict[str, Any] = field(default_factory=dict)  # region -> the chosen order Candidate
    assigns: dict[str, list] = field(default_factory=dict)  # region -> its outputs in index notation
    # (the module fuseflow-order lowered, sam text, summary, assigns, typed graphs, distinct
    # graphs' texts); `run_pipeline` drops it when any other pass runs before lower-to-sam
    lowered: tuple[Any, str, dict, dict, list, list] | None = None
    typed: list | None = None  # the typed graphs (SamGraph) of the module lower-to-sam returned
