"""From a validated scenario to results: build the world, run the token walks, compute the metrics.

Randomness (all explicit, no global state):

- run ``r`` of a study uses the integer ``seed`` of row ``r`` of ``runs.csv``, derived from the
  scenario seed by ``SeedSequence(scenario_seed, spawn_key=(r,))``; from it come independent streams
  for the walk, the start node, the protocol and (with ``draw = "per-run"``) the data. The same run
  index therefore has the same walk in every variant of a sweep on the same graph (common random
  numbers), and the same numbers whatever the number of workers;
- random graphs and data drawn once come from the scenario seed alone (data: shared by every variant
  with the same data settings and node count).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .covertime import cover_iteration
from .data import points_per_node, read_observations, synthetic_observations
from .engine import Request, RunRecord, run_token
from .errors import ConfigError
from .families import CONJUGATE_MODELS, ConjugateModel, ExponentialFamily
from .links import LinkModel
from .metrics import Segments, kl_segments, recorded_slots
from .protocols import ConjugateGFVL, Protocol, StateTrace, WithRetrainBaseline
from .scenario import Scenario, Study
from .scheduling import IndexedGraph, Walker, stationary_distribution
from .topology import build_topology

_DATA_TAG = 0x64617461  # "data"
_TOPOLOGY_TAG = 0x746F706F  # "topo"


def run_seed(scenario_seed: int, run: int) -> int:
    """The integer seed of run ``run`` (the ``seed`` column of runs.csv)."""
    seq = np.random.SeedSequence(scenario_seed, spawn_key=(run,))
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))


@dataclass
class World:
    """Everything the runs of one variant share: graph, model, data (when fixed), requests."""

    scenario: Scenario
    graph: nx.Graph
    indexed: IndexedGraph
    model: ConjugateModel
    family: ExponentialFamily
    prior: np.ndarray
    points: list[int]
    node_params: list[dict[str, Any]]
    factors: np.ndarray | None
    requests: tuple[Request, ...]
    start: int | None
    links: LinkModel

    @property
    def nodes(self) -> int:
        return self.indexed.size


def build_world(scenario: Scenario) -> World:
    """Build and check the graph, the model and the data of one variant (all user errors raised here)."""
    topo = scenario.topology
    graph = build_topology(
        topo.kind,
        topo.nodes,
        topo.params,
        path=topo.path,
        base_dir=scenario.base_dir,
        seed=np.random.SeedSequence([scenario.run.seed, _TOPOLOGY_TAG]),
    )
    indexed = IndexedGraph.from_networkx(graph)
    model = CONJUGATE_MODELS[scenario.model.kind](scenario.model.options)
    prior = model.prior_natural(model.check_prior(scenario.model.prior))
    k = indexed.size
    requests = []
    for i, req in enumerate(scenario.unlearning):
        node = indexed.index(req.node, f"unlearning[{i}].node")
        requests.append(Request(node, req.at_iteration, req.at_time))
    start: int | None = None
    if scenario.scheduler.start not in ("uniform", "stationary"):
        start = indexed.index(scenario.scheduler.start, "scheduler.start")
    factors = None
    points: list[int] = []
    node_params: list[dict[str, Any]] = []
    if scenario.data.path is not None:
        path = Path(scenario.data.path)
        if not path.is_absolute():
            path = Path(scenario.base_dir) / path
        observations = read_observations(path, indexed, model)
        factors = _factors(model, observations, scenario.model.temperature)
        points = [len(x) for x in observations]
    else:
        points = points_per_node(scenario.data.points_per_node, k)
        node_params = model.check_data_params(scenario.data.params, k)
        if scenario.data.draw == "once":
            rng = np.random.default_rng(np.random.SeedSequence([scenario.run.seed, _DATA_TAG]))
            factors = _factors(
                model,
                synthetic_observations(model, points, node_params, rng),
                scenario.model.temperature,
            )
    return World(
        scenario=scenario,
        graph=graph,
        indexed=indexed,
        model=model,
        family=model.family,
        prior=prior,
        points=points,
        node_params=node_params,
        factors=factors,
        requests=tuple(requests),
        start=start,
        links=LinkModel(scenario.links.rate_bps, scenario.links.latency_s),
    )


def _factors(
    model: ConjugateModel, observations: Sequence[np.ndarray], temperature: float
) -> np.ndarray:
    """Exact local factors s_k = (1/α) Σ_x [s_l(x); 1] (eq. 13), one row per node."""
    return np.stack([model.statistics(x) for x in observations]) / temperature


@dataclass
class RunOutput:
    """The rows one run contributes to the three tables (columns as arrays / dicts)."""

    run: int
    seed: int
    run_row: dict[str, Any]
    request_rows: list[dict[str, Any]]
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # slots each node held the token, by node index


def simulate_run(world: World, run: int, seed: int) -> RunOutput:
    """Run one token walk of ``world`` with the given run seed and compute its metrics."""
    sc = world.scenario
    walk_ss, start_ss, _protocol_ss, data_ss = np.random.SeedSequence(seed).spawn(4)
    factors = world.factors
    if factors is None:
        rng = np.random.default_rng(data_ss)
        observations = synthetic_observations(world.model, world.points, world.node_params, rng)
        factors = _factors(world.model, observations, sc.model.temperature)
    walker = Walker(world.indexed, sc.scheduler.kind, np.random.default_rng(walk_ss))
    start_rng = np.random.default_rng(start_ss)
    if world.start is not None:
        start = world.start
    elif sc.scheduler.start == "stationary":
        pi = stationary_distribution(world.indexed, sc.scheduler.kind)
        start = int(start_rng.choice(world.nodes, p=pi))
    else:
        start = int(start_rng.integers(world.nodes))
    bits = sc.protocol.bits_per_entry * world.family.dim
    protocol = _make_protocol(world, factors, bits)
    record = run_token(
        walker=walker,
        protocol=protocol,
        start=start,
        iterations=sc.run.iterations,
        compute_seconds=sc.compute_seconds,
        links=world.links,
        requests=world.requests,
        stop_when_done=sc.run.stop_when_done,
    )
    return _measure(world, factors, record, run, seed)


def _make_protocol(world: World, factors: np.ndarray, bits: float) -> Protocol:
    main = ConjugateGFVL(world.prior, factors, bits_per_message=bits)
    if not (world.requests and world.scenario.protocol.retrain_baseline):
        return main

    def fresh(forgotten: frozenset[int], trace: StateTrace, slot: int) -> Protocol:
        return ConjugateGFVL(
            world.prior,
            factors,
            bits_per_message=bits,
            forgotten=forgotten,
            trace=trace,
            start_slot=slot,
        )

    return WithRetrainBaseline(main, fresh)


def _target_trace(
    world: World, factors: np.ndarray, record: RunRecord
) -> tuple[np.ndarray, np.ndarray]:
    """Slots at which the target changes and the targets' natural parameters (exact posteriors)."""
    included = np.ones(world.nodes, dtype=bool)
    slots = [0]
    targets = [world.prior + factors[included].sum(axis=0)]
    for arrival in sorted(record.arrivals, key=lambda a: (a.slot, a.request)):
        included[arrival.node] = False
        targets.append(world.prior + factors[included].sum(axis=0))
        slots.append(arrival.slot)
    return np.asarray(slots, dtype=np.int64), np.asarray(targets)


