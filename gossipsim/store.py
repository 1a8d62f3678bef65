"""Loss-free, resumable results: every finished run is committed to the results folder at once.

Layout of a results folder ``DIR`` while a sweep runs::

    DIR/.gossipsim/study.json          the scenario (after --runs/--seed), its fingerprint, run count
    DIR/.gossipsim/parts/v0001-r000042.pkl   a finished run, or a batch of runs from the vectorised
                                             engine (first run 42), or a failure: a header naming
                                             its runs, then the outcome (written to a temporary
                                             name, renamed)

When every run is done the tables (metrics.csv, runs.csv, requests.csv, visits.csv, failures.csv,
summary.json, plots/) are merged from the parts in (variant, run) order and the parts are removed.
``gossipsim run FILE --out DIR --resume`` continues an interrupted sweep: finished runs are skipped,
and a folder that holds another scenario is refused. A crash at any moment leaves at worst one
temporary file, which is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .executors import Outcome, RunFailure, Task
from .scenario import Study

META = ".gossipsim"
RESULT_FILES = (
    "metrics.csv", "runs.csv", "requests.csv", "visits.csv", "failures.csv", "summary.json",
    "metrics.parquet", "runs.parquet", "requests.parquet", "visits.parquet", "failures.parquet",
)  # fmt: skip


def fingerprint(study: Study) -> str:
    """A hash of the scenario as it will run (sections, sweep, runs, seed)."""
    text = json.dumps(study.raw, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunStore:
    """The per-run parts of one sweep in ``DIR/.gossipsim``."""

    def __init__(
        self, out_dir: str | os.PathLike[str], study: Study, *, resume: bool = False
    ) -> None:
        self.dir = Path(out_dir)
        self.meta = self.dir / META
        self.parts = self.meta / "parts"
        self.study = study
        self.fingerprint = fingerprint(study)
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError("--out", f"{str(self.dir)!r} exists and is not a folder")
        existing = read_meta(self.dir)
        if resume:
            if existing is None:
                if self.dir.exists() and any(self.dir.iterdir()):
                    raise ConfigError(
                        "--resume", f"{str(self.dir)!r} is not a gossipsim results folder"
                    )
            elif existing.get("fingerprint") != self.fingerprint:
                raise ConfigError(
                    "--resume",
                    f"{str(self.dir)!r} holds results of another scenario ({existing.get('name')!r}, "
                    f"fingerprint {existing.get('fingerprint')}); run without --resume or choose another --out",
                )
        else:
            if existing is None and self.dir.exists() and any(self.dir.iterdir()):
                raise ConfigError(
                    "--out",
                    f"{str(self.dir)!r} exists and is not a gossipsim results folder; choose another",
                )
            clear(self.dir)
        self.parts.mkdir(parents=True, exist_ok=True)
        total = sum(v.scenario.run.runs for v in study.variants)
        meta = {
            "name": study.name,
            "fingerprint": self.fingerprint,
            "runs": total,
            "scenario": study.raw,
        }
        atomic_write_bytes(
            self.meta / "study.json", (json.dumps(meta, indent=2, default=str) + "\n").encode()
        )

    @staticmethod
    def part_name(task: Task) -> str:
        return f"v{task[0]:04d}-r{task[1]:06d}.pkl"

    def save(self, variant: int, outcome: Outcome) -> None:
        """Commit one outcome (a run, a batch of runs, or a failure): a header naming its runs,
        then the outcome, in one file written under a temporary name and renamed."""
        header = {"runs": list(outcome.runs), "failed": isinstance(outcome, RunFailure)}
        atomic_write_bytes(
            self.parts / self.part_name((variant, outcome.runs[0])),
            pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL)
            + pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL),
        )

    def _parts(self) -> list[tuple[Task, Path]]:
        """The committed parts by (variant, first run)."""
        out = []
        for path in self.parts.glob("v*-r*.pkl"):
            v, r = path.stem[1:].split("-r")
            out.append(((int(v), int(r)), path))
        return sorted(out)

    def finished(self) -> set[Task]:
        """Tasks with a committed part (a finished run or a recorded failure)."""
        done: set[Task] = set()
        for (variant, _), path in self._parts():
            done.update((variant, r) for r in read_header(path)["runs"])
        return done

    def load(self) -> Iterator[tuple[int, Outcome]]:
        """Every committed outcome, in (variant, first run) order."""
        for (variant, _), path in self._parts():
            with open(path, "rb") as fh:
                pickle.load(fh)  # the header
                yield variant, pickle.load(fh)

    def finish(self) -> None:
        """The tables are written: drop the parts, keep study.json (for status and --resume)."""
        shutil.rmtree(self.parts, ignore_errors=True)
        meta = read_meta(self.dir) or {}
        meta["complete"] = True
        atomic_write_bytes(
            self.meta / "study.json", (json.dumps(meta, indent=2, default=str) + "\n").encode()
        )


def read_header(path: Path) -> dict[str, Any]:
    """The header of a committed part: its runs and whether they failed."""
    with open(path, "rb") as fh:
        header: dict[str, Any] = pickle.load(fh)
    return header


def read_meta(out_dir: Path) -> dict[str, Any] | None:
    path = Path(out_dir) / META / "study.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError):
        return None


def clear(out_dir: Path) -> None:
    """Remove a previous gossipsim results folder's own files (and nothing else)."""
    for name in RESULT_FILES:
        (out_dir / name).unlink(missing_ok=True)
    shutil.rmtree(out_dir / "plots", ignore_errors=True)
    shutil.rmtree(out_dir / META, ignore_errors=True)


def status(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Runs done, failed and remaining of a results folder (finished or interrupted)."""
    d = Path(out_dir)
    meta = read_meta(d)
    if meta is None:
        raise ConfigError("DIR", f"{str(d)!r} is not a gossipsim results folder")
    total = int(meta.get("runs", 0))
    if meta.get("complete"):
        failed = 0
        failures = d / "failures.csv"
        if failures.is_file():
            failed = max(len(failures.read_text(encoding="utf-8").splitlines()) - 1, 0)
        return {
            "name": meta.get("name"),
            "complete": True,
            "runs": total,
            "done": total - failed,
            "failed": failed,
            "remaining": 0,
        }
    done = failed = 0
    for path in (d / META / "parts").glob("v*-r*.pkl"):
        try:
            header = read_header(path)
        except (OSError, pickle.UnpicklingError, EOFError):
            continue
        if header["failed"]:
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
