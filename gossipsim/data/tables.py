"""A user's own supervised data set: a table read from a CSV, Parquet or NumPy ``.npz`` file, or
given from Python (``[data] table``: ``(X, y)`` or a pandas DataFrame, :func:`memory_table`, checked
as a file is, recorded by :func:`describe_table` and kept in a results folder by :func:`save_table`).

The file is named by ``[data] path`` (relative to the scenario file's folder) for the
classification and regression models, which read it in place of a bundled data set:

- **CSV** (``.csv``): a header row, then one row per example. The column named by ``[data]
  label_column`` (``label`` by default) is the label or target; every other column is a feature, in
  file order. Every feature cell must be a finite number.
- **Parquet** (``.parquet``, ``.pq``; needs pyarrow): the same layout, read with pandas.
- **NumPy** (``.npz``): arrays ``X`` (rows × features, numbers) and ``y`` (one label per row);
  the features are named ``x0, x1, ...``.

Labels: a regression model needs a finite number in every row. A classification model takes any
values (numbers or strings) and numbers the distinct ones in sorted order (numerically when every
label is a number, else as strings): a binary task maps the smaller to 0 and the larger to 1 and
needs exactly two distinct values; a multi-class one maps them to ``0..C-1``.

A bad file is one :class:`~gossipsim.errors.ConfigError` line for ``data.path`` naming the file and,
where it applies, the row (the file's line number for CSV, the 0-based row index otherwise) and the
column: missing or unreadable file, no label column, a cell that is not a finite number, fewer
than 2 rows. A file is read once per process and cached by path, size and modification time, so
every worker reads it itself.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from gossipsim.errors import ConfigError

KEY = "data.path"
#: the key of a table given from Python (:func:`memory_table`)
MEMORY_KEY = "data.table"
DEFAULT_LABEL_COLUMN = "label"
TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".npz")


@dataclass(frozen=True, eq=False)
class Table:
    """The rows of a file, or of a table given from Python (``path`` None): features ``X``
    (float64, read-only), the raw labels (one per row, as read: float64 when every label is a
    number, else strings) and the feature names; ``label_column`` the DataFrame column the labels
    came from (None for ``(X, y)``: :func:`memory_table`)."""

    path: Path | None
    X: np.ndarray
    labels: np.ndarray
    feature_names: tuple[str, ...]
    label_column: str | None = None

    @property
    def key(self) -> str:
        """The setting that gave the table: ``data.path`` or ``data.table``."""
        return KEY if self.path is not None else MEMORY_KEY

    @property
    def source(self) -> str:
        """What a message names: the file, or the table given from Python."""
        return str(self.path) if self.path is not None else "the table given from Python"

    @property
    def name(self) -> str:
        """The task's name: the file's name, or ``table``."""
        return self.path.name if self.path is not None else "table"

    @cached_property
    def description(self) -> str:
        """What the scenario records of the table: :func:`describe_table`."""
        return describe_table(self)

    @property
    def numeric_labels(self) -> bool:
        return self.labels.dtype.kind == "f"

    def classes(self) -> np.ndarray:
        """The distinct labels in sorted order (numerically when they are numbers)."""
        return np.unique(self.labels)

    def class_index(self) -> np.ndarray:
        """Each row's label as its index among :meth:`classes` (int64)."""
        return np.searchsorted(self.classes(), self.labels).astype(np.int64)

    def whole_labels(self) -> bool:
        """Whether every label is a string or a whole number (what ``task = "auto"`` reads as
        classification)."""
        return not self.numeric_labels or bool(np.all(self.labels == np.round(self.labels)))

    def target(self) -> np.ndarray:
        """The labels as a real regression target (every one a finite number)."""
        if not self.numeric_labels:
            bad = next(i for i, v in enumerate(self.labels) if not _is_number(str(v)))
            raise ConfigError(
                self.key,
                f"{self.source}: a regression target must be a number; row {bad} of the label "
                f"column is {self.labels[bad]!r}",
            )
        return np.asarray(self.labels, dtype=float)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fail(path: Path | str, what: str) -> ConfigError:
    """An error of the file ``path``, or of the table given from Python (``path`` a string: what
    the message names)."""
    return ConfigError(KEY if isinstance(path, Path) else MEMORY_KEY, f"{path}: {what}")