def _measure(
    world: World, factors: np.ndarray, record: RunRecord, run: int, seed: int
) -> RunOutput:
    sc = world.scenario
    tol = sc.metrics.tolerance
    n = record.slots
    target_slots, targets = _target_trace(world, factors, record)
    traces = record.traces
    main = kl_segments(traces["main"], target_slots, targets, world.family.kl)
    retrain: Segments | None = None
    if "retrain" in traces and len(traces["retrain"]):
        retrain = kl_segments(traces["retrain"], target_slots, targets, world.family.kl)
    end_times = record.end_times

    def time_of(slot: int | None) -> float:
        return float(end_times[slot - 1]) if slot is not None else np.nan

    converged = main.first_at_or_below(tol, 1)
    converged = converged if converged is not None and converged <= n else None
    request_rows: list[dict[str, Any]] = []
    completions: list[int] = []
    for arrival in sorted(record.arrivals, key=lambda a: a.request):
        done_at = main.first_at_or_below(tol, arrival.slot)
        done_at = done_at if done_at is not None and done_at <= n else None
        retrain_at = retrain.first_at_or_below(tol, arrival.slot) if retrain is not None else None
        retrain_at = retrain_at if retrain_at is not None and retrain_at <= n else None
        completions += [s for s in (done_at, retrain_at) if s is not None]
        request_rows.append(
            {
                "request": arrival.request,
                "node": world.indexed.labels[arrival.node],
                "request_iteration": arrival.slot,
                "request_time": arrival.time,
                "latency": _latency(done_at, arrival.slot),
                "latency_time": time_of(done_at) - arrival.time if done_at is not None else np.nan,
                "retrain_latency": _latency(retrain_at, arrival.slot),
                "retrain_latency_time": time_of(retrain_at) - arrival.time
                if retrain_at is not None
                else np.nan,
            }
        )
    delivered = {a.request for a in record.arrivals}
    for r, req in enumerate(world.requests):
        if r not in delivered:  # the run ended before the request arrived
            request_rows.append(
                {
                    "request": r,
                    "node": world.indexed.labels[req.node],
                    "request_iteration": np.nan,
                    "request_time": np.nan,
                    "latency": np.nan,
                    "latency_time": np.nan,
                    "retrain_latency": np.nan,
                    "retrain_latency_time": np.nan,
                }
            )
    request_rows.sort(key=lambda row: int(row["request"]))

    cover = cover_iteration(record.holders, world.nodes)
    extra = [s for s in [converged, *completions] if s is not None]
    slots = recorded_slots(n, sc.metrics.record_every, extra)
    idx = slots - 1
    labels = np.asarray(world.indexed.labels, dtype=object)
    metrics = {
        "iteration": slots,
        "time": end_times[idx],
        "holder": labels[record.holders[idx]],
        "kl": main.at(slots),
        "bits": record.bits[idx],
    }
    if retrain is not None or (world.requests and sc.protocol.retrain_baseline):
        metrics["retrain_kl"] = (
            retrain.at(slots) if retrain is not None else np.full(slots.size, np.nan)
        )
    run_row = {
        "seed": seed,
        "cover_iteration": cover if cover is not None else np.nan,
        "convergence_iteration": converged if converged is not None else np.nan,
        "convergence_time": time_of(converged),
        "iterations": n,
        "time": float(end_times[-1]),
        "bits": float(record.bits[-1]),
    }
    visits = np.bincount(record.holders, minlength=world.nodes)
    return RunOutput(run, seed, run_row, request_rows, metrics, visits)


