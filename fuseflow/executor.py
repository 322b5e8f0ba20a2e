"""Where work runs: a local process pool (default) or Ray, behind one interface.

`Executor.run(fn, tasks)` calls a module-level `fn(*task)` for every task and yields
``(index, result)`` as they finish. `Program.simulate(jobs=)` maps regions, pieces and sampled
units with it, and sweeps map design points (`experiments/evaluate.py`); results do not depend
on the executor (tests compare local and Ray runs row by row, wall time aside). It knows nothing
of what it runs: the API and the experiments above it both use it.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from fuseflow.errors import FuseflowError


class Executor:
    """Runs tasks somewhere (this process, a pool, Ray) and yields (task index, result) as they finish."""

    name = "base"

    def run(self, fn: Callable[..., Any], tasks: Sequence[tuple]) -> Iterator[tuple[int, Any]]:  # pragma: no cover
        """Yield ``(i, fn(*tasks[i]))`` for every task, in completion order."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the executor's workers."""
        pass


class LocalExecutor(Executor):
    """A pool of `jobs` worker processes (spawned: each imports torch and MLIR afresh, safely)."""

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = max(1, jobs or os.cpu_count() or 1)

    def run(self, fn: Callable[..., Any], tasks: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """Yield ``(i, fn(*tasks[i]))``; one job (or one task) runs in this process."""
        if not tasks:
            return
        if self.jobs == 1 or len(tasks) == 1:  # no pool: the same function in this process
            for i, t in enumerate(tasks):
                yield i, fn(*t)
            return
        ctx = multiprocessing.get_context("spawn")
        try:
            with ProcessPoolExecutor(max_workers=min(self.jobs, len(tasks)), mp_context=ctx) as pool:
                pending = {pool.submit(fn, *t): i for i, t in enumerate(tasks)}
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        yield pending.pop(f), f.result()
        except BrokenProcessPool:
            raise FuseflowError(
                "a worker process died (out of memory, or a script that starts workers without an "
                "`if __name__ == '__main__':` guard: spawned workers re-import the main script)"
            ) from None


class RayExecutor(Executor):
    """Ray tasks, on a cluster (`address`) or on a local Ray started in-process."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None):
        try:
            import ray  # optional extra (ray)
        except ImportError:
            raise FuseflowError("--executor ray needs Ray: pip install 'fuseflow[ray]'") from None
        self.ray = ray
        self.started = False
        if address and address != "auto":
            _reachable(address)
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address,
                    num_cpus=None if address else (jobs or os.cpu_count()),
                    include_dashboard=False,
                    log_to_driver=False,
                    ignore_reinit_error=True,
                )
            except Exception as e:  # ConnectionError, ValueError, RuntimeError, depending on the failure
                where = address or "a local Ray"
                raise FuseflowError(f"cannot reach Ray at {where}: {str(e).splitlines()[0][:200]}") from None
            self.started = True

    def run(self, fn: Callable[..., Any], tasks: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """Yield ``(i, fn(*tasks[i]))`` as Ray's remote calls finish."""
        remote = self.ray.remote(fn)
        refs = {remote.remote(*t): i for i, t in enumerate(tasks)}
        while refs:
            done, _ = self.ray.wait(list(refs), num_returns=1)
            for r in done:
                yield refs.pop(r), self.ray.get(r)

    def close(self) -> None:
        """Shut down the Ray this executor started (not one it joined)."""
        if self.started:
            self.ray.shutdown()


def _reachable(address: str, timeout: float = 3.0) -> None:
    """Fail fast (Ray itself retries for minutes) when nothing listens at a cluster address."""

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except (OSError, ValueError) as e:
        raise FuseflowError(f"cannot reach Ray at {address}: {e}") from None


def make_executor(kind: str, address: str | None = None, jobs: int | None = None) -> Executor:
    """The executor named `kind` (``local`` or ``ray``); a Ray `address` is checked before use."""
    if kind == "local":
        if address:
            raise FuseflowError("--address is for --executor ray")
        return LocalExecutor(jobs)
    if kind == "ray":
        return RayExecutor(address, jobs)
    raise FuseflowError(f"unknown executor {kind!r}; expected local or ray")
