"""``fuseflow-opt``: mlir-opt conventions over fuseflow's passes and upstream MLIR passes."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from fuseflow.dialects.sam import new_context
from fuseflow.errors import FuseflowError
from fuseflow.mlir import MLIRError, ir
from fuseflow.passes import PASSES, PassStep, parse_pipeline, run_pipeline


@dataclass
class Diag:
    """One diagnostic: its line in the input chunk (when known) and its message."""

    line: int | None
    message: str


def _diags(e: Exception) -> list[Diag]:
    if isinstance(e, MLIRError):
        out = []
        for d in e.error_diagnostics:
            m = re.search(r":(\d+):\d+", str(d.location))
            out.append(Diag(int(m.group(1)) if m else None, d.message))
        return out or [Diag(None, str(e))]
    if isinstance(e, FuseflowError):
        m = re.search(r":(\d+):\d+$", e.location or "")
        return [Diag(int(m.group(1)) if m else None, e.message)]
    raise e


def expected_diags(chunk: str) -> list[Diag]:
    """The ``expected-error`` annotations of a chunk, as mlir-opt's --verify-diagnostics reads them."""
    out = []
    for i, line in enumerate(chunk.splitlines(), start=1):
        for m in re.finditer(r"expected-error\s*(@[+-]\d+)?\s*\{\{(.*?)\}\}", line):
            off = int(m.group(1)[1:]) if m.group(1) else 0
            out.append(Diag(i + off, m.group(2)))
    return out


def process(chunk: str, steps: list[PassStep], print_after_all: bool) -> ir.Module:
    """Parse one chunk in a fresh context and run the pipeline over it."""
    with new_context() as ctx:
        module = ir.Module.parse(chunk, context=ctx)
        return run_pipeline(module, steps, print_after_all=print_after_all)


def parser() -> argparse.ArgumentParser:
    """fuseflow-opt's argument parser; its help lists every fuseflow pass with its options."""
    lines = [
        f"  --{p.name}"
        + ("{" + " ".join(f"{f.name.replace('_', '-')}={f.default}" for f in fields(p.options)) + "}")
        + f"\n      {p.summary}"
        for p in PASSES.values()
    ]
    p = argparse.ArgumentParser(
        prog="fuseflow-opt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run fuseflow and upstream MLIR passes over a .mlir file (mlir-opt conventions).",
        epilog="fuseflow passes (use in --pass-pipeline or as --NAME[=OPTIONS]):\n"
        + "\n".join(lines)
        + "\n\nAny other pass name is handed to MLIR's PassManager (e.g. canonicalize, cse).",
    )
    p.add_argument("input", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    p.add_argument("--pass-pipeline", default="", help="e.g. 'builtin.module(fuseflow-partition,lower-to-sam)'")
    p.add_argument("--split-input-file", action="store_true", help="process chunks separated by // -----")
    p.add_argument("--verify-diagnostics", action="store_true", help="check expected-error annotations")
    p.add_argument("--mlir-print-ir-after-all", action="store_true")
    p.add_argument("--emit-irdl", action="store_true", help="print the sam dialect's IRDL and exit")
    for name in PASSES:
        p.add_argument(
            f"--{name}", nargs="?", const="", default=None, metavar="OPTIONS", help=f"append {name} to the pipeline"
        )
    return p


def main(argv: list[str] | None = None) -> int:
    """The ``fuseflow-opt`` command (mlir-opt conventions)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # mlir-opt spells pass options as --name=opts or --name='{a=1}'; a bare --name takes none
    # (argparse would otherwise read the input file that follows as its options)
    argv = [f"{tok}=" if tok[2:] in PASSES and tok.startswith("--") else tok for tok in argv]
    args = parser().parse_args(argv)
    if args.emit_irdl:
        from fuseflow.dialects.sam import (  # lazily: the CLI starts without loading what a command does not use
            irdl_text,  # lazily: the CLI starts without loading what a command does not use
        )

        sys.stdout.write(irdl_text())
        return 0
    elements = [args.pass_pipeline] if args.pass_pipeline else []
    for tok in argv:  # shorthand pass flags, in command-line order
        m = re.fullmatch(r"--([\w-]+)(?:=(.*))?", tok)
        if m and m.group(1) in PASSES:
            opts = (m.group(2) or "").strip().strip("{}")
            elements.append(m.group(1) + (f"{{{opts}}}" if opts else ""))
    try:  # the one place pipeline text is read (compile() builds its steps)
        steps = [s for el in elements for s in parse_pipeline(el)]
    except FuseflowError as e:
        print(f"fuseflow-opt: error: {e}", file=sys.stderr)
        return 1
    try:
        text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text()
    except OSError as e:
        print(f"fuseflow-opt: cannot read {args.input}: {e.strerror}", file=sys.stderr)
        return 1
    fname = "<stdin>" if args.input == "-" else args.input
    chunks = re.split(r"^// -----\s*$", text, flags=re.M) if args.split_input_file else [text]
    outputs, failed, offset = [], False, 0
    for chunk in chunks:
        try:
            mod = process(chunk, steps, args.mlir_print_ir_after_all)
            got: list[Diag] = []
            outputs.append(str(mod))
        except (MLIRError, FuseflowError) as e:
            got = _diags(e)
        if args.verify_diagnostics:
            want = expected_diags(chunk)
            for w in want:
                if not any(g.line == w.line and w.message in g.message for g in got):
                    print(
                        f'{fname}:{(w.line or 0) + offset}: error: expected error "{w.message}" was not produced'
                        + (f"; got: {'; '.join(g.message for g in got)}" if got else ""),
                        file=sys.stderr,
                    )
                    failed = True
            for g in got:
                if not any(g.line == w.line and w.message in g.message for w in want):
                    print(f"{fname}:{(g.line or 0) + offset}: error: unexpected error: {g.message}", file=sys.stderr)
                    failed = True
        elif got:
            for g in got:
                where = f"{fname}:{g.line + offset}" if g.line else fname
                print(f"{where}: error: {g.message}", file=sys.stderr)
            failed = True
        offset += chunk.count("\n") + 1
    if args.verify_diagnostics:
        return 1 if failed else 0
    out = "\n// -----\n".join(outputs)
    if args.output == "-":
        sys.stdout.write(out)
    else:
        Path(args.output).write_text(out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
