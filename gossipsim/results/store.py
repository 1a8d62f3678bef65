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
study.json is marked ``complete`` with the runs done and failed
(:func:`gossipsim.results.studyrecord.mark_complete`, which
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

The record of the sweep is :mod:`gossipsim.results.studyrecord`'s, the parts are read and checked
by :mod:`gossipsim.results.parts` (written in :mod:`gossipsim.results.partformat`'s format) and
``gossipsim status`` is :mod:`gossipsim.results.status`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gossipsim.errors import ConfigError
from gossipsim.execution.executors import Outcome, RunFailure, Task
from gossipsim.measurement.outputs import BatchOutput
from gossipsim.results.folderfiles import (
    PROGRESS_KEYS as PROGRESS_KEYS,  # re-exported: the folder's names
)
from gossipsim.results.folderfiles import STAGING_PREFIX as STAGING_PREFIX
from gossipsim.results.folderfiles import atomic_write_bytes
from gossipsim.results.folderfiles import check_output_folder as check_output_folder
from gossipsim.results.folderfiles import read_meta as read_meta
from gossipsim.results.folderlock import LOCK_NAME, META, FolderLock
from gossipsim.results.partformat import (
    PART_MAGIC as PART_MAGIC,  # re-exported: the part format's names
)
from gossipsim.results.partformat import decode_part as decode_part
from gossipsim.results.partformat import decoded, read_bytes
from gossipsim.results.partformat import encode_part as encode_part
from gossipsim.results.partformat import read_header as read_header
from gossipsim.results.parts import (
    PART_SUFFIX,
    PartScan,
    check_part,
    damaged_part,
    part_task,
    refuse_pickled_parts,
    scan_parts,
)
from gossipsim.results.provenance import code_changes, code_fingerprint
from gossipsim.results.studyrecord import (
    fingerprint,
    input_hashes,
    mark_complete,
    study_record,
    write_record,
)

if TYPE_CHECKING:
    from gossipsim.study.scenario import Study

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
                task = part_task(path)
                header, outcomes = decoded(read_bytes(path))
                check_part(task, header, outcomes, self.study)
            except (OSError, ValueError) as exc:
                raise damaged_part(path, exc) from None
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
