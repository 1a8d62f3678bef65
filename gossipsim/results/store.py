"""Loss-free, resumable results: finished runs are committed to the results folder in batches.

Layout of a results folder ``DIR`` while a sweep runs::

    DIR/.gossipsim/study.json                 the scenario (after --runs/--seed), its fingerprint,
                                              the content hashes of the files it names, the
                                              fingerprint of the code (:mod:`.provenance`), run count
    DIR/.gossipsim/lock                       held by the command writing the folder
                                              (:mod:`.folderlock`): one command at a time
    DIR/.gossipsim/parts/v0001-r000042.part   runs of variant 1 (the first is run 42): a batch of
                                              the vectorised engine, runs of the event engine
                                              committed together, or failures (each part written
                                              to a temporary name, flushed to disk, renamed)

A batch of the vectorised engine is one part, committed as soon as it is done. Runs of the event
engine (and failures) are held back and committed together, one part per variant, once
:data:`COMMIT_RUNS` are waiting, the first of them has waited :data:`COMMIT_SECONDS`, or runs finish
more slowly than that (each is then committed as it finishes), and at the end of the sweep or when
it is interrupted. A ``kill -9`` therefore loses the runs in flight and at most about a second's
worth of finished runs, which ``--resume`` runs again: a part is written whole or not at all, and
every run has its own seed, so the resumed tables equal those of an uninterrupted sweep.

A part is data, never code: a SHA-256 checksum of the rest of its bytes, a JSON header (its
variant, its runs, whether they failed, the scalar fields) and the raw bytes of its NumPy arrays,
each described in the header by dtype and shape; arrays of strings are stored as fixed-width text,
arrays mixing labels of several types as JSON lists. Nothing is unpickled: a folder holding parts
of an older gossipsim (``.pkl`` files) is refused. A part whose checksum or structure does not hold
(damaged on disk, truncated, edited, or written by a gossipsim without checksums) is never merged:
``status`` reports it and ``--resume`` sets it aside (``.damaged``) and runs its runs again. Parts
holding the same runs (two commands on one folder before folders were locked) are merged once:
``--resume`` keeps parts that do not overlap and runs the others' runs again.

When every run is done the tables (metrics.csv, runs.csv, requests.csv, visits.csv, failures.csv,
particles.csv where particle sets are kept, summary.json, plots/) are merged from the parts in (variant, run) order, the parts are removed and
study.json is marked ``complete`` with the runs done and failed (:func:`mark_complete`, which
:meth:`gossipsim.Results.write` calls too: its folder is the one ``gossipsim run`` writes).
``gossipsim run FILE --out DIR --resume`` continues an interrupted sweep: finished runs are skipped,
and a folder that holds another scenario, whose data or graph files have changed since, or whose
runs were made by other code (unless ``--allow-code-change``) is refused; a finished sweep has
nothing left to run (its tables are read back). A crash at any moment leaves at worst temporary
files and staging folders, which the next run or resume on the folder removes.

Every check is made before the folder is touched: :class:`RunStore` checks at construction (under
the folder's lock, with ``lock=True``) and changes the folder only in :meth:`RunStore.open`. A
rerun that replaces a folder first checks that it can write every folder it will use, then moves
the old files aside and deletes them only once all have moved (:func:`clear`): a refusal removes
nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.execution.executors import Outcome, RunFailure, Task
from gossipsim.measurement.outputs import BatchOutput
from gossipsim.results.folderfiles import (
    PROGRESS_KEYS as PROGRESS_KEYS,  # re-exported: the folder's names
)
from gossipsim.results.folderfiles import STAGING_PREFIX as STAGING_PREFIX
from gossipsim.results.folderfiles import check_output_folder as check_output_folder
from gossipsim.results.folderfiles import read_meta as read_meta
from gossipsim.results.folderlock import LOCK_NAME, META, FolderLock, holder
from gossipsim.results.partformat import (
    PART_MAGIC as PART_MAGIC,  # re-exported: the part format's names
)
from gossipsim.results.partformat import decode_part as decode_part
from gossipsim.results.partformat import decoded, read_bytes
from gossipsim.results.partformat import encode_part as encode_part
from gossipsim.results.partformat import read_header as read_header
from gossipsim.results.provenance import code_changes, code_fingerprint
from gossipsim.study.scenario import Scenario, Study, parse_study, records_particle_sets

PART_SUFFIX = ".part"
DAMAGED_SUFFIX = ".damaged"  # a damaged part set aside by --resume (its runs are run again)
#: runs of the event engine held back before a commit, at most (one part per variant and commit)
COMMIT_RUNS = 1024
#: seconds a finished run waits for its commit, at most, while runs keep finishing faster than that
COMMIT_SECONDS = 1.0
RESULT_FILES = (
    "metrics.csv", "runs.csv", "requests.csv", "visits.csv", "failures.csv", "particles.csv",
    "summary.json", "metrics.parquet", "runs.parquet", "requests.parquet", "visits.parquet",
    "failures.parquet", "particles.parquet",
)  # fmt: skip


def fingerprint(study: Study) -> str:
    """A hash of the scenario as it will run (sections, sweep, runs, seed)."""
    text = json.dumps(study.raw, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def input_files(study: Study) -> dict[str, Path]:
    """Every file the scenario names, by ``key=value as written`` (e.g. ``data.path=obs.csv``),
    resolved as the simulator resolves it (relative to the scenario file's folder)."""
    out: dict[str, Path] = {}
    for variant in study.variants:
        sc = variant.scenario
        if sc.topology.path is not None:
            path = Path(sc.topology.path).expanduser()  # as topology._resolve reads it
            out[f"topology.path={sc.topology.path}"] = (
                path if path.is_absolute() else Path(sc.base_dir) / path
            )
        if sc.data.path is not None:
            path = Path(sc.data.path)  # as the conjugate models read it
            out[f"data.path={sc.data.path}"] = (
                path if path.is_absolute() else Path(sc.base_dir) / path
            )
        if sc.data.options.get("dataset") == "fashion_mnist":  # as the bnn model reads it
            from gossipsim.data.idx import FASHION_MNIST_FILES, FASHION_MNIST_FOLDER

            written = str(sc.data.options.get("folder", FASHION_MNIST_FOLDER))
            folder = Path(written)
            folder = folder if folder.is_absolute() else Path(sc.base_dir) / folder
            for name in FASHION_MNIST_FILES.values():
                out[f"data.folder={written}/{name}"] = folder / name
    return out


def input_hashes(study: Study) -> dict[str, str]:
    """Content hashes of every input the scenario names: its data and graph files, and the bundled
    data sets it uses (whose options are in the scenario itself), so that a resumed sweep is known
    to read the same data as the runs already finished."""
    hashes: dict[str, str] = {}
    for key, path in input_files(study).items():
        try:
            with open(path, "rb") as fh:
                hashes[key] = hashlib.file_digest(fh, "sha256").hexdigest()[:16]
        except OSError as exc:
            setting = key.split("=", 1)[0]
            raise ConfigError(
                setting, f"cannot read {str(path)!r}: {exc.strerror or exc}"
            ) from None
    for name in sorted(_datasets(study)):
        hashes[f"data.dataset={name}"] = _dataset_hash(name)
    return hashes


def _datasets(study: Study) -> set[str]:
    names = {v.scenario.data.options.get("dataset", "synthetic") for v in study.variants}
    return {str(n) for n in names if n not in ("synthetic", "fashion_mnist")}  # files: above


def _dataset_hash(name: str) -> str:
    """The content hash of a bundled data set (as loaded, cached, by the simulator)."""
    from gossipsim.data.datasets import _raw

    X, target, features = _raw(name)
    digest = hashlib.sha256()
    for array in (X, target):
        digest.update(str(array.dtype).encode() + str(array.shape).encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update("\n".join(features).encode())
    return digest.hexdigest()[:16]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` under a temporary name, flushed to disk, then renamed into place:
    a reader sees the old file or the whole new one, never a part."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # e.g. a full disk: give back the partial copy's space
            tmp.unlink()
        raise


def check_writable(folder: Path, key: str) -> None:
    """Raise a ConfigError for ``key`` unless a file can be made in each existing folder a command
    writes in a results folder (the folder, its bookkeeping directory and parts, plots/ and
    graphs/): tried by making and removing a file, which holds for any user (root included)."""
    for path in (
        folder,
        folder / META,
        folder / META / "parts",
        folder / "plots",
        folder / "graphs",
    ):
        if not path.is_dir() or path.is_symlink():
            continue
        probe = path / f".write-check.tmp-{os.getpid()}"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            probe.unlink()
        except OSError as exc:
            raise ConfigError(
                key, f"cannot write {str(path)!r}: {exc.strerror or exc}; nothing was changed"
            ) from None


@dataclass
class PartScan:
    """The committed parts of a folder, checked: those merged (``kept``: (variant, first run),
    path, header; no two share a run), those ``damaged`` (path, why) and those holding runs of
    kept parts (``duplicates``, from two commands writing one folder at once)."""

    kept: list[tuple[Task, Path, dict[str, Any]]] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)
    duplicates: list[Path] = field(default_factory=list)

    def runs(self, *, failed: bool | None = None) -> set[Task]:
        """The (variant, run) pairs of the kept parts (only failed or only done ones)."""
        return {
            (variant, r)
            for (variant, _), _, header in self.kept
            if failed is None or bool(header["failed"]) == failed
            for r in header["runs"]
        }


def scan_parts(parts: Path, study: Study | None = None) -> PartScan:
    """Every part of ``parts`` read whole, its checksum verified and its content checked (against
    ``study``'s variants and runs where given); of the parts sharing runs, the larger is kept."""
    scan = PartScan()
    good: list[tuple[Task, Path, dict[str, Any]]] = []
    for path in sorted(parts.glob(f"v*-r*{PART_SUFFIX}")) if parts.is_dir() else []:
        try:
            task = _part_task(path)
            data = read_bytes(path)
            header, outcomes = decoded(data)
            _check_against(task, header, outcomes, study)
        except (OSError, ValueError) as exc:
            scan.damaged.append((path, _reason(exc)))
            continue
        del outcomes, data
        good.append((task, path, header))
    taken: set[Task] = set()
    for task, path, header in sorted(good, key=lambda g: (-len(g[2]["runs"]), g[0])):
        mine = {(task[0], r) for r in header["runs"]}
        if mine & taken:
            scan.duplicates.append(path)
            continue
        taken |= mine
        scan.kept.append((task, path, header))
    scan.kept.sort(key=lambda g: g[0])
    return scan


def _listed(runs: list[int]) -> str:
    return ", ".join(map(str, runs[:3])) + (", ..." if len(runs) > 3 else "")


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _part_task(path: Path) -> Task:
    """(variant, first run) from a part's name ``vVVVV-rRRRRRR.part``."""
    v, _, r = path.stem[1:].partition("-r")
    if not (v.isdigit() and r.isdigit()):
        raise ValueError(f"{path.name!r} is not the name of a results part")
    return int(v), int(r)


def _check_against(
    task: Task, header: dict[str, Any], outcomes: list[Outcome], study: Study | None
) -> None:
    """A part's name, header and outcomes agree (and fit ``study``)."""
    variant, first = task
    runs = header["runs"]
    if "variant" in header and header["variant"] != variant:
        raise ValueError(f"its name says variant {variant}, its header {header['variant']!r}")
    if runs and min(runs) != first:
        raise ValueError(f"its name says first run {first}, its header {min(runs)}")
    if study is not None:
        if variant >= len(study.variants):
            raise ValueError(f"variant {variant} is not in the scenario")
        total = study.variants[variant].scenario.run.runs
        if runs and max(runs) >= total:
            raise ValueError(f"run {max(runs)} is beyond the variant's {total} runs")
    if sorted(r for outcome in outcomes for r in outcome.runs) != sorted(runs):
        raise ValueError("its runs and its header's runs differ")
    if study is not None:
        for outcome in outcomes:
            why = missing_tables(study.variants[variant].scenario, outcome)
            if why is not None:
                raise ValueError(why)


def missing_tables(scenario: Scenario, outcome: Outcome) -> str | None:
    """Why a part's runs (``outcome``) do not hold every table their variant records (None if
    they do): metrics.csv rows for each run, requests.csv rows for each of the variant's
    requests in each run, and particles.csv rows (the ``particles.*`` arrays) for exactly the runs
    that keep their particle sets (``[metrics] particles``, ``particle_runs``). A part holding
    less would be merged into tables silently missing the rows of its runs."""
    if isinstance(outcome, RunFailure):
        return None
    runs = list(outcome.runs)
    if isinstance(outcome, BatchOutput):
        with_metrics = set(np.unique(outcome.metric_runs).tolist()) if outcome.metrics else set()
        if outcome.request_columns:
            asked = outcome.request_columns.get("run", np.zeros(0, dtype=np.int64))
            requested = Counter(np.asarray(asked).tolist())
        else:
            requested = Counter(row.get("run") for row in outcome.request_rows)
        particles = outcome.particles
        with_particles = set(np.unique(particles["run"]).tolist()) if particles else set()
    else:
        columns = list(outcome.metrics.values())
        with_metrics = {outcome.run} if columns and len(columns[0]) else set()
        requested = Counter({outcome.run: len(outcome.request_rows)})
        kept = outcome.particles
        with_particles = {outcome.run} if kept and len(kept.get("iteration", ())) else set()
    keeps = records_particle_sets(scenario)
    keeping = {r for r in runs if keeps and scenario.metrics.keeps_particles(r)}
    requests = len(scenario.unlearning)
    for table, missing in (
        ("metrics.csv rows (metrics.* arrays)", [r for r in runs if r not in with_metrics]),
        ("requests.csv rows", [r for r in runs if requested[r] != requests]),
        ("particles.csv rows (particles.* arrays)", sorted(keeping - with_particles)),
    ):
        if missing:
            return f"it holds no {table} for run(s) {_listed(missing)}, which its variant records"
    extra = sorted(with_particles - keeping)
    if extra:
        return f"it holds particle sets of run(s) {_listed(extra)}, which its variant does not keep"
    return None


class RunStore:
    """The per-run parts of one sweep in ``DIR/.gossipsim``.

    Constructing a store checks everything (``--out``, ``--resume`` against the folder's scenario,
    its input files, the code that made its runs and its parts, and that the folders it will write
    are writable) without changing the folder; :meth:`open` (called at construction unless
    ``open=False``) clears it or cleans it up for resuming. With ``lock=True`` the folder's lock
    (:mod:`.folderlock`) is taken before the checks and held until :meth:`close`: what a command
    does (:func:`gossipsim.run`).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        study: Study,
        *,
        resume: bool = False,
        open: bool = True,
        lock: bool = False,
        allow_code_change: bool = False,
    ) -> None:
        if not os.fspath(out_dir):
            raise ConfigError("--out", "must name a folder (got '')")
        self.dir = Path(out_dir)
        self.meta = self.dir / META
        self.parts = self.meta / "parts"
        self.study = study
        self.resume = resume
        self.allow_code_change = allow_code_change
        self.fingerprint = fingerprint(study)
        self.inputs = input_hashes(study)
        self.code = code_fingerprint(study)
        self.complete = False  # resuming a finished sweep: nothing to run, its tables read back
        self.damaged: list[tuple[Path, str]] = []  # parts set aside by open() (resuming)
        self.duplicates: list[Path] = []  # parts of runs committed twice, dropped by open()
        self.code_changes: list[str] = []  # resumed across these (allow_code_change)
        self._existing: dict[str, Any] | None = None
        self._scan: PartScan | None = None
        self._held: list[tuple[int, Outcome]] = []  # finished, not yet committed (save, commit)
        self._first_held = self._last_saved = time.monotonic()
        self._lock = FolderLock(self.dir, "--resume" if resume else "--out") if lock else None
        check_output_folder(self.dir, "--out")
        self._refuse_foreign()  # before the lock makes anything in the folder
        try:
            if self._lock is not None:
                self._lock.acquire()
            self._existing = read_meta(self.dir)
            self._check(self._existing)
            check_writable(self.dir, "--out")
            if self.resume and not self.complete:
                self._check_parts()
            if open:
                self.open()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the folder's lock (if this store holds it)."""
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refuse_foreign(self) -> None:
        """Refuse a folder with files of its own and no gossipsim bookkeeping."""
        if os.path.lexists(self.meta) or not self.dir.is_dir():
            return
        self._check(None)

    def _check(self, existing: dict[str, Any] | None) -> None:
        """Refuse, without touching anything, a folder this sweep may not write or resume."""
        if existing is None:
            if self.resume and (self.dir / "summary.json").is_file():
                raise ConfigError(
                    "--resume",
                    f"{str(self.dir)!r} holds finished tables without gossipsim's record of their "
                    "runs (an older gossipsim's Results.write made it); run without --resume to "
                    "start over",
                )
            others = [p for p in self.dir.iterdir() if p.name != META] if self.dir.is_dir() else []
            if self.meta.is_dir():
                others += [p for p in self.meta.iterdir() if p.name != LOCK_NAME]
            if others:
                key = "--resume" if self.resume else "--out"
                raise ConfigError(
                    key,
                    f"{str(self.dir)!r} exists and is not a gossipsim results folder; choose another",
                )
            return
        if not self.resume:
            return  # a previous gossipsim results folder: replaced by open()
        if existing.get("fingerprint") != self.fingerprint:
            raise ConfigError(
                "--resume",
                f"{str(self.dir)!r} holds results of another scenario ({existing.get('name')!r}, "
                f"fingerprint {existing.get('fingerprint')}); run without --resume or choose another --out",
            )
        before = existing.get("inputs")
        if not isinstance(before, dict):
            if self.inputs:
                raise ConfigError(
                    "--resume",
                    f"{str(self.dir)!r} does not record the content of its input files (an older "
                    "gossipsim made it); run without --resume to start over",
                )
            before = {}
        for key in sorted(set(before) | set(self.inputs)):
            if before.get(key) != self.inputs.get(key):
                setting, _, value = key.partition("=")
                raise ConfigError(
                    "--resume",
                    f"{setting} {value!r} has changed since the sweep in {str(self.dir)!r} started "
                    "(its content differs from the runs already finished); run without --resume to start over",
                )
        refuse_pickled_parts(self.dir, "--resume")
        # a finished sweep (its tables written, by ``gossipsim run`` or ``Results.write``): every
        # run is done, and its tables are its runs (the parts are gone)
        self.complete = bool(existing.get("complete"))

    def _check_parts(self) -> None:
        """Resuming: read every part (damaged ones and duplicates are dropped by :meth:`open`) and
        refuse runs made by other code (unless ``allow_code_change``)."""
        scan = self._scanned()
        self.damaged = list(scan.damaged)
        self.duplicates = list(scan.duplicates)
        if not scan.kept:
            return  # nothing made by the other code is kept: nothing to mix
        changes = code_changes((self._existing or {}).get("code"), self.code)
        if changes and not self.allow_code_change:
            raise ConfigError(
                "--resume",
                f"the code has changed since the runs in {str(self.dir)!r} were made: "
                f"{'; '.join(changes)}; resumed runs would come from other code than the "
                f"{len(scan.runs())} finished ones. Run without --resume to start over, or add "
                "--allow-code-change to resume anyway",
            )
        self.code_changes = changes

    @property
    def record(self) -> dict[str, Any]:
        """What ``study.json`` records of this sweep (:func:`study_record`), with the code
        changes a resume was allowed across (``allowed_code_changes``, kept from earlier ones)."""
        record = study_record(self.study, self.inputs, self.code)
        earlier = (self._existing or {}).get("allowed_code_changes") if self.resume else None
        allowed = [*(earlier if isinstance(earlier, list) else []), *self.code_changes]
        if allowed:
            record["allowed_code_changes"] = allowed
        return record

    def open(self) -> None:
        """Make the folder ready: replaced (a new sweep) or cleaned of what a crash left behind
        (resuming: damaged parts set aside, duplicates removed), then ``study.json`` written (a
        finished sweep resumed keeps its own)."""
        try:
            if self.resume:
                clean_stale(self.dir)
                for path, _ in self.damaged:
                    os.replace(path, path.with_suffix(DAMAGED_SUFFIX))
                for path in self.duplicates:
                    path.unlink(missing_ok=True)
                self._scan = None
            else:
                try:
                    clear(self.dir)
                except OSError as exc:
                    where = exc.filename or self.dir
                    raise ConfigError(
                        "--out",
                        f"cannot replace the results in {str(self.dir)!r} ({str(where)!r}: "
                        f"{exc.strerror or exc}); nothing was changed",
                    ) from None
            if self.complete:
                return
            self.parts.mkdir(parents=True, exist_ok=True)
            write_record(self.dir, self.record)
            self._last_saved = time.monotonic()
        except OSError as exc:
            raise ConfigError(
                "--out", f"cannot write {str(self.dir)!r}: {exc.strerror or exc}"
            ) from None

    @staticmethod
    def part_name(task: Task) -> str:
        return f"v{task[0]:04d}-r{task[1]:06d}{PART_SUFFIX}"

    def save(self, variant: int, outcome: Outcome) -> None:
        """Take a finished outcome: a batch of runs is committed at once, in one part; single runs
        and failures are held back and committed together (:meth:`commit`) when
        :data:`COMMIT_RUNS` are waiting, when the first of them has waited
        :data:`COMMIT_SECONDS`, or when this one took that long to come (slow runs are
        committed one by one, as they finish)."""
        now = time.monotonic()
        if isinstance(outcome, BatchOutput):
            self._write(variant, [outcome])
        else:
            if not self._held:
                self._first_held = now
            self._held.append((variant, outcome))
            if (
                len(self._held) >= COMMIT_RUNS
                or now - self._first_held >= COMMIT_SECONDS
                or now - self._last_saved >= COMMIT_SECONDS
            ):
                self.commit()
        self._last_saved = now

    def commit(self) -> None:
        """Commit the runs held back: per variant, one part of runs (a part per set of metric
        columns, which is one in practice) and one of failures. A part written is dropped from
        the held runs at once, so that a commit failing half-way can be retried."""
        groups: dict[tuple[int, bool, tuple[str, ...]], list[Outcome]] = {}
        for variant, outcome in self._held:
            failed = isinstance(outcome, RunFailure)
            columns = () if failed else tuple(outcome.metrics)  # type: ignore[union-attr]
            groups.setdefault((variant, failed, columns), []).append(outcome)
        for (variant, failed, _), outcomes in sorted(groups.items()):
            if failed:
                part: list[Outcome] = outcomes
            else:
                part = [BatchOutput.from_runs(outcomes)]  # type: ignore[arg-type]
            self._write(variant, part)
            written = {id(outcome) for outcome in outcomes}
            self._held = [(v, o) for v, o in self._held if id(o) not in written]

    def _write(self, variant: int, outcomes: list[Outcome]) -> None:
        """One part holding ``outcomes`` (a batch, or failures), under a temporary name, renamed."""
        first = min(min(outcome.runs) for outcome in outcomes)
        self._scan = None
        atomic_write_bytes(
            self.parts / self.part_name((variant, first)), encode_part(outcomes, variant=variant)
        )

    def _scanned(self) -> PartScan:
        if self._scan is None:
            self._scan = scan_parts(self.parts, self.study)
        return self._scan

    def finished(self) -> set[Task]:
        """Tasks with a committed part (a finished run or a recorded failure) that is whole and
        merged once; every task of a finished sweep."""
        if self.complete:
            variants = self.study.variants
            return {(v, r) for v, var in enumerate(variants) for r in range(var.scenario.run.runs)}
        return self._scanned().runs()

    def load(self) -> list[tuple[int, Outcome]]:
        """Every committed outcome, in (variant, first run) order; a part damaged since the sweep
        started, or runs committed twice, are a one-line error (``--resume`` then runs them
        again)."""
        out: list[tuple[int, Outcome]] = []
        seen: set[Task] = set()
        for path in sorted(self.parts.glob(f"v*-r*{PART_SUFFIX}")):
            try:
                task = _part_task(path)
                header, outcomes = decoded(read_bytes(path))
                _check_against(task, header, outcomes, self.study)
            except (OSError, ValueError) as exc:
                raise _damaged(path, exc) from None
            mine = {(task[0], r) for r in header["runs"]}
            if mine & seen:
                raise ConfigError(
                    "--resume",
                    f"results part {str(path)!r} holds runs committed in another part too (two "
                    "commands wrote the folder at once); continue with the same command and "
                    "--resume, which merges them once",
                )
            seen |= mine
            out += [(task[0], outcome) for outcome in outcomes]
        out.sort(key=lambda item: (item[0], item[1].runs[0]))  # failures and runs of a part apart
        return out

    def finish(self, *, done: int, failed: int) -> None:
        """The tables are written: drop the parts, keep study.json (for status and --resume),
        marked complete with the runs done and failed (:func:`mark_complete`)."""
        mark_complete(self.dir, read_meta(self.dir) or self.record, done=done, failed=failed)


def study_record(
    study: Study, inputs: dict[str, str] | None = None, code: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What ``DIR/.gossipsim/study.json`` records of a sweep of ``study``: its name, fingerprint,
    the content hashes of its inputs (``inputs``, else read now: :func:`input_hashes`), the
    fingerprint of the code (``code``, else taken now: :func:`.provenance.code_fingerprint`), its
    number of runs and its scenario."""
    return {
        "name": study.name,
        "fingerprint": fingerprint(study),
        "inputs": input_hashes(study) if inputs is None else inputs,
        "code": code_fingerprint(study) if code is None else code,
        "runs": sum(v.scenario.run.runs for v in study.variants),
        "scenario": study.raw,
    }


def write_record(out_dir: Path, record: dict[str, Any]) -> None:
    """``DIR/.gossipsim/study.json``, written atomically."""
    meta = Path(out_dir) / META
    meta.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=2, default=str) + "\n"
    atomic_write_bytes(meta / "study.json", text.encode())


def mark_complete(out_dir: Path, record: dict[str, Any], *, done: int, failed: int) -> None:
    """Record a sweep whose tables are written in ``out_dir``: the parts of the runs (if any) are
    dropped and study.json says ``complete`` with the runs ``done`` and ``failed``, as
    ``gossipsim status`` reports them and ``--resume`` finds nothing left to run. What
    ``gossipsim run`` does at the end of a sweep, and :meth:`gossipsim.Results.write`."""
    shutil.rmtree(Path(out_dir) / META / "parts", ignore_errors=True)
    kept = {k: v for k, v in record.items() if k not in PROGRESS_KEYS}
    write_record(out_dir, {**kept, "complete": True, "done": done, "failed": failed})


def _damaged(path: Path, exc: Exception) -> ConfigError:
    return ConfigError(
        "--resume",
        f"results part {str(path)!r} is damaged ({_reason(exc)}); continue with the same command "
        "and --resume, which sets it aside and runs its runs again",
    )


def refuse_pickled_parts(out_dir: Path, key: str) -> None:
    """Refuse a folder holding parts of an older gossipsim, which were pickles: unpickling a file
    from elsewhere can run any code, so they are never read."""
    parts = Path(out_dir) / META / "parts"
    if parts.is_dir() and any(parts.glob("*.pkl")):
        raise ConfigError(
            key,
            f"{str(out_dir)!r} holds runs saved by an older gossipsim as pickle files, which are not "
            "read (loading them could run code); run without --resume to start over",
        )


# ---------------------------------------------------------------------------------- folder upkeep


def clean_stale(out_dir: Path) -> None:
    """Remove what an interrupted write leaves behind: staging folders of the tables and figures
    and temporary files of parts and study.json (a process killed before its rename)."""
    d = Path(out_dir)
    for staging in d.glob(f"{STAGING_PREFIX}*"):
        if staging.is_dir() and not staging.is_symlink():
            shutil.rmtree(staging, ignore_errors=True)
    for folder in (d, d / META, d / META / "parts"):
        for tmp in folder.glob(".*.tmp-*"):
            if tmp.is_file():
                tmp.unlink(missing_ok=True)


def clear(out_dir: Path) -> None:
    """Remove a previous gossipsim results folder's own files (and nothing else; the lock stays):
    all are first moved into a staging folder, and deleted only once every one has moved; if one
    cannot be moved, those moved are put back and the OSError raised (nothing is lost)."""
    d = Path(out_dir)
    clean_stale(d)
    victims = [d / name for name in (*RESULT_FILES, "plots") if os.path.lexists(d / name)]
    if (d / META).is_dir():
        victims += [p for p in (d / META).iterdir() if p.name != LOCK_NAME]
    if not victims:
        return
    trash = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=d))
    moved: list[tuple[Path, Path]] = []
    try:
        for i, path in enumerate(victims):
            aside = trash / f"{i}-{path.name}"
            os.rename(path, aside)
            moved.append((path, aside))
    except OSError:
        for path, aside in reversed(moved):
            with contextlib.suppress(OSError):
                os.rename(aside, path)
        shutil.rmtree(trash, ignore_errors=True)
        raise
    shutil.rmtree(trash, ignore_errors=True)


def status(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Runs done, failed and remaining of a results folder (finished or interrupted), whether a
    command holds it (``running``: its process id, else None), what is damaged (``damaged``:
    ``name: why`` of each part that will not be merged, or of each file of finished tables that
    is not what was written; ``repairable``: whether ``--resume`` rewrites each such file from
    its intact copy in the other format) and how many parts hold runs of other parts
    (``duplicate_parts``: each run is counted once)."""
    d = Path(out_dir)
    meta = read_meta(d)
    if meta is None:
        meta = _record_of_tables(d)
    if meta is None:
        raise ConfigError("DIR", f"{str(d)!r} is not a gossipsim results folder")
    total = meta.get("runs", 0)
    total = total if type(total) is int else 0
    running = holder(d)
    if meta.get("complete"):
        from gossipsim.results.manifest import folder_damage

        failed = meta.get("failed")
        if type(failed) is not int:  # recorded by an older gossipsim: count failures.csv
            failed = _failures_written(d)
        damaged, repairable = folder_damage(d)
        return {
            "name": meta.get("name"),
            "complete": True,
            "runs": total,
            "done": total - failed,
            "failed": failed,
            "remaining": 0,
            "running": running,
            "damaged": damaged,
            "repairable": repairable,
            "duplicate_parts": 0,
        }
    refuse_pickled_parts(d, "DIR")
    scan = scan_parts(d / META / "parts", _study_of(meta))
    done, failed = len(scan.runs(failed=False)), len(scan.runs(failed=True))
    damaged = [f"{path.name}: {why}" for path, why in scan.damaged]
    return {
        "name": meta.get("name"),
        "complete": False,
        "runs": total,
        "done": done,
        "failed": failed,
        "remaining": max(total - done - failed, 0),
        "running": running,
        "damaged": damaged,
        "repairable": False,
        "duplicate_parts": len(scan.duplicates),
    }


def _study_of(record: dict[str, Any]) -> Study | None:
    """The study a folder's record holds (its scenario as the sweep ran it), which its parts are
    checked against (every table their variant records: :func:`missing_tables`); None where this
    gossipsim cannot rebuild it (a data file or plug-in gone): the parts are then checked alone."""
    raw = record.get("scenario")
    if not isinstance(raw, dict):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return parse_study(raw)
    except Exception:  # noqa: BLE001 - status reports what it can read
        return None


def _failures_written(d: Path) -> int:
    """Rows of a finished folder's failures table (folders whose record does not count them)."""
    if (d / "failures.csv").is_file():
        import pandas as pd

        try:
            return len(pd.read_csv(d / "failures.csv"))
        except (OSError, ValueError, pd.errors.ParserError):
            return 0
    return 0


def _record_of_tables(d: Path) -> dict[str, Any] | None:
    """The record of a finished folder that has none (written by an older gossipsim's
    ``Results.write``), from its summary.json: each variant's runs (its resolved settings) and
    failed runs; None if there is no readable summary."""
    try:
        summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
        entries = summary["variants"].values()
        runs = sum(int(e["resolved"]["run"]["runs"]) for e in entries)
        failed = sum(int(e.get("failed_runs", 0)) for e in entries)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    return {"name": summary.get("name"), "runs": runs, "complete": True, "failed": failed}
