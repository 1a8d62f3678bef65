"""What ``gossipsim plot`` reads of a results folder this gossipsim wrote
(:func:`load_figure_tables`): its tables, without the swept keys' columns and those no figure
draws, summary.json as the figures read it and the graphs, without rebuilding its study (so that
neither the scenario's models nor SciPy are imported)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gossipsim.core.textfiles import checked_path
from gossipsim.core.version import __version__
from gossipsim.results.folderfiles import read_meta
from gossipsim.results.manifest import DIGEST_KEY, FILES_KEY, TABLES, TableCheck
from gossipsim.results.reading import (
    read_folder,
    read_graphs,
    read_summary,
    read_tables,
    restore_node_labels,
)
from gossipsim.results.tidy import flat_values

if TYPE_CHECKING:
    import networkx as nx

#: metrics.csv's columns that no figure draws (``gossipsim plot`` does not read them; ``bits``
#: only with ``--x bits``, ``holder`` only where the ``time_map`` figure may be drawn)
UNDRAWN_COLUMNS = {"metrics": ("holder", "bits")}


@dataclass
class FigureTables:
    """What ``gossipsim plot`` draws of a results folder (:func:`load_figure_tables`): the tables
    (without the swept keys' columns and :data:`UNDRAWN_COLUMNS`), what the figures read of the
    summary (:meth:`gossipsim.results.results.Results.figure_summary`) and the graphs."""

    metrics: pd.DataFrame
    runs: pd.DataFrame
    requests: pd.DataFrame
    visits: pd.DataFrame
    particles: pd.DataFrame
    summary: dict[str, Any]
    graphs: dict[str, nx.Graph]


def load_figure_tables(
    out_dir: str | os.PathLike[str],
    check: TableCheck | None = None,
    *,
    x: str = "iteration",
    which: Sequence[str] | None = None,
) -> FigureTables | None:
    """What the figures of a results folder draw, read without rebuilding its study (which imports
    the scenario's model, family and SciPy: about 0.15-0.3 s of ``gossipsim plot``): the
    figures' summary is summary.json's, which is :meth:`gossipsim.results.results.Results.figure_summary` of the folder
    when this gossipsim wrote it (its version and the hash of each of its source files, as the
    folder's record ``.gossipsim/study.json`` holds them, are this one's). None for any other
    folder (another version's, one without a record or without its graphs): then
    :func:`gossipsim.results.results.load_results`. The tables are checked as it checks them (``check``:
    the verification of the folder's files, started early: :func:`gossipsim.results.manifest.start_check`),
    and a damaged folder is the same one-line ConfigError. ``x``: the x axis of the figures
    (``bits`` reads the metrics' bits column too); ``which``: the figures to draw (None: all that
    apply; the metrics' holder column is read where ``time_map`` may be one of them)."""
    return read_folder(
        checked_path(out_dir, "DIR"), lambda d: _load_figure_tables(d, check, x, which)
    )


def _load_figure_tables(
    d: Path,
    check: TableCheck | None = None,
    x: str = "iteration",
    which: Sequence[str] | None = None,
) -> FigureTables | None:
    summary = read_summary(d)
    entries = summary.get("variants")
    if (
        not _written_by_this_code(d)
        or not entries
        or not all(
            isinstance(e, dict) and isinstance(e.get("values"), dict) for e in entries.values()
        )
    ):
        return None
    graphs = read_graphs(d, entries)
    if not graphs:  # gossipsim plot builds them from the study
        return None
    labels = list(entries)
    swept = {key for entry in entries.values() for key in flat_values(entry["values"])}
    drawn = {x, "holder"} if _may_draw_time_map(entries, graphs, x, which) else {x}
    unread = {stem: swept | set(UNDRAWN_COLUMNS.get(stem, ())) - drawn for stem in TABLES}
    tables = read_tables(d, summary, labels, [{}] * len(labels), unread=unread, check=check)
    restore_node_labels(tables, graphs.values())
    figures = {
        k: v for k, v in summary.items() if k not in (FILES_KEY, DIGEST_KEY, "table_formats")
    }
    # the censored estimates of the cover time are not drawn (Results.figure_summary)
    figures["variants"] = {
        label: {k: v for k, v in entry.items() if k != "cover"} for label, entry in entries.items()
    }
    return FigureTables(
        tables["metrics"], tables["runs"], tables["requests"], tables["visits"],
        tables["particles"], figures, graphs,
    )  # fmt: skip


def _may_draw_time_map(
    entries: dict[str, Any], graphs: dict[str, nx.Graph], x: str, which: Sequence[str] | None
) -> bool:
    """Whether the ``time_map`` figure, which reads the holder of every slot, may be drawn: asked
    for, or (all figures drawn) a variant's links differ by edge or lose messages; and some
    variant records what it needs (:func:`gossipsim.figures.time_map.variant_refusal`)."""
    from gossipsim.figures.time_map import per_edge_links, variant_refusal

    if x != "iteration" or (which is not None and "time_map" not in which):
        return False
    able = [v for v in entries if variant_refusal(entries[v], graphs.get(v)) is None]
    return bool(able) and (
        which is not None or any(per_edge_links(entries[v], graphs[v]) for v in able)
    )


def _written_by_this_code(d: Path) -> bool:
    """Whether the folder's record says this gossipsim (version and source) made its runs, so
    that its summary.json is what this code computes from its tables."""
    from gossipsim.results.provenance import source_hashes

    record = read_meta(d)
    code = record.get("code") if isinstance(record, dict) else None
    return (
        isinstance(code, dict)
        and code.get("gossipsim") == __version__
        and code.get("source") == source_hashes()
    )
