"""Tidy tables of a sweep: the ``variant`` column as an ordered categorical (the sweep's order, not
alphabetical) and, right after it, one typed column per swept dotted key.

A variant's swept values (:attr:`gossipsim.study.scenario.Variant.values`) are flattened to dotted keys
(a whole-section sweep ``topology = [{ kind = "ring" }, { kind = "random_regular", degree = 3 }]``
gives ``topology.kind`` and ``topology.degree``). Each key becomes a column whose type follows its
values: ``Int64`` for integers, ``float64`` for numbers, ``boolean`` for booleans, pandas' string
type for text; a key that a variant does not set is missing there (``<NA>``, NaN). Values of mixed
or other types (a list, a table) are stored as their JSON text. The columns are built from the
variant's codes (one value per variant, repeated by position), never row by row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd


def variant_dtype(labels: Sequence[str]) -> pd.CategoricalDtype:
    """The dtype of every ``variant`` column: the labels, ordered as the sweep lists them."""
    return pd.CategoricalDtype(list(labels), ordered=True)


def flat_values(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> scalar value; tables (a whole-section sweep) are opened into their keys."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_values(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def sweep_columns(
    values: Sequence[Mapping[str, Any]],
) -> dict[str, pd.api.extensions.ExtensionArray]:
    """One typed array per swept dotted key, each with one value per variant (in order)."""
    flat = [flat_values(v) for v in values]
    keys: list[str] = []
    for entry in flat:
        keys += [k for k in entry if k not in keys]
    return {key: _typed([entry.get(key) for entry in flat]) for key in keys}


def _typed(values: list[Any]) -> pd.api.extensions.ExtensionArray:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool | np.bool_) for v in present):
        return pd.array(values, dtype="boolean")
    if present and all(_is_int(v) for v in present):
        return pd.array(values, dtype="Int64")
    if present and all(_is_int(v) or isinstance(v, float | np.floating) for v in present):
        return pd.array([np.nan if v is None else float(v) for v in values], dtype="float64")
    texts = [None if v is None else v if isinstance(v, str) else _text(v) for v in values]
    text_type: Any = pd.Series(["text"]).dtype  # the string type pandas infers
    return pd.array(cast(Any, texts), dtype=text_type)


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _text(value: Any) -> str:
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def tidy(
    table: pd.DataFrame, labels: Sequence[str], values: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """``table`` with its ``variant`` column categorical (ordered as ``labels``) and the swept keys'
    columns right after it (columns of those names already there are replaced)."""
    if "variant" not in table.columns:
        return table
    dtype = variant_dtype(labels)
    column = table["variant"]
    if column.dtype != dtype:
        column = pd.Series(
            pd.Categorical(column.astype(object) if len(column) else [], dtype=dtype),
            index=table.index,
        )
    codes = column.cat.codes.to_numpy()
    swept = sweep_columns(values)
    rest = [c for c in table.columns if c != "variant" and c not in swept]
    data: dict[str, Any] = {"variant": column}
    for key, per_variant in swept.items():
        data[key] = pd.Series(per_variant.take(codes, allow_fill=True), index=table.index)
    for name in rest:
        data[name] = table[name]
    return pd.DataFrame(data, index=table.index, copy=False)
