"""Results: tidy tables, a summary, and atomic writes of the results folder.

A results folder holds ``metrics.csv``, ``runs.csv``, ``requests.csv``, ``visits.csv``,
``failures.csv`` (and ``particles.csv`` where ``[metrics] particles`` keeps particle sets),
``summary.json``, ``graphs/`` and ``plots/``; :func:`load_results` reads it back
into the :class:`Results` that :func:`gossipsim.run` returned. They are written into a staging folder and renamed
into place one by one, so no file is ever half written (the runs themselves are committed as they
finish by :mod:`gossipsim.results.store`). The tables and ``summary.json`` are committed first and the
figures after them, so a failure while drawing cannot lose the tables. Missing values (a run that
never converged) are empty cells.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from gossipsim import __version__
from gossipsim.core.columns import METRIC_COLUMNS, RUN_COLUMNS
from gossipsim.core.textfiles import checked_path
from gossipsim.errors import ConfigError
from gossipsim.figures.stats import cover_moves, interval_record
from gossipsim.measurement.metrics import quantile_summary
from gossipsim.results.fastcsv import write_csv
from gossipsim.results.folderfiles import (  # stale staging folders are removed by the next run on the folder
    PROGRESS_KEYS,
    STAGING_PREFIX,
    read_meta,
)
from gossipsim.results.graphfiles import (
    LAYOUT_KEYS,
    MAX_SAVED_NODES,
    graph_files,
    read_graph,
    write_graphs,
)
from gossipsim.results.manifest import (
    DIGEST_KEY,
    FILES_KEY,
    TABLE_FILE_KINDS,
    TABLES,
    TableCheck,
    check_recorded,
    check_rows,
    check_summary,
    check_tables,
    file_sha256,
    intact_copy,
    parquet_available,
    recorded,
    sealed,
    table_damage,
)
from gossipsim.results.tidy import flat_values, tidy, variant_dtype
from gossipsim.states.divergences import Divergence, divergences
from gossipsim.study.sweeps import GRAPH_SWEEP_KEY, is_graph_description

if TYPE_CHECKING:
    import networkx as nx
    from matplotlib.figure import Figure

    from gossipsim.execution.executors import RunFailure
    from gossipsim.measurement.outputs import BatchOutput, RunOutput
    from gossipsim.study.scenario import (
        Study,  # the scenario's machinery (its models) is imported where read
    )

REQUEST_COLUMNS = [
    "variant", "run", "request", "node", "request_iteration", "request_time", "settled_at_request",
    "latency_threshold", "removal_latency", "removal_latency_time", "latency", "latency_time", "retrain_latency",
    "retrain_latency_time",
]  # fmt: skip
#: requests.csv's columns derived from the others and runs.csv (:func:`with_censoring`)
CENSORING_COLUMNS = ["served", "censored_at"]
VISIT_COLUMNS = ["variant", "node", "visits", "share"]
FAILURE_COLUMNS = ["variant", "run", "seed", "error"]
#: particles.csv's columns before the coordinates theta_0 … theta_{d−1} (:func:`particle_table`)
PARTICLE_COLUMNS = ["variant", "run", "iteration", "world", "particle"]


@dataclass
class Results:
    """The tables of a study (pandas DataFrames), its summary and the graphs of its variants.

    Every table's ``variant`` column is an ordered categorical in the sweep's order, followed by one
    typed column per swept dotted key (:mod:`gossipsim.results.tidy`). ``graphs`` maps a variant's label to
    its NetworkX graph (left out beyond :data:`~gossipsim.results.graphfiles.MAX_SAVED_NODES` nodes)."""

    study: Study
    metrics: pd.DataFrame
    runs: pd.DataFrame
    requests: pd.DataFrame
    visits: pd.DataFrame
    failures: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FAILURE_COLUMNS))
    #: particles.csv: the particle sets of the runs that keep them (``[metrics] particles``,
    #: ``particle_runs``), one row per particle: ``variant`` (and the swept keys), ``run``,
    #: ``iteration`` (the slot after which the set is recorded; 0: before the first),
    #: ``world`` (``main``: the protocol; ``retrain``: the retrain baseline), ``particle`` and
    #: ``theta_0`` … ``theta_{d−1}``; empty when no variant keeps any
    particles: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PARTICLE_COLUMNS))
    theory: dict[str, dict[str, Any]] = field(default_factory=dict)
    engines: dict[str, str] = field(default_factory=dict)
    theory_errors: dict[str, str] = field(default_factory=dict)  # variant -> why its theory failed
    graphs: dict[str, nx.Graph] = field(default_factory=dict)
    #: what ``DIR/.gossipsim/study.json`` records of the runs (the scenario's fingerprint, the
    #: content hashes of its inputs when they ran: :func:`gossipsim.results.store.study_record`), written
    #: with the tables so that ``status`` and ``--resume`` know the folder; None: from the study
    run_record: dict[str, Any] | None = field(default=None, repr=False)
    #: summary.json as :func:`load_results` read it (None for the Results of a run): the figures
    #: take the latency estimates they print from it (:meth:`figure_summary`)
    read_summary: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def figure_summary(self) -> dict[str, Any]:
        """What the figures read of the summary: :meth:`summary` without the censored estimates
        (``cover``, and each latency of ``per_request``: Kaplan–Meier estimates, which import
        SciPy's statistics) and the cover figure's mean with its interval (``cover_mean``), with
        those of summary.json where this Results was read from a folder (:attr:`read_summary`;
        the latency and cover figures check them against the tables, and estimate what is
        missing or does not agree)."""
        out = self.summary(estimates=False)
        read = (self.read_summary or {}).get("variants")
        if not isinstance(read, dict):
            return out
        for label, entry in out["variants"].items():
            stored = read.get(label)
            items = stored.get("per_request") if isinstance(stored, dict) else None
            for item in entry["per_request"]:
                old = next(
                    (o for o in items or [] if isinstance(o, dict) and _same_request(o, item)), {}
                )
                item.update({k: old[k] for k in LATENCIES if isinstance(old.get(k), dict)})
            if isinstance(stored, dict) and isinstance(stored.get("cover_mean"), dict):
                entry["cover_mean"] = stored["cover_mean"]  # checked by the figure (its runs)
        return out

    @property
    def variants(self) -> list[str]:
        return [v.label for v in self.study.variants]

    @property
    def divergences(self) -> dict[str, Divergence]:
        """What each variant's states were judged on, by label: KL(q ‖ target) in the column
        ``kl`` for natural parameters (G-FVL), the kernelized Stein discrepancy in ``ksd`` for
        particle sets (``svgd``, ``dsvgd``); ``res.metrics[res.divergences[v].column]``.
        Convergence, the unlearning and retrain latencies and ``settled_at_request`` are judged
        on it. Read from the metrics table (:func:`gossipsim.states.divergences.divergences`)."""
        return divergences(self.metrics, self.variants)

    def summary(self, *, estimates: bool = True) -> dict[str, Any]:
        """Resolved scenario and, per variant, mean / median / 12.5th / 87.5th percentile of every
        numeric column of runs.csv and requests.csv. ``estimates=False`` leaves out the censored
        estimates (``cover`` and the latencies of ``per_request``) and the mean cover time of the
        covered runs with its Student t interval (``cover_mean``, what the cover figure draws)."""
        out: dict[str, Any] = {
            "name": self.study.name,
            "scenario_file": self.study.path,
            "scenario": _jsonable(self.study.raw),
            "sweep": _jsonable(self.study.sweep),
            "variants": {},
        }
        files = graph_files(self.variants, self.graphs)
        for variant in self.study.variants:
            label = variant.label
            entry: dict[str, Any] = {
                "values": _jsonable(variant.values),
                "resolved": _jsonable(variant.scenario.resolved()),
                "runs": _column_summaries(
                    self.runs[self.runs["variant"] == label], skip={"run", "seed"}
                ),
                "requests": _column_summaries(
                    self.requests[self.requests["variant"] == label],
                    skip={"run", "request", "node"},
                ),
            }
            runs = self.runs[self.runs["variant"] == label]
            if not walks(variant.scenario):
                entry["cover"] = {"unit": COVER_UNIT, "note": NO_WALK}
            elif estimates:
                entry["cover"] = {"unit": COVER_UNIT, **_jsonable(cover_summary(runs))}
                moves, _ = cover_moves(runs)
                if moves.size:  # the cover figure's mean and its Student t interval
                    entry["cover_mean"] = _jsonable(interval_record(moves))
            entry["per_request"] = _jsonable(self.request_entries(label, estimates=estimates))
            entry["failed_runs"] = int((self.failures["variant"] == label).sum())
            entry["runs_with_nonfinite_kl"] = self.nonfinite_runs(label)
            shares = self.visits.loc[self.visits["variant"] == label, "share"]
            if len(shares):
                entry["visit_share"] = {"min": float(shares.min()), "max": float(shares.max())}
            if label in self.engines:
                entry["engine"] = self.engines[label]
            if label in self.theory:
                entry["theory"] = _jsonable(self.theory[label])
            if label in self.theory_errors:
                entry["theory_error"] = self.theory_errors[label]
            entry["graph"] = files.get(label)
            if label not in files:
                entry["graph_note"] = (
                    "not saved: each run drew its own graph (topology.draw = per-run)"
                    if variant.scenario.topology.draw == "per-run"
                    else f"not saved (graphs of more than {MAX_SAVED_NODES:,} nodes are not written)"
                )
            out["variants"][label] = entry
        # each table's column types, so that load_results gives CSV tables the types gs.run gave
        out["columns"] = {
            stem: {name: str(dtype) for name, dtype in table.dtypes.items()}
            for stem, table in self.tables().items()
        }
        return out

    def request_entries(self, label: str, *, estimates: bool = True) -> list[dict[str, Any]]:
        """The requests of variant ``label``, one entry each (:func:`request_summaries`): what
        summary.json's ``per_request`` holds and ``gossipsim run`` prints."""
        scenario = self.study.variants[self.variants.index(label)].scenario
        return request_summaries(
            self.requests[self.requests["variant"] == label],
            self.runs[self.runs["variant"] == label],
            self.theory.get(label, {}),
            window=scenario.metrics.latency_window,
            retrain_baseline=scenario.protocol.retrain_baseline,
            estimates=estimates,
        )

    def request_summary(self) -> pd.DataFrame:
        """One row per variant, request and latency (``removal_latency``, ``latency`` and, with a
        retrain baseline, ``retrain_latency``): the request's node and slot, in how many runs it
        arrived, how many of those reached the latency (``observed``), the naive mean of those
        (``mean_of_observed``, biased low when some were censored), the Kaplan–Meier median and the
        restricted mean up to ``restricted_to`` (:mod:`gossipsim.measurement.censoring`), and for the removal
        latency the exact expectation at the request's slot where known (``expected``, with
        ``expected_method``) and E[min(latency, restricted_to)] (``expected_restricted``: what the
        restricted mean estimates when runs end before serving the request). The variant's swept keys are typed columns, as in the other tables.

        >>> res.request_summary().query("latency == 'removal_latency'")  # doctest: +SKIP
        """
        rows: list[dict[str, Any]] = []
        for label in self.variants:
            for entry in self.request_entries(label):
                slot = entry["request_iteration"]
                exact = entry.get("expected_removal_latency") or {}
                for column in LATENCIES:
                    if column not in entry:
                        continue
                    rows.append(
                        {
                            "variant": label,
                            "request": entry["request"],
                            "node": entry["node"],
                            "request_iteration": slot if not isinstance(slot, list) else np.nan,
                            "runs": entry["runs"],
                            "arrived": entry["arrived"],
                            "latency": column,
                            **entry[column],
                            "expected": exact.get("value") if column == "removal_latency" else None,
                            "expected_restricted": (
                                exact.get("restricted_value")
                                if column == "removal_latency"
                                else None
                            ),
                            "expected_method": (
                                exact.get("method") if column == "removal_latency" else None
                            ),
                            "next_visit_latency": (
                                entry.get("next_visit_latency")
                                if column == "removal_latency"
                                else None
                            ),
                        }
                    )
        table = pd.DataFrame(rows)
        if not len(table):
            return table
        for name in ("expected", "expected_restricted", "next_visit_latency"):
            table[name] = table[name].astype(float)
        table["latency"] = pd.Categorical(table["latency"], categories=list(LATENCIES))
        return tidy(table, self.variants, [v.values for v in self.study.variants])

    def nonfinite_runs(self, label: str) -> int:
        """Runs of a variant whose divergence (KL or KSD) became NaN or infinite at some slot
        (``nonfinite_kl_slots``): 0 for folders written since such runs fail (failures.csv);
        others may have some."""
        runs = self.runs.loc[self.runs["variant"] == label]
        if "nonfinite_kl_slots" not in runs:
            return 0
        return int((runs["nonfinite_kl_slots"].fillna(0) > 0).sum())

    def nonfinite_values(self) -> list[str]:
        """One line per table holding infinite or NaN numbers where numbers were computed, naming
        its columns and counts (:func:`gossipsim.results.nonfinite.nonfinite_lines`; empty cells that mean
        "not applicable" are not counted): what ``gossipsim run`` warns of."""
        from gossipsim.results.nonfinite import nonfinite_lines

        swept = {key for v in self.study.variants for key in flat_values(v.values)}
        return nonfinite_lines(self.tables(), swept)

    @property
    def keeps_particles(self) -> bool:
        """Whether a variant keeps particle sets (``[metrics] particles`` with a particle
        protocol): the folder then holds particles.csv."""
        from gossipsim.study.scenario import records_particle_sets

        return any(
            v.scenario.metrics.particles != "none" and records_particle_sets(v.scenario)
            for v in self.study.variants
        )

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables by name (the stem of their file); ``particles`` only where a variant keeps
        particle sets (:attr:`keeps_particles`)."""
        out = {
            "metrics": self.metrics,
            "runs": self.runs,
            "requests": self.requests,
            "visits": self.visits,
            "failures": self.failures,
        }
        if len(self.particles) or self.keeps_particles:
            out["particles"] = self.particles
        return out

    def write(
        self,
        out_dir: str | os.PathLike[str],
        *,
        make_plots: Callable[[Results, Path], None] | None = None,
        tables: str | None = None,
        parquet: bool | None = None,
    ) -> Path:
        """Write the folder ``gossipsim run`` writes into ``out_dir``: the tables, summary.json,
        ``graphs/``, the record of the runs (``.gossipsim/study.json``, marked complete: ``gossipsim
        status`` counts its runs, ``gossipsim run FILE --out DIR --resume`` and ``gs.run(...,
        out=DIR, resume=True)`` find nothing left to run) and, with ``make_plots``, the figures.

        ``tables`` says which files hold the tables (:data:`TABLE_FORMATS`): ``"auto"`` (the
        default) CSV files plus Parquet copies (``metrics.parquet``, ...: column types kept,
        several times faster to load) when pyarrow is installed (``pip install
        'gossipsim[parquet]'``), ``"csv"`` CSV only, ``"parquet"`` Parquet only (a fraction of the
        size for large studies), ``"both"``; the last two need pyarrow. (``parquet=False`` is
        ``"csv"``, ``parquet=True`` ``"both"``.) Everything is first written to a staging folder
        inside ``out_dir`` and then renamed into place file by file, so no file is ever half
        written; table files of an earlier run in a format this one does not write are removed.
        The tables and summary are committed before ``make_plots`` is called: if it raises, they
        stay. The folder is locked while it is written (:mod:`gossipsim.results.folderlock`): a folder a
        command is writing is refused with a one-line ConfigError.
        """
        from gossipsim.results.folderlock import FolderLock

        table_formats(tables, parquet=parquet)  # a bad argument is refused before the lock
        with FolderLock(Path(out_dir), "out_dir"):  # one command at a time on the folder
            dest = self.write_tables(out_dir, tables=tables, parquet=parquet)
            self.write_record(dest)
            if make_plots is not None:
                self.write_plots(dest, make_plots)
        return dest

    def write_record(self, out_dir: str | os.PathLike[str]) -> None:
        """Record in ``out_dir/.gossipsim/study.json`` that the folder holds the finished runs of
        this study (:func:`gossipsim.results.store.mark_complete`), as ``gossipsim run`` does once its
        tables are written."""
        from gossipsim.results.store import mark_complete, study_record

        record = self.run_record
        if record is None:
            try:
                record = study_record(self.study)
            except ConfigError:  # an input file is gone: recorded as unknown (--resume refuses)
                record = {**study_record(self.study, inputs={}), "inputs": None}
        mark_complete(Path(out_dir), record, done=len(self.runs), failed=len(self.failures))

    def write_tables(
        self,
        out_dir: str | os.PathLike[str],
        *,
        tables: str | None = None,
        parquet: bool | None = None,
    ) -> Path:
        """Commit the tables (failures included) and summary.json to ``out_dir`` in the formats
        ``tables`` names (see :meth:`write`; summary.json records them as ``table_formats``, and
        each file's rows, size and SHA-256 under ``files``: :mod:`gossipsim.results.manifest`);
        summary.json is renamed last, so it marks a complete set of tables."""
        formats = table_formats(tables, parquet=parquet)
        parquet = "parquet" in formats
        dest = Path(out_dir)
        dest.mkdir(parents=True, exist_ok=True)
        frames = self.tables()
        with _staging(dest) as staging, ThreadPoolExecutor(max_workers=1) as pool:
            # the Parquet copies are written beside the CSVs, on a thread of their own: pyarrow's
            # writer releases the GIL, so most of it overlaps the CSV writing (measured on two
            # cores: 0 to 0.3 s of the Fig. 3 command, within that machine's noise). The thread
            # gets shallow copies (the same arrays, DataFrame objects of its own): pandas does not
            # promise that two threads may use one DataFrame, even only to read it
            parquet_done = (
                pool.submit(
                    _write_parquet, {k: t.copy(deep=False) for k, t in frames.items()}, staging
                )
                if parquet
                else None
            )
            names = []
            if "csv" in formats:
                for stem, table in frames.items():
                    write_csv(table, staging / f"{stem}.csv")  # what to_csv(index=False) writes
                    names.append(f"{stem}.csv")
            graphs = write_graphs(staging, self.variants, self.graphs, layouts=False)
            summary = self.summary()
            summary["table_formats"] = list(formats)
            if parquet_done is not None:
                names += parquet_done.result()
            # each table file's rows and checksum, and summary.json's own (gossipsim.results.manifest)
            rows = {name: len(frames[name.rsplit(".", 1)[0]]) for name in names}
            (staging / "summary.json").write_text(sealed(summary, staging, rows), encoding="utf-8")
            shutil.rmtree(dest / GRAPHS, ignore_errors=True)  # graphs of an earlier run
            if graphs:
                os.replace(staging / GRAPHS, dest / GRAPHS)
            for name in names:
                os.replace(staging / name, dest / name)
            for stem in TABLES:  # a format or table of an earlier run that this one does not write
                for kind in TABLE_FILE_KINDS:
                    if kind not in formats or stem not in frames:
                        (dest / f"{stem}.{kind}").unlink(missing_ok=True)
            os.replace(staging / "summary.json", dest / "summary.json")  # put in place last
        return dest

    def plot(
        self,
        out_dir: str | os.PathLike[str] | None = None,
        *,
        which: Sequence[str] | None = None,
        fmt: str = "png",
        statistic: str = "median",
    ) -> dict[str, Path] | dict[str, Figure]:
        """Draw the standard figures (those ``gossipsim plot DIR`` draws; ``which`` picks one or
        some by name, e.g. ``"visits"`` or ``["kl_vs_iteration", "visits"]``). With ``out_dir`` they are written there as
        ``<name>.<fmt>`` and their paths returned; without, the matplotlib Figures are returned
        (shown by a notebook), by name. A figure that does not apply (no requests, no graph) is
        left out."""
        from gossipsim.figures.standard import FIGURES, FORMATS, STATISTICS, draw_figures

        if isinstance(which, str):  # one figure by name
            which = [which]
        if which is not None:
            unknown = [w for w in which if w not in FIGURES]
            if unknown:
                raise ConfigError(
                    "which", f"unknown figure {unknown!r}; allowed: {', '.join(FIGURES)}"
                )
        if fmt not in FORMATS:
            raise ConfigError("fmt", f"must be one of {', '.join(FORMATS)} (got {fmt!r})")
        if statistic not in STATISTICS:
            raise ConfigError(
                "statistic", f"must be one of {', '.join(STATISTICS)} (got {statistic!r})"
            )
        return draw_figures(
            self, None if out_dir is None else Path(out_dir), which=which, fmt=fmt,
            statistic=statistic,
        )  # fmt: skip

    def write_plots(
        self, out_dir: str | os.PathLike[str], make_plots: Callable[[Results, Path], None]
    ) -> Path:
        """Draw the figures with ``make_plots`` into a staging folder and put them in place as
        ``out_dir/plots`` once all are drawn (an exception leaves the folder's tables as they are,
        and no half-drawn figure)."""
        dest = Path(out_dir)
        with _staging(dest) as staging:
            (staging / "plots").mkdir()
            make_plots(self, staging / "plots")
            # the graphs small enough for a layout again, now with the one the figures drew
            graphs = write_graphs(
                staging, self.variants, self.graphs, layouts=True, laid_out_only=True
            )
            if graphs:
                (dest / GRAPHS).mkdir(exist_ok=True)
            for name in graphs:
                os.replace(staging / name, dest / name)
            shutil.rmtree(dest / "plots", ignore_errors=True)
            os.replace(staging / "plots", dest / "plots")
        return dest / "plots"


class PostProcessingError(RuntimeError):
    """The runs are done, but a step after them failed: the theory of some variants, drawing the
    figures (the tables, failures.csv and summary.json of a results folder are committed by then)
    or writing the tables (the committed runs are kept for ``--resume``). ``results`` holds the
    tables all the same; ``str(error)`` is one line saying what failed and what to do."""

    def __init__(
        self,
        results: Results,
        folder: Path | None,
        failures: list[str],
        *,
        interrupted: bool = False,
    ) -> None:
        self.results = results
        self.folder = folder
        self.failures = failures
        self.interrupted = interrupted  # by Ctrl-C (while drawing)
        super().__init__(self._line())

    @property
    def tables_written(self) -> bool:
        """Whether the tables, failures.csv and summary.json are in the folder (False without one,
        or when writing them is what failed)."""
        return self.folder is not None and not any(
            f.startswith("writing the tables") for f in self.failures
        )

    def _line(self) -> str:
        what = "; ".join(self.failures)
        if self.folder is None:
            return f"the runs are done, but {what}"
        if not self.tables_written:
            return (
                f"the runs are done, but {what}; the finished runs are kept in {self.folder}/: "
                "fix the cause and continue with the same command and --resume"
            )
        line = (
            f"the runs are done and the tables, failures.csv and summary.json are in {self.folder}/, "
            f"but {what}"
        )
        if any(f.startswith("plotting") for f in self.failures):
            line += f"; redraw the figures with: gossipsim plot {self.folder}"
        return line


@contextlib.contextmanager
def _staging(dest: Path) -> Iterator[Path]:
    """A fresh staging folder inside ``dest`` (same file system: renames are atomic), removed at
    the end; one left by a killed process is removed by the next run on the folder."""
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=dest))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def collect(
    study: Study,
    outputs: Iterable[tuple[int, RunOutput | BatchOutput | RunFailure]],
    node_labels: Sequence[Sequence[Any]] | None = None,
) -> Results:
    """Assemble the tables from run outputs (single runs, or batches of runs from the vectorised
    engine), sorted by (variant, run); failed runs go to the failures table."""
    from gossipsim.execution.executors import (
        RunFailure,  # the engines: imported by runs, not by readers of a folder
    )
    from gossipsim.measurement.outputs import BatchOutput, joined_particles

    labels = [v.label for v in study.variants]
    run_rows: list[dict[str, Any]] = []
    run_pieces: list[pd.DataFrame] = []
    request_rows: list[dict[str, Any]] = []
    request_pieces: list[pd.DataFrame] = []
    metric_parts: list[tuple[str, int | np.ndarray, dict[str, np.ndarray]]] = []
    particle_parts: list[tuple[str, dict[str, np.ndarray]]] = []
    visits: dict[int, np.ndarray] = {}
    failure_rows: list[dict[str, Any]] = []
    order: list[tuple[int, int]] = []  # (variant, run) of each run row, as collected
    for variant, out in outputs:
        label = labels[variant]
        if isinstance(out, RunFailure):
            failure_rows.append(
                {"variant": label, "run": out.run, "seed": out.seed, "error": out.error}
            )
            continue
        visits[variant] = visits.get(variant, 0) + out.visits
        order += [(variant, r) for r in out.runs]
        if isinstance(out, BatchOutput):
            if out.run_rows:  # runs measured one by one, committed together: rows as they are
                run_rows += [{"variant": label, **row} for row in out.run_rows]
            else:  # the vectorised engine's columns
                if run_rows:
                    run_pieces.append(_run_frame(run_rows))
                    run_rows = []
                columns = {"variant": label, "run": np.asarray(out.runs, dtype=np.int64)}
                run_pieces.append(_run_frame({**columns, **out.run_columns}))
            request_rows += [{"variant": label, **row} for row in out.request_rows]
            if out.request_columns:
                if request_rows:
                    request_pieces.append(pd.DataFrame(request_rows, columns=REQUEST_COLUMNS))
                    request_rows = []
                piece = pd.DataFrame({"variant": label, **out.request_columns})
                request_pieces.append(piece.reindex(columns=REQUEST_COLUMNS))
            metric_parts.append((label, out.metric_runs, out.metrics))
            if out.particles:
                particle_parts.append((label, out.particles))
            continue
        run_rows.append({"variant": label, "run": out.run, **out.run_row})
        if out.particles is not None and len(out.particles["iteration"]):
            particle_parts.append((label, joined_particles([(out.run, out.particles)])))
        for row in out.request_rows:
            request_rows.append({"variant": label, "run": out.run, **row})
        metric_parts.append((label, out.run, out.metrics))
    if run_rows or not run_pieces:
        run_pieces.append(_run_frame(run_rows))
    runs = pd.concat(run_pieces, ignore_index=True) if len(run_pieces) > 1 else run_pieces[0]
    # the fixed columns first, then every counter a protocol reported (Protocol.stats), in order
    extra = [c for c in runs.columns if c not in RUN_COLUMNS]
    runs = runs.reindex(columns=RUN_COLUMNS + extra)
    for col in ("cover_iteration", "convergence_iteration"):
        runs[col] = runs[col].astype("Int64")
    runs["cover_moves"] = runs["cover_iteration"] - 1  # moves between holders: one vocabulary
    if request_rows or not request_pieces:
        request_pieces.append(pd.DataFrame(request_rows, columns=REQUEST_COLUMNS))
    requests = (
        pd.concat(request_pieces, ignore_index=True)
        if len(request_pieces) > 1
        else request_pieces[0]
    )
    for col in ("request_iteration", "removal_latency", "latency", "retrain_latency"):
        requests[col] = requests[col].astype("Int64")
    requests["settled_at_request"] = requests["settled_at_request"].astype("boolean")
    requests = with_censoring(requests, runs)
    metrics = _metrics_table(metric_parts, labels)
    particles = particle_table(particle_parts, labels)
    index = {label: v for v, label in enumerate(labels)}
    if order != sorted(order):  # e.g. a sweep resumed with another engine: batches interleave
        runs = _sorted_by_run(runs, index)
        metrics = _sorted_by_run(metrics, index)
        requests = _sorted_by_run(requests, index)
        particles = _sorted_by_run(particles, index)
    failure_rows.sort(key=lambda row: (index[row["variant"]], row["run"]))
    visit_parts = []
    for variant, counts in sorted(visits.items()):
        if not walks(study.variants[variant].scenario):
            continue  # a centralised protocol has no walk: no visits
        # node labels are those of the variant's graph; the caller passes them through node_labels
        visit_parts.append(
            pd.DataFrame(
                {
                    "variant": labels[variant],
                    "node": node_labels[variant] if node_labels else np.arange(counts.size),
                    "visits": counts,
                    "share": counts / max(int(counts.sum()), 1),
                }
            )
        )
    visits_df = (
        pd.concat(visit_parts, ignore_index=True)
        if visit_parts
        else pd.DataFrame(columns=VISIT_COLUMNS)
    )
    failures = pd.DataFrame(failure_rows, columns=FAILURE_COLUMNS)
    values = [v.values for v in study.variants]
    metrics, runs, requests, visits_df, failures, particles = (
        tidy(t, labels, values) for t in (metrics, runs, requests, visits_df, failures, particles)
    )
    return Results(study, metrics, runs, requests, visits_df, failures, particles)


def with_censoring(requests: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """requests.csv with ``served`` and ``censored_at`` (issue 20, item 14), from its own columns
    and each run's length in runs.csv:

    - ``served``: the node's contribution left the state within the run (its ``removal_latency``
      is known; 0 when it had contributed nothing); missing when the request never arrived;
    - ``censored_at``: the run's last slot n, for a request that arrived and has a latency the
      run did not reach (missing otherwise). The removal latency then exceeds n − r + 1 (r the
      ``request_iteration``); a divergence-based (KL or KSD) latency judged over a window of W
      slots exceeds n − W + 2 − r (no stretch of W slots could start after slot n − W + 1 and be seen whole).
    """
    out = requests.drop(columns=[c for c in CENSORING_COLUMNS if c in requests.columns])
    arrived = out["request_iteration"].notna().to_numpy()
    removal = out["removal_latency"].notna().to_numpy()
    served = pd.array(removal, dtype="boolean")
    served[~arrived] = pd.NA
    out["served"] = served
    latencies = [c for c in LATENCIES if c in out.columns]
    missing = (
        out[latencies].isna().any(axis=1).to_numpy() if latencies else np.zeros(len(out), bool)
    )
    if len(out) and len(runs):
        key = pd.MultiIndex.from_arrays([runs["variant"].astype(str), runs["run"]])
        length = pd.Series(runs["iterations"].to_numpy(), index=key)
        ends = length.reindex(
            pd.MultiIndex.from_arrays([out["variant"].astype(str), out["run"]])
        ).to_numpy(dtype=float, na_value=np.nan)
    else:
        ends = np.full(len(out), np.nan)
    out["censored_at"] = pd.array(
        np.where(arrived & missing, ends, np.nan), dtype="Float64"
    ).astype("Int64")
    return out


def _sorted_by_run(table: pd.DataFrame, variant_index: dict[str, int]) -> pd.DataFrame:
    """Rows in (variant, run) order, keeping the order of rows within a run."""
    if not len(table):
        return table
    variant = table["variant"]
    codes = (
        variant.cat.codes.to_numpy().astype(np.int64)  # the categories are in the sweep's order
        if isinstance(variant.dtype, pd.CategoricalDtype)
        else variant.map(variant_index).to_numpy(dtype=np.int64)
    )
    key = codes * (int(table["run"].max()) + 1) + table["run"].to_numpy(dtype=np.int64)
    return table.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)


def _run_frame(rows: list[dict[str, Any]] | dict[str, Any]) -> pd.DataFrame:
    """runs.csv rows (or columns) with at least the fixed columns."""
    frame = pd.DataFrame(rows)
    missing = [c for c in RUN_COLUMNS if c not in frame.columns]
    if missing:
        frame = frame.reindex(columns=[*frame.columns, *missing])
    return frame


def _metrics_table(
    parts: list[tuple[str, int | np.ndarray, dict[str, np.ndarray]]], labels: Sequence[str]
) -> pd.DataFrame:
    """One table from the column arrays of every run (or batch of runs, whose run index is given
    per row), concatenated column by column (much faster than a DataFrame per run); a column a run
    does not have is empty there."""
    if not parts:
        return pd.DataFrame(columns=METRIC_COLUMNS)
    names: list[str] = []
    for _, _, cols in parts:
        names += [c for c in cols if c not in names]
    ordered = [c for c in METRIC_COLUMNS if c in names] + [
        c for c in names if c not in METRIC_COLUMNS
    ]
    sizes = [len(next(iter(cols.values()))) for _, _, cols in parts]
    # the variant column repeats a few labels: a categorical built from each part's code, repeated
    # by position, never a label per row
    code_of = {label: i for i, label in enumerate(labels)}
    codes = np.repeat(np.array([code_of[label] for label, _, _ in parts], dtype=np.int64), sizes)
    data: dict[str, Any] = {
        "variant": pd.Categorical.from_codes(codes, dtype=variant_dtype(labels)),
        "run": np.concatenate(
            [
                np.asarray(run, dtype=np.int64)
                if isinstance(run, np.ndarray)
                else np.full(n, run, dtype=np.int64)
                for (_, run, _), n in zip(parts, sizes, strict=True)
            ]
        ),
    }
    for name in ordered:
        if name in ("variant", "run"):
            continue
        data[name] = np.concatenate(
            [
                np.asarray(cols[name]) if name in cols else np.full(n, np.nan)
                for (_, _, cols), n in zip(parts, sizes, strict=True)
            ]
        )
    return pd.DataFrame(data, copy=False)  # the arrays are fresh: no need to copy them again


def particle_table(
    parts: list[tuple[str, dict[str, np.ndarray]]], labels: Sequence[str]
) -> pd.DataFrame:
    """particles.csv from the particle columns of batches of runs (variant label,
    :func:`~gossipsim.measurement.outputs.joined_particles`), in the order given: :data:`PARTICLE_COLUMNS`
    then ``theta_0`` … ``theta_{d−1}`` (d the largest of the variants'; empty for the others)."""
    parts = [(label, cols) for label, cols in parts if len(cols.get("iteration", ()))]
    if not parts:
        return pd.DataFrame(columns=PARTICLE_COLUMNS)
    sizes = [len(cols["iteration"]) for _, cols in parts]
    dimension = max(cols["theta"].shape[1] for _, cols in parts)
    code_of = {label: i for i, label in enumerate(labels)}
    codes = np.repeat(np.array([code_of[label] for label, _ in parts], dtype=np.int64), sizes)
    data: dict[str, Any] = {
        "variant": pd.Categorical.from_codes(codes, dtype=variant_dtype(labels)),
        **{
            name: np.concatenate([cols[name] for _, cols in parts]).astype(np.int64)
            for name in ("run", "iteration")
        },
        "world": np.concatenate([cols["world"] for _, cols in parts]).astype(object),
        "particle": np.concatenate([cols["particle"] for _, cols in parts]).astype(np.int64),
    }
    for i in range(dimension):
        data[f"theta_{i}"] = np.concatenate(
            [
                cols["theta"][:, i] if i < cols["theta"].shape[1] else np.full(n, np.nan)
                for (_, cols), n in zip(parts, sizes, strict=True)
            ]
        ).astype(np.float64)
    return pd.DataFrame(data, copy=False)


#: ``tables=`` (``--tables``): auto (CSV, plus Parquet copies where pyarrow is installed), csv,
#: parquet (Parquet only), both; the kinds of table files are :data:`TABLE_FILE_KINDS`
TABLE_FORMATS = ("auto", "csv", "parquet", "both")
PARQUET_HINT = "pip install 'gossipsim[parquet]'"


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


def _write_parquet(tables: dict[str, pd.DataFrame], folder: Path) -> list[str]:
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


GRAPHS = "graphs"
#: column types of folders written before summary.json recorded them
_OLD_TYPES = {
    **dict.fromkeys(
        ("cover_iteration", "cover_moves", "convergence_iteration", "request_iteration",
         "removal_latency", "latency", "retrain_latency"), "Int64",
    ),
    "settled_at_request": "boolean",
}  # fmt: skip


def load_results(out_dir: str | os.PathLike[str]) -> Results:
    """Read a results folder back into the :class:`Results` that :func:`gossipsim.run` returned:
    the study rebuilt from summary.json's scenario, every table with the same column types (from
    the Parquet files when they are there, else from the CSV files, with the types summary.json
    records), the graphs of ``graphs/``, the theory, engines and theory errors of summary.json
    (as JSON holds them: NaN as None, infinities as ``"inf"``), and the record of its runs
    (``.gossipsim/study.json``), which :meth:`Results.write` carries to another folder.

    The scenario's input files (a data CSV, an edge list) are not read again, so a folder whose
    inputs have gone still loads. A folder without these files, with a damaged one (summary.json
    or a table file that is not what was written, by the row counts and checksums summary.json
    records: :mod:`gossipsim.results.manifest`; a column that does not hold its recorded type), whose
    tables are Parquet files only where pyarrow is not installed, whose scenario this gossipsim
    cannot read, or that a command is writing, is a one-line ConfigError for ``DIR`` naming the
    file; visits.csv and failures.csv, missing in folders of older versions, and particles.csv,
    missing where no variant keeps particle sets, are then empty tables."""
    return _reading(checked_path(out_dir, "DIR"), _load)


_T = TypeVar("_T")


def _reading(d: Path, read: Callable[[Path], _T]) -> _T:
    """``read(d)``; a ConfigError where a command is writing the folder says so (not damaged)."""
    try:
        return read(d)
    except ConfigError:
        from gossipsim.results.folderlock import holder, in_use_message

        pid = holder(d)
        if pid is not None and pid != os.getpid():  # a command is writing it: not damaged
            raise ConfigError("DIR", in_use_message(d, pid)) from None
        raise


def _load(d: Path) -> Results:
    summary = _read_summary(d)
    study = _rebuilt_study(summary, d)
    labels = [v.label for v in study.variants]
    values = [v.values for v in study.variants]
    tables = _read_tables(d, summary, labels, values)
    entries = summary.get("variants", {})
    results = Results(
        study, tables["metrics"], tables["runs"], tables["requests"], tables["visits"],
        tables["failures"], tables["particles"],
    )  # fmt: skip
    for label in labels:
        entry = entries.get(label) if isinstance(entries.get(label), dict) else {}
        if isinstance(entry.get("theory"), dict):
            results.theory[label] = entry["theory"]
        if "engine" in entry:
            results.engines[label] = str(entry["engine"])
        if "theory_error" in entry:
            results.theory_errors[label] = str(entry["theory_error"])
    results.graphs = _read_graphs(d, {label: entries.get(label) for label in labels})
    _restore_node_labels(results.tables(), results.graphs.values())
    record = read_meta(d)
    if record is not None and record.get("complete"):
        results.run_record = {k: v for k, v in record.items() if k not in PROGRESS_KEYS}
    results.read_summary = summary
    return results


def repair_tables(
    out_dir: str | os.PathLike[str], study: Study | None = None, key: str = "--resume"
) -> list[str]:
    """Rewrite each table file of a finished folder that is not what was written (truncated,
    edited, emptied, widened or missing: :func:`gossipsim.results.manifest.table_damage`) from its copy
    in the other format (``metrics.csv`` from ``metrics.parquet`` or the other way round), where
    that copy is intact, and only if the file rewritten is byte for byte the one written (the
    SHA-256 summary.json records): the folder is then exactly as it was written. What ``--resume``
    of a finished folder does first. ``study``: the folder's (else rebuilt from summary.json).

    Returns one ``name was damaged (why): rewritten from copy`` per file rewritten (none for a
    whole folder). A damaged summary.json, a damaged file without an intact copy, or a copy that
    does not give the file written back, is a one-line ConfigError for ``key`` naming the file;
    nothing is then changed. The caller holds the folder's lock (``--resume`` does)."""
    d = Path(out_dir)
    try:
        summary = _read_summary(d)
        damage = table_damage(d, summary)
        plan: dict[str, str] = {}
        state = {
            name: "missing" if why == "missing" else f"damaged ({why})" for name, why in damage
        }
        for name, _ in damage:
            copy = intact_copy(d, name, summary, damage)
            if copy is None:
                raise ConfigError(
                    key,
                    f"{str(d / name)!r} is {state[name]} and has no intact copy to rewrite it from; run "
                    "without --resume to start over",
                )
            if "parquet" in (name.rpartition(".")[2], copy.rpartition(".")[2]) and (
                not parquet_available()
            ):
                raise ConfigError(
                    key, f"rewriting {str(d / name)!r} from {copy} needs pyarrow: {PARQUET_HINT}"
                )
            plan[name] = copy
        if not plan:
            return []
        study = _rebuilt_study(summary, d) if study is None else study
        labels = [v.label for v in study.variants]
        values = [v.values for v in study.variants]
        sources = {name.rpartition(".")[0]: copy.rpartition(".")[2] for name, copy in plan.items()}
        tables = _read_tables(d, summary, labels, values, sources=sources)
        entries = summary.get("variants", {})
        graphs = _read_graphs(d, {label: entries.get(label) for label in labels})
        _restore_node_labels(tables, graphs.values())
    except ConfigError as exc:
        raise ConfigError(key, exc.message) from None
    done = []
    with _staging(d) as staging:
        for name, copy in plan.items():
            stem, _, kind = name.rpartition(".")
            if kind == "csv":
                write_csv(tables[stem], staging / name)
            else:
                _write_parquet({stem: tables[stem]}, staging)
            if file_sha256(staging / name) != (recorded(summary, name) or {}).get("sha256"):
                raise ConfigError(
                    key,
                    f"{str(d / name)!r} is {state[name]}, and rewritten from {copy} it would "
                    "not be the file written (another pyarrow or pandas?); run without --resume "
                    "to start over",
                )
        for name, copy in plan.items():
            os.replace(staging / name, d / name)
            done.append(f"{name} was {state[name]}: rewritten from {copy}")
    return done


def _read_tables(
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
    ``sources`` (table -> the kind of file to read it from: what :func:`repair_tables` rewrites
    a damaged file from, once it has verified those files) only those tables are read."""
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
    """The tables of :func:`_read_tables` read from the files ``reading`` names."""
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


#: metrics.csv's columns that no figure draws (``gossipsim plot`` does not read them)
UNDRAWN_COLUMNS = {"metrics": ("holder", "bits")}


@dataclass
class FigureTables:
    """What ``gossipsim plot`` draws of a results folder (:func:`load_figure_tables`): the tables
    (without the swept keys' columns and :data:`UNDRAWN_COLUMNS`), what the figures read of the
    summary (:meth:`Results.figure_summary`) and the graphs."""

    metrics: pd.DataFrame
    runs: pd.DataFrame
    requests: pd.DataFrame
    visits: pd.DataFrame
    particles: pd.DataFrame
    summary: dict[str, Any]
    graphs: dict[str, nx.Graph]


def load_figure_tables(
    out_dir: str | os.PathLike[str], check: TableCheck | None = None
) -> FigureTables | None:
    """What the figures of a results folder draw, read without rebuilding its study (which imports
    the scenario's model, family and SciPy: about 0.15-0.3 s of ``gossipsim plot``): the
    figures' summary is summary.json's, which is :meth:`Results.figure_summary` of the folder
    when this gossipsim wrote it (its version and the hash of each of its source files, as the
    folder's record ``.gossipsim/study.json`` holds them, are this one's). None for any other
    folder (another version's, one without a record or without its graphs): then
    :func:`load_results`. The tables are checked as :func:`load_results` checks them (``check``:
    the verification of the folder's files, started early: :func:`gossipsim.results.manifest.start_check`),
    and a damaged folder is the same one-line ConfigError."""
    return _reading(checked_path(out_dir, "DIR"), lambda d: _load_figure_tables(d, check))


def _load_figure_tables(d: Path, check: TableCheck | None = None) -> FigureTables | None:
    summary = _read_summary(d)
    entries = summary.get("variants")
    if (
        not _written_by_this_code(d)
        or not entries
        or not all(
            isinstance(e, dict) and isinstance(e.get("values"), dict) for e in entries.values()
        )
    ):
        return None
    graphs = _read_graphs(d, entries)
    if not graphs:  # gossipsim plot builds them from the study
        return None
    labels = list(entries)
    swept = {key for entry in entries.values() for key in flat_values(entry["values"])}
    unread = {stem: swept | set(UNDRAWN_COLUMNS.get(stem, ())) for stem in TABLES}
    tables = _read_tables(d, summary, labels, [{}] * len(labels), unread=unread, check=check)
    _restore_node_labels(tables, graphs.values())
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


#: the columns whose cells are node labels
NODE_COLUMNS = {"metrics": ("holder",), "requests": ("node",), "visits": ("node",)}


def _restore_node_labels(tables: dict[str, pd.DataFrame], graphs: Iterable[nx.Graph]) -> None:
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


def _read_summary(d: Path) -> dict[str, Any]:
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


def _rebuilt_study(summary: dict[str, Any], d: Path) -> Study:
    """The study of summary.json's scenario, paths resolved against the original scenario file's
    folder (nothing is read from them); infinities written as "inf" are tried as numbers too."""
    from gossipsim.study.scenario import (
        parse_study,  # the scenario's machinery: imported where a study is read
    )

    raw = _with_saved_graph(summary["scenario"], summary, d)
    path = summary.get("scenario_file")
    path = path if isinstance(path, str) else None
    try:
        return parse_study(raw, path=path)
    except ConfigError as first:
        try:
            return parse_study(_infinities(raw), path=path)
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
    written as text: :func:`_restore_node_labels`)."""
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
                continue  # e.g. mixed node labels, written as text (see _restore_node_labels)
            raise ConfigError(
                "DIR",
                f"{str(path)!r}: column {name!r} does not hold {kind} values as written "
                f"({_reason(exc)}); run the scenario again",
            ) from None
    return table


def _read_graphs(d: Path, entries: dict[str, Any]) -> dict[str, nx.Graph]:
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


LATENCIES = ("removal_latency", "latency", "retrain_latency")
COVER_UNIT = "cover_iteration (slots; cover_moves = cover_iteration - 1)"
#: what a centralised protocol's runs have instead of a cover time and visits
NO_WALK = "no walk: a centralised protocol learns at a centre holding every node's data"


def walks(scenario: Any) -> bool:
    """Whether a variant's runs walk: False for a centralised protocol kind (``svgd``), which has
    no cover time (NaN in runs.csv) and no visits (no rows in visits.csv)."""
    from gossipsim.protocols import protocol_kind  # the protocols: imported where a study is read

    return not protocol_kind(scenario.protocol.kind).centralised


def cover_summary(runs: pd.DataFrame) -> dict[str, Any]:
    """A variant's cover iterations with their censoring: a run that ended uncovered says only that
    its cover iteration exceeds its length (:func:`gossipsim.measurement.censoring.censored_summary`)."""
    from gossipsim.measurement.censoring import (
        censored_summary,  # SciPy's statistics: imported where estimated
    )

    cover = runs["cover_iteration"].to_numpy(dtype=float, na_value=np.nan)
    length = runs["iterations"].to_numpy(dtype=float, na_value=np.nan)
    return censored_summary(cover, length)


def request_summaries(
    requests: pd.DataFrame,
    runs: pd.DataFrame,
    theory: dict[str, Any] | None = None,
    *,
    window: int = 1,
    retrain_baseline: bool = True,
    estimates: bool = True,
) -> list[dict[str, Any]]:
    """One entry per request of a variant (never pooled across nodes): the node, when it arrived,
    in how many runs, and for each latency the served count, the naive mean of the served runs, the
    Kaplan–Meier median and the restricted mean (:func:`gossipsim.measurement.censoring.censored_summary`; a
    removal latency not reached by the end of a run of n slots, for a request at slot r, exceeds
    n − r + 1, a divergence-based latency judged over ``window`` slots exceeds n − window + 2 − r).
    ``retrain_latency`` is left out without a retrain baseline (``retrain_baseline``), and every
    latency with ``estimates=False``.

    From ``theory`` (the variant's theory block): ``expected_removal_latency``, the exact
    expectation of what the runs measure at this request's slot (``value``, None when it could not
    be computed, and ``label`` saying what it is), and ``next_visit_latency``, the value from a
    stationary holder with the node's factor present (a different quantity, for reference)."""
    out: list[dict[str, Any]] = []
    if not len(requests):
        return out
    theory = theory or {}
    exact = {
        e.get("request"): e for e in theory.get("removal_latency") or [] if isinstance(e, dict)
    }
    next_visit = theory.get("next_visit_latency") or {}
    length = runs.set_index("run")["iterations"]
    latencies = [c for c in LATENCIES if estimates and (c != "retrain_latency" or retrain_baseline)]
    for _, rows in requests.groupby("request", sort=True):
        node = rows["node"].iloc[0]
        request = int(rows["request"].iloc[0])
        slot = rows["request_iteration"].to_numpy(dtype=float, na_value=np.nan)
        arrived = np.isfinite(slot)
        ends = rows["run"].map(length).to_numpy(dtype=float, na_value=np.nan)
        times = rows["request_time"].to_numpy(dtype=float, na_value=np.nan)[arrived]
        entry: dict[str, Any] = {
            "request": request,
            "node": node,
            "runs": int(len(rows)),
            "arrived": int(arrived.sum()),
            "request_iteration": _one_or_range(slot[arrived]),
            "request_time": _one_or_range(times),
        }
        for column in latencies:
            if column not in rows:
                continue
            seen = window if column != "removal_latency" else 1  # slots a settled stretch needs
            censored_at = ends - seen + 2 - slot
            values = rows[column].to_numpy(dtype=float, na_value=np.nan)[arrived]
            from gossipsim.measurement.censoring import (
                censored_summary,  # SciPy's statistics: where estimated
            )

            entry[column] = censored_summary(values, censored_at[arrived])
        if request in exact:
            e = exact[request]
            entry["expected_removal_latency"] = {
                "value": e.get("expected"),
                "label": expected_label(e),
                "method": e.get("method"),
                "nothing_to_remove": e.get("nothing_to_remove"),
                "restricted_to": e.get("restricted_to"),
                "restricted_value": e.get("restricted_expected"),
                "served_within_run": e.get("served_within_run"),
            }
        if str(node) in next_visit:
            entry["next_visit_latency"] = next_visit[str(node)]
        out.append(entry)
    return out


def _same_request(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two ``per_request`` entries are of the same request (its number and node)."""
    return a.get("request") == b.get("request") and str(a.get("node")) == str(b.get("node"))


def expected_label(entry: dict[str, Any]) -> str:
    """A few words for a legend or a summary line saying what an exact removal-latency value of
    the theory block is (or why there is none)."""
    if entry.get("expected") is None:
        return "no exact expectation (see summary.json theory.removal_latency)"
    return "exact expectation at the request's slot"


def _one_or_range(values: np.ndarray) -> Any:
    """A value shared by every run, or its [min, max] range (None when there is none)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    low, high = float(finite.min()), float(finite.max())
    return low if low == high else [low, high]


def _column_summaries(df: pd.DataFrame, skip: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in df.columns:
        if col in skip or col == "variant":
            continue
        series = df[col]
        if not (pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)):
            continue
        out[col] = quantile_summary(series.to_numpy(dtype=float, na_value=np.nan))
    return out


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        f = float(x)
        if math.isnan(f):
            return None
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    return x
