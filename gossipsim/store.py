"""Loss-free, resumable results: finished runs are committed to the results folder in batches.

Layout of a results folder ``DIR`` while a sweep runs::

    DIR/.gossipsim/study.json                 the scenario (after --runs/--seed), its fingerprint,
                                              the content hashes of the files it names, run count
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

A part is data, never code: a JSON header (its runs, whether they failed, the scalar fields) and
the raw bytes of its NumPy arrays, each described in the header by dtype and shape; arrays of
strings are stored as fixed-width text, arrays mixing labels of several types as JSON lists. Nothing
is unpickled: a folder holding parts of an older gossipsim (``.pkl`` files) is refused.

When every run is done the tables (metrics.csv, runs.csv, requests.csv, visits.csv, failures.csv,
summary.json, plots/) are merged from the parts in (variant, run) order, the parts are removed and
study.json is marked ``complete`` with the runs done and failed (:func:`mark_complete`, which
:meth:`gossipsim.Results.write` calls too: its folder is the one ``gossipsim run`` writes).
``gossipsim run FILE --out DIR --resume`` continues an interrupted sweep: finished runs are skipped,
and a folder that holds another scenario, or whose data or graph files have changed since, is
refused; a finished sweep has nothing left to run (its tables are read back). A crash at any moment leaves at worst temporary files and staging folders, which the next
run or resume on the folder removes.

Every check is made before the folder is touched: :class:`RunStore` checks at construction and
changes the folder only in :meth:`RunStore.open`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigError
from .executors import Outcome, RunFailure, Task
from .measure import BatchOutput, RunOutput
from .scenario import Study

META = ".gossipsim"
STAGING_PREFIX = ".staging-"  # results.Results stages the tables and figures in DIR/.staging-*
PART_SUFFIX = ".part"
PART_MAGIC = b"GOSSIPSIM-PART-1\n"
_LENGTH = struct.Struct("<Q")  # the header's length in bytes, after the magic
_ALIGN = 8  # array data starts on 8-byte boundaries (from the start of the data section)
_ARRAY_KINDS = "biufcU"  # dtype kinds a part may hold: numbers, booleans, text; never objects
#: runs of the event engine held back before a commit, at most (one part per variant and commit)
COMMIT_RUNS = 1024
#: seconds a finished run waits for its commit, at most, while runs keep finishing faster than that
COMMIT_SECONDS = 1.0
RESULT_FILES = (
    "metrics.csv", "runs.csv", "requests.csv", "visits.csv", "failures.csv", "summary.json",
    "metrics.parquet", "runs.parquet", "requests.parquet", "visits.parquet", "failures.parquet",
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
    return {str(n) for n in names if n != "synthetic"}


def _dataset_hash(name: str) -> str:
    """The content hash of a bundled data set (as loaded, cached, by the simulator)."""
    from .datasets import _raw

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


def check_output_folder(folder: str | os.PathLike[str], key: str) -> None:
    """Raise a ConfigError for ``key`` unless a folder can be written at ``folder``: it is a
    writable folder, or it does not exist and its nearest existing ancestor is a writable folder.
    Nothing is created."""
    if not os.fspath(folder):  # Path("") would silently mean the current folder
        raise ConfigError(key, "must name a folder (got '')")
    path = Path(folder)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ConfigError(key, f"{str(path)!r} exists and is not a folder; choose another")
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if not os.path.isdir(probe):
        raise ConfigError(
            key,
            f"{str(probe)!r} is a file, so {str(path)!r} cannot be made below it; choose another",
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(key, f"no permission to write in {str(probe)!r}; choose another folder")


class RunStore:
    """The per-run parts of one sweep in ``DIR/.gossipsim``.

    Constructing a store checks everything (``--out``, ``--resume`` against the folder's scenario,
    its input files and the format of its parts) without changing the folder; :meth:`open` (called
    at construction unless ``open=False``) clears it or cleans it up for resuming.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        study: Study,
        *,
        resume: bool = False,
        open: bool = True,
    ) -> None:
        if not os.fspath(out_dir):
            raise ConfigError("--out", "must name a folder (got '')")
        self.dir = Path(out_dir)
        self.meta = self.dir / META
        self.parts = self.meta / "parts"
        self.study = study
        self.resume = resume
        self.fingerprint = fingerprint(study)
        self.inputs = input_hashes(study)
        self.complete = False  # resuming a finished sweep: nothing to run, its tables read back
        check_output_folder(self.dir, "--out")
        self._check(read_meta(self.dir))
        self._held: list[tuple[int, Outcome]] = []  # finished, not yet committed (save, commit)
        self._first_held = self._last_saved = time.monotonic()
        if open:
            self.open()

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
            if self.dir.exists() and any(self.dir.iterdir()):
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

    @property
    def record(self) -> dict[str, Any]:
        """What ``study.json`` records of this sweep (:func:`study_record`)."""
        return study_record(self.study, self.inputs)

    def open(self) -> None:
        """Make the folder ready: replaced (a new sweep) or cleaned of what a crash left behind
        (resuming), then ``study.json`` written (a finished sweep resumed keeps its own)."""
        try:
            if self.resume:
                clean_stale(self.dir)
            else:
                clear(self.dir)
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
        atomic_write_bytes(self.parts / self.part_name((variant, first)), encode_part(outcomes))

    def _parts(self) -> list[tuple[Task, Path]]:
        """The committed parts by (variant, first run)."""
        out = []
        for path in self.parts.glob(f"v*-r*{PART_SUFFIX}"):
            v, r = path.stem[1:].split("-r")
            out.append(((int(v), int(r)), path))
        return sorted(out)

    def finished(self) -> set[Task]:
        """Tasks with a committed part (a finished run or a recorded failure); every task of a
        finished sweep."""
        if self.complete:
            variants = self.study.variants
            return {(v, r) for v, var in enumerate(variants) for r in range(var.scenario.run.runs)}
        done: set[Task] = set()
        for (variant, _), path in self._parts():
            done.update((variant, r) for r in _checked_header(path)["runs"])
        return done

    def load(self) -> list[tuple[int, Outcome]]:
        """Every committed outcome, in (variant, first run) order."""
        out: list[tuple[int, Outcome]] = []
        for (variant, _), path in self._parts():
            try:
                out += [(variant, outcome) for outcome in decode_part(_read(path))]
            except (OSError, ValueError) as exc:
                raise _damaged(path, exc) from None
        out.sort(key=lambda item: (item[0], item[1].runs[0]))  # failures and runs of a part apart
        return out

    def finish(self, *, done: int, failed: int) -> None:
        """The tables are written: drop the parts, keep study.json (for status and --resume),
        marked complete with the runs done and failed (:func:`mark_complete`)."""
        mark_complete(self.dir, read_meta(self.dir) or self.record, done=done, failed=failed)


