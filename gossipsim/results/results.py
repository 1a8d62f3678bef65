"""Results: a study's tidy tables, its summary and its graphs (:class:`Results`), and a results folder
read back into them (:func:`load_results`).

A results folder holds ``metrics.csv``, ``runs.csv``, ``requests.csv``, ``visits.csv``,
``failures.csv`` (and ``particles.csv`` where ``[metrics] particles`` keeps particle sets),
``summary.json``, ``graphs/`` and ``plots/``; :func:`load_results` reads it back
into the :class:`Results` that :func:`gossipsim.run` returned. They are written into a staging folder and renamed
into place one by one, so no file is ever half written (:mod:`gossipsim.results.writing`; the runs
themselves are committed as they finish by :mod:`gossipsim.results.store`). The tables and
``summary.json`` (:mod:`gossipsim.results.summary`) are committed first and the figures after them,
so a failure while drawing cannot lose the tables. Missing values (a run that never converged) are
empty cells. The tables are assembled from the runs by :mod:`gossipsim.results.assembly` and read
from a folder by :mod:`gossipsim.results.reading`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gossipsim.core.textfiles import checked_path
from gossipsim.errors import ConfigError
from gossipsim.results.folderfiles import PROGRESS_KEYS, read_meta
from gossipsim.results.reading import (
    read_folder,
    read_graphs,
    read_summary,
    read_tables,
    rebuilt_study,
    restore_node_labels,
)
from gossipsim.results.summary import (
    figure_summary_of,
    request_summaries,
    request_summary_of,
    summary_of,
)
from gossipsim.results.tablecolumns import FAILURE_COLUMNS, PARTICLE_COLUMNS
from gossipsim.results.tidy import flat_values
from gossipsim.results.writing import commit_plots, commit_tables, table_formats
from gossipsim.states.divergences import Divergence, divergences

if TYPE_CHECKING:
    import networkx as nx
    from matplotlib.figure import Figure

    from gossipsim.study.scenario import (
        Study,  # the scenario's machinery (its models) is imported where read
    )


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
    #: content hashes of its inputs when they ran: :func:`gossipsim.results.studyrecord.study_record`), written
    #: with the tables so that ``status`` and ``--resume`` know the folder; None: from the study
    run_record: dict[str, Any] | None = field(default=None, repr=False)
    #: summary.json as :func:`load_results` read it (None for the Results of a run): the figures
    #: take the latency estimates they print from it (:meth:`figure_summary`)
    read_summary: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def figure_summary(self) -> dict[str, Any]:
        """What the figures read of the summary: :meth:`summary` without the censored estimates
        (``cover``, and each latency of ``per_request``: Kaplan–Meier estimates, which the figures
        compute from the tables where they need them) and the cover figure's mean with its interval (``cover_mean``), with
        those of summary.json where this Results was read from a folder (:attr:`read_summary`;
        the latency and cover figures check them against the tables, and estimate what is
        missing or does not agree)."""
        return figure_summary_of(self)

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
        return summary_of(self, estimates=estimates)

    def request_entries(self, label: str, *, estimates: bool = True) -> list[dict[str, Any]]:
        """The requests of variant ``label``, one entry each (:func:`~gossipsim.results.summary.request_summaries`): what
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
        return request_summary_of(self)

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

        ``tables`` says which files hold the tables (:data:`~gossipsim.results.writing.TABLE_FORMATS`): ``"auto"`` (the
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
        this study (:func:`gossipsim.results.studyrecord.mark_complete`), as ``gossipsim run`` does once its
        tables are written."""
        from gossipsim.results.studyrecord import mark_complete, study_record

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
        return commit_tables(
            self.tables(), self.summary, self.variants, self.graphs, out_dir, formats,
            self.study.table,
        )  # fmt: skip

    def plot(
        self,
        out_dir: str | os.PathLike[str] | None = None,
        *,
        which: Sequence[str] | None = None,
        fmt: str = "png",
        statistic: str = "median",
        x: str = "iteration",
    ) -> dict[str, Path] | dict[str, Figure]:
        """Draw the standard figures (those ``gossipsim plot DIR`` draws; ``which`` picks one or
        some by name, e.g. ``"visits"`` or ``["kl_vs_iteration", "visits"]``). With ``out_dir`` they are written there as
        ``<name>.<fmt>`` and their paths returned; without, the matplotlib Figures are returned
        (shown by a notebook), by name. A figure that does not apply (no requests, no graph) is
        left out.

        ``x = "bits"`` or ``"time"`` (``gossipsim plot --x``) draws the figures with a slot axis
        (``kl_vs_iteration``, ``evaluation``, ``unlearning_kl``, ``unlearning_accuracy``)
        against cumulative bits or simulated seconds instead, named ``kl_vs_bits``,
        ``evaluation_vs_bits``, ... (``kl_vs_iteration`` against time is ``kl_vs_time``); the
        rule for runs of different costs: :mod:`gossipsim.figures.costaxis`. ``which`` naming
        another figure with such an ``x`` is refused."""
        from gossipsim.figures.standard import (
            FIGURES,
            FORMATS,
            STATISTICS,
            draw_figures,
            x_refusal,
        )

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
        why = x_refusal(x, which)
        if why is not None:
            raise ConfigError("x", why)
        return draw_figures(
            self, None if out_dir is None else Path(out_dir), which=which, fmt=fmt,
            statistic=statistic, x=x,
        )  # fmt: skip

    def write_plots(
        self, out_dir: str | os.PathLike[str], make_plots: Callable[[Results, Path], None]
    ) -> Path:
        """Draw the figures with ``make_plots`` into a staging folder and put them in place as
        ``out_dir/plots`` once all are drawn (an exception leaves the folder's tables as they are,
        and no half-drawn figure)."""
        return commit_plots(
            lambda folder: make_plots(self, folder), self.variants, self.graphs, out_dir
        )


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
    return read_folder(checked_path(out_dir, "DIR"), _load)


def _load(d: Path) -> Results:
    summary = read_summary(d)
    study = rebuilt_study(summary, d)
    labels = [v.label for v in study.variants]
    values = [v.values for v in study.variants]
    tables = read_tables(d, summary, labels, values)
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
    results.graphs = read_graphs(d, {label: entries.get(label) for label in labels})
    restore_node_labels(results.tables(), results.graphs.values())
    record = read_meta(d)
    if record is not None and record.get("complete"):
        results.run_record = {k: v for k, v in record.items() if k not in PROGRESS_KEYS}
    results.read_summary = summary
    return results
