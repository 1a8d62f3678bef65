"""The fast CSV writer writes what pandas' ``to_csv(index=False)`` writes, byte for byte, and every
value reads back exactly."""

from __future__ import annotations

import csv
import math
import struct

import numpy as np
import pandas as pd
import pytest

from gossipsim.results import fastcsv
from gossipsim.results.fastcsv import write_csv

AWKWARD_TEXT = ["plain", "a,b", 'say "hi"', "two\nlines", "cr\rhere", "", " spaced ", "ünï", "x"]
SPECIAL_FLOATS = [
    0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
    1e16, 9999999999999998.0, 1e-5, 0.0001, 0.1, 1 / 3, 2.0, 128.0, 1e22, -1e-300, 123456789012345680.0,
]  # fmt: skip


def same_as_pandas(table: pd.DataFrame, tmp_path, name: str = "t") -> bytes:
    expected, got = tmp_path / f"{name}-pandas.csv", tmp_path / f"{name}-fast.csv"
    table.to_csv(expected, index=False)
    write_csv(table, got)
    assert got.read_bytes() == expected.read_bytes()
    return got.read_bytes()


def random_table(
    rng: np.random.Generator, rows: int, words: list[str] = AWKWARD_TEXT
) -> pd.DataFrame:
    bits = rng.integers(0, 2**64, size=rows, dtype=np.uint64).view(np.float64)  # any float
    special = np.asarray(SPECIAL_FLOATS)[rng.integers(0, len(SPECIAL_FLOATS), rows)]
    few = np.asarray([0.5, 4.743101334302423, -0.0, math.nan])[rng.integers(0, 4, rows)]
    ints = rng.integers(-(2**63), 2**63 - 1, size=rows, dtype=np.int64)
    small = rng.integers(-5, 300, size=rows)
    mask = rng.random(rows) < 0.3
    text = np.asarray(words, dtype=object)[rng.integers(0, len(words), rows)]
    text_na = text.copy()
    text_na[mask] = None
    labels = np.asarray([3, "a", 1.0, True, None, np.nan, "b,c", np.int64(7)], dtype=object)
    return pd.DataFrame(
        {
            "variant": pd.Series(text, dtype="str"),
            "run": small,
            "any_float": bits,
            "special": special,
            "few": few,
            "big_int": ints,
            "uint": rng.integers(0, 2**64 - 1, size=rows, dtype=np.uint64),
            "flag": rng.random(rows) < 0.5,
            "nullable_int": pd.Series(small, dtype="Int64").mask(mask),
            "nullable_bool": pd.Series(rng.random(rows) < 0.5, dtype="boolean").mask(mask),
            "text_na": pd.Series(text_na, dtype="str"),
            "object_text": pd.Series(text_na, dtype=object),
            "mixed_labels": labels[rng.integers(0, labels.size, rows)],
            "float32": rng.normal(size=rows).astype(np.float32),
            "small_float": few * 1e-300,
            # the variant column of a sweep: categories in sweep order (not sorted), some unused
            "ordered_labels": pd.Categorical(
                text_na, categories=["zz unused", *reversed(dict.fromkeys(words))], ordered=True
            ),
            "int_categories": pd.Categorical(pd.Series(small).mask(mask)),
            "float_categories": pd.Categorical(pd.Series(few * 1e-300)),
        }
    )