def _cell(path: Path | str, value: Any, row: str, column: str) -> float:
    """A feature cell as a finite float, or an error naming the row and the column."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _fail(path, f"{row}, column {column!r}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise _fail(path, f"{row}, column {column!r}: {value!r} is not a finite number")
    return number


def _matrix(path: Path | str, cells: Any, row_name: Any, columns: list[str]) -> np.ndarray:
    """The feature cells (rows × columns) as finite float64, converted at once; only when that
    fails are they looked at one by one, for the first bad cell's row and column."""
    try:
        with np.errstate(all="ignore"):
            X = np.asarray(cells, dtype=float)
        if X.ndim == 2 and X.shape[1] == len(columns) and np.all(np.isfinite(X)):
            return X
    except (TypeError, ValueError):
        pass
    rows = np.asarray(cells, dtype=object)
    for i in range(rows.shape[0]):
        for j, name in enumerate(columns):
            _cell(path, rows[i, j], row_name(i), name)
    raise AssertionError("a bad cell was not found")  # pragma: no cover


def _labels(path: Path | str, raw: list[Any], row_name: Any, column: str) -> np.ndarray:
    """The label column: float64 when every value is a finite number, else strings (a missing
    value or a NaN is an error either way)."""
    texts = [str(v).strip() if v is not None else "" for v in raw]
    for i, text in enumerate(texts):
        if (
            text == ""
            or text.lower() == "nan"
            or (_is_number(text) and not math.isfinite(float(text)))
        ):
            raise _fail(path, f"{row_name(i)}, column {column!r}: {raw[i]!r} is not a label")
    if all(_is_number(t) for t in texts):
        return np.array([float(t) for t in texts], dtype=float)
    return np.array(texts, dtype=str)


def _read_csv(path: Path, label_column: str) -> Table:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # a BOM as Excel writes it
            rows = list(csv.reader(handle))
    except UnicodeDecodeError as exc:
        raise _fail(path, f"not a UTF-8 text file ({exc.reason})") from None
    except csv.Error as exc:
        raise _fail(path, f"not a CSV file ({exc})") from None
    if not rows:
        raise _fail(path, "the file is empty: it needs a header row and at least 2 rows")
    header = [h.strip() for h in rows[0]]
    if label_column not in header:
        raise _fail(
            path,
            f"no label column {label_column!r} in the header (columns: {', '.join(header)}); "
            "name it with data.label_column",
        )
    at = header.index(label_column)
    features = [i for i in range(len(header)) if i != at]
    body = [(line, r) for line, r in enumerate(rows[1:], start=2) if any(c.strip() for c in r)]
    cells: list[list[str]] = []
    raw: list[Any] = []
    for line, r in body:
        if len(r) != len(header):
            raise _fail(path, f"row {line} has {len(r)} cells, the header {len(header)}")
        cells.append([r[col].strip() for col in features])
        raw.append(r[at])
    lines = [line for line, _ in body]
    names = [header[i] for i in features]
    X = _matrix(path, cells, lambda i: f"row {lines[i]}", names) if cells else np.empty((0, 0))
    labels = _labels(path, raw, lambda i: f"row {lines[i]}", label_column)
    return Table(path, X, labels, tuple(header[i] for i in features))


