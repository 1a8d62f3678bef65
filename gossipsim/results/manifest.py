"""What a results folder's tables were when written: row counts and a checksum per file.

``summary.json`` records, under ``files``, each table file written with it (``metrics.csv``,
``metrics.parquet``, ...): its rows, its size in bytes and the SHA-256 of its bytes; and under
``summary_sha256`` the SHA-256 of summary.json itself without that key (its JSON as loaded,
keys sorted, no spaces: the same for any formatting). :func:`check_summary` refuses a summary
that no longer is what was written; :func:`table_damage` lists every table file that is not (one
mechanism for every reader: :func:`check_tables` for ``load_results``, ``plot``, ``compare`` and
``--resume``, which refuse the first in one line naming the file, whatever format they read;
:func:`folder_damage` for ``gossipsim status``); :func:`intact_copy` names the copy of a damaged
table in the other format that ``--resume`` rewrites it from. Folders written before summary.json
recorded them are read as they are.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import stat
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

from gossipsim.errors import ConfigError

FILES_KEY = "files"
DIGEST_KEY = "summary_sha256"
#: a rerun of the scenario is the remedy for a damaged finished folder
REMEDY = "run the scenario again"
#: the tables of a results folder (the stems of their files) and the kinds of their files
TABLES = ("metrics", "runs", "requests", "visits", "failures", "particles")
TABLE_FILE_KINDS = ("csv", "parquet")
#: the names a table file may have (summary.json records no other: a name it lists that is none of
#: these, e.g. a path elsewhere, is never opened)
TABLE_FILES = frozenset(f"{stem}.{kind}" for stem in TABLES for kind in TABLE_FILE_KINDS)


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def summary_sha256(summary: dict[str, Any]) -> str:
    """The checksum of a summary as loaded from its JSON (``DIGEST_KEY`` left out)."""
    body = {k: v for k, v in summary.items() if k != DIGEST_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def sealed(summary: dict[str, Any], folder: Path, rows: dict[str, int]) -> str:
    """summary.json's text for ``summary`` with the table files of ``folder`` (``rows``: file name
    -> its rows) recorded in it and its own checksum."""
    files = {}
    for name, count in rows.items():
        path = folder / name
        files[name] = {"rows": count, "bytes": path.stat().st_size, "sha256": file_sha256(path)}
    loaded = json.loads(json.dumps({**summary, FILES_KEY: files}))  # as a reader will load it
    loaded[DIGEST_KEY] = summary_sha256(loaded)
    return compact_number_lists(json.dumps(loaded, indent=2)) + "\n"


_NUMBER = r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?"
#: a list of numbers as ``json.dumps(..., indent=...)`` writes it, one number a line (a JSON
#: string never holds a raw newline, so no string can match)
_NUMBER_LIST = re.compile(rf"\[\n\s*{_NUMBER}(?:,\n\s*{_NUMBER})*\n\s*\]")


def compact_number_lists(text: str) -> str:
    """Indented JSON with each list of numbers on one line (the same JSON value): a grid of
    numbers (``theory.target_density``) takes a line per row, not per number."""
    return _NUMBER_LIST.sub(lambda m: "[" + ", ".join(re.findall(_NUMBER, m.group(0))) + "]", text)


def check_summary(summary: dict[str, Any], path: Path) -> None:
    """Refuse a summary.json whose checksum does not match its content (one that records its
    table files must have one)."""
    recorded = summary.get(DIGEST_KEY)
    if recorded is None and FILES_KEY not in summary:
        return  # written before summaries were checksummed
    if not isinstance(recorded, str) or recorded != summary_sha256(summary):
        raise ConfigError(
            "DIR",
            f"{str(path)!r} is damaged or was edited (it does not match the checksum gossipsim "
            f"wrote in it); {REMEDY}",
        )
    if not isinstance(summary.get(FILES_KEY), dict):
        raise ConfigError("DIR", f"{str(path)!r} does not record its tables; {REMEDY}")


def recorded(summary: dict[str, Any], name: str) -> dict[str, Any] | None:
    """What summary.json records of table file ``name`` (None if it records nothing of it)."""
    files = summary.get(FILES_KEY)
    entry = files.get(name) if isinstance(files, dict) else None
    return entry if isinstance(entry, dict) else None


def mismatch(path: Path, entry: dict[str, Any]) -> str | None:
    """Why ``path`` is not the file ``entry`` records (None if it is)."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
        return "not a regular file"
    size, written = info.st_size, entry.get("bytes")
    if size != written:
        if type(written) is not int:
            return "its size unknown"
        if size == 0:
            return f"empty, {written:,} bytes written"
        return f"{size:,} bytes, {written:,} written"
    try:
        digest = file_sha256(path)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if digest != entry.get("sha256"):
        return "its bytes differ from those written (checksum)"
    return None


