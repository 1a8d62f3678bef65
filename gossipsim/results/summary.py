"""What summary.json says of a study's tables (:meth:`gossipsim.results.results.Results.summary`):
per variant the quantiles of every numeric column of runs.csv and requests.csv, the censored
estimates of the cover time and of each request's latencies (Kaplan–Meier, in closed form:
:mod:`gossipsim.measurement.censoring`), the cover figure's mean with its interval, the theory and engines, and
numbers in their JSON form; what the figures read of it (:func:`figure_summary_of`) and the table
of the requests' latencies (:func:`request_summary_of`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from gossipsim.figures.stats import cover_moves, interval_record
from gossipsim.measurement.metrics import quantile_summary
from gossipsim.results.graphfiles import MAX_SAVED_NODES, graph_files
from gossipsim.results.tablecolumns import LATENCIES
from gossipsim.results.tidy import tidy

if TYPE_CHECKING:
    import networkx as nx

    from gossipsim.study.scenario import Study


class SummarySource(Protocol):
    """What summary.json is computed from: a study's tables and what was recorded beside them
    (:class:`~gossipsim.results.results.Results` is one; typed here so that this module needs
    nothing of the class whose methods call it)."""

    study: Study
    runs: pd.DataFrame
    requests: pd.DataFrame
    visits: pd.DataFrame
    failures: pd.DataFrame
    engines: dict[str, str]
    theory: dict[str, dict[str, Any]]
    theory_errors: dict[str, str]
    graphs: dict[str, nx.Graph]
    read_summary: dict[str, Any] | None

    @property
    def variants(self) -> list[str]: ...

    def tables(self) -> dict[str, pd.DataFrame]: ...

    def summary(self, *, estimates: bool = True) -> dict[str, Any]: ...

    def request_entries(self, label: str, *, estimates: bool = True) -> list[dict[str, Any]]: ...

    def nonfinite_runs(self, label: str) -> int: ...


def summary_of(results: SummarySource, *, estimates: bool = True) -> dict[str, Any]:
    """:meth:`Results.summary <gossipsim.results.results.Results.summary>`: summary.json's content
    (without what :func:`gossipsim.results.manifest.sealed` adds of the files written)."""
    out: dict[str, Any] = {
        "name": results.study.name,
        "scenario_file": results.study.path,
        "scenario": _jsonable(results.study.raw),
        "sweep": _jsonable(results.study.sweep),
        "variants": {},
    }
    files = graph_files(results.variants, results.graphs)
    for variant in results.study.variants:
        label = variant.label
        entry: dict[str, Any] = {
            "values": _jsonable(variant.values),
            "resolved": _jsonable(variant.scenario.resolved()),
            "runs": _column_summaries(
                results.runs[results.runs["variant"] == label], skip={"run", "seed"}
            ),
            "requests": _column_summaries(
                results.requests[results.requests["variant"] == label],
                skip={"run", "request", "node"},
            ),
        }
        runs = results.runs[results.runs["variant"] == label]
        if not walks(variant.scenario):
            entry["cover"] = {"unit": COVER_UNIT, "note": NO_WALK}
        elif estimates:
            entry["cover"] = {"unit": COVER_UNIT, **_jsonable(cover_summary(runs))}
            moves, _ = cover_moves(runs)
            if moves.size:  # the cover figure's mean and its Student t interval
                entry["cover_mean"] = _jsonable(interval_record(moves))
        entry["per_request"] = _jsonable(results.request_entries(label, estimates=estimates))
        entry["failed_runs"] = int((results.failures["variant"] == label).sum())
        entry["runs_with_nonfinite_kl"] = results.nonfinite_runs(label)
        shares = results.visits.loc[results.visits["variant"] == label, "share"]
        if len(shares):
            entry["visit_share"] = {"min": float(shares.min()), "max": float(shares.max())}
        if label in results.engines:
            entry["engine"] = results.engines[label]
        if label in results.theory:
            entry["theory"] = _jsonable(results.theory[label])
        if label in results.theory_errors:
            entry["theory_error"] = results.theory_errors[label]
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
        for stem, table in results.tables().items()
    }
    return out


def figure_summary_of(results: SummarySource) -> dict[str, Any]:
    """:meth:`Results.figure_summary <gossipsim.results.results.Results.figure_summary>`: what the
    figures read of the summary."""
    out = results.summary(estimates=False)
    read = (results.read_summary or {}).get("variants")
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


def request_summary_of(results: SummarySource) -> pd.DataFrame:
    """:meth:`Results.request_summary <gossipsim.results.results.Results.request_summary>`: one
    row per variant, request and latency."""
    rows: list[dict[str, Any]] = []
    for label in results.variants:
        for entry in results.request_entries(label):
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
                            exact.get("restricted_value") if column == "removal_latency" else None
                        ),
                        "expected_method": (
                            exact.get("method") if column == "removal_latency" else None
                        ),
                        "next_visit_latency": (
                            entry.get("next_visit_latency") if column == "removal_latency" else None
                        ),
                    }
                )
    table = pd.DataFrame(rows)
    if not len(table):
        return table
    for name in ("expected", "expected_restricted", "next_visit_latency"):
        table[name] = table[name].astype(float)
    table["latency"] = pd.Categorical(table["latency"], categories=list(LATENCIES))
    return tidy(table, results.variants, [v.values for v in results.study.variants])


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
    from gossipsim.measurement.censoring import censored_summary

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
            from gossipsim.measurement.censoring import censored_summary

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
            if e.get("no_unlearning"):  # the protocol removes nothing: the retrain serves it
                entry["expected_removal_latency"]["no_unlearning"] = True
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
