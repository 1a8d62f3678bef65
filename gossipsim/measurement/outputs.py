"""What measuring a run gives: its rows of the tables (:class:`RunOutput`), a batch's
(:class:`BatchOutput`) and their particle sets, and the failure of a run whose divergence left the
floats (:class:`NonFiniteKL`): what the engines hand to the results folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gossipsim.measurement.metrics import (
    Segments,
)
from gossipsim.states.representations import Target


class NonFiniteKL(ArithmeticError):
    """A run whose KL to its target became NaN or infinite: the run fails with this message
    (:func:`nonfinite_kl`), the same from either engine."""


def nonfinite_kl(
    which: str, slot: int, value: float, state: np.ndarray, target: Target, name: str = "KL"
) -> NonFiniteKL:
    """The failure of a run whose ``which`` (the protocol's state, or the retrain baseline's) has
    the non-finite KL ``value`` to ``target`` from ``slot`` on, with its cause: a state that is not
    finite, a KL beyond float64's largest number, or terms of the KL beyond float64's range (an
    ∞ − ∞ or a 0·∞)."""
    eta = np.asarray(state, dtype=float)
    target_eta = getattr(target, "eta", None)
    where = f"state {_numbers(eta)}" + (
        f", target {_numbers(target_eta)}" if target_eta is not None else ""
    )
    if not np.all(np.isfinite(eta)):
        cause = "the state's numbers are not finite"
    elif value == np.inf:
        cause = f"the {name} is larger than float64's largest number ({np.finfo(float).max:.3g})"
    else:
        cause = f"terms of the {name} are beyond float64's range (an ∞ − ∞ or 0·∞)"
    what = "NaN" if np.isnan(value) else f"{value:g}"
    return NonFiniteKL(
        f"the {name} of the {which} to its target is {what} from slot {slot} ({where}): {cause}"
    )


def _numbers(values: Any) -> str:
    flat = np.asarray(values, dtype=float).ravel()
    shown = ", ".join(f"{x:.6g}" for x in flat[:4])
    return f"({shown}{', ...' if flat.size > 4 else ''})"


def check_finite(
    segments: Segments,
    trace: Any,
    targets: list[Target],
    last_slot: int,
    which: str,
    name: str = "KL",
) -> None:
    """Raise :class:`NonFiniteKL` for the first segment of slots 1..``last_slot`` whose KL is not
    a number."""
    m = segments.first_nonfinite(last_slot)
    if m is None:
        return
    assert segments.state_index is not None and segments.target_index is not None
    state = trace.states[int(segments.state_index[m])]
    target = targets[int(segments.target_index[m])]
    raise nonfinite_kl(which, int(segments.starts[m]), float(segments.kl[m]), state, target, name)


@dataclass
class RunOutput:
    """The rows one run contributes to the three tables (columns as arrays / dicts)."""

    run: int
    seed: int
    run_row: dict[str, Any]
    request_rows: list[dict[str, Any]]
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # slots each node held the token, by node index
    #: the run's particle sets for particles.csv (:func:`particle_columns`), None when it keeps
    #: none (``[metrics] particles``, ``particle_runs``)
    particles: dict[str, np.ndarray] | None = None

    @property
    def runs(self) -> tuple[int, ...]:
        return (self.run,)


@dataclass
class BatchOutput:
    """The rows of many runs of one variant (the same values the runs' :class:`RunOutput` would
    hold), runs.csv and requests.csv column by column (the vectorised engine's batches) or row by
    row (runs measured one by one and committed together, :meth:`from_runs`)."""

    runs: tuple[int, ...]  # run indices, ascending
    run_columns: dict[str, np.ndarray]  # runs.csv columns after variant and run, one entry per run
    metric_runs: np.ndarray  # the run index of each metrics row
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # summed over the runs
    #: requests.csv columns after the variant (``run`` first), one entry per request of each run
    request_columns: dict[str, np.ndarray] = field(default_factory=dict)
    #: runs of the batch that failed (not in ``runs``, nor in any column), by run index: a KL that
    #: is not a number (:class:`NonFiniteKL`)
    failures: dict[int, NonFiniteKL] = field(default_factory=dict)
    #: runs.csv rows after the variant (``run`` first), for runs measured one by one
    run_rows: list[dict[str, Any]] = field(default_factory=list)
    #: requests.csv rows after the variant (``run`` first), for runs measured one by one
    request_rows: list[dict[str, Any]] = field(default_factory=list)
    #: particles.csv columns after the variant (``run`` first; :func:`particle_columns`) of the
    #: runs that keep their particle sets; empty when none does
    particles: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def run(self) -> int:
        return self.runs[0]

    @classmethod
    def from_runs(cls, outputs: list[RunOutput]) -> BatchOutput:
        """Runs measured one by one (same metric columns) as one batch, in run order: their rows
        as they are, their metric columns concatenated, their visits summed."""
        outputs = sorted(outputs, key=lambda out: out.run)
        names = list(outputs[0].metrics)
        sizes = [len(out.metrics[names[0]]) if names else 0 for out in outputs]
        runs = np.asarray([out.run for out in outputs], dtype=np.int64)
        visits = outputs[0].visits.copy()
        for out in outputs[1:]:
            visits += out.visits
        return cls(
            runs=tuple(runs.tolist()),
            run_columns={},
            metric_runs=np.repeat(runs, sizes),
            metrics={
                name: np.concatenate([out.metrics[name] for out in outputs]) for name in names
            },
            visits=visits,
            run_rows=[{"run": out.run, **out.run_row} for out in outputs],
            request_rows=[{"run": out.run, **row} for out in outputs for row in out.request_rows],
            particles=joined_particles(
                [(out.run, out.particles) for out in outputs if out.particles is not None]
            ),
        )


#: the worlds of particles.csv, in the order of a run's rows: the protocol's, the retrain baseline's
PARTICLE_WORLDS = ("main", "retrain")


#: the columns of a run's particle sets (:func:`particle_columns`); ``theta`` is ``(rows, d)``
PARTICLE_FIELDS = ("iteration", "world", "particle", "theta")


def particle_columns(traces: dict[str, Any], which: str) -> dict[str, np.ndarray]:
    """A run's particle sets as particles.csv's columns: for each world of
    :data:`PARTICLE_WORLDS` with a trace, the set in force after each recorded slot (``which =
    "recorded"``: every slot the trace holds, the last record of a slot being the one in force, as
    :meth:`~gossipsim.engine.protocol_api.StateTrace.at` reads it) or after its last recorded slot
    (``"final"``); a row per particle: ``iteration`` (the slot; 0 is before the first),
    ``world``, ``particle`` (0 … N − 1) and ``theta`` ``(rows, d)``."""
    iterations, worlds, indices, thetas = [], [], [], []
    for world in PARTICLE_WORLDS:
        trace = traces.get(world)
        if trace is None or not len(trace):
            continue
        slots = np.unique(trace.slots)
        if which == "final":
            slots = slots[-1:]
        states = np.asarray(trace.states[trace.at(slots)], dtype=np.float64)  # (R, N, d)
        records, count, dimension = states.shape
        iterations.append(np.repeat(slots, count))
        worlds.append(np.full(records * count, world, dtype=f"<U{max(map(len, PARTICLE_WORLDS))}"))
        indices.append(np.tile(np.arange(count, dtype=np.int64), records))
        thetas.append(states.reshape(records * count, dimension))
    if not thetas:
        return {
            "iteration": np.zeros(0, dtype=np.int64), "world": np.zeros(0, dtype="<U7"),
            "particle": np.zeros(0, dtype=np.int64), "theta": np.zeros((0, 0)),
        }  # fmt: skip
    return {
        "iteration": np.concatenate(iterations).astype(np.int64),
        "world": np.concatenate(worlds),
        "particle": np.concatenate(indices),
        "theta": np.concatenate(thetas, axis=0),
    }


def joined_particles(parts: list[tuple[int, dict[str, np.ndarray]]]) -> dict[str, np.ndarray]:
    """The particle columns of several runs (run index, :func:`particle_columns`) as one, in run
    order, with a ``run`` column first; empty without any. Runs of another dimension d cannot
    share a batch (every run of a variant has the same)."""
    parts = sorted((part for part in parts if len(part[1]["iteration"])), key=lambda p: p[0])
    if not parts:
        return {}
    return {
        "run": np.concatenate(
            [np.full(len(cols["iteration"]), run, dtype=np.int64) for run, cols in parts]
        ),
        **{
            name: np.concatenate([cols[name] for _, cols in parts], axis=0)
            for name in PARTICLE_FIELDS
        },
    }


def batches_of(outputs: list[RunOutput]) -> list[BatchOutput]:
    """Runs measured one by one as batches (:meth:`BatchOutput.from_runs`), one per set of metric
    columns (one in practice: every run of a variant has the same)."""
    groups: dict[tuple[str, ...], list[RunOutput]] = {}
    for out in outputs:
        groups.setdefault(tuple(out.metrics), []).append(out)
    return [BatchOutput.from_runs(group) for group in groups.values()]


def batches_with_failures(
    outputs: list[RunOutput], failures: dict[int, NonFiniteKL], nodes: int
) -> list[BatchOutput]:
    """Runs measured one by one (:func:`batches_of`) with the runs that failed attached to the
    first batch (a batch of none when every run failed)."""
    batches = batches_of(outputs) if outputs else []
    if failures:
        if not batches:  # every run failed: a batch of none
            batches = [BatchOutput((), {}, np.empty(0, dtype=np.int64), {}, np.zeros(nodes, int))]
        batches[0].failures.update(failures)
    return batches


def without_runs(
    output: BatchOutput, failures: dict[int, NonFiniteKL], visits: np.ndarray
) -> BatchOutput:
    """``output`` without the rows of the ``failures``' runs (listed in its ``failures``), with the
    ``visits`` of the runs kept."""
    runs = np.asarray(output.runs, dtype=np.int64)
    failed = list(failures)
    kept = ~np.isin(runs, failed)
    rows = ~np.isin(output.metric_runs, failed)
    requests = output.request_columns
    request_rows = ~np.isin(requests["run"], failed) if requests else None
    particles = output.particles
    particle_rows = ~np.isin(particles["run"], failed) if particles else None
    return BatchOutput(
        runs=tuple(runs[kept].tolist()),
        run_columns={name: values[kept] for name, values in output.run_columns.items()},
        metric_runs=output.metric_runs[rows],
        metrics={name: values[rows] for name, values in output.metrics.items()},
        visits=visits,
        request_columns={name: values[request_rows] for name, values in requests.items()},
        failures={**output.failures, **failures},
        particles={name: values[particle_rows] for name, values in particles.items()},
    )