def table_damage(
    folder: Path, summary: dict[str, Any], names: Collection[str] | None = None
) -> list[tuple[str, str]]:
    """``(name, why)`` of every table file ``summary`` (checked: :func:`check_summary`) records
    (of those ``names`` lists, where given) that is not what was written, whatever format a reader
    reads (truncated, edited, emptied, widened: another size or checksum), and of each file the
    tables are read from that is missing (the CSV files, or the Parquet files of a folder written
    as Parquet only; Parquet copies beside CSV files may be deleted). Empty for a folder written
    before summary.json recorded its files. Each file is read whole once (about a second per
    GB)."""
    out = []
    for name in recorded_names(summary):
        if names is None or name in names:
            why = file_damage(folder, summary, name)
            if why is not None:
                out.append((str(name)[:80], why))
    return out


def recorded_names(summary: dict[str, Any]) -> list[str]:
    """The names of the files summary.json records (none for a folder of an older gossipsim)."""
    files = summary.get(FILES_KEY)
    return sorted(files) if isinstance(files, dict) else []


def file_damage(folder: Path, summary: dict[str, Any], name: str) -> str | None:
    """Why recorded file ``name`` is not what was written (None if it is, or if it is a Parquet
    copy that was deleted): :func:`table_damage` of one file."""
    if name not in TABLE_FILES:
        return "not a table file of a results folder"
    path = folder / name
    if not os.path.lexists(path):
        needed = "parquet" if summary.get("table_formats") == ["parquet"] else "csv"
        return "missing" if name.endswith("." + needed) else None
    entry = recorded(summary, name)
    return mismatch(path, entry) if entry is not None else "not recorded"


class TableCheck:
    """:func:`table_damage` of every file a folder's summary.json records, computed on a thread of
    its own from construction, the files ``first`` (those a reader parses) first. A reader waits
    only for the files it asks about (:meth:`damage`): the others are hashed while it reads, and
    ``gossipsim plot`` starts the check before its imports (about a second), so that on two cores
    verifying every file costs the command next to no time. Hashing releases the GIL."""

    def __init__(self, folder: Path, summary: dict[str, Any], first: Collection[str] = ()) -> None:
        self.folder = Path(folder)
        self.summary = summary
        names = recorded_names(summary)
        self._order = sorted(names, key=lambda name: (name not in first, name))
        self._found: dict[str, str | None] = {}
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._check, name="gossipsim-tables", daemon=True)
        self._thread.start()

    def _check(self) -> None:
        for name in self._order:
            try:
                why = file_damage(self.folder, self.summary, name)
            except Exception as exc:  # noqa: BLE001 - reported as the file's damage, not lost
                why = f"cannot be checked ({type(exc).__name__})"
            with self._ready:
                self._found[name] = why
                self._ready.notify_all()

    def damage(self, names: Collection[str] | None = None) -> list[tuple[str, str]]:
        """``(name, why)`` of the damaged files among ``names`` (every recorded file if None), once
        they are checked."""
        wanted = [n for n in self._order if names is None or n in names]
        with self._ready:
            while not all(n in self._found for n in wanted) and self._thread.is_alive():
                self._ready.wait(0.5)  # woken at each file; the timeout: a thread that died
            found = dict(self._found)
        for name in wanted:  # (never left unchecked, even by a thread that died)
            if name not in found:
                found[name] = file_damage(self.folder, self.summary, name)
        return [(n[:80], why) for n in wanted if (why := found[n]) is not None]


def start_check(folder: Path) -> TableCheck | None:
    """A :class:`TableCheck` of ``folder`` started now (its Parquet copies, which readers parse
    where pyarrow is installed, first); None where summary.json cannot be read or does not match
    its checksum (the reader then refuses it itself)."""
    try:
        summary = json.loads((Path(folder) / "summary.json").read_text(encoding="utf-8"))
        if not isinstance(summary, dict):
            return None
        check_summary(summary, Path(folder) / "summary.json")
    except (OSError, ValueError, RecursionError):  # ConfigError is a ValueError
        return None
    first = {f"{stem}.parquet" for stem in TABLES} if parquet_available() else set()
    return TableCheck(Path(folder), summary, first)


