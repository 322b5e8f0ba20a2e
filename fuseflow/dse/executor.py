"""Where points run: a local process pool (default) or Ray, behind one interface.

`Executor.map(tasks)` yields ``(index, row)`` as tasks finish; rows do not depend on the executor
(tests compare local and Ray runs row by row, wall time aside).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Iterator, Sequence

from fuseflow.errors import FuseflowError

Task = tuple[str, dict, Any, bool]  # (model path, build options, Point, simulate)


class Executor:
    name = "base"

    def map(self, tasks: Sequence[Task]) -> Iterator[tuple[int, dict]]:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalExecutor(Executor):
    """A pool of `jobs` worker processes (spawned: each imports torch and MLIR afresh, safely)."""

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = max(1, jobs or os.cpu_count() or 1)

    def map(self, tasks: Sequence[Task]) -> Iterator[tuple[int, dict]]:
        from fuseflow.dse.evaluate import evaluate

        if not tasks:
            return
        if self.jobs == 1 or len(tasks) == 1:  # no pool: the same function in this process
            for i, t in enumerate(tasks):
                yield i, evaluate(*t)
            return
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(self.jobs, len(tasks)), mp_context=ctx) as pool:
            pending = {pool.submit(evaluate, *t): i for i, t in enumerate(tasks)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    yield pending.pop(f), f.result()


class RayExecutor(Executor):
    """Ray tasks, on a cluster (`address`) or on a local Ray started in-process."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None):
        try:
            import ray
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

    def map(self, tasks: Sequence[Task]) -> Iterator[tuple[int, dict]]:
        from fuseflow.dse.evaluate import evaluate

        remote = self.ray.remote(evaluate)
        refs = {remote.remote(*t): i for i, t in enumerate(tasks)}
        while refs:
            done, _ = self.ray.wait(list(refs), num_returns=1)
            for r in done:
                yield refs.pop(r), self.ray.get(r)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def _reachable(address: str, timeout: float = 3.0) -> None:
    """Fail fast (Ray itself retries for minutes) when nothing listens at a cluster address."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except (OSError, ValueError) as e:
        raise FuseflowError(f"cannot reach Ray at {address}: {e}") from None


def make_executor(kind: str, address: str | None = None, jobs: int | None = None) -> Executor:
    if kind == "local":
        if address:
            raise FuseflowError("--address is for --executor ray")
        return LocalExecutor(jobs)
    if kind == "ray":
        return RayExecutor(address, jobs)
    raise FuseflowError(f"unknown executor {kind!r}; expected local or ray")