def study_record(study: Study, inputs: dict[str, str] | None = None) -> dict[str, Any]:
    """What ``DIR/.gossipsim/study.json`` records of a sweep of ``study``: its name, fingerprint,
    the content hashes of its inputs (``inputs``, else read now: :func:`input_hashes`), its
    number of runs and its scenario."""
    return {
        "name": study.name,
        "fingerprint": fingerprint(study),
        "inputs": input_hashes(study) if inputs is None else inputs,
        "runs": sum(v.scenario.run.runs for v in study.variants),
        "scenario": study.raw,
    }


#: the keys of a record that say how far its sweep got (not what the sweep is)
PROGRESS_KEYS = ("complete", "done", "failed")


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


# ------------------------------------------------------------------------------------ part format


def encode_part(outcomes: Outcome | list[Outcome]) -> bytes:
    """A part as bytes: magic, header length, JSON header, array data (see the module doc). A part
    holds one run, one batch of runs, or failures."""
    items = outcomes if isinstance(outcomes, list) else [outcomes]
    arrays: dict[str, np.ndarray] = {}
    fields: dict[str, Any]
    runs = [r for item in items for r in item.runs]
    if all(isinstance(item, RunFailure) for item in items) and len(items) > 1:
        kind = "failures"
        fields = {
            "failures": [[f.run, f.seed, f.error] for f in items]  # type: ignore[union-attr]
        }
    elif len(items) != 1:
        raise ValueError("a results part holds one run, one batch of runs, or failures")
    elif isinstance(outcome := items[0], RunFailure):
        kind = "failure"
        fields = {"run": outcome.run, "seed": outcome.seed, "error": outcome.error}
    elif isinstance(outcome, BatchOutput):
        kind = "batch"
        fields = {}
        if outcome.run_rows or outcome.request_rows:
            fields = {"run_rows": outcome.run_rows, "request_rows": outcome.request_rows}
        arrays.update({f"run_columns.{k}": v for k, v in outcome.run_columns.items()})
        arrays.update({f"request_columns.{k}": v for k, v in outcome.request_columns.items()})
        arrays["metric_runs"] = outcome.metric_runs
        arrays.update({f"metrics.{k}": v for k, v in outcome.metrics.items()})
        arrays["visits"] = outcome.visits
    else:
        kind = "run"
        fields = {
            "run": outcome.run,
            "seed": outcome.seed,
            "run_row": outcome.run_row,
            "request_rows": outcome.request_rows,
        }
        arrays.update({f"metrics.{k}": v for k, v in outcome.metrics.items()})
        arrays["visits"] = outcome.visits
    table: list[list[Any]] = []  # [name, dtype, shape, offset], or [name, "json", shape, values]
    chunks: list[bytes | memoryview] = []
    offset = 0
    for name, value in arrays.items():
        dtype, shape, data = _encode_array(np.asarray(value))
        if isinstance(data, list):
            table.append([name, dtype, shape, data])
            continue
        pad = -offset % _ALIGN
        if pad:
            chunks.append(b"\0" * pad)
            offset += pad
        table.append([name, dtype, shape, offset])
        chunks.append(data)
        offset += len(data)
    header = {
        "kind": kind,
        "runs": [int(r) for r in runs],
        "failed": kind in ("failure", "failures"),
        "fields": fields,
        "arrays": table,
    }
    text = _HEADER_ENCODER.encode(header).encode()
    return b"".join([PART_MAGIC, _LENGTH.pack(len(text)), text, *chunks])


