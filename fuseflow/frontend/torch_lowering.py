"""torch dialect → linalg-on-tensors, run by torch-mlir's own ``torch-mlir-opt`` in a child process.

torch-mlir's lowering can die natively on input it does not expect (PyTorch Geometric's
``GCNConv`` with an ``edge_index`` segfaulted in-process), and it prints diagnostics and a
"reproduce with" hint to stderr. Out of process, a crash becomes a `FuseflowError` naming the
step and the signal, stderr is captured (shown with ``verbose``), and the Python process lives.
The pipelines are the ones ``torch_mlir.fx.export_and_import`` runs for ``linalg-on-tensors``.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fuseflow.errors import FuseflowError, UnsupportedError

STEPS = (
    (
        "torch-mlir: TorchFX IR -> torch backend",
        "builtin.module(func.func(torch-match-quantized-custom-ops), torchdynamo-export-to-torch-backend-pipeline)",
    ),
    (
        "torch-mlir: torch backend -> linalg-on-tensors",
        "builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline{allow-non-finites=true})",
    ),
)


def opt_binary() -> Path:
    """The native ``torch-mlir-opt`` shipped inside the pinned wheel (same MLIR as the bindings)."""
    from torch_mlir import _mlir_libs  # torch_mlir itself is a namespace package (no __file__)

    path = Path(_mlir_libs.__file__).parent / "torch-mlir-opt"
    if not path.exists():
        raise FuseflowError(f"torch-mlir-opt not found at {path}; reinstall torch-mlir")
    return path


def run_step(text: str, step: str, pipeline: str, verbose: bool = False) -> str:
    """Run one pipeline on module text in a child process; returns the lowered text."""
    proc = _run(text, pipeline)
    err = proc.stderr.decode(errors="replace")
    if (verbose or os.environ.get("FUSEFLOW_VERBOSE")) and err:
        sys.stderr.write(err)
    return _checked(proc, step, err)


def _run(text: str, pipeline: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(opt_binary()), f"--pass-pipeline={pipeline}", "--mlir-print-debuginfo", "-"],
        input=text.encode(),
        capture_output=True,
        env={**os.environ, "LLVM_DISABLE_CRASH_REPORT": "1", "LLVM_DISABLE_SYMBOLIZATION": "1"},
    )


def _checked(proc: subprocess.CompletedProcess, step: str, err: str) -> str:
    """The child's output, or the error naming `step`."""
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        raise FuseflowError(f"{step} crashed ({sig}); the model was not lowered. Rerun with --verbose for its output")
    if proc.returncode != 0:
        raise UnsupportedError(f"{step} failed: {first_error(err)}", first_location(err))
    return proc.stdout.decode()


def first_error(stderr: str) -> str:
    """The first error line of torch-mlir-opt's stderr."""
    for ln in stderr.splitlines():
        if "error:" in ln:
            return ln.split("error:", 1)[1].strip()
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return lines[0] if lines else "no diagnostic"


def first_location(stderr: str) -> str | None:
    """The source location of torch-mlir-opt's first error, if it names one."""

    for ln in stderr.splitlines():
        m = re.match(r"(.+?):(\d+):(\d+): error:", ln)
        if m and not m.group(1).startswith("<"):
            return f"{m.group(1)}:{m.group(2)}:{m.group(3)}"
    return None


def lower_to_linalg(text: str, verbose: bool = False) -> str:
    """Both steps in one child process (no intermediate module printed and parsed again); when
    that fails, one child process per step, so that the error names the step it happened in."""
    proc = _run(text, _both())
    if proc.returncode == 0:
        err = proc.stderr.decode(errors="replace")
        if (verbose or os.environ.get("FUSEFLOW_VERBOSE")) and err:
            sys.stderr.write(err)
        return proc.stdout.decode()
    for step, pipeline in STEPS:
        text = run_step(text, step, pipeline, verbose)
    return text


def lower_parts(texts: Sequence[str], unverified: Sequence[bool]) -> list[str] | None:
    """Several modules lowered at once, one child process each (run side by side): a model
    whose repeated blocks are calls, and each block. A module marked `unverified` skips the
    linalg backend contract (its calls are not linalg; they are spliced away afterwards). None
    when any fails: the caller lowers the model whole, which reports the failure as usual."""
    pipelines = [_unverified_pipeline() if u else _both() for u in unverified]
    with ThreadPoolExecutor(max_workers=min(len(texts), os.cpu_count() or 1) or 1) as pool:
        procs = list(pool.map(_run, texts, pipelines))
    if any(p.returncode != 0 for p in procs):
        return None
    return [p.stdout.decode() for p in procs]


def _both() -> str:
    return "builtin.module(" + ",".join(_inner(pipeline) for _, pipeline in STEPS) + ")"


@functools.cache
def _unverified_pipeline() -> str:
    """Both steps, spelled out by torch-mlir-opt itself, without the final contract check."""
    proc = subprocess.run(
        [str(opt_binary()), f"--pass-pipeline={_both()}", "--dump-pass-pipeline", "-o", os.devnull, "-"],
        input=b"module {}",
        capture_output=True,
    )
    dumped = proc.stderr.decode()
    start = dumped.find("builtin.module(")
    if proc.returncode != 0 or start < 0:
        raise FuseflowError(f"torch-mlir-opt did not print its pipeline: {first_error(dumped)}")
    text = " ".join(dumped[start:].split())
    verify = "torch-verify-linalg-on-tensors-backend-contract"
    if verify not in text:
        raise FuseflowError("torch-mlir's linalg pipeline no longer ends in its contract check")
    return text.replace(", " + verify, "").replace(verify, "")


def _inner(pipeline: str) -> str:
    """``builtin.module(a, b)`` -> ``a, b``."""
    return pipeline.removeprefix("builtin.module(").removesuffix(")")