def _read_parquet(path: Path, label_column: str) -> Table:
    try:
        import pandas as pd

        frame = pd.read_parquet(path)
    except ImportError as exc:
        raise _fail(path, f"reading Parquet needs pandas and pyarrow ({exc})") from None
    except Exception as exc:  # pyarrow's errors have no common base worth naming
        raise _fail(path, f"not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    return frame_table(frame, label_column, path)


def frame_table(frame: Any, label_column: str, path: Path | str) -> Table:
    """A pandas DataFrame as a :class:`Table` (rows named by their 0-based index); ``path`` the
    file it was read from, or what messages call a DataFrame given from Python."""
    columns = [str(c) for c in frame.columns]
    if label_column not in columns:
        raise _fail(
            path,
            f"no label column {label_column!r} (columns: {', '.join(columns)}); "
            "name it with data.label_column",
        )
    features = [c for c in columns if c != label_column]
    cells = frame[features].to_numpy(dtype=object) if features else np.empty((len(frame), 0))
    X = _matrix(path, cells, lambda i: f"row {i}", features)
    labels = _labels(path, list(frame[label_column].to_numpy()), lambda i: f"row {i}", label_column)
    where = path if isinstance(path, Path) else None
    return Table(where, X, labels, tuple(features), label_column)


def _read_npz(path: Path) -> Table:
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as exc:
        raise _fail(path, f"not a readable .npz file ({exc})") from None
    for name in ("X", "y"):
        if name not in arrays:
            raise _fail(
                path, f"no array {name!r} (arrays: {', '.join(arrays) or 'none'}); it needs X and y"
            )
    X, y = arrays["X"], arrays["y"]
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise _fail(
            path, f"X must be rows x features and y one label per row, got {X.shape}, {y.shape}"
        )
    names = tuple(f"x{j}" for j in range(X.shape[1]))
    out = _matrix(path, X, lambda i: f"row {i}", list(names))
    labels = _labels(path, list(y.tolist()), lambda i: f"row {i}", "y")
    return Table(path, out, labels, names)


_CACHE: dict[tuple[str, int, int, str], Table] = {}


def read_table(path: str | Path, label_column: str = DEFAULT_LABEL_COLUMN) -> Table:
    """The table in ``path`` (CSV, Parquet or ``.npz`` by its suffix), checked: see the module
    docstring. Cached by path, size, modification time and label column."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise _fail(path, f"unknown file type {suffix!r}; use one of {', '.join(TABLE_SUFFIXES)}")
    try:
        stat = path.stat()
    except OSError as exc:
        raise _fail(path, f"cannot read the file ({exc.strerror or exc})") from None
    if not path.is_file():
        raise _fail(path, "not a file")
    if not os.access(path, os.R_OK):
        raise _fail(path, "cannot read the file (permission denied)")
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, label_column)
    if key in _CACHE:
        return _CACHE[key]
    try:
        if suffix == ".csv":
            table = _read_csv(path, label_column)
        elif suffix == ".npz":
            table = _read_npz(path)
        else:
            table = _read_parquet(path, label_column)
    except OSError as exc:
        raise _fail(path, f"cannot read the file ({exc.strerror or exc})") from None
    _CACHE[key] = _checked(table, path)
    return table


def _checked(table: Table, where: Path | str) -> Table:
    """``table`` with at least 2 rows and a feature, its arrays made read-only."""
    if table.X.shape[0] < 2:
        raise _fail(where, f"{table.X.shape[0]} data rows: a data set needs at least 2")
    if table.X.shape[1] < 1:
        raise _fail(where, "no feature columns besides the label")
    table.X.setflags(write=False)
    table.labels.setflags(write=False)
    return table


def memory_table(value: Any, label_column: str | None = None) -> Table:
    """A table given from Python (``[data] table``) as a checked :class:`Table` of its own,
    read-only copies (changing the arrays afterwards changes nothing): ``(X, y)``, features ``X``
    (rows × features, numbers) and labels ``y`` (one per row: numbers, or strings for
    classification), the features named ``x0, x1, ...``; or a pandas DataFrame whose column
    ``label_column`` (``label`` by default) holds the labels, every other column a feature. The
    labels are read as from a file (the module docstring). A bad table is one ConfigError line for
    ``data.table``."""
    if _is_frame(value):
        column = DEFAULT_LABEL_COLUMN if label_column is None else label_column
        table = frame_table(value, column, "the DataFrame")
        return _checked(_copied(table), "the DataFrame")
    if label_column is not None:
        raise ConfigError(
            "data.label_column", "applies to a DataFrame or a data file, not to (X, y)"
        )
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise ConfigError(
            MEMORY_KEY,
            "must be (X, y), a 2-D array of features and a 1-D array of labels, or a pandas "
            f"DataFrame with a label column (got {type(value).__name__})",
        )
    where = "(X, y)"
    try:
        X, y = np.asarray(value[0]), np.asarray(value[1])
    except ValueError as exc:  # ragged nested lists
        raise _fail(where, f"X and y must be arrays ({exc})") from None
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise _fail(
            where,
            f"X must be rows x features and y one label per row, got shapes {X.shape} and {y.shape}",
        )
    if X.dtype.kind == "c":
        raise _fail(where, "X holds complex numbers; features must be real")
    names = tuple(f"x{j}" for j in range(X.shape[1]))
    out = _matrix(where, X, lambda i: f"row {i}", list(names))
    labels = _labels(where, list(y.tolist()), lambda i: f"row {i}", "y")
    return _checked(_copied(Table(None, out, labels, names)), where)


def _is_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (pandas imported only if it already is)."""
    import sys

    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)