@pytest.mark.parametrize("seed", range(6))
def test_random_tables_are_written_as_pandas_writes_them(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(fastcsv, "CHUNK_ROWS", int(rng.integers(1, 50)))  # several chunks
    table = random_table(rng, int(rng.integers(0, 400)))
    same_as_pandas(table, tmp_path)
    # column subsets and orders: neighbouring columns are joined when their pairs are few
    for _ in range(5):
        columns = list(rng.permutation(table.columns)[: int(rng.integers(2, len(table.columns)))])
        same_as_pandas(table[columns], tmp_path, "subset")


def test_every_value_reads_back_exactly(tmp_path):
    rng = np.random.default_rng(1)
    # a lone carriage return is not quoted (Python 3.11's csv module, as pandas writes it), so a
    # CSV reader would take it for a line end: left out here
    table = random_table(rng, 2000, [w for w in AWKWARD_TEXT if "\r" not in w])
    path = tmp_path / "t.csv"
    write_csv(table, path)
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == list(table.columns)
    body = rows[1:]
    assert len(body) == len(table)
    for j, name in enumerate(table.columns):
        cells = [row[j] for row in body]
        column = table[name]
        if name in ("any_float", "special", "few", "small_float"):
            for cell, value in zip(cells, column.tolist(), strict=True):
                if math.isnan(value):
                    assert cell == ""
                else:  # the same bits: -0.0, subnormals, ±inf, the largest float
                    assert struct.pack("<d", float(cell)) == struct.pack("<d", value)
        elif name in ("run", "big_int", "uint"):
            assert [int(c) for c in cells] == [int(v) for v in column]
        elif name in ("variant", "text_na", "object_text", "ordered_labels"):
            assert cells == ["" if pd.isna(v) else v for v in column.tolist()]
        elif name == "nullable_int":
            assert cells == ["" if pd.isna(v) else str(int(v)) for v in column]
        elif name in ("flag", "nullable_bool"):
            assert cells == ["" if pd.isna(v) else str(bool(v)) for v in column]


def test_tables_of_other_kinds_are_written_by_pandas(tmp_path):
    when = pd.date_range("2024-01-01", periods=4, freq="h")
    same_as_pandas(pd.DataFrame({"when": when, "x": [1.5, 2.0, math.nan, 3.0]}), tmp_path, "dates")
    same_as_pandas(pd.DataFrame({"only": ["", "a", None]}), tmp_path, "one-column")  # '""' rows
    same_as_pandas(pd.DataFrame({"z": [1 + 2j, 3j], "x": [1, 2]}), tmp_path, "complex")


def test_categorical_columns_are_written_by_codes(tmp_path):
    """Categorical columns are written here, not by pandas (the variant column of every table
    is one), as pandas writes them: each row its category's text, missing empty."""
    table = pd.DataFrame(
        {
            "c": pd.Categorical(["b", "a", None, "b"], categories=["b", "a", "x,y"], ordered=True),
            "n": pd.Categorical([3, None, 1, 3]),
            "x": 1,
        }
    )
    assert all(fastcsv._column_cells(table[name]) is not None for name in table.columns)
    assert same_as_pandas(table, tmp_path) == b"c,n,x\nb,3,1\na,,1\n,1,1\nb,3,1\n"
    empty = table.iloc[:0]
    assert same_as_pandas(empty, tmp_path, "empty") == b"c,n,x\n"


def test_empty_and_header_only_tables(tmp_path):
    assert (
        same_as_pandas(pd.DataFrame(columns=["variant", "run", "seed", "error"]), tmp_path)
        == b"variant,run,seed,error\n"
    )
    same_as_pandas(pd.DataFrame({"a,b": [1], 'q"': [2.5]}), tmp_path, "quoted-header")
    same_as_pandas(pd.DataFrame({"x": pd.Series([], dtype=float), "y": []}), tmp_path, "typed")


def test_results_tables_of_a_sweep(tmp_path):
    """The tables of a real study (string variant labels, Int64 and boolean columns, NaN)."""
    import gossipsim as gs
    from tests.helpers import base_scenario

    raw = base_scenario(  # the second request never arrives: no slot starts after 199 s
        links={"latency_s": 1.0},
        unlearning=[{"node": 2, "at_iteration": 50}, {"node": 3, "at_time": 199.5}],
    )
    raw["scenario"]["runs"] = 6
    raw["sweep"] = {"topology.kind": ["star", "ring"]}
    res = gs.run(raw, engine="event")
    for stem, table in res.tables().items():
        same_as_pandas(table, tmp_path, stem)
