"""The columns of requests.csv, visits.csv, failures.csv and particles.csv (those of runs.csv and
metrics.csv are :mod:`gossipsim.core.columns`'), and requests.csv's censoring columns, derived from
its latencies and runs.csv (:func:`with_censoring`): what the tables collected from runs
(:mod:`gossipsim.results.assembly`) and those read back from a folder
(:mod:`gossipsim.results.reading`) share."""

from __future__ import annotations

import numpy as np
import pandas as pd

REQUEST_COLUMNS = [
    "variant", "run", "request", "node", "request_iteration", "request_time", "settled_at_request",
    "latency_threshold", "removal_latency", "removal_latency_time", "latency", "latency_time", "retrain_latency",
    "retrain_latency_time",
]  # fmt: skip
#: requests.csv's latencies (slots), each censored where its run ended first
LATENCIES = ("removal_latency", "latency", "retrain_latency")
#: requests.csv's columns derived from the others and runs.csv (:func:`with_censoring`)
CENSORING_COLUMNS = ["served", "censored_at"]
VISIT_COLUMNS = ["variant", "node", "visits", "share"]
FAILURE_COLUMNS = ["variant", "run", "seed", "error"]
#: particles.csv's columns before the coordinates theta_0 … theta_{d−1} (:func:`gossipsim.results.assembly.particle_table`)
PARTICLE_COLUMNS = ["variant", "run", "iteration", "world", "particle"]


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
