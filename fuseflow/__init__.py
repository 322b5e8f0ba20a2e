"""fuseflow: sparse PyTorch models → fused sparse streaming-dataflow graphs → cycle-level simulation."""

from fuseflow.compiler import compile, plan
from fuseflow.errors import (
    EagerError,
    FormatError,
    FuseflowError,
    MismatchError,
    SimulationError,
    UnsupportedError,
    VerificationError,
)
from fuseflow.fabric.split import SplitInfo, SplitPlan, split_nnz, split_rows
from fuseflow.fabric.strategy import Context, RegionTask, Strategy
from fuseflow.program import Program
from fuseflow.results import SimResult
from fuseflow.schedule.rules import Match, Rule, Schedule

__all__ = [
    "compile",
    "plan",
    "Program",
    "SimResult",
    "Schedule",
    "Rule",
    "Match",
    "Strategy",
    "Context",
    "RegionTask",
    "SplitInfo",
    "SplitPlan",
    "split_nnz",
    "split_rows",
    "FuseflowError",
    "FormatError",
    "UnsupportedError",
    "VerificationError",
    "SimulationError",
    "MismatchError",
    "EagerError",
]
from fuseflow.version import __version__ as __version__  # noqa: E402
