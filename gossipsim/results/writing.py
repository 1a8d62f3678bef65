"""Writing a results folder so that no file is ever half written: the kinds of table files
(``tables=``: :func:`table_formats`), the tables and summary.json written into a staging folder and
renamed into place file by file, summary.json last (:func:`commit_tables`), the figures drawn into
one and put in place once all are drawn (:func:`commit_plots`), the Parquet files
(:func:`write_parquet`). A staging folder left by a killed process is removed by the next run
on the folder (:func:`gossipsim.results.store.clean_stale`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gossipsim.data.tables import SAVED_TABLE, save_table
from gossipsim.errors import ConfigError
from gossipsim.results.fastcsv import write_csv
from gossipsim.results.folderfiles import STAGING_PREFIX
from gossipsim.results.graphfiles import FOLDER as GRAPHS
from gossipsim.results.graphfiles import write_graphs
from gossipsim.results.manifest import (
    PARQUET_HINT,
    TABLE_FILE_KINDS,
    TABLES,
    parquet_available,
    sealed,
)

if TYPE_CHECKING:
    import networkx as nx

#: ``tables=`` (``--tables``): auto (CSV, plus Parquet copies where pyarrow is installed), csv,
#: parquet (Parquet only), both; the kinds of table files are :data:`TABLE_FILE_KINDS`
TABLE_FORMATS = ("auto", "csv", "parquet", "both")


def table_formats(
    tables: str | None, *, parquet: bool | None = None, key: str = "tables"
) -> tuple[str, ...]:
    """The kinds of table files to write (``("csv",)``, ``("parquet",)`` or both) for ``tables``
    (:data:`TABLE_FORMATS`; None: ``"auto"``, or what the older ``parquet`` flag says: False
    ``"csv"``, True ``"both"``); a one-line ConfigError for ``key`` when it is none of them or
    needs pyarrow where it is not installed."""
    if tables is not None and parquet is not None:
        raise ConfigError(key, "give tables or parquet, not both (parquet=True is tables='both')")
    if tables is None:
        tables = "auto" if parquet is None else "both" if parquet else "csv"
    if tables not in TABLE_FORMATS:
        raise ConfigError(key, f"must be one of {', '.join(TABLE_FORMATS)} (got {tables!r})")
    if tables == "auto":
        return ("csv", "parquet") if parquet_available() else ("csv",)
    if tables == "csv":
        return ("csv",)
    if not parquet_available():
        raise ConfigError(
            key, f"{tables!r} writes Parquet files, which needs pyarrow: {PARQUET_HINT}"
        )
    return ("parquet",) if tables == "parquet" else ("csv", "parquet")


@contextlib.contextmanager
def staging_folder(dest: Path) -> Iterator[Path]:
    """A fresh staging folder inside ``dest`` (same file system: renames are atomic), removed at
    the end; one left by a killed process is removed by the next run on the folder."""
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=dest))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def commit_tables(
    frames: dict[str, pd.DataFrame],
    summary_of: Callable[[], dict[str, Any]],
    labels: Sequence[str],
    graphs: Mapping[str, nx.Graph],
    out_dir: str | os.PathLike[str],
    formats: tuple[str, ...],
    data_table: Any = None,
) -> Path:
    """Commit the tables ``frames`` (failures included), the graphs of the variants ``labels`` and summary.json
    (``summary_of()``, computed while the Parquet copies are written) to ``out_dir`` as the kinds
    of files ``formats`` names (:func:`table_formats`; :meth:`Results.write_tables
    <gossipsim.results.results.Results.write_tables>`), and a copy of the ``table`` given from
    Python (``data_table``: ``data/table.npz``, :func:`~gossipsim.data.tables.save_table`) if any."""
    parquet = "parquet" in formats
    dest = Path(out_dir)
    dest.mkdir(parents=True, exist_ok=True)
    with staging_folder(dest) as staging, ThreadPoolExecutor(max_workers=1) as pool:
        # the Parquet copies are written beside the CSVs, on a thread of their own: pyarrow's
        # writer releases the GIL, so most of it overlaps the CSV writing (measured on two
        # cores: 0 to 0.3 s of the Fig. 3 command, within that machine's noise). The thread
        # gets shallow copies (the same arrays, DataFrame objects of its own): pandas does not
        # promise that two threads may use one DataFrame, even only to read it
        parquet_done = (
            pool.submit(write_parquet, {k: t.copy(deep=False) for k, t in frames.items()}, staging)
            if parquet
            else None
        )
        names = []
        if "csv" in formats:
            for stem, table in frames.items():
                write_csv(table, staging / f"{stem}.csv")  # what to_csv(index=False) writes
                names.append(f"{stem}.csv")
        written = write_graphs(staging, labels, graphs, layouts=False)
        if data_table is not None:
            save_table(data_table, staging / SAVED_TABLE)
        summary = summary_of()
        summary["table_formats"] = list(formats)
        if parquet_done is not None:
            names += parquet_done.result()
        # each table file's rows and checksum, and summary.json's own (gossipsim.results.manifest)
        rows = {name: len(frames[name.rsplit(".", 1)[0]]) for name in names}
        (staging / "summary.json").write_text(sealed(summary, staging, rows), encoding="utf-8")
        shutil.rmtree(dest / GRAPHS, ignore_errors=True)  # graphs of an earlier run
        if written:
            os.replace(staging / GRAPHS, dest / GRAPHS)
        for name in names:
            os.replace(staging / name, dest / name)
        shutil.rmtree(dest / SAVED_TABLE.split("/")[0], ignore_errors=True)  # an earlier run's
        if data_table is not None:
            os.replace(staging / SAVED_TABLE.split("/")[0], dest / SAVED_TABLE.split("/")[0])
        for stem in TABLES:  # a format or table of an earlier run that this one does not write
            for kind in TABLE_FILE_KINDS:
                if kind not in formats or stem not in frames:
                    (dest / f"{stem}.{kind}").unlink(missing_ok=True)
        os.replace(staging / "summary.json", dest / "summary.json")  # put in place last
    return dest


def commit_plots(
    draw: Callable[[Path], None],
    labels: Sequence[str],
    graphs: Mapping[str, nx.Graph],
    out_dir: str | os.PathLike[str],
) -> Path:
    """The figures ``draw`` draws into a folder, put in place as ``out_dir/plots``, with the
    graphs of the variants ``labels`` that the figures laid out (:meth:`Results.write_plots
    <gossipsim.results.results.Results.write_plots>`)."""
    dest = Path(out_dir)
    with staging_folder(dest) as staging:
        (staging / "plots").mkdir()
        draw(staging / "plots")
        # the graphs small enough for a layout again, now with the one the figures drew
        written = write_graphs(staging, labels, graphs, layouts=True, laid_out_only=True)
        if written:
            (dest / GRAPHS).mkdir(exist_ok=True)
        for name in written:
            os.replace(staging / name, dest / name)
        shutil.rmtree(dest / "plots", ignore_errors=True)
        os.replace(staging / "plots", dest / "plots")
    return dest / "plots"


def write_parquet(tables: dict[str, pd.DataFrame], folder: Path) -> list[str]:
    """Each table as ``<stem>.parquet`` in ``folder``; the names written."""
    names = []
    for stem, table in tables.items():
        _parquet_ready(table).to_parquet(folder / f"{stem}.parquet", index=False)
        names.append(f"{stem}.parquet")
    return names


def _parquet_ready(table: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding values of mixed types (node labels such as 3 and "a") as strings,
    which Parquet needs (one type per column); missing values stay missing, other columns as is."""
    mixed = [
        name
        for name in table.columns
        if table[name].dtype == object and len({type(x) for x in table[name].dropna()}) > 1
    ]
    if not mixed:
        return table
    out = table.copy()
    for name in mixed:
        out[name] = [None if pd.isna(x) else str(x) for x in out[name]]
    return out
