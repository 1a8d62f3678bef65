"""Reading a results folder's files back: summary.json, checked (:func:`read_summary`); the study
of its scenario, rebuilt (:func:`rebuilt_study`: graphs given from Python read back from
``graphs/``); every table, verified against what summary.json records, from its Parquet or CSV
file with its recorded column types, tidy (:func:`read_tables`); the variants' graphs
(:func:`read_graphs`) and node labels of mixed types restored in the tables
(:func:`restore_node_labels`). What :func:`gossipsim.results.results.load_results`,
:func:`gossipsim.results.figuretables.load_figure_tables` and
:func:`gossipsim.results.repair.repair_tables` read a folder with; a folder that is not what was
written is a one-line ConfigError for ``DIR`` naming the file."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from gossipsim.data.tables import SAVED_TABLE, load_saved_table
from gossipsim.errors import ConfigError
from gossipsim.results.graphfiles import FOLDER as GRAPHS
from gossipsim.results.graphfiles import LAYOUT_KEYS, read_graph
from gossipsim.results.manifest import (
    FILES_KEY,
    PARQUET_HINT,
    TABLE_FILE_KINDS,
    TABLES,
    TableCheck,
    check_recorded,
    check_rows,
    check_summary,
    check_tables,
    parquet_available,
    recorded,
)
from gossipsim.results.tablecolumns import (
    FAILURE_COLUMNS,
    PARTICLE_COLUMNS,
    VISIT_COLUMNS,
    with_censoring,
)
from gossipsim.results.tidy import flat_values, tidy, variant_dtype
from gossipsim.study.sweeps import GRAPH_SWEEP_KEY, is_graph_description

if TYPE_CHECKING:
    import networkx as nx

    from gossipsim.study.scenario import (
        Study,  # the scenario's machinery (its models) is imported where read
    )

#: column types of folders written before summary.json recorded them
_OLD_TYPES = {
    **dict.fromkeys(
        ("cover_iteration", "cover_moves", "convergence_iteration", "request_iteration",
         "removal_latency", "latency", "retrain_latency"), "Int64",
    ),
    "settled_at_request": "boolean",
}  # fmt: skip

_T = TypeVar("_T")


def read_folder(d: Path, read: Callable[[Path], _T]) -> _T:
    """``read(d)``; a ConfigError where a command is writing the folder says so (not damaged)."""
    try:
        return read(d)
    except ConfigError:
        from gossipsim.results.folderlock import holder, in_use_message

        pid = holder(d)
        if pid is not None and pid != os.getpid():  # a command is writing it: not damaged
            raise ConfigError("DIR", in_use_message(d, pid)) from None
        raise


def read_tables(
    d: Path,
    summary: dict[str, Any],
    labels: Sequence[str],
    values: Sequence[Mapping[str, Any]],
    *,
    unread: Mapping[str, Collection[str]] | None = None,
    sources: Mapping[str, str] | None = None,
    check: TableCheck | None = None,
) -> dict[str, pd.DataFrame]:
    """Every table of the folder, checked (:func:`_read_table`), with its recorded column types
    and tidy (:func:`~gossipsim.results.tidy.tidy`: the variant's swept keys as columns, from
    ``values``). The swept keys' columns in the files are not read (tidy makes them again), nor
    the columns ``unread`` names for a table.

    Every table file summary.json records is verified, whatever format is read
    (:class:`gossipsim.results.manifest.TableCheck`, ``check`` where the caller started it early, as
    ``gossipsim plot`` does): the files read before any is parsed, the others (the CSV files
    beside the Parquet copies read) on a thread of their own while the tables are read, and a
    damaged one is refused once they are (:func:`gossipsim.results.manifest.check_tables`). With
    ``sources`` (table -> the kind of file to read it from: what
    :func:`gossipsim.results.repair.repair_tables` rewrites a damaged file from, once it has
    verified those files) only those tables are read."""
    written = summary.get("table_formats")
    # the files that must hold the tables: the CSV files, unless summary.json says the tables
    # were written as Parquet only (Parquet copies beside CSV files may be deleted; they are read
    # where they are there)
    required = "parquet" if written == ["parquet"] else "csv"
    stems = list(TABLES if sources is None else sources)
    reading = {stem: _table_file(d, stem, required, (sources or {}).get(stem)) for stem in stems}
    if sources is not None:
        return _parsed_tables(d, summary, labels, values, reading, required, unread)
    read = {path.name for path in reading.values()}
    if check is None or check.folder != d or check.summary != summary:
        check = TableCheck(d, summary, first=read)
    if check.damage(read):  # nothing is parsed from a damaged file
        check_tables(d, summary, check.damage())
    tables = _parsed_tables(d, summary, labels, values, reading, required, unread)
    check_tables(d, summary, check.damage())
    return tables


def _parsed_tables(
    d: Path,
    summary: dict[str, Any],
    labels: Sequence[str],
    values: Sequence[Mapping[str, Any]],
    reading: Mapping[str, Path],
    required: str,
    unread: Mapping[str, Collection[str]] | None,
) -> dict[str, pd.DataFrame]:
    """The tables of :func:`read_tables` read from the files ``reading`` names."""
    types = _column_types(summary, d / "summary.json")
    empty = {"visits": VISIT_COLUMNS, "failures": FAILURE_COLUMNS, "particles": PARTICLE_COLUMNS}
    swept = {key for v in values for key in flat_values(v)}  # tidy makes their columns
    tables = {}
    for stem, where in reading.items():
        skip = swept | set((unread or {}).get(stem, ()))
        table, path = _read_table(d, stem, where, labels, empty.get(stem), required, summary, skip)
        table = _with_types(table, (types or {}).get(stem) or _OLD_TYPES, labels, path)
        if path is not None and "variant" in table and table["variant"].isna().any():
            raise ConfigError(
                "DIR", f"{str(path)!r} has rows of no variant of the study; run the scenario again"
            )
        tables[stem] = tidy(table, labels, values)
    if "requests" in tables and "served" not in tables["requests"].columns:  # an older folder
        tables["requests"] = with_censoring(tables["requests"], tables["runs"])
    return tables


def _table_file(d: Path, stem: str, required: str, source: str | None = None) -> Path:
    """The file a table is read from: its Parquet file in a folder of Parquet files only
    (``required``), else its Parquet copy when there is one (and pyarrow to read it), else its
    CSV file; the file of kind ``source`` where given."""
    if source is not None:
        return d / f"{stem}.{source}"
    copy = d / f"{stem}.parquet"
    if required == "parquet" or (copy.is_file() and parquet_available()):
        return copy
    return d / f"{stem}.csv"


#: the columns whose cells are node labels
NODE_COLUMNS = {"metrics": ("holder",), "requests": ("node",), "visits": ("node",)}


def restore_node_labels(tables: dict[str, pd.DataFrame], graphs: Iterable[nx.Graph]) -> None:
    """Node labels of mixed types (3 and "a"), which the CSV and Parquet files hold as text, turned
    back into the graphs' labels (in place), so that the tables equal those ``gs.run`` returned.
    Left as text where no saved graph has mixed labels, or where two labels share a text (3 and
    "3")."""
    columns = [
        (tables[stem], name)
        for stem, names in NODE_COLUMNS.items()
        for name in names
        if stem in tables and name in tables[stem].columns and tables[stem][name].dtype == object
    ]
    if not columns:  # integer labels come back as integers: nothing to restore
        return
    texts: dict[str, Any] = {}
    for graph in graphs:
        for node in graph:
            known = texts.setdefault(str(node), node)
            if type(known) is not type(node) or known != node:
                return  # two labels, one text: which one a cell means is not known
    if all(isinstance(label, str) for label in texts.values()):
        return  # text labels (or none saved): the tables hold them as they are
    for table, name in columns:
        codes, uniques = pd.factorize(table[name], use_na_sentinel=True)
        labels = np.array(
            [None, *(texts.get(u, u) if isinstance(u, str) else u for u in uniques)], dtype=object
        )
        column = labels[codes + 1]
        column[codes < 0] = table[name].to_numpy(dtype=object)[codes < 0]  # missing as read
        table[name] = column


def read_summary(d: Path) -> dict[str, Any]:
    if not d.is_dir():
        raise ConfigError("DIR", f"{str(d)!r} is not a folder")
    path = d / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            "DIR", f"{str(d)!r} is not a finished gossipsim results folder (no summary.json)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(
            "DIR", f"{str(path)!r} cannot be read ({_reason(exc)}); run the scenario again"
        ) from None
    if (
        not isinstance(summary, dict)
        or not isinstance(summary.get("variants", {}), dict)
        or not isinstance(summary.get("scenario"), dict)
    ):
        raise ConfigError(
            "DIR", f"{str(path)!r} is not a gossipsim summary; run the scenario again"
        )
    check_summary(summary, path)
    formats = summary.get("table_formats")
    if formats is not None and (
        not isinstance(formats, list) or not all(f in TABLE_FILE_KINDS for f in formats)
    ):
        raise ConfigError(
            "DIR",
            f"{str(path)!r}: table_formats is not a list of csv, parquet; run the scenario again",
        )
    return summary


def _column_types(summary: dict[str, Any], path: Path) -> dict[str, dict[str, str]] | None:
    """summary.json's column types (``columns``: table -> column -> dtype name), None where it has
    none (folders of older versions); a one-line ConfigError if they are not such a table."""
    types = summary.get("columns")
    if types is None:
        return None
    if not (
        isinstance(types, dict)
        and all(
            isinstance(columns, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in columns.items())
            for columns in types.values()
        )
    ):
        raise ConfigError(
            "DIR", f"{str(path)!r}: columns is not a table of column types; run the scenario again"
        )
    return types


def rebuilt_study(summary: dict[str, Any], d: Path) -> Study:
    """The study of summary.json's scenario, paths resolved against the original scenario file's
    folder (nothing is read from them); infinities written as "inf" are tried as numbers too."""
    from gossipsim.study.scenario import (
        parse_study,  # the scenario's machinery: imported where a study is read
    )

    raw = _with_saved_graph(summary["scenario"], summary, d)
    path = summary.get("scenario_file")
    path = path if isinstance(path, str) else None
    data = raw.get("data")
    described = data.get("table") if isinstance(data, dict) else None
    table = load_saved_table(d / SAVED_TABLE, described) if isinstance(described, str) else None
    try:
        return parse_study(raw, path=path, table=table)
    except ConfigError as first:
        try:
            return parse_study(_infinities(raw), path=path, table=table)
        except ConfigError:
            pass
        raise ConfigError(
            "DIR",
            f"the scenario in {str(d / 'summary.json')!r} is not valid for this gossipsim "
            f"({first}); read its CSV files with pandas",
        ) from None


def _with_saved_graph(raw: dict[str, Any], summary: dict[str, Any], d: Path) -> dict[str, Any]:
    """A scenario whose graphs were given from Python (summary.json holds only their descriptions:
    a topology of kind networkx, a sweep over graphs) with each graph read back from the folder's
    ``graphs/`` (its layout left out): the topology's from the first variant's file, each swept
    graph from the file of a variant whose ``topology`` value is its label."""
    entries = [e for e in summary.get("variants", {}).values() if isinstance(e, dict)]
    topology = raw.get("topology")
    if isinstance(topology, dict) and topology.get("kind") == "networkx":
        names = [e.get("graph") for e in entries]
        name = next((n for n in names if isinstance(n, str) and n.startswith(GRAPHS + "/")), None)
        raw = {**raw, "topology": {**topology, "graph": _saved_graph(d, name)}}
    sweep = raw.get("sweep")
    swept = sweep.get(GRAPH_SWEEP_KEY) if isinstance(sweep, dict) else None
    if (
        isinstance(sweep, dict)
        and isinstance(swept, dict)
        and any(is_graph_description(v) for v in swept.values())
    ):
        files: dict[str, str] = {}
        for entry in entries:
            values = entry.get("values")
            label = values.get(GRAPH_SWEEP_KEY) if isinstance(values, dict) else None
            if isinstance(label, str) and isinstance(entry.get("graph"), str):
                files.setdefault(label, entry["graph"])
        graphs = {label: _saved_graph(d, files.get(label)) for label in swept}
        raw = {**raw, "sweep": {**sweep, GRAPH_SWEEP_KEY: graphs}}
    return raw


def _saved_graph(d: Path, name: Any) -> nx.Graph:
    """The graph of a study given from Python, read back from ``d/name`` without its layout."""
    if not isinstance(name, str) or not name.startswith(GRAPHS + "/"):
        raise ConfigError(
            "DIR", f"the study's graph was given from Python and {str(d / GRAPHS)!r} has no copy"
        )
    try:
        graph = read_graph(d / name)
    except Exception as exc:  # noqa: BLE001 - any damage to the file: one line
        raise ConfigError(
            "DIR", f"{str(d / name)!r} cannot be read ({_reason(exc)}); run the scenario again"
        ) from None
    for node in graph:
        for key in LAYOUT_KEYS:
            graph.nodes[node].pop(key, None)
    return graph


def _infinities(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _infinities(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_infinities(v) for v in x]
    return {"inf": math.inf, "-inf": -math.inf}.get(x, x) if isinstance(x, str) else x


def _read_table(
    d: Path,
    stem: str,
    where: Path,
    labels: Sequence[str],
    optional: Sequence[str] | None,
    required: str,
    summary: dict[str, Any],
    skip: Collection[str] = (),
) -> tuple[pd.DataFrame, Path | None]:
    """A table from the file ``where`` (:func:`_table_file`) and that file (None for an optional
    table the folder does not hold: an empty one). The file must be one summary.json records (the
    caller verifies every recorded file: :func:`gossipsim.results.manifest.table_damage`, which also
    reports a recorded file that is missing); in a folder whose summary.json records no files
    (an older gossipsim's), the file of the ``required`` kind must be there. Its rows are
    checked after. The columns of ``skip`` are left unread (a Parquet file's are known from
    summary.json's column types; where it records none, every column is read)."""
    path = d / f"{stem}.csv"
    copy = d / f"{stem}.parquet"
    if not path.is_file() and copy.is_file() and not parquet_available():
        raise ConfigError(
            "DIR",
            f"{str(d)!r} holds its tables as Parquet files only, which needs pyarrow: "
            f"{PARQUET_HINT}",
        )
    needed = d / f"{stem}.{required}"
    for must in (where,) if isinstance(summary.get(FILES_KEY), dict) else (needed, where):
        if must.is_file():
            continue
        written = recorded(summary, must.name) is not None  # then it must be there
        if optional is not None and not path.exists() and not copy.exists() and not written:
            return pd.DataFrame(columns=list(optional)), None
        raise ConfigError(
            "DIR", f"{str(must)!r} is missing: not a finished gossipsim results folder"
        )
    check_recorded(d, where.name, summary)
    try:
        if where == copy:
            names = ((summary.get("columns") or {}).get(stem) or {}) if skip else {}
            kept = [c for c in names if c not in skip] if isinstance(names, dict) else []
            table = pd.read_parquet(copy, columns=kept if kept else None)
        else:
            table = pd.read_csv(
                path,
                dtype={"variant": variant_dtype(labels)},
                usecols=(lambda c: c not in skip) if skip else None,
            )
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ConfigError(
            "DIR", f"{str(where)!r} cannot be read ({_reason(exc)}); run the scenario again"
        ) from None
    except Exception as exc:  # pyarrow's own errors on a damaged file
        raise ConfigError(
            "DIR", f"{str(where)!r} cannot be read ({_reason(exc)}); run the scenario again"
        ) from None
    check_rows(d, where.name, summary, len(table))
    return table, where


def _with_types(
    table: pd.DataFrame, types: dict[str, Any], labels: Sequence[str], path: Path | None = None
) -> pd.DataFrame:
    """The columns converted to the types ``gs.run`` gave them (``types``: column -> dtype name);
    a column that cannot hold its type (text in a column of numbers) is a one-line ConfigError
    naming ``path``, the file it was read from. Node labels are left as read (mixed labels are
    written as text: :func:`restore_node_labels`)."""
    nodes = {name for names in NODE_COLUMNS.values() for name in names}
    for name, kind in types.items():
        if name not in table.columns or not isinstance(kind, str):
            continue
        target: Any = variant_dtype(labels) if kind == "category" else kind
        if str(table[name].dtype) == kind and kind != "category":
            continue
        try:
            table[name] = table[name].astype(target)
        except (TypeError, ValueError, OverflowError) as exc:
            if name in nodes or path is None or kind == "object":
                continue  # e.g. mixed node labels, written as text (see restore_node_labels)
            raise ConfigError(
                "DIR",
                f"{str(path)!r}: column {name!r} does not hold {kind} values as written "
                f"({_reason(exc)}); run the scenario again",
            ) from None
    return table


def read_graphs(d: Path, entries: dict[str, Any]) -> dict[str, nx.Graph]:
    """Each variant's graph from the file summary.json names (one read per file); a missing or
    damaged file leaves the variant out (only the visit map needs it)."""
    out: dict[str, nx.Graph] = {}
    read: dict[str, nx.Graph | None] = {}
    for label, entry in entries.items():
        name = entry.get("graph") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.startswith(GRAPHS + "/"):
            continue
        if name not in read:
            try:
                read[name] = read_graph(d / name)
            except Exception:  # noqa: BLE001 - a damaged graph file must not lose the tables
                read[name] = None
        graph = read[name]
        if graph is not None:
            out[label] = graph
    return out


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
