"""The record of a sweep in its results folder, ``DIR/.gossipsim/study.json`` (:func:`study_record`):
the scenario as it runs, its fingerprint (:func:`fingerprint`), the content hashes of every input
it reads (:func:`input_hashes`: its data and graph files, the bundled data sets it uses), the
fingerprint of the code (:mod:`gossipsim.results.provenance`) and its number of runs; written
atomically (:func:`write_record`), and marked complete with the runs done and failed once the
tables are written (:func:`mark_complete`). What ``gossipsim status`` counts and ``--resume``
checks a folder against."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.results.folderfiles import PROGRESS_KEYS, atomic_write_bytes
from gossipsim.results.folderlock import META
from gossipsim.results.provenance import code_fingerprint

if TYPE_CHECKING:
    from gossipsim.study.scenario import Study


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
    """Content hashes of every input the scenario names: its data and graph files, the table given
    from Python (``data.table=in-memory``), and the bundled data sets it uses (whose options are in the scenario itself), so that a resumed sweep is known
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
    if study.table is not None:  # a table given from Python: its content hash (the description's)
        from gossipsim.data.tables import table_digest

        hashes["data.table=in-memory"] = table_digest(study.table)
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
