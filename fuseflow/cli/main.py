"""The ``fuseflow`` command: compile, simulate and run sparse models."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from fuseflow.cli import files, planning, runs
from fuseflow.errors import FuseflowError
from fuseflow.version import __version__


def cmd_resume(a) -> int:
    """``fuseflow resume DIR``: the command that wrote checkpoint DIR, run again from where it stopped."""
    saved = Path(a.directory) / runs.COMMAND_FILE
    if not saved.exists():
        raise FuseflowError(f"{a.directory} holds no command to resume (run ... --checkpoint DIR writes one)")
    command = json.loads(saved.read_text())
    if Path.cwd() != Path(command["cwd"]):
        os.chdir(command["cwd"])  # its model file and paths are relative to where it ran
    return main(command["argv"])


def register_resume(sub) -> None:
    """``fuseflow resume DIR``."""
    r = sub.add_parser("resume", help="continue a checkpointed run (run ... --checkpoint DIR) where it stopped")
    r.add_argument("directory", metavar="DIR", help="the run's checkpoint directory")
    r.set_defaults(fn=cmd_resume)


COMMANDS = (
    files.register_ops,
    runs.register_run,
    register_resume,
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
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parser().parse_args(argv)
    a.argv = argv  # the command as parsed: a checkpointed run keeps it for `fuseflow resume`
    if a.verbose:
        os.environ["FUSEFLOW_VERBOSE"] = "1"  # torch-mlir's own diagnostics go to stderr
    import warnings  # lazily: the CLI starts without loading what a command does not use

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