def _latency(done_at: int | None, request_slot: int) -> float:
    return float(done_at - request_slot + 1) if done_at is not None else np.nan


# ----------------------------------------------------------------------------- many runs

_WORLD_CACHE: dict[tuple[int, str], World] = {}
_STUDY: Study | None = None


def _init_worker(study: Study) -> None:
    global _STUDY
    _STUDY = study
    _WORLD_CACHE.clear()


def _world_for(study: Study, variant: int) -> World:
    key = (variant, study.variants[variant].label)
    if key not in _WORLD_CACHE:
        if len(_WORLD_CACHE) > 8:
            _WORLD_CACHE.clear()
        _WORLD_CACHE[key] = build_world(study.variants[variant].scenario)
    return _WORLD_CACHE[key]


def _task(variant: int, run: int) -> tuple[int, RunOutput]:
    assert _STUDY is not None
    world = _world_for(_STUDY, variant)
    return variant, simulate_run(world, run, run_seed(world.scenario.run.seed, run))


def iterate_runs(
    study: Study,
    *,
    workers: int = 1,
    progress: Callable[[int], object] | None = None,
    worlds: Sequence[World] | None = None,
) -> Iterator[tuple[int, RunOutput]]:
    """Yield ``(variant index, RunOutput)`` for every run of every variant, in a fixed order.

    With ``workers > 1`` runs execute in a process pool; the order of the yielded results (and so
    every table) is the same for any number of workers.
    """
    if workers < 1:
        raise ConfigError("--workers", f"must be >= 1 (got {workers})")
    tasks = [
        (v, r)
        for v in range(len(study.variants))
        for r in range(study.variants[v].scenario.run.runs)
    ]
    if workers == 1 or len(tasks) == 1:
        _init_worker(study)
        for v, world in enumerate(worlds or ()):  # already built by the caller: reuse them
            _WORLD_CACHE[(v, study.variants[v].label)] = world
        for v, r in tasks:
            out = _task(v, r)
            if progress:
                progress(1)
            yield out
        return
    # small chunks: run lengths differ widely across variants (a star of 1,000 nodes vs a complete
    # graph of 10), and large chunks would leave one worker with all the long runs
    chunk = max(1, min(8, len(tasks) // (workers * 64)))
    with ProcessPoolExecutor(
        max_workers=workers, initializer=_init_worker, initargs=(study,)
    ) as pool:
        for out in pool.map(_task_star, tasks, chunksize=chunk):
            if progress:
                progress(1)
            yield out


def _task_star(args: tuple[int, int]) -> tuple[int, RunOutput]:
    return _task(*args)


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
