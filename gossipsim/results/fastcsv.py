"""CSV text of a table, byte for byte what ``DataFrame.to_csv(path, index=False)`` writes, several
times faster for the long numeric tables of a sweep (metrics.csv holds a row per recorded slot).

pandas converts every cell to text on its own (``astype(str)`` of each float, then the ``csv``
module row by row). Table columns repeat few distinct values (run and slot numbers, node labels, the
handful of KL values of a conjugate run), so here each column is *factorized* (its distinct values
found by hashing: floats by their bit pattern, so ``-0.0`` stays ``-0.0``), each distinct value is
converted to text once, exactly as pandas converts it, and the rows are assembled by one
``str.join`` over the cells in row order:

- numbers and booleans of NumPy columns: ``astype(str)`` (for float64 the shortest text that reads
  back to the same float, Python's ``repr``); missing values (NaN) are empty cells;
- nullable integer and boolean columns (``Int64``, ``boolean``): the Python value's text, ``<NA>``
  empty;
- text and object columns: the ``csv`` module's text of the value (quoted when it holds a comma,
  a quote or a line break, as pandas' writer quotes it), missing values empty. Object columns
  mixing types (node labels 3 and ``"a"``) are converted cell by cell, never by equality (1, 1.0
  and True are equal keys but different text);
- categorical columns (the ``variant`` column): their categories converted as a column of their
  own type, each row pointed at its category's text by its code, missing values empty.

A table with a column of any other kind (dates, intervals, ...), or with fewer than two columns,
is written by pandas itself.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: rows assembled and written at a time (bounds the memory of the cell list)
CHUNK_ROWS = 1 << 18
_MASKED_KINDS = "iub"  # nullable integer and boolean columns (their Python values' text)


class _CellWriter:
    """The text pandas' writer gives one value (its ``csv`` dialect: QUOTE_MINIMAL, ``"``)."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.writer = csv.writer(self.buffer, lineterminator="\n")

    def __call__(self, value: Any) -> str:
        if isinstance(value, str) and not value:
            return ""  # in a row of several fields an empty string is an empty cell
        self.buffer.seek(0)
        self.buffer.truncate()
        self.writer.writerow([value])
        return self.buffer.getvalue()[:-1]


