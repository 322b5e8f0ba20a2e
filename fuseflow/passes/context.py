"""What a pipeline run knows beyond the IR, shared by its passes (`run_pipeline`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fuseflow.analysis.index_notation import Assign
from fuseflow.conversion.lower_module import LoweredModule
from fuseflow.dialects.sam_ir import SamGraph
from fuseflow.mlir import ir
from fuseflow.schedule.rules import Schedule
from fuseflow.search.ordering import Candidate
from fuseflow.search.rank import OrderRanker


@dataclass(frozen=True)
class KeptLowering:
    """The lowering ``fuseflow-order`` made of `module` while ranking, kept so that
    ``lower-to-sam`` right after takes it instead of lowering again."""

    module: ir.Module
    lowered: LoweredModule


@dataclass
class PassContext:
    """Inputs a caller may give passes, and what they leave for the caller.

    `fuseflow-opt` runs with an empty context: everything then comes from the IR (orders are
    ranked from recorded densities). `fuseflow.compile` fills the inputs from the model.
    """

    # given by the caller
    schedule: Schedule | None = None  # for fuseflow-partition{schedule=custom}
    containers: set[str] | None = None  # module paths that are containers (the layer schedule)
    module_classes: dict[str, str] | None = None  # module path -> class name (rules by module class)
    ranker: OrderRanker | None = None  # bound to example inputs (fuseflow-order{order=auto})
    order: Mapping[str, str] | None = None  # a per-region order mapping, which pass options cannot spell
    node_budget: int = 100_000  # the budget fuseflow-order lowers with (lower-to-sam reuses that lowering)
    regions_assigned: bool = False  # the caller annotated the regions already: fuseflow-partition keeps them
    lowering_cache: dict | None = None  # region lowerings shared across compiles, by structure (the planner's)
    # left by the passes
    summary: dict[str, list[str]] = field(default_factory=dict)  # region -> expressions and notes
    chosen: dict[str, Candidate] = field(default_factory=dict)  # region -> the chosen order
    assigns: dict[str, list[Assign]] = field(default_factory=dict)  # region -> its outputs in index notation
    # `run_pipeline` drops it when any other pass runs before lower-to-sam
    lowered: KeptLowering | None = None
    typed: list[SamGraph] | None = None  # the typed graphs of the module lower-to-sam returned
