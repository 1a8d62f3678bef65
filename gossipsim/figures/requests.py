"""The requests a latency figure shows, read from the tables: each request's rows, how long a latency
each run could have shown (censoring), and the expectation drawn beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: the latency columns of requests.csv, in the order a panel lists them
LATENCIES = ("removal_latency", "latency", "retrain_latency")
#: what the next-visit latency of summary.json is, where no expectation of the request itself is known
STATIONARY_LABEL = "from a stationary holder (next-visit latency; not this request's expectation)"


def latency_bound(rows: pd.DataFrame, runs: pd.DataFrame | None) -> np.ndarray:
    """For each row of ``rows`` (requests.csv of one variant) the longest latency its run could
    show: a request that arrived at slot r (``request_iteration``) in a run of n slots and has no
    latency was not served within the run, so its latency exceeds n − r + 1. n is requests.csv's
    ``censored_at`` where given (a row with a latency missing), else runs.csv's ``iterations``; NaN
    where the run's length is unknown (``runs`` not given or without the run).

    The one place the censoring of a latency is read from the tables."""
    slot = rows["request_iteration"].to_numpy(dtype=float, na_value=np.nan)
    if "censored_at" in rows:
        ends = rows["censored_at"].to_numpy(dtype=float, na_value=np.nan)
        if np.isfinite(ends).any() and (runs is None or "iterations" not in runs):
            return ends - slot + 1
    if runs is None or "iterations" not in runs or "run" not in runs or "run" not in rows:
        return np.full(slot.shape, np.nan)
    key = ["variant", "run"] if "variant" in rows and "variant" in runs else ["run"]
    left = rows[key].reset_index(drop=True)
    right = runs[[*key, "iterations"]].drop_duplicates(key)
    if "variant" in key:  # categorical in one table, text in the other: compare as text
        left = left.assign(variant=left["variant"].astype(str))
        right = right.assign(variant=right["variant"].astype(str))
    n = left.merge(right, on=key, how="left")["iterations"].to_numpy(dtype=float, na_value=np.nan)
    return n - slot + 1


def expected_removal(
    summary: dict[str, Any] | None, variant: str, request: int, node: Any
) -> tuple[float, str] | None:
    """The expectation drawn beside a request's removal latency and what it is, in words for a
    legend: the request's own ``expected_removal_latency`` of summary.json's ``per_request`` entry
    when present, else the latency of the node from a stationary holder
    (``theory.next_visit_latency``, ``expected_unlearning_latency`` in folders of gossipsim before
    it), labelled as what it is (:data:`STATIONARY_LABEL`)."""
    entry = (summary or {}).get("variants", {}).get(variant, {}) or {}
    for item in entry.get("per_request") or []:
        if not isinstance(item, dict) or item.get("request") != request:
            continue
        if str(item.get("node")) != str(node):
            continue
        expected = item.get("expected_removal_latency")
        if isinstance(expected, dict) and expected.get("value") is not None:
            return float(expected["value"]), str(
                expected.get("label") or "expected removal latency"
            )
    theory = entry.get("theory") or {}
    stationary = theory.get("next_visit_latency") or theory.get("expected_unlearning_latency")
    value = (stationary or {}).get(str(node))
    return None if value is None else (float(value), STATIONARY_LABEL)


def request_entry(
    summary: dict[str, Any] | None, variant: str, request: int, node: Any
) -> dict[str, Any]:
    """The request's entry of summary.json's ``per_request`` (its latency estimates, its
    expectation), empty where there is none."""
    entry = (summary or {}).get("variants", {}).get(variant, {}) or {}
    for item in entry.get("per_request") or []:
        same = isinstance(item, dict) and item.get("request") == request
        if same and str(item.get("node")) == str(node):
            return item
    return {}


def expected_within_run(
    summary: dict[str, Any] | None, variant: str, request: int
) -> tuple[float, float] | None:
    """(τ, E[min(L, τ)]) of a request whose runs see latencies up to τ − 1 (summary.json's
    ``per_request`` entry, from ``theory.removal_latency``): the exact value a Kaplan–Meier mean
    restricted to the observation window estimates; None where not known."""
    entry = (summary or {}).get("variants", {}).get(variant, {}) or {}
    for item in entry.get("per_request") or []:
        if isinstance(item, dict) and item.get("request") == request:
            expected = item.get("expected_removal_latency") or {}
            tau, value = expected.get("restricted_to"), expected.get("restricted_value")
            if tau is not None and value is not None:
                return float(tau), float(value)
    return None


@dataclass(frozen=True)
class RequestPanel:
    """One request of one variant: the rows of the runs in which it arrived, with the longest
    latency each could show (``bound``: NaN where the run's length is unknown; ``censored_at``:
    where the estimates censor a request not served, the bound or else the longest latency seen),
    and the runs that ended before it arrived (``late``)."""

    variant: str
    request: int
    node: Any
    slot: int | None  # None when the slot differs between runs (a request at a simulated time)
    rows: pd.DataFrame
    bound: np.ndarray
    censored_at: np.ndarray
    late: int

    @property
    def arrived(self) -> bool:
        return bool(len(self.rows))

    @property
    def description(self) -> str:
        if not self.arrived:
            return f"node {self.node}, request (arrived in no run)"
        where = f"at slot {self.slot:,}" if self.slot is not None else "at varying slots"
        return f"node {self.node}, request {where}"


def latency_window(summary: dict[str, Any] | None, variant: str) -> int:
    """The slots W a KL-based latency must stay settled (``metrics.latency_window`` of the
    variant's resolved scenario; 1 where not known): a run of n slots sees such a latency only up
    to n − W + 1 − r + 1, W − 1 slots short of the removal latency's n − r + 1."""
    entry = (summary or {}).get("variants", {}).get(variant, {}) or {}
    value = ((entry.get("resolved") or {}).get("metrics") or {}).get("latency_window")
    return int(value) if isinstance(value, int) and value >= 1 else 1


def _iterations(summary: dict[str, Any] | None, variant: str) -> float:
    """The length of the variant's runs in its resolved scenario (NaN if not there)."""
    entry = (summary or {}).get("variants", {}).get(variant, {}) or {}
    value = ((entry.get("resolved") or {}).get("run") or {}).get("iterations")
    return float(value) if isinstance(value, int | float) else float("nan")


def request_panels(
    requests: pd.DataFrame,
    variants: Sequence[str],
    runs: pd.DataFrame | None = None,
    summary: dict[str, Any] | None = None,
) -> list[RequestPanel]:
    """A :class:`RequestPanel` per request of each variant (in order); one that arrived in no run
    (every run ended first) has no rows.
    Where runs.csv does not give a run's length, the variant's scenario does (summary.json); where
    neither does, a request without a latency is taken to exceed every latency of its panel (the
    estimate then ends at the served fraction, as an ECDF over all requests would)."""
    out: list[RequestPanel] = []
    if requests.empty or "request_iteration" not in requests:
        return out
    for variant in variants:
        part = requests.loc[requests["variant"].astype(str) == str(variant)]
        for (request, node), rows in part.groupby(["request", "node"], sort=True, observed=True):
            arrived = rows.dropna(subset=["request_iteration"])
            slots = arrived["request_iteration"].to_numpy(dtype=float)
            slot = int(slots[0]) if len(slots) and np.all(slots == slots[0]) else None
            bound = latency_bound(arrived, runs)
            unknown = ~np.isfinite(bound)
            if unknown.any():
                bound[unknown] = _iterations(summary, str(variant)) - slots[unknown] + 1
            censored_at = bound.copy()
            unknown = ~np.isfinite(bound)
            if unknown.any():
                columns = [c for c in LATENCIES if c in arrived]
                seen = arrived[columns].to_numpy(dtype=float, na_value=np.nan)
                censored_at[unknown] = np.nanmax(seen) if np.isfinite(seen).any() else 0.0
            out.append(
                RequestPanel(
                    str(variant),
                    int(request),  # type: ignore[call-overload]
                    node,
                    slot,
                    arrived,
                    bound,
                    censored_at,
                    len(rows) - len(arrived),
                )  # fmt: skip
            )
    return out