#: what to install for Parquet files, where :func:`parquet_available` is False
PARQUET_HINT = "pip install 'gossipsim[parquet]'"


def parquet_available() -> bool:
    """Whether pandas can read and write Parquet here (pyarrow is installed)."""
    return importlib.util.find_spec("pyarrow") is not None


def intact_copy(
    folder: Path, name: str, summary: dict[str, Any], damage: list[tuple[str, str]]
) -> str | None:
    """The name of the copy of table file ``name`` in the other format, if summary.json records
    it, it is there and it is not in ``damage`` (:func:`table_damage` of the folder)."""
    stem, _, kind = name.rpartition(".")
    if name not in TABLE_FILES:
        return None
    other = f"{stem}.{TABLE_FILE_KINDS[1 - TABLE_FILE_KINDS.index(kind)]}"
    if recorded(summary, other) is None or other in {n for n, _ in damage}:
        return None
    return other if (folder / other).is_file() else None


def check_recorded(folder: Path, name: str, summary: dict[str, Any]) -> None:
    """Refuse a table file ``name`` that summary.json, recording its files, does not list."""
    if recorded(summary, name) is None and isinstance(summary.get(FILES_KEY), dict):
        raise ConfigError(
            "DIR", f"{str(folder / name)!r} is not among the files summary.json records; {REMEDY}"
        )


def check_tables(
    folder: Path, summary: dict[str, Any], damage: list[tuple[str, str]] | None = None
) -> None:
    """Refuse, in one line naming the file and what is wrong, a folder one of whose table files
    is not what was written (``damage``, else :func:`table_damage` of every recorded file, not
    only those a reader reads). Where the table's copy in the other format is intact, the line
    says that ``--resume`` rewrites the damaged file from it."""
    damage = sorted(table_damage(folder, summary) if damage is None else damage)
    if not damage:
        return
    name, why = damage[0]
    path = str(folder / name)
    if why == "missing":
        what = f"{path!r} is missing"
    else:
        what = f"{path!r} is damaged or was edited since it was written ({why})"
    more = f" (and {len(damage) - 1} more file(s))" if len(damage) > 1 else ""
    copy = intact_copy(folder, name, summary, damage)
    if copy is not None and all(intact_copy(folder, n, summary, damage) for n, _ in damage):
        scenario = summary.get("scenario_file")
        scenario = scenario if isinstance(scenario, str) and scenario else "SCENARIO"
        remedy = (
            f"its copy {copy} is intact: gossipsim run {scenario} --out {folder} --resume "
            f"rewrites it from that, or {REMEDY}"
        )
    else:
        remedy = REMEDY
    raise ConfigError("DIR", f"{what}{more}; {remedy}")


def check_rows(folder: Path, name: str, summary: dict[str, Any], rows: int) -> None:
    """Refuse a table read from ``name`` whose row count is not the one recorded."""
    entry = recorded(summary, name)
    written = entry.get("rows") if entry is not None else rows
    if written != rows:
        shown = f"{written:,}" if type(written) is int else "an unknown number"
        raise ConfigError(
            "DIR", f"{str(folder / name)!r} holds {rows:,} rows, {shown} written; {REMEDY}"
        )


def folder_damage(folder: Path) -> tuple[list[str], bool]:
    """``name: why`` of every file of a finished folder that is not what was written: summary.json
    itself, or a table file (:func:`table_damage`); and whether ``--resume`` can rewrite each such
    file from its intact copy in the other format (:func:`intact_copy`). Empty for a folder
    written before summary.json recorded its files."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ["summary.json: missing"], False
    except (OSError, ValueError, RecursionError) as exc:
        return [f"summary.json: cannot be read ({type(exc).__name__})"], False
    if not isinstance(summary, dict):
        return ["summary.json: not a gossipsim summary"], False
    try:
        check_summary(summary, folder / "summary.json")
    except ConfigError:
        return ["summary.json: does not match its checksum"], False
    damage = table_damage(folder, summary)
    repairable = bool(damage) and all(intact_copy(folder, n, summary, damage) for n, _ in damage)
    return [f"{name}: {why}" for name, why in damage], repairable
