"""Fusion schedules: which ops form a region (`Schedule`, the built-ins), the op listing a
schedule names, and region assignment on the linalg module (`regions.py`)."""

from fuseflow.schedule.regions import OpInfo, Schedule, assign_regions, op_listing

__all__ = ["OpInfo", "Schedule", "assign_regions", "op_listing"]