def _encode_array(a: np.ndarray) -> tuple[str, list[int], memoryview | list[Any]]:
    """An array's dtype (``"json"``, or ``"object:"`` + the text dtype of string labels), shape,
    and its bytes or, for labels of mixed types, its values as a list."""
    shape = list(a.shape)
    if a.dtype.kind == "O":
        values = a.ravel().tolist()
        if all(isinstance(x, str) for x in values):  # string labels: fixed-width text
            text = np.array(values, dtype=str)
            return "object:" + text.dtype.str, shape, _bytes(text)
        return "json", shape, values  # labels of mixed types (3 and "a")
    if a.dtype.kind not in _ARRAY_KINDS:
        raise TypeError(f"cannot store an array of dtype {a.dtype} in a results part")
    return a.dtype.str, shape, _bytes(a)


def _bytes(a: np.ndarray) -> memoryview:
    """The array's bytes without a copy (batches hold large arrays)."""
    return np.ascontiguousarray(a).data.cast("B")


def _json_scalar(x: Any) -> Any:
    """NumPy scalars as the Python values they hold (JSON has no other types)."""
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    raise TypeError(f"cannot store a value of type {type(x).__name__} in a results part")


# one encoder for every part: json.dumps with options would build a new one per call
_HEADER_ENCODER = json.JSONEncoder(default=_json_scalar, separators=(",", ":"))


def decode_part(data: bytearray) -> list[Outcome]:
    """The outcomes :func:`encode_part` wrote; a ValueError if ``data`` is not such a part. Arrays
    are views of ``data`` (writable, as it is a bytearray)."""
    header, start = _parse_header(data)
    try:
        return _outcomes(header, data, start)
    except (TypeError, KeyError, AttributeError) as exc:  # a header of the wrong shape
        raise ValueError(f"malformed results part ({type(exc).__name__}: {exc})") from None


def _outcomes(header: dict[str, Any], data: bytearray, start: int) -> list[Outcome]:
    fields = header["fields"]
    arrays = {entry[0]: _decode_array(entry, data, start) for entry in header["arrays"]}

    def group(prefix: str) -> dict[str, np.ndarray]:
        return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}

    kind = header["kind"]
    if kind == "failure":
        return [RunFailure(int(fields["run"]), int(fields["seed"]), str(fields["error"]))]
    if kind == "failures":
        return [RunFailure(int(r), int(seed), str(error)) for r, seed, error in fields["failures"]]
    if kind == "batch":
        return [
            BatchOutput(
                runs=tuple(int(r) for r in header["runs"]),
                run_columns=group("run_columns."),
                metric_runs=arrays["metric_runs"],
                metrics=group("metrics."),
                visits=arrays["visits"],
                request_columns=group("request_columns."),
                run_rows=[dict(row) for row in fields.get("run_rows", [])],
                request_rows=[dict(row) for row in fields.get("request_rows", [])],
            )
        ]
    if kind == "run":
        return [
            RunOutput(
                run=int(fields["run"]),
                seed=int(fields["seed"]),
                run_row=dict(fields["run_row"]),
                request_rows=[dict(row) for row in fields["request_rows"]],
                metrics=group("metrics."),
                visits=arrays["visits"],
            )
        ]
    raise ValueError(f"unknown part kind {kind!r}")


def _parse_header(data: bytes | bytearray) -> tuple[dict[str, Any], int]:
    """The header and the offset where the array data starts."""
    head = len(PART_MAGIC) + _LENGTH.size
    if len(data) < head or not data.startswith(PART_MAGIC):
        raise ValueError("not a gossipsim results part")
    (length,) = _LENGTH.unpack_from(data, len(PART_MAGIC))
    if head + length > len(data):
        raise ValueError("truncated results part")
    header = json.loads(data[head : head + length])
    runs = header.get("runs") if isinstance(header, dict) else None
    if not isinstance(runs, list) or not all(type(r) is int for r in runs):
        raise ValueError("results part without its runs")
    return header, head + length


