"""Model files: a Python file whose ``build(**options)`` returns (model, example_args, formats).

Loaded by the CLI and by sweep workers (`fuseflow.experiments`); an exception in the file's own code is
one located line (`FuseflowError`), not a traceback.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from fuseflow.errors import FuseflowError, user_location


def load_python_file(path: str, name: str | None = None):
    """Execute a user's Python file as module `name` (default: its stem); its own errors are one
    located line."""
    p = Path(path)
    if not p.exists():
        raise FuseflowError(f"{path}: no such file")
    sys.path.insert(0, str(p.parent.resolve()))
    spec = importlib.util.spec_from_file_location(name or p.stem, p)
    if spec is None or spec.loader is None:
        raise FuseflowError(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise _user_error(e, path) from None
    return mod


def example(name: str, directory: str | Path):
    """Model file `name` (``name.py``) of `directory`, loaded once per process: how benchmarks
    and scripts use a folder of model files (the repository's ``examples/``) without putting
    it on ``sys.path`` themselves (a model file still imports its siblings: `load_python_file`)."""
    mod = python_file(name, directory)
    if not hasattr(mod, "build"):
        raise FuseflowError(f"{mod.__file__}: defines no build(**options) -> (model, example_args, formats)")
    return mod


def python_file(name: str, directory: str | Path):
    """Python file `name` (``name.py``) of `directory`, loaded once per process (a benchmark
    uses another benchmark's functions this way, wherever it is run from)."""
    path = (Path(directory) / f"{name}.py").resolve()
    have = sys.modules.get(name)
    if have is not None and Path(getattr(have, "__file__", "") or "").resolve() == path:
        return have
    return load_python_file(str(path))


def load_module(path: str):
    """A model file: a Python file defining build(**options)."""
    mod = load_python_file(path)
    if not hasattr(mod, "build"):
        raise FuseflowError(f"{path}: defines no build(**options) -> (model, example_args, formats)")
    return mod


def build_from_file(path: str, options: dict[str, Any]) -> tuple:
    """The model file's module and what its build(**options) returns."""
    mod = load_module(path)
    try:
        return mod, mod.build(**options)
    except FuseflowError:
        raise
    except TypeError as e:
        if user_location(e.__traceback__) is None:  # the call itself: build() takes other options
            raise FuseflowError(f"{path}: build() rejected the options: {e}") from None
        raise _user_error(e, path) from None
    except Exception as e:  # the model file's own code failed
        raise _user_error(e, path) from None


def _user_error(e: Exception, path: str) -> FuseflowError:
    """One located line for an exception raised by a model file's code."""
    first = (str(e).strip().splitlines() or [""])[0]
    return FuseflowError(f"{type(e).__name__}: {first}", user_location(e.__traceback__) or path)
