"""Where runs execute: in this process, in a local process pool, or on a Dask cluster.

The unit of work is one (variant, run). Every executor yields outcomes as they finish, in any order;
the caller stores them and merges them in (variant, run) order, so the tables are byte-identical
whatever the executor and the number of workers. A run that raises becomes a :class:`RunFailure`
(its error message and seed), and the sweep goes on.

Dask is optional (``pip install 'gossipsim[cluster]'``): ``cluster="tcp://host:8786"`` connects to a
running scheduler, ``cluster="local:N"`` starts a ``dask.distributed.LocalCluster`` of N
single-threaded worker processes for the duration of the sweep.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .runner import RunOutput, World, build_world, run_seed, simulate_run
from .scenario import Study

Task = tuple[int, int]  # (variant index, run index)

CLUSTER_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RunFailure:
    """A run that raised: its error, recorded in failures.csv instead of aborting the sweep."""

    run: int
    seed: int
    error: str


Outcome = RunOutput | RunFailure

# one study's worlds per worker process (graphs and data are built once per variant)
_CACHE: dict[str, Any] = {"key": None, "worlds": {}}


def _world(study: Study, variant: int) -> World:
    key = (study.name, study.path, repr(study.raw))
    if _CACHE["key"] != key:
        _CACHE["key"] = key
        _CACHE["worlds"] = {}
    worlds: dict[int, World] = _CACHE["worlds"]
    if variant not in worlds:
        worlds[variant] = build_world(study.variants[variant].scenario)
    return worlds[variant]


def run_task(study: Study, task: Task) -> tuple[int, Outcome]:
    """Run one (variant, run); an exception becomes a :class:`RunFailure`."""
    variant, run = task
    seed = run_seed(study.variants[variant].scenario.run.seed, run)
    try:
        return variant, simulate_run(_world(study, variant), run, seed)
    except Exception as exc:  # a failed run is recorded, the sweep continues
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return variant, RunFailure(run, seed, last)


def prime(study: Study, worlds: Sequence[World]) -> None:
    """Reuse worlds already built by the caller (serial execution in this process)."""
    _CACHE["key"] = (study.name, study.path, repr(study.raw))
    _CACHE["worlds"] = dict(enumerate(worlds))


def execute(
    study: Study,
    tasks: Sequence[Task],
    *,
    workers: int = 1,
    cluster: str | None = None,
    worlds: Sequence[World] | None = None,
) -> Iterator[tuple[int, Outcome]]:
    """Run ``tasks`` and yield ``(variant, outcome)`` as each finishes."""
    if workers < 1:
        raise ConfigError("--workers", f"must be >= 1 (got {workers})")
    if cluster is not None:
        yield from _dask(study, tasks, cluster)
    elif workers == 1 or len(tasks) <= 1:
        if worlds is not None:
            prime(study, worlds)
        for task in tasks:
            yield run_task(study, task)
    else:
        yield from _pool(study, tasks, workers)


def _pool(study: Study, tasks: Sequence[Task], workers: int) -> Iterator[tuple[int, Outcome]]:
    # at most a few tasks in flight per worker: results stream back, memory stays bounded
    pending: set[Future[tuple[int, Outcome]]] = set()
    todo = iter(tasks)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for task in _take(todo, 4 * workers):
            pending.add(pool.submit(run_task, study, task))
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
                for task in _take(todo, 1):
                    pending.add(pool.submit(run_task, study, task))


def _take(it: Iterator[Task], n: int) -> Iterable[Task]:
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return


def _dask(study: Study, tasks: Sequence[Task], cluster: str) -> Iterator[tuple[int, Outcome]]:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ConfigError("--cluster", "needs Dask: pip install 'gossipsim[cluster]'") from None
    local = None
    if cluster.startswith("local:"):
        try:
            n = int(cluster.split(":", 1)[1])
        except ValueError:
            n = 0
        if n < 1:
            raise ConfigError(
                "--cluster", f"local:N needs a number of workers N >= 1 (got {cluster!r})"
            )
        local = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=50,
        )
        address: Any = local
    elif cluster.startswith(("tcp://", "tls://", "ws://", "wss://", "inproc://")):
        address = cluster
    else:
        raise ConfigError(
            "--cluster",
            f"expected a scheduler address such as tcp://host:8786 or local:N (got {cluster!r})",
        )
    try:
        client = Client(address, timeout=f"{CLUSTER_TIMEOUT_S}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        if local is not None:
            local.close()
        raise ConfigError(
            "--cluster",
            f"cannot reach the Dask scheduler at {cluster} within {CLUSTER_TIMEOUT_S:g} s ({type(exc).__name__})",
        ) from None
    try:
        futures = [client.submit(run_task, study, task, pure=False) for task in tasks]
        for future in as_completed(futures, loop=client.loop):
            yield future.result()
            future.release()
    finally:
        client.close()
        if local is not None:
            local.close()


def available_cpus() -> int:
    return max(
        1,
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
    )
