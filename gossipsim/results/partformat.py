"""The format of a results part: data, never code, whole or refused.

A part is one file: the magic line ``GOSSIPSIM-PART-2``, the SHA-256 of every byte after it (32
bytes), the length of a JSON header (8 bytes, little-endian), the header, then the raw bytes of the
part's NumPy arrays. The header says what the part holds (``kind``: ``batch`` of runs,
``failures``, or a single ``run`` or ``failure``), its ``variant``, its ``runs``, whether they
``failed``, the scalar fields (rows of runs.csv and requests.csv of runs measured one by one; the
seeds and errors of failures) and, for each array, its dtype (numbers, booleans or fixed-width
text only), shape and offset. Node labels that are strings are stored as text; labels mixing types
(3 and ``"a"``) as a JSON list.

:func:`decode_part` verifies the checksum before it reads anything else, then checks what it reads
(shapes, offsets, dtypes, runs and seeds, rows that belong to the part's runs): a part damaged on
disk, truncated or edited, or one written by a gossipsim without checksums
(``GOSSIPSIM-PART-1``), is a ValueError saying why in one line, never a half-read part nor a
MemoryError or OverflowError. Nothing is ever unpickled.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from gossipsim.execution.executors import Outcome, RunFailure
from gossipsim.measurement.outputs import PARTICLE_FIELDS, PARTICLE_WORLDS, BatchOutput, RunOutput

PART_MAGIC = b"GOSSIPSIM-PART-2\n"
OLD_PART_MAGIC = b"GOSSIPSIM-PART-1\n"  # parts without a checksum (earlier gossipsim versions)
_DIGEST_SIZE = 32  # SHA-256 of everything after it
_LENGTH = struct.Struct("<Q")  # the header's length in bytes, after the magic and checksum
_HEAD = len(PART_MAGIC) + _DIGEST_SIZE + _LENGTH.size  # where the header starts
_ALIGN = 8  # array data starts on 8-byte boundaries (from the start of the data section)
_ARRAY_KINDS = "biufcU"  # dtype kinds a part may hold: numbers, booleans, text; never objects


def encode_part(outcomes: Outcome | list[Outcome], *, variant: int | None = None) -> bytes:
    """A part as bytes: magic, checksum, header length, JSON header, array data (see the module
    doc). A part holds one run, one batch of runs, or failures (of variant ``variant``)."""
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
        arrays.update({f"particles.{k}": v for k, v in outcome.particles.items()})
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
        if outcome.particles is not None:
            arrays.update({f"particles.{k}": v for k, v in outcome.particles.items()})
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
    header: dict[str, Any] = {"kind": kind}
    if variant is not None:
        header["variant"] = int(variant)
    header.update(
        {
            "runs": [int(r) for r in runs],
            "failed": kind in ("failure", "failures"),
            "fields": fields,
            "arrays": table,
        }
    )
    text = _HEADER_ENCODER.encode(header).encode()
    body = [_LENGTH.pack(len(text)) + text, *chunks]
    digest = hashlib.sha256()
    for chunk in body:
        digest.update(chunk)
    return b"".join([PART_MAGIC, digest.digest(), *body])


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
    """The outcomes :func:`encode_part` wrote; a ValueError (one line saying why) if ``data`` is
    not such a part, whole: its checksum is verified and its content checked. Arrays are views of
    ``data`` (writable, as it is a bytearray)."""
    return decoded(data)[1]


def decoded(data: bytearray) -> tuple[dict[str, Any], list[Outcome]]:
    """The header and outcomes of a part (:func:`decode_part`)."""
    header, start = _parse_header(data, verify=True)
    try:
        outcomes = _outcomes(header, data, start)
        _check_outcomes(header, outcomes)
    except (TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        raise ValueError(f"malformed results part ({type(exc).__name__}: {exc})") from None
    return header, outcomes


def _outcomes(header: dict[str, Any], data: bytearray, start: int) -> list[Outcome]:
    fields = header["fields"]
    if not isinstance(fields, dict) or not isinstance(header["arrays"], list):
        raise ValueError("malformed results part (fields or arrays of the wrong type)")
    arrays = {}
    for entry in header["arrays"]:
        if not isinstance(entry, list) or len(entry) != 4 or not isinstance(entry[0], str):
            raise ValueError(f"malformed results part (array entry {str(entry)[:60]})")
        if entry[0] in arrays:
            raise ValueError(f"malformed results part (array {entry[0]!r} twice)")
        arrays[entry[0]] = _decode_array(entry, data, start)
    _check_layout(header["arrays"], len(data) - start)

    def group(prefix: str) -> dict[str, np.ndarray]:
        return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}

    kind = header["kind"]
    if kind == "failure":
        return [RunFailure(_count(fields["run"]), _count(fields["seed"]), _text(fields["error"]))]
    if kind == "failures":
        return [
            RunFailure(_count(r), _count(seed), _text(error))
            for r, seed, error in fields["failures"]
        ]
    if kind == "batch":
        return [
            BatchOutput(
                runs=tuple(int(r) for r in header["runs"]),
                run_columns=group("run_columns."),
                metric_runs=arrays["metric_runs"],
                metrics=group("metrics."),
                visits=arrays["visits"],
                request_columns=group("request_columns."),
                run_rows=[_row(row) for row in fields.get("run_rows", [])],
                request_rows=[_row(row) for row in fields.get("request_rows", [])],
                particles=group("particles."),
            )
        ]
    if kind == "run":
        return [
            RunOutput(
                run=_count(fields["run"]),
                seed=_count(fields["seed"]),
                run_row=_row(fields["run_row"]),
                request_rows=[_row(row) for row in fields["request_rows"]],
                metrics=group("metrics."),
                visits=arrays["visits"],
                particles=group("particles.") or None,
            )
        ]
    raise ValueError(f"unknown part kind {str(kind)[:40]!r}")


def _count(x: Any) -> int:
    """A run index or seed as a part holds it: an integer >= 0 (never null, text or a float)."""
    if type(x) is not int or x < 0:
        raise ValueError(f"malformed results part (a run or seed of {str(x)[:40]!r})")
    return x


def _text(x: Any) -> str:
    if not isinstance(x, str):
        raise ValueError(f"malformed results part (an error message of {str(x)[:40]!r})")
    return x


def _row(x: Any) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise ValueError(f"malformed results part (a row of {str(x)[:40]!r})")
    if "run" in x:
        _count(x["run"])
    if "seed" in x:
        _count(x["seed"])
    return dict(x)


def _check_outcomes(header: dict[str, Any], outcomes: list[Outcome]) -> None:
    """The outcomes of a part are consistent: every array of a batch or run as long as its
    runs and rows say, its rows belong to its runs, its visits are counts."""

    def fail(why: str) -> None:
        raise ValueError(f"malformed results part ({why})")

    runs = header["runs"]
    if len(set(runs)) != len(runs) or any(r < 0 for r in runs):
        fail("runs listed twice or negative")
    if header["kind"] == "batch" and runs != sorted(runs):
        fail("the runs of a batch out of order")
    if header.get("failed") is not (header["kind"] in ("failure", "failures")):
        fail("'failed' does not match its kind")
    mine = set(runs)
    for outcome in outcomes:
        if isinstance(outcome, RunFailure):
            continue
        visits = outcome.visits
        if visits.ndim != 1 or visits.dtype.kind not in "iu" or (visits < 0).any():
            fail("visits are not counts")
        why = _particles_wrong(outcome.particles or {}, isinstance(outcome, BatchOutput), mine)
        if why is not None:
            fail(why)
        if isinstance(outcome, RunOutput):
            sizes = {len(c) if c.ndim == 1 else -1 for c in outcome.metrics.values()}
            if len(sizes) > 1 or -1 in sizes:
                fail("metric columns of different lengths")
            if [outcome.run] != runs:
                fail("its run and its header's runs differ")
            continue
        assert isinstance(outcome, BatchOutput)
        rows = outcome.metric_runs
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            fail("metric_runs are not run indices")
        if any(c.ndim != 1 or len(c) != len(rows) for c in outcome.metrics.values()):
            fail("metric columns of different lengths")
        if len(rows) and not set(np.unique(rows).tolist()) <= mine:
            fail("metrics rows of runs it does not hold")
        if any(c.ndim != 1 or len(c) != len(runs) for c in outcome.run_columns.values()):
            fail("runs.csv columns of another length than its runs")
        seeds = outcome.run_columns.get("seed")
        if seeds is not None and (seeds.dtype.kind not in "iu" or (seeds < 0).any()):
            fail("seeds that are not integers >= 0")
        requests = outcome.request_columns
        if (
            any(c.ndim != 1 for c in requests.values())
            or len({len(c) for c in requests.values()}) > 1
        ):
            fail("requests.csv columns of different lengths")
        if "run" in requests and len(requests["run"]):
            column = requests["run"]
            if column.dtype.kind not in "iu" or not set(np.unique(column).tolist()) <= mine:
                fail("requests of runs it does not hold")
        if outcome.run_rows and sorted(row.get("run", -1) for row in outcome.run_rows) != sorted(
            runs
        ):
            fail("runs.csv rows of other runs than its runs")
        if any(row.get("run") not in mine for row in outcome.request_rows):
            fail("requests of runs it does not hold")
        if not outcome.run_rows and not outcome.run_columns and runs:
            fail("no runs.csv rows for its runs")


def _particles_wrong(columns: dict[str, np.ndarray], batch: bool, runs: set[int]) -> str | None:
    """Why a part's particle columns are not particles.csv's (None if they are): every column
    of :data:`~gossipsim.measurement.outputs.PARTICLE_FIELDS` (and ``run`` in a batch, of the part's runs), one
    entry per row, ``theta`` a matrix of numbers, ``world`` one of the worlds."""
    if not columns:
        return None
    names = {"run", *PARTICLE_FIELDS} if batch else set(PARTICLE_FIELDS)
    if set(columns) != names:
        return f"particle columns {sorted(columns)}"
    theta = columns["theta"]
    if theta.ndim != 2 or theta.dtype.kind != "f":
        return "particles that are not a matrix of numbers"
    if any(c.ndim != 1 or len(c) != theta.shape[0] for n, c in columns.items() if n != "theta"):
        return "particle columns of different lengths"
    for name in ("run", "iteration", "particle") if batch else ("iteration", "particle"):
        column = columns[name]
        if column.dtype.kind not in "iu" or (len(column) and column.min() < 0):
            return f"particle {name}s that are not integers >= 0"
    if batch and len(columns["run"]) and not set(np.unique(columns["run"]).tolist()) <= runs:
        return "particles of runs it does not hold"
    if not set(np.unique(columns["world"]).tolist()) <= set(PARTICLE_WORLDS):
        return "particles of unknown worlds"
    return None


def _parse_header(data: bytes | bytearray, *, verify: bool) -> tuple[dict[str, Any], int]:
    """The header and the offset where the array data starts; with ``verify``, the checksum of
    ``data`` (the whole part) is checked first."""
    if data.startswith(OLD_PART_MAGIC):
        raise ValueError("written by an older gossipsim, without a checksum")
    if len(data) < _HEAD or not data.startswith(PART_MAGIC):
        raise ValueError("not a gossipsim results part")
    if verify:
        start = len(PART_MAGIC)
        expected = bytes(data[start : start + _DIGEST_SIZE])
        if hashlib.sha256(memoryview(data)[start + _DIGEST_SIZE :]).digest() != expected:
            raise ValueError("its checksum does not match its bytes (damaged or truncated)")
    (length,) = _LENGTH.unpack_from(data, _HEAD - _LENGTH.size)
    if length > len(data) - _HEAD:
        raise ValueError(f"truncated results part (a header of {length:,} bytes)")
    return _header_of(data[_HEAD : _HEAD + length]), _HEAD + length


def _header_of(text: bytes | bytearray) -> dict[str, Any]:
    try:
        header = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("its header is not JSON") from None
    runs = header.get("runs") if isinstance(header, dict) else None
    if not isinstance(runs, list) or not all(type(r) is int for r in runs):
        raise ValueError("results part without its runs")
    for key in ("kind", "fields", "arrays"):
        if key not in header:
            raise ValueError(f"results part without its {key}")
    return header


def _check_layout(entries: list[list[Any]], size: int) -> None:
    """The arrays' bytes tile the data section as :func:`encode_part` lays them out: in order,
    each on the next 8-byte boundary after the one before, the last ending the part. A dtype,
    shape or offset changed in the header (other itemsizes, other lengths) breaks the tiling."""
    end = 0
    for _, kind, shape, where in sorted(
        (e for e in entries if e[1] != "json"), key=lambda e: int(e[3])
    ):
        if where != end + (-end % _ALIGN):
            raise ValueError(f"malformed results part (an array at {where}, not after the last)")
        end = where + math.prod(shape) * _dtype(kind)[0].itemsize
    if end != size:
        raise ValueError(f"malformed results part ({size - end:,} bytes past its arrays)")


def _decode_array(entry: list[Any], data: bytearray, start: int) -> np.ndarray:
    """One array of a part, from its header entry (see :func:`encode_part`)."""
    _, kind, shape, where = entry
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"malformed results part (shape {str(shape)[:40]})")
    count = math.prod(shape)
    if kind == "json":  # labels of mixed types
        if not isinstance(where, list) or len(where) != count:
            raise ValueError("malformed results part (labels that do not fill their shape)")
        out = np.empty(len(where), dtype=object)
        out[:] = where
        return out.reshape(shape)
    if not isinstance(kind, str):
        raise ValueError(f"malformed results part (dtype {str(kind)[:40]})")
    dtype, text = _dtype(kind)
    if type(where) is not int or where < 0 or where % _ALIGN:
        raise ValueError(f"malformed results part (an array at offset {str(where)[:40]})")
    offset = start + where
    if offset + count * dtype.itemsize > len(data):
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
    try:
        dtype = np.dtype(kind.removeprefix("object:"))
    except (TypeError, ValueError, SyntaxError):
        raise ValueError(f"results part with an array of dtype {kind[:40]!r}") from None
    if dtype.kind not in _ARRAY_KINDS or dtype.hasobject or (text and dtype.kind != "U"):
        raise ValueError(f"results part with an array of dtype {dtype}")
    if dtype.itemsize == 0:
        raise ValueError(f"results part with an array of dtype {dtype}")
    return dtype, text


def read_bytes(path: Path) -> bytearray:
    """A file's bytes in a bytearray (so arrays decoded from it are writable, without a copy)."""
    with open(path, "rb") as fh:
        data = bytearray(os.fstat(fh.fileno()).st_size)
        got = fh.readinto(data)
    if got != len(data):
        raise ValueError("the file changed while it was read")
    return data


def read_header(path: Path) -> dict[str, Any]:
    """The header of a committed part (its runs, whether they failed, ...), read without its
    arrays nor its checksum verified (:func:`gossipsim.results.parts.scan_parts` does both); a
    ValueError if the file is not a part."""
    with open(path, "rb") as fh:
        head = fh.read(_HEAD)
        if head.startswith(OLD_PART_MAGIC) or len(head) < _HEAD:
            return _parse_header(head + fh.read(), verify=False)[0]  # says why
        (length,) = _LENGTH.unpack_from(head, _HEAD - _LENGTH.size)
        if length > os.fstat(fh.fileno()).st_size - _HEAD:
            raise ValueError(f"truncated results part (a header of {length:,} bytes)")
        header, _ = _parse_header(head + fh.read(length), verify=False)
    return header
