"""Which numbers of a study's tables are infinite or NaN: what ``gossipsim run`` and ``plot`` warn
of, naming the table and its columns, instead of passing on every overflow NumPy or matplotlib
meets on the way (most change no number of the tables: an SVGD kernel's bandwidth squared beyond
float64's range, a logarithmic axis's margin).

A table cell is counted when it holds ±∞, or NaN where a number was computed: an empty cell is
also NaN in memory, and means "not applicable" (a retrain column before the baseline starts, a
latency not reached, a column of another variant of a sweep). So NaN counts only

- in metrics.csv, in a variant's value columns on the rows where its divergence (``kl``, ``ksd``)
  is a number, the ``retrain_`` columns on the rows where the retrain baseline's is; a value column
  of a variant is one holding a number in at least one of those rows (a column no row of the
  variant fills is another variant's);
- in particles.csv, in a coordinate column a variant fills in at least one row.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd

from gossipsim.states.divergences import divergences

#: metrics.csv's columns that say where and when a row is, not what was measured
METRIC_KEYS = ("run", "iteration", "time", "holder", "bits", "best_family_kl")


def nonfinite_counts(
    tables: Mapping[str, pd.DataFrame], swept: Collection[str] = ()
) -> dict[str, dict[str, int]]:
    """Table name -> column -> how many cells hold ±∞ or a computed NaN (see the module's rules);
    only tables and columns with some. ``swept``: the swept keys' columns (not counted)."""
    out: dict[str, dict[str, int]] = {}
    for name, table in tables.items():
        if table is None or not len(table):
            continue
        counts: dict[str, int] = {}
        for column in table.columns:
            if column in swept or column == "variant":
                continue
            values = _numbers(table[column])
            if values is not None:
                _add(counts, column, int(np.isinf(values).sum()))
        if name == "metrics":
            _metric_nans(table, counts, swept)
        elif name == "particles":
            for column in [c for c in table.columns if str(c).startswith("theta_")]:
                for _, rows in table.groupby("variant", observed=True, sort=False):
                    _add(counts, column, _nan_among(_numbers(rows[column])))
        if counts:
            out[name] = counts
    return out


def nonfinite_lines(tables: Mapping[str, pd.DataFrame], swept: Collection[str] = ()) -> list[str]:
    """One line per table holding infinite or NaN numbers, naming it and its columns, e.g.
    ``metrics.csv holds 12 infinite or NaN numbers (mmd: 10, retrain_mmd: 2)``."""
    lines = []
    for name, counts in nonfinite_counts(tables, swept).items():
        total = sum(counts.values())
        shown = ", ".join(f"{column}: {n}" for column, n in counts.items())
        lines.append(f"{name}.csv holds {total} infinite or NaN numbers ({shown})")
    return lines


def _metric_nans(table: pd.DataFrame, counts: dict[str, int], swept: Collection[str]) -> None:
    """The computed NaN of metrics.csv's value columns, variant by variant, world by world."""
    if "variant" not in table.columns:
        return
    labels = [str(v) for v in pd.unique(table["variant"])]
    judged = divergences(table, labels)
    values = [
        c for c in table.columns if c not in swept and c != "variant" and c not in METRIC_KEYS
    ]
    for label, rows in table.groupby("variant", observed=True, sort=False):
        divergence = judged.get(str(label))
        if divergence is None:
            continue
        for key, retrain in ((divergence.column, False), (divergence.retrain_column, True)):
            judged_values = _numbers(rows[key]) if key in rows.columns else None
            if judged_values is None:
                continue
            present = rows[np.isfinite(judged_values)]
            mine = [c for c in values if str(c).startswith("retrain_") == retrain]
            for column in mine:
                _add(counts, column, _nan_among(_numbers(present[column])))


def _nan_among(values: np.ndarray | None) -> int:
    """NaN in ``values`` when some of them are numbers (a column the rows fill), else 0."""
    if values is None or not values.size:
        return 0
    nan = np.isnan(values)
    return int(nan.sum()) if not nan.all() else 0


def _numbers(column: pd.Series) -> np.ndarray | None:
    """A numeric column as floats (missing values NaN); None for other columns."""
    if isinstance(column.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(column):
        return None
    if pd.api.types.is_bool_dtype(column):
        return None
    return column.to_numpy(dtype=float, na_value=np.nan)


def _add(counts: dict[str, int], column: str, n: int) -> None:
    if n:
        counts[str(column)] = counts.get(str(column), 0) + n
