"""Fusion schedules: which ops form a region (`Schedule`, the built-ins), the op listing a
schedule names, and region assignment on the linalg module (`regions.py`)."""

from fuseflow.schedule.regions import OpInfo, assign_regions, op_listing
from fuseflow.schedule.rules import BUILTIN, Match, Rule, Schedule, ScheduleWarning

__all__ = ["BUILTIN", "Match", "OpInfo", "Rule", "Schedule", "ScheduleWarning", "assign_regions", "op_listing"]
