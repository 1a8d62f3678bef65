"""Where runs execute: in this process, in a local process pool, or on a Dask cluster.

The unit of work is one (variant, run). Every executor yields outcomes as they finish, in any order;
the caller stores them and merges them in (variant, run) order, so the tables are byte-identical
whatever the executor and the number of workers. A run that raises becomes a :class:`RunFailure`
(its error message and seed), and the sweep goes on.

An executor is started by :func:`start_executor` *before* the caller touches its results folder, so
a bad ``--workers`` / ``--cluster`` or a cluster that cannot be reached changes nothing on disk. Work
is handed out lazily (a few units in flight per worker), so a sweep of many runs never holds a task
list in memory. On Ctrl-C the workers stay quiet (they ignore SIGINT) and the caller stops them;
pool workers also exit by themselves when their parent process dies.

Dask is optional (``pip install 'gossipsim[cluster]'``): ``cluster="tcp://host:8786"`` connects to a
running scheduler, ``cluster="local:N"`` starts a ``dask.distributed.LocalCluster`` of N
single-threaded worker processes for the duration of the sweep.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

from gossipsim.core.streams import run_seed
from gossipsim.errors import ConfigError
from gossipsim.measurement.outputs import BatchOutput, RunOutput
from gossipsim.states.representations import Target
from gossipsim.study.scenario import Study
from gossipsim.world.world import World, build_world

Task = tuple[int, int]  # (variant index, run index)
Unit = tuple[int, tuple[int, ...], str]  # (variant, runs, engine): the unit of work
#: each variant's targets as the checking process found them (by forgotten set), handed to the
#: workers with the study so that they do not search for them again
Targets = Sequence[Mapping[frozenset[int], Target]]

CLUSTER_TIMEOUT_S = 10.0
ABORT_TIMEOUT_S = 10.0  # how long an interrupted sweep waits for a Dask cluster to close
PARENT_POLL_S = 0.5  # how often a pool worker checks that its parent is still alive
IN_FLIGHT_PER_WORKER = 4  # Dask: units submitted ahead per worker (results stream, memory bounded)
ADDRESS_SCHEMES = ("tcp://", "tls://", "ws://", "wss://", "inproc://")


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


def _world(study: Study, variant: int, targets: Targets | None) -> World:
    key = (study.name, study.path, repr(study.raw))
    if _CACHE["key"] != key:
        _CACHE["key"] = key
        _CACHE["worlds"] = {}
    worlds: dict[int, World] = _CACHE["worlds"]
    if variant not in worlds:
        known = targets[variant] if targets is not None else None
        worlds[variant] = build_world(study.variants[variant].scenario, targets=known)
    return worlds[variant]


def known_targets(worlds: Sequence[World] | None) -> list[dict[frozenset[int], Target]] | None:
    """The targets each checked world's model has found (:data:`Targets`), None without worlds."""
    return None if worlds is None else [world.model.known_targets() for world in worlds]


def run_unit(study: Study, unit: Unit, targets: Targets | None = None) -> list[tuple[int, Outcome]]:
    """Run one unit of work: a single run on the event engine, or a batch of runs of one variant
    on the vectorised engine. Exceptions become :class:`RunFailure` records. A worker building
    the variant's world takes its ``targets`` from the caller (:data:`Targets`) when given."""
    variant, runs, engine = unit
    base = study.variants[variant].scenario.run.seed
    if engine == "vectorized":
        from gossipsim.execution.vectorized.driver import simulate_runs

        try:
            world = _world(study, variant, targets)
            batches = simulate_runs(world, runs)
        except Exception as exc:  # the whole batch is recorded as failed
            message = describe_error(exc)
            return [(variant, RunFailure(r, run_seed(base, r), message)) for r in runs]
        outcomes: list[tuple[int, Outcome]] = []
        for batch in batches:  # a run whose KL is not a number fails alone, as on the event engine
            for r, error in sorted(batch.failures.items()):
                outcomes.append((variant, RunFailure(r, run_seed(base, r), describe_error(error))))
            if batch.runs:
                outcomes.append((variant, dataclasses.replace(batch, failures={})))
        return outcomes
    from gossipsim.execution.runner import simulate_run  # the event engine, only where it runs

    out: list[tuple[int, Outcome]] = []
    for run in runs:
        seed = run_seed(base, run)
        try:
            out.append((variant, simulate_run(_world(study, variant, targets), run, seed)))
        except Exception as exc:  # a failed run is recorded, the sweep continues
            out.append((variant, RunFailure(run, seed, describe_error(exc))))
    return out


