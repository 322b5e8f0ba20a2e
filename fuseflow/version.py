"""The package version (one place: pyproject.toml declares the same)."""

__version__ = "0.3.0"
