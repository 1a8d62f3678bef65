"""How far the sweep of a results folder got (:func:`status`, what ``gossipsim status DIR``
prints): runs done, failed and remaining, whether a command holds the folder, what is damaged and
whether ``--resume`` can repair it; a finished folder by its record and its tables' checksums, an
interrupted one by its parts."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gossipsim.errors import ConfigError
from gossipsim.results.folderfiles import read_meta
from gossipsim.results.folderlock import META, holder
from gossipsim.results.parts import refuse_pickled_parts, scan_parts
from gossipsim.study.scenario import parse_study

if TYPE_CHECKING:
    from gossipsim.study.scenario import Study


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
    checked against (every table their variant records: :func:`gossipsim.results.parts.missing_tables`); None where this
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