def describe_error(exc: BaseException) -> str:
    """An exception as one line: its type and message."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


#: runs of one variant in a unit of work of the vectorised engine
BATCH_RUNS = 1024


def count_units(runs: Sequence[int], engines: Sequence[str], batch: int = BATCH_RUNS) -> int:
    """How many units :func:`units` makes of ``runs[v]`` tasks of each variant v."""
    return sum(
        -(-n // batch) if engine == "vectorized" else n
        for n, engine in zip(runs, engines, strict=True)
    )


def units(tasks: Iterable[Task], engines: Sequence[str], batch: int = BATCH_RUNS) -> Iterator[Unit]:
    """Group tasks into units, lazily: one per run on the event engine, batches per variant on the
    vectorised engine (a variant's last, partial batch comes once its tasks are exhausted)."""
    pending: dict[int, list[int]] = {}
    for variant, run in tasks:
        if engines[variant] == "vectorized":
            pending.setdefault(variant, []).append(run)
            if len(pending[variant]) == batch:
                yield (variant, tuple(pending.pop(variant)), "vectorized")
        else:
            yield (variant, (run,), "event")
    for variant, runs in sorted(pending.items()):
        yield (variant, tuple(runs), "vectorized")


def prime(study: Study, worlds: Sequence[World]) -> None:
    """Reuse worlds already built by the caller: in this process (serial execution), and in
    pool workers forked after this call, which inherit them."""
    _CACHE["key"] = (study.name, study.path, repr(study.raw))
    _CACHE["worlds"] = dict(enumerate(worlds))


class Executor:
    """Runs units of work somewhere. Made by :func:`start_executor`, which closes it."""

    def map(
        self, study: Study, work: Iterable[Unit], worlds: Sequence[World] | None = None
    ) -> Iterator[tuple[int, Outcome]]:
        """Run the units of ``work`` and yield ``(variant, outcome)`` for each run as it finishes."""
        if worlds is not None:
            prime(study, worlds)
        for unit in work:
            yield from run_unit(study, unit)

    def close(self) -> None:
        """Release the workers after a sweep that ended normally."""

    def abort(self) -> None:
        """Stop the workers at once (Ctrl-C or an error): runs in flight are dropped."""
        self.close()


class InProcess(Executor):
    """Every run in this process, one after another."""


class LocalPool(Executor):
    """A local pool of ``workers`` processes, each fed units of work through its own pipe; a
    single unit of work runs in this process instead (starting workers would cost more).

    Each worker has its own pipe (not one queue shared by all, as in ``concurrent.futures``), so
    stopping the pool is safe at any moment: a worker terminated half-way through sending a result
    corrupts only its own pipe, which is dropped, and nothing waits for it at exit. A worker that
    dies (killed, out of memory) has its unit recorded as failed and is replaced.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: list[_Worker] = []
        import multiprocessing  # here: serial sweeps do without it

        self.context = multiprocessing.get_context()

    def map(
        self, study: Study, work: Iterable[Unit], worlds: Sequence[World] | None = None
    ) -> Iterator[tuple[int, Outcome]]:
        todo = iter(work)
        head = list(islice(todo, 2))
        if len(head) < 2:
            yield from super().map(study, head, worlds)
            return
        from multiprocessing.connection import wait

        retry: list[Unit] = []  # units queued on a worker that died before running them
        units_left = chain(head, todo)

        def next_unit() -> Unit | None:
            if retry:
                return retry.pop()
            return next(units_left, None)

        targets = known_targets(worlds)
        if worlds is not None:  # a forked worker starts with the worlds (spawned ones: targets)
            prime(study, worlds)
        with _frozen_for_fork(self.context):
            self.pool = [_Worker(self.context, study, targets) for _ in range(self.workers)]
        for worker in self.pool:
            worker.feed(next_unit)
        while any(worker.pending for worker in self.pool):
            busy = [w for w in self.pool if w.pending]
            ready = set(wait([w.conn for w in busy] + [w.sentinel for w in busy]))
            for worker in busy:
                if worker.conn in ready or worker.sentinel in ready:
                    index = self.pool.index(worker)
                    yield from self._collect(worker, study, targets, retry)
                    self.pool[index].feed(next_unit)  # the same worker, or its replacement

    def _collect(
        self, worker: _Worker, study: Study, targets: Targets | None, retry: list[Unit]
    ) -> list[tuple[int, Outcome]]:
        """The result of the worker's first unit in flight; if the worker died, its unit is
        recorded as failed, the units queued behind it go back to the queue and it is replaced."""
        try:
            result: list[tuple[int, Outcome]] = worker.conn.recv()
        except (EOFError, OSError):
            failed = worker.pending.popleft()
            retry.extend(worker.pending)
            worker.pending.clear()
            code = worker.stop()
            with _frozen_for_fork(self.context):
                self.pool[self.pool.index(worker)] = _Worker(self.context, study, targets)
            return _failed(study, failed, f"the worker process died (exit code {code})")
        worker.pending.popleft()
        return result

    def close(self) -> None:
        for worker in self.pool:
            worker.stop(wait=True)
        self.pool = []

    def abort(self) -> None:
        for worker in self.pool:
            worker.stop()
        self.pool = []


@contextlib.contextmanager
def _frozen_for_fork(context: Any) -> Iterator[None]:
    """Fork workers with every object of this process out of the garbage collector's reach.

    A forked worker shares this process's memory until it writes to it, and a collection in the
    worker writes to every object it examines: with the worlds inherited (a large graph is millions
    of objects) each worker would copy most of them. Frozen before the fork, they are never examined
    there (a 200,000-node sweep on 2 workers: 8.1 s instead of 10.5 s). This process is left as it
    was: unfrozen again unless something (the CLI, at start-up) had frozen objects before."""
    import gc

    if context.get_start_method() != "fork":
        yield
        return
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


class _Worker:
    """One pool process and the units sent to it, oldest first."""

    AHEAD = 2  # units queued per worker, so that it never waits for the parent between units

    def __init__(self, context: Any, study: Study, targets: Targets | None) -> None:
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(
            target=_pool_worker, args=(child, os.getpid()), daemon=True, name="gossipsim-worker"
        )
        self.process.start()
        child.close()  # the worker's end lives in the worker only: its death is an EOF here
        self.sentinel = self.process.sentinel
        self.pending: deque[Unit] = deque()
        self.conn.send(("study", (study, targets)))  # once: every unit of the sweep reuses it

    def feed(self, next_unit: Callable[[], Unit | None]) -> None:
        while len(self.pending) < self.AHEAD and (unit := next_unit()) is not None:
            self.conn.send(("unit", unit))
            self.pending.append(unit)

    def stop(self, wait: bool = False) -> int | None:
        """End the process: asked to exit once its queue is done (``wait``), else terminated at
        once (SIGTERM, which prints nothing). Returns its exit code."""
        with contextlib.suppress(OSError):
            if wait:
                self.conn.send(None)
                self.process.join(timeout=60)
        if self.process.is_alive():
            self.process.terminate()
        self.process.join(timeout=5)
        self.conn.close()
        return self.process.exitcode


def _pool_worker(conn: Any, parent: int) -> None:
    """A pool process: receive the study, then run units and send their outcomes back, until told
    to stop or the parent's end of the pipe closes."""
    _pool_worker_init(parent)
    study: Study | None = None
    targets: Targets | None = None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if message is None:
            return
        kind, payload = message
        if kind == "study":
            study, targets = payload
            continue
        assert study is not None
        conn.send(run_unit(study, payload, targets))


def _failed(study: Study, unit: Unit, error: str) -> list[tuple[int, Outcome]]:
    """Every run of ``unit`` recorded as failed with ``error``."""
    variant, runs, _ = unit
    base = study.variants[variant].scenario.run.seed
    return [(variant, RunFailure(r, run_seed(base, r), error)) for r in runs]


def _pool_worker_init(parent: int) -> None:
    """Set up a pool worker: Ctrl-C is the parent's to handle (it stops the pool; a worker raising
    KeyboardInterrupt would only print a traceback), and the worker exits when its parent dies (a
    ``kill -9`` of the main process would otherwise leave it waiting for work for minutes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch = threading.Thread(
        target=_exit_with_parent, args=(os.getppid(), parent), daemon=True, name="parent-watch"
    )
    watch.start()


def _exit_with_parent(ppid: int, parent: int) -> None:
    """Exit this process once it has been orphaned: its parent process id changed (the parent
    died and the process was re-parented), or the main process is gone."""
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != ppid or not _alive(parent):
            os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class DaskCluster(Executor):
    """A Dask cluster: ``local:N`` starts a LocalCluster of N single-threaded worker processes,
    an address such as ``tcp://host:8786`` connects to a running scheduler."""

    def __init__(self, cluster: str) -> None:
        workers = _parse_cluster(cluster)
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise ConfigError("--cluster", "needs Dask: pip install 'gossipsim[cluster]'") from None
        self.local: Any = None
        address: Any = cluster
        if workers is not None:
            if getattr(multiprocessing.current_process(), "_inheriting", False):
                # a worker process Dask is starting, importing the user's script again because
                # it calls gs.run without an `if __name__ == "__main__":` guard: leave quietly
                # (no traceback per worker); the calling process says what to do
                raise SystemExit(1)
            # the cluster's processes inherit an ignored SIGINT: Ctrl-C is for this process to
            # handle (it closes the cluster), not for every worker to print a traceback about
            try:
                with _sigint_ignored():
                    self.local = LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=":0",  # a free port: no clash with another cluster
                        # (Dask serves its HTTP routes even without a dashboard, on 8787 by
                        # default)
                        silence_logs=50,
                    )
            except RuntimeError as exc:
                if "failed to start" not in str(exc):
                    raise
                raise ConfigError(
                    "--cluster",
                    f"the local Dask cluster's worker processes failed to start ({exc}); in a "
                    'script, call gs.run inside `if __name__ == "__main__":` (each worker '
                    "process imports the script again)",
                ) from None
            address = self.local
        try:
            self.client = Client(address, timeout=f"{CLUSTER_TIMEOUT_S}s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            if self.local is not None:
                self.local.close()
            raise ConfigError(
                "--cluster",
                f"cannot reach the Dask scheduler at {cluster} within {CLUSTER_TIMEOUT_S:g} s ({type(exc).__name__})",
            ) from None
        except Exception as exc:  # an address Dask cannot use (its own checks): one line
            _disarm_client(exc)
            if self.local is not None:
                self.local.close()
            raise ConfigError(
                "--cluster", f"Dask cannot connect to {cluster} ({describe_error(exc)})"
            ) from None

    def map(
        self, study: Study, work: Iterable[Unit], worlds: Sequence[World] | None = None
    ) -> Iterator[tuple[int, Outcome]]:
        from dask.distributed import as_completed

        todo = iter(work)
        workers = len(self.client.scheduler_info().get("workers", {}))
        ahead = IN_FLIGHT_PER_WORKER * max(workers, 4)
        targets: Any = known_targets(worlds)
        if targets is not None:  # sent once to every worker, not with each task
            targets = self.client.scatter([targets], broadcast=True, hash=False)[0]
        first = [
            self.client.submit(run_unit, study, unit, targets, pure=False)
            for unit in islice(todo, ahead)
        ]
        queue = as_completed(first, loop=self.client.loop)
        for future in queue:
            for unit in islice(todo, 1):
                queue.add(self.client.submit(run_unit, study, unit, targets, pure=False))
            result = future.result()
            future.release()
            yield from result

    def close(self) -> None:
        with _sigint_ignored():  # a second Ctrl-C must not leave the cluster half closed
            self.client.close()
            if self.local is not None:
                self.local.close()

    def abort(self) -> None:
        # closing waits on the client's event loop, which the interrupt may have left stuck: give
        # it a while, then let the process exit (Dask's workers exit when their parent dies)
        closer = threading.Thread(target=self._quiet_close, daemon=True, name="dask-close")
        closer.start()
        closer.join(ABORT_TIMEOUT_S)

    def _quiet_close(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _parse_cluster(cluster: str) -> int | None:
    """The number of workers of ``local:N`` (``None`` for a scheduler address); a ConfigError for
    anything else."""
    if not isinstance(cluster, str):
        raise ConfigError(
            "--cluster",
            f"expected a scheduler address such as tcp://host:8786 or local:N (got "
            f"{type(cluster).__name__} {cluster!r})",
        )
    if cluster.startswith("local:"):
        try:
            n = int(cluster.split(":", 1)[1])
        except ValueError:
            n = 0
        if n < 1:
            raise ConfigError(
                "--cluster", f"local:N needs a number of workers N >= 1 (got {cluster!r})"
            )
        return n
    if cluster.startswith(ADDRESS_SCHEMES) and len(cluster) > cluster.index("://") + 3:
        _check_address(cluster)
        return None
    raise ConfigError(
        "--cluster",
        f"expected a scheduler address such as tcp://host:8786 or local:N (got {cluster!r})",
    )


def _disarm_client(exc: BaseException) -> None:
    """Mark closed the Client whose construction raised ``exc`` (found in the traceback's frames):
    Dask's ``Client.__del__`` would otherwise try to close it at exit on an event loop that has
    stopped, and print a traceback after 20 s."""
    with contextlib.suppress(Exception):
        from dask.distributed import Client

        tb = exc.__traceback__
        while tb is not None:
            client = tb.tb_frame.f_locals.get("self")
            if isinstance(client, Client):
                client.status = "closed"
                with contextlib.suppress(Exception):
                    client._loop_runner.stop()
                return
            tb = tb.tb_next


def _check_address(cluster: str) -> None:
    """Refuse at once, in one line, a scheduler address that no Client of this process can reach:
    an in-process address (``inproc://``) with no scheduler listening in this process, and a TLS
    address (``tls://``, ``wss://``) without Dask's TLS settings (Dask would fail only after its
    timeouts, with a traceback)."""
    scheme, _, rest = cluster.partition("://")
    if scheme in ("tcp", "tls", "ws", "wss"):
        try:
            from distributed.comm.addressing import parse_host_port

            _, port = parse_host_port(rest, default_port=8786)
        except ImportError:
            return
        except Exception as exc:  # Dask's own reading of the address: one line, not later
            raise ConfigError(
                "--cluster",
                f"{cluster!r} is not a scheduler address host:port ({describe_error(exc)})",
            ) from None
        if not 0 < int(port) < 65536:
            raise ConfigError("--cluster", f"{cluster!r}: the port must be 1 to 65535 (got {port})")
    if scheme == "inproc":
        try:
            from distributed.comm.inproc import global_manager

            listening = global_manager.get_listener_for(rest) is not None
        except ImportError:
            return  # DaskCluster says that Dask is missing
        except Exception:  # an address of another process or host, or malformed
            listening = False
        if not listening:
            raise ConfigError(
                "--cluster",
                f"{cluster!r} is an in-process address, and no Dask scheduler listens on it in this "
                "process (an inproc:// address is reachable only from the process that runs its "
                "scheduler); give tcp://host:port or local:N",
            )
    if scheme in ("tls", "wss"):
        try:
            from distributed.security import Security

            context = Security().get_connection_args("client").get("ssl_context")
        except ImportError:
            return
        except Exception as exc:  # a TLS configuration Dask cannot load
            raise ConfigError(
                "--cluster", f"{scheme}:// needs Dask's TLS settings, which failed to load "
                f"({describe_error(exc)})"
            ) from None  # fmt: skip
        if context is None:
            raise ConfigError(
                "--cluster",
                f"{scheme}:// needs Dask's TLS settings (distributed.comm.tls.ca-file, "
                "distributed.comm.tls.client.cert and .key in the Dask configuration), and none "
                "are set; give tcp://host:port, local:N, or configure TLS",
            )


def usable_cores() -> int:
    """The processor cores this process may run on (its CPU affinity where the system says)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def usable_workers(requested: int, units: int, cores: int | None = None) -> int:
    """How many local worker processes can be of use: no more than the units of work (a batch of
    vectorised runs or one event-engine run each; an idle process only costs its start-up and
    memory) nor than the cores (more processes share them, none finishes sooner), at least 1."""
    cores = usable_cores() if cores is None else cores
    return max(1, min(requested, units, cores))


def capped(workers: int, cluster: str | None, units: int) -> tuple[int, str | None, str | None]:
    """``workers`` and ``cluster`` (``local:N``) capped by :func:`usable_workers`, and a one-line
    note saying so (None when nothing changed). A scheduler address is left as it is: its
    workers are another machine's."""
    if cluster is None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers <= 1:
            return workers, cluster, None  # checked (or refused) by make_executor
        use = usable_workers(workers, units)
        if use == workers:
            return workers, cluster, None
        return use, cluster, _cap_note(f"--workers {workers}", use, units)
    asked = _parse_cluster(cluster)
    if asked is None:
        return workers, cluster, None
    use = usable_workers(asked, units)
    if use == asked:
        return workers, cluster, None
    return workers, f"local:{use}", _cap_note(f"--cluster {cluster}", use, units)


def _cap_note(what: str, use: int, units: int) -> str:
    cores = usable_cores()
    return (
        f"{what}: {use} worker process{'es' if use != 1 else ''} used ({units:,} unit"
        f"{'s' if units != 1 else ''} of work, {cores} core{'s' if cores != 1 else ''}: more "
        "would only wait; the results are the same for any number)"
    )


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored for the duration (only the main thread may change signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def make_executor(workers: int = 1, cluster: str | None = None) -> Executor:
    """Check ``workers`` and ``cluster`` and start the executor they name (a ConfigError, in one
    line, if they are wrong or the cluster cannot be started or reached)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError("--workers", f"must be an integer >= 1 (got {workers!r})")
    if cluster is not None:
        if workers != 1:
            raise ConfigError(
                "--cluster",
                "cannot be combined with --workers: the cluster's workers run the sweep; give one of them",
            )
        return DaskCluster(cluster)
    return InProcess() if workers == 1 else LocalPool(workers)


@contextlib.contextmanager
def start_executor(workers: int = 1, cluster: str | None = None) -> Iterator[Executor]:
    """Start an executor for the duration of a ``with`` block: closed normally at its end, stopped
    at once (workers terminated, nothing printed) if the block raises or is interrupted."""
    executor = make_executor(workers, cluster)
    try:
        yield executor
    except BaseException:
        executor.abort()
        raise
    executor.close()


def execute(
    study: Study,
    work: Iterable[Unit],
    *,
    workers: int = 1,
    cluster: str | None = None,
    worlds: Sequence[World] | None = None,
) -> Iterator[tuple[int, Outcome]]:
    """Run the units of ``work`` on a fresh executor and yield ``(variant, outcome)`` for each run
    as it finishes."""
    with start_executor(workers, cluster) as executor:
        yield from executor.map(study, work, worlds)
