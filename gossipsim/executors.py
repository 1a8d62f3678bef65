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

import traceback
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .runner import BatchOutput, RunOutput, World, build_world, run_seed, simulate_run
from .scenario import Study

Task = tuple[int, int]  # (variant index, run index)
Unit = tuple[int, tuple[int, ...], str]  # (variant, runs, engine): the unit of work

CLUSTER_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RunFailure:
    """A run that raised: its error, recorded in failures.csv instead of aborting the sweep."""

    run: int
    seed: int
    error: str

    @property
    def runs(self) -> tuple[int, ...]:
        return (self.run,)


Outcome = RunOutput | BatchOutput | RunFailure

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


def run_unit(study: Study, unit: Unit) -> list[tuple[int, Outcome]]:
    """Run one unit of work: a single run on the event engine, or a batch of runs of one variant
    on the vectorised engine. Exceptions become :class:`RunFailure` records."""
    variant, runs, engine = unit
    base = study.variants[variant].scenario.run.seed
    if engine == "vectorized":
        from .fastpath import simulate_runs

        try:
            return [(variant, out) for out in simulate_runs(_world(study, variant), runs)]
        except Exception as exc:  # the whole batch is recorded as failed
            message = _message(exc)
            return [(variant, RunFailure(r, run_seed(base, r), message)) for r in runs]
    out: list[tuple[int, Outcome]] = []
    for run in runs:
        seed = run_seed(base, run)
        try:
            out.append((variant, simulate_run(_world(study, variant), run, seed)))
        except Exception as exc:  # a failed run is recorded, the sweep continues
            out.append((variant, RunFailure(run, seed, _message(exc))))
    return out


def _message(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def units(tasks: Sequence[Task], engines: Sequence[str], batch: int = 1024) -> list[Unit]:
    """Group tasks into units: one per run on the event engine, batches per variant on the
    vectorised engine."""
    out: list[Unit] = []
    pending: dict[int, list[int]] = {}
    for variant, run in tasks:
        if engines[variant] == "vectorized":
            pending.setdefault(variant, []).append(run)
            if len(pending[variant]) == batch:
                out.append((variant, tuple(pending.pop(variant)), "vectorized"))
        else:
            out.append((variant, (run,), "event"))
    out += [(v, tuple(runs), "vectorized") for v, runs in sorted(pending.items())]
    return out


def prime(study: Study, worlds: Sequence[World]) -> None:
    """Reuse worlds already built by the caller (serial execution in this process)."""
    _CACHE["key"] = (study.name, study.path, repr(study.raw))
    _CACHE["worlds"] = dict(enumerate(worlds))


def execute(
    study: Study,
    work: Sequence[Unit],
    *,
    workers: int = 1,
    cluster: str | None = None,
    worlds: Sequence[World] | None = None,
) -> Iterator[tuple[int, Outcome]]:
    """Run the units of ``work`` and yield ``(variant, outcome)`` for each run as it finishes."""
    if workers < 1:
        raise ConfigError("--workers", f"must be >= 1 (got {workers})")
    if cluster is not None:
        yield from _dask(study, work, cluster)
    elif workers == 1 or len(work) <= 1:
        if worlds is not None:
            prime(study, worlds)
        for unit in work:
            yield from run_unit(study, unit)
    else:
        yield from _pool(study, work, workers)


def _pool(study: Study, work: Sequence[Unit], workers: int) -> Iterator[tuple[int, Outcome]]:
    # at most a few units in flight per worker: results stream back, memory stays bounded
    pending: set[Future[list[tuple[int, Outcome]]]] = set()
    todo = iter(work)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for unit in _take(todo, 4 * workers):
            pending.add(pool.submit(run_unit, study, unit))
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield from future.result()
                for unit in _take(todo, 1):
                    pending.add(pool.submit(run_unit, study, unit))


def _take(it: Iterator[Unit], n: int) -> Iterable[Unit]:
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return


def _dask(study: Study, work: Sequence[Unit], cluster: str) -> Iterator[tuple[int, Outcome]]:
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
        futures = [client.submit(run_unit, study, unit, pure=False) for unit in work]
        for future in as_completed(futures, loop=client.loop):
            yield from future.result()
            future.release()
    finally:
        client.close()
        if local is not None:
            local.close()
