"""A study's tables assembled from its runs' outputs (single runs, batches of the vectorised
engine, failures) in (variant, run) order (:func:`collect`): the
:class:`~gossipsim.results.results.Results` that :func:`gossipsim.run` returns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gossipsim.core.columns import METRIC_COLUMNS, RUN_COLUMNS
from gossipsim.results.results import Results
from gossipsim.results.summary import walks
from gossipsim.results.tablecolumns import (
    FAILURE_COLUMNS,
    PARTICLE_COLUMNS,
    REQUEST_COLUMNS,
    VISIT_COLUMNS,
    with_censoring,
)
from gossipsim.results.tidy import tidy, variant_dtype

if TYPE_CHECKING:
    from gossipsim.execution.executors import RunFailure
    from gossipsim.measurement.outputs import BatchOutput, RunOutput
    from gossipsim.study.scenario import Study


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
