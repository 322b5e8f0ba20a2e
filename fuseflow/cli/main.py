"""The ``fuseflow`` command: compile, simulate and run sparse models."""

from __future__ import annotations

import argparse
import os
import sys

from fuseflow.cli import files, planning, runs
from fuseflow.errors import FuseflowError
from fuseflow.version import __version__

COMMANDS = (
    files.register_ops,
    runs.register_run,
    runs.register_resume,
    planning.register_dse,
    planning.register_plan,
    planning.register_estimate,
    runs.register_study,
    runs.register_order_sweep,
    files.register_report,
    files.register_compile,
    files.register_simulate,
)
"""Each command registers its own flags, next to its handler (in help order)."""


def parser() -> argparse.ArgumentParser:
    """The ``fuseflow`` argument parser: global flags, then every command's."""
    p = argparse.ArgumentParser(prog="fuseflow", description=__doc__)
    p.add_argument("--verbose", action="store_true", help="show torch-mlir's own diagnostics on stderr")
    p.add_argument("--version", action="version", version=f"fuseflow {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for register in COMMANDS:
        register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """The ``fuseflow`` command: a user error prints one line and exits 1."""
    os.environ.setdefault("TMPDIR", os.path.join(os.getcwd(), "build", "tmp"))
    os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    a = parser().parse_args(argv)
    if a.verbose:
        os.environ["FUSEFLOW_VERBOSE"] = "1"  # torch-mlir's own diagnostics go to stderr
    import warnings

    def one_line(message, category, filename, lineno, file=None, line=None):
        print(f"fuseflow: warning: {message}", file=sys.stderr)

    warnings.showwarning = one_line
    # torch's own notices about its sparse support and dependencies' deprecations are not the user's business
    warnings.filterwarnings("ignore", message=r"Sparse (CSR|BSR|BSC) tensor support is in beta state")
    warnings.filterwarnings("ignore", message=r"Sparse invariant checks are implicitly disabled")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        return a.fn(a)
    except FuseflowError as e:
        print(f"fuseflow: {e}" if not e.location else str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
