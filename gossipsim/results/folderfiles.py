"""What a reader of a results folder needs of its bookkeeping, without the machinery that writes it
(:mod:`gossipsim.results.store`, which imports the engines): the prefix of the staging folders, the record
``DIR/.gossipsim/study.json`` and the keys of it that say how far a sweep got, and the check that a
folder can be written; and how its bookkeeping files are written, whole or not at all
(:func:`atomic_write_bytes`: the record and the parts). ``gossipsim plot`` and
:func:`gossipsim.load_results` import this module, not the store; it imports neither pandas nor
the engines."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from gossipsim.errors import ConfigError
from gossipsim.results.folderlock import META

STAGING_PREFIX = ".staging-"  # results.writing stages the tables and figures in DIR/.staging-*
#: the keys of a record that say how far its sweep got (not what the sweep is)
PROGRESS_KEYS = ("complete", "done", "failed")


def read_meta(out_dir: Path) -> dict[str, Any] | None:
    """``DIR/.gossipsim/study.json`` as a dict; None where it is missing or not a JSON object."""
    path = Path(out_dir) / META / "study.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


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