def _decode_array(entry: list[Any], data: bytearray, start: int) -> np.ndarray:
    """One array of a part, from its header entry (see :func:`encode_part`)."""
    _, kind, shape, where = entry
    if kind == "json":  # labels of mixed types
        out = np.empty(len(where), dtype=object)
        out[:] = where
        return out.reshape(shape)
    dtype, text = _dtype(kind)
    count = math.prod(shape)
    offset = start + where
    if type(where) is not int or count < 0 or offset + count * dtype.itemsize > len(data):
        raise ValueError("truncated results part")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    if len(shape) != 1:
        array = array.reshape(shape)
    return array.astype(object) if text else array


@functools.lru_cache(maxsize=64)
def _dtype(kind: str) -> tuple[np.dtype[Any], bool]:
    """The dtype a part names and whether it holds string labels (``object:`` + text dtype):
    numbers, booleans or text only, never objects (which would be built from the file's bytes)."""
    text = kind.startswith("object:")
    dtype = np.dtype(kind.removeprefix("object:"))
    if dtype.kind not in _ARRAY_KINDS or dtype.hasobject or (text and dtype.kind != "U"):
        raise ValueError(f"results part with an array of dtype {dtype}")
    return dtype, text


def _read(path: Path) -> bytearray:
    """A file's bytes in a bytearray (so arrays decoded from it are writable, without a copy)."""
    with open(path, "rb") as fh:
        data = bytearray(os.fstat(fh.fileno()).st_size)
        fh.readinto(data)
    return data


def read_header(path: Path) -> dict[str, Any]:
    """The header of a committed part (its runs, whether they failed, ...), read without its
    arrays; a ValueError if the file is not a part."""
    with open(path, "rb") as fh:
        head = fh.read(len(PART_MAGIC) + _LENGTH.size)
        if head[: len(PART_MAGIC)] != PART_MAGIC or len(head) < len(PART_MAGIC) + _LENGTH.size:
            raise ValueError("not a gossipsim results part")
        (length,) = _LENGTH.unpack_from(head, len(PART_MAGIC))
        header, _ = _parse_header(head + fh.read(length))
    return header


def _checked_header(path: Path) -> dict[str, Any]:
    try:
        return read_header(path)
    except (OSError, ValueError) as exc:
        raise _damaged(path, exc) from None


def _damaged(path: Path, exc: Exception) -> ConfigError:
    return ConfigError(
        "--resume",
        f"results part {str(path)!r} is damaged ({exc}); delete it to run its runs again",
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


def read_meta(out_dir: Path) -> dict[str, Any] | None:
    path = Path(out_dir) / META / "study.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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
    """Remove a previous gossipsim results folder's own files (and nothing else)."""
    clean_stale(out_dir)
    for name in RESULT_FILES:
        (out_dir / name).unlink(missing_ok=True)
    shutil.rmtree(out_dir / "plots", ignore_errors=True)
    shutil.rmtree(out_dir / META, ignore_errors=True)


def status(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Runs done, failed and remaining of a results folder (finished or interrupted)."""
    d = Path(out_dir)
    meta = read_meta(d)
    if meta is None:
        meta = _record_of_tables(d)
    if meta is None:
        raise ConfigError("DIR", f"{str(d)!r} is not a gossipsim results folder")
    total = int(meta.get("runs", 0))
    if meta.get("complete"):
        failed = meta.get("failed")
        if not isinstance(failed, int):  # recorded by an older gossipsim: count failures.csv
            failed = _failures_written(d)
        return {
            "name": meta.get("name"),
            "complete": True,
            "runs": total,
            "done": total - failed,
            "failed": failed,
            "remaining": 0,
        }
    refuse_pickled_parts(d, "DIR")
    done = failed = 0
    for path in (d / META / "parts").glob(f"v*-r*{PART_SUFFIX}"):
        try:
            header = read_header(path)
        except (OSError, ValueError):
            continue  # a damaged part counts as not done (--resume says which)
        if header.get("failed"):
            failed += len(header["runs"])
        else:
            done += len(header["runs"])
    return {
        "name": meta.get("name"),
        "complete": False,
        "runs": total,
        "done": done,
        "failed": failed,
        "remaining": total - done - failed,
    }


def _failures_written(d: Path) -> int:
    """Rows of a finished folder's failures table (folders whose record does not count them)."""
    if (d / "failures.csv").is_file():
        import pandas as pd

        return len(pd.read_csv(d / "failures.csv"))
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
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return {"name": summary.get("name"), "runs": runs, "complete": True, "failed": failed}