def _copied(table: Table) -> Table:
    """``table`` with arrays of its own (the caller's may be changed after)."""
    return Table(
        None, np.array(table.X, dtype=float), np.array(table.labels), table.feature_names,
        table.label_column,
    )  # fmt: skip


def table_digest(table: Table) -> str:
    """A content hash of a table: its features, labels (with their types) and feature names."""
    digest = hashlib.sha256()
    for array in (table.X, table.labels):
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update("\n".join(table.feature_names).encode())
    return digest.hexdigest()[:16]


#: how :func:`describe_table` begins
TABLE_DESCRIPTION = "in-memory table: "


def describe_table(table: Table) -> str:
    """A table given from Python as the scenario records it (``data.table`` in ``raw``, summary.json
    and the results folder's study.json): rows, features, where the labels came from and a
    content hash, so that a reader knows the data and ``--resume`` whether it gets the same."""
    labels = f"label column {table.label_column!r}" if table.label_column is not None else "(X, y)"
    return (
        f"{TABLE_DESCRIPTION}{table.X.shape[0]} rows, {table.X.shape[1]} features, {labels}, "
        f"sha256 {table_digest(table)}"
    )


#: where a results folder keeps a copy of a table given from Python (:func:`save_table`)
SAVED_TABLE = "data/table.npz"


def save_table(table: Table, path: Path) -> None:
    """A copy of ``table`` as a ``.npz`` file (what :func:`load_saved_table` reads back): a results
    folder of a study whose table was given from Python keeps one, as it keeps its graphs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    column = np.array([] if table.label_column is None else [table.label_column], dtype=str)
    with path.open("wb") as fh:
        np.savez(
            fh, X=table.X, labels=table.labels, names=np.array(table.feature_names, dtype=str),
            label_column=column,
        )  # fmt: skip


def load_saved_table(path: Path, description: str) -> Table:
    """The table :func:`save_table` wrote, checked against the ``description`` the scenario
    recorded (a different table is an error)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            X, labels = archive["X"], archive["labels"]
            names, column = archive["names"].tolist(), archive["label_column"].tolist()
    except (OSError, KeyError, ValueError) as exc:
        raise ConfigError(
            "DIR", f"the study's table was given from Python and {str(path)!r} has no copy ({exc})"
        ) from None
    table = _checked(Table(None, X, labels, tuple(names), column[0] if column else None), path)
    if table.description != description:
        raise ConfigError("DIR", f"{str(path)!r} is not the table the study ran on ({description})")
    return table