def write_csv(table: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``table`` to ``path`` as ``table.to_csv(path, index=False)`` would, faster."""
    columns = [_column_cells(table.iloc[:, j]) for j in range(table.shape[1])]
    cells = [c for c in columns if c is not None]
    if table.shape[1] < 2 or len(cells) < len(columns):
        table.to_csv(path, index=False)
        return
    cell = _CellWriter()
    newline = os.linesep  # pandas' default line terminator
    header = ",".join(cell(str(name)) for name in table.columns) + newline
    groups = _merged(cells, len(table))
    # every group's texts (with the separator that follows them) in one table, indexed by the
    # group's codes shifted past the groups before it: each row's cells are one take away
    texts: list[str] = []
    offsets = []
    for j, (group_texts, _) in enumerate(groups):
        suffix = newline if j == len(groups) - 1 else ","
        offsets.append(len(texts))
        texts += [t + suffix for t in group_texts]
    table_texts = np.array(texts, dtype=object)
    n, k = len(table), len(groups)
    with open(Path(path), "wb") as fh:
        fh.write(header.encode())
        for start in range(0, n, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, n)
            index = np.empty((stop - start, k), dtype=np.intp)
            for j, (_, codes) in enumerate(groups):
                np.add(codes[start:stop], offsets[j], out=index[:, j])
            fh.write("".join(table_texts.take(index.ravel()).tolist()).encode())


def _merged(
    columns: list[tuple[list[str], np.ndarray]], rows: int
) -> list[tuple[list[str], np.ndarray]]:
    """Neighbouring columns whose pairs of texts are few (a variant label and a run number) as one
    column of joined texts: fewer cells to assemble per row."""
    out = [columns[0]]
    for texts, codes in columns[1:]:
        left, left_codes = out[-1]
        if len(left) * len(texts) > max(rows // 4, 1):
            out.append((texts, codes))
            continue
        joined = [f"{a},{b}" for a in left for b in texts]
        out[-1] = (joined, left_codes * len(texts) + codes)
    return out


def _column_cells(series: pd.Series) -> tuple[list[str], np.ndarray] | None:
    """The distinct texts of a column and each row's index into them; None for a column kind
    this writer does not handle (the table is then written by pandas)."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype):
        values = series.to_numpy()
        if dtype.kind in "iu":
            return _integers(values)
        if dtype.kind == "b":
            return _numeric(values, None)
        if dtype.kind == "f":
            return _numeric(values, np.isnan(values))
        if dtype.kind == "O":
            return _objects(values)
        return None
    if isinstance(dtype, pd.CategoricalDtype):  # each category's text once, rows by their codes
        inner = _column_cells(pd.Series(dtype.categories))
        if inner is None:
            return None
        texts, category_text = inner
        codes = series.cat.codes.to_numpy()
        missing = codes < 0
        rows = category_text.take(np.where(missing, 0, codes)) if len(category_text) else codes
        return _with_missing(texts, rows.astype(np.intp, copy=False), missing)
    if isinstance(dtype, pd.StringDtype):  # str values (hashed by pandas or pyarrow) or missing
        codes, distinct = pd.factorize(series.array, use_na_sentinel=True)
        cell = _CellWriter()
        texts = [cell(v) for v in np.asarray(distinct, dtype=object).tolist()]
        return _with_missing(texts, codes.astype(np.intp, copy=False), codes < 0)
    array = series.array
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in _MASKED_KINDS:
        data = getattr(array, "_data", None)
        mask = getattr(array, "_mask", None)
        if isinstance(data, np.ndarray) and isinstance(mask, np.ndarray):
            return _numeric(data, mask, python=True)
    return None


def _with_missing(
    texts: list[str], codes: np.ndarray, missing: np.ndarray | None
) -> tuple[list[str], np.ndarray]:
    """Missing rows pointed at an empty text."""
    if missing is not None and missing.any():
        codes = np.where(missing, len(texts), codes)
        texts = [*texts, ""]
    return texts, codes


def _integers(values: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Integers: within a short range (run and slot numbers, node indices) every number of the
    range is converted once and a row's code is its offset; otherwise as other numbers."""
    if values.size:
        low, high = int(values.min()), int(values.max())
        if high - low <= max(values.size, 1024):
            texts = [str(v) for v in range(low, high + 1)]  # str(int) is NumPy's text of an int
            return texts, (values - values.dtype.type(low)).astype(np.intp, copy=False)
    return _numeric(values, None)


def _numeric(
    values: np.ndarray, missing: np.ndarray | None, *, python: bool = False
) -> tuple[list[str], np.ndarray]:
    """Numbers and booleans: distinct values by bit pattern, each converted once (``astype(str)``
    as pandas does for NumPy columns, or the Python value's text for nullable columns)."""
    values = np.ascontiguousarray(values)
    keys = values.view(f"u{values.itemsize}") if values.dtype.kind == "f" else values
    codes, distinct = pd.factorize(keys, sort=False)
    distinct = np.asarray(distinct).view(values.dtype)
    # a nullable column's values are written as Python values, a NumPy column's as astype(str)
    texts = [str(v) for v in distinct.tolist()] if python else distinct.astype(str).tolist()
    return _with_missing(texts, codes.astype(np.intp, copy=False), missing)


def _objects(values: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Text or mixed objects: the csv module's text of each value, missing values empty."""
    cell = _CellWriter()
    missing = pd.isna(values)
    if pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty"):
        codes, distinct = pd.factorize(values, use_na_sentinel=True)
        texts = [cell(v) for v in distinct.tolist()]
        return _with_missing(texts, codes.astype(np.intp, copy=False), missing)
    # mixed types: 1, 1.0 and True are equal keys with different texts, so convert every cell
    texts = ["" if m else cell(v) for v, m in zip(values.tolist(), missing.tolist(), strict=True)]
    return texts, np.arange(len(texts), dtype=np.intp)
