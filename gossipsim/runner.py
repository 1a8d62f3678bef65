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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from .covertime import cover_iteration
from .engine import Arrival, Request, RunRecord, run_token
from .errors import ConfigError
from .families import ExponentialFamily
from .links import LinkModel
from .metrics import Segments, kl_segments, recorded_slots
from .models import Model, Target, model_class
from .protocols import BuildRequest, Protocol, StateTrace, WithRetrainBaseline, protocol_kind
from .representations import REPRESENTATIONS
from .scenario import Scenario
from .scheduling import IndexedGraph, Walker, stationary_distribution
from .topology import build_indexed

_DATA_TAG = 0x64617461  # "data"
_TOPOLOGY_TAG = 0x746F706F  # "topo"


WALK, START, PROTOCOL, DATA = range(4)  # the run's independent random streams


def run_stream(seed: int, stream: int) -> np.random.SeedSequence:
    """Stream ``stream`` of the run with integer seed ``seed``: the same as
    ``SeedSequence(seed).spawn(4)[stream]``, built alone (cheaper when only some are needed)."""
    return np.random.SeedSequence(seed, spawn_key=(stream,))


def node_labels(world: World) -> np.ndarray:
    """The graph's node labels as an array: integers when they all are, else objects."""
    labels = world.indexed.labels
    if isinstance(labels, range):
        return np.arange(labels.start, labels.stop, labels.step, dtype=np.int64)
    if all(isinstance(x, int) and not isinstance(x, bool) for x in labels):
        return np.asarray(labels, dtype=np.int64)
    return np.asarray(labels, dtype=object)


def run_seed(scenario_seed: int, run: int) -> int:
    """The integer seed of run ``run`` (the ``seed`` column of runs.csv)."""
    seq = np.random.SeedSequence(scenario_seed, spawn_key=(run,))
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))


@dataclass
class World:
    """Everything the runs of one variant share: graph, model (with its data when drawn once),
    requests, links."""

    scenario: Scenario
    indexed: IndexedGraph
    model: Model
    requests: tuple[Request, ...]
    start: int | None
    links: LinkModel
    built_graph: nx.Graph | None = None  # the NetworkX graph, when the topology built one

    @property
    def graph(self) -> nx.Graph:
        """The graph as NetworkX (built from the CSR arrays on first use for kinds drawn straight
        into arrays)."""
        if self.built_graph is None:
            self.built_graph = self.indexed.to_networkx()
        return self.built_graph

    @property
    def nodes(self) -> int:
        return self.indexed.size

    @property
    def family(self) -> ExponentialFamily:
        return self.model.family

    @property
    def points(self) -> list[int]:
        """Observations per node (of the data drawn once, or as configured)."""
        return self.model.node_sizes(self.model.fixed_data)


def build_world(scenario: Scenario) -> World:
    """Build and check the graph, the model and the data of one variant (all user errors raised here)."""
    topo = scenario.topology
    indexed, graph = build_indexed(
        topo.kind,
        topo.nodes,
        topo.params,
        path=topo.path,
        base_dir=scenario.base_dir,
        seed=np.random.SeedSequence([scenario.run.seed, _TOPOLOGY_TAG]),
    )
    requests = []
    for i, req in enumerate(scenario.unlearning):
        node = indexed.index(req.node, f"unlearning[{i}].node")
        requests.append(Request(node, req.at_iteration, req.at_time))
    start: int | None = None
    if scenario.scheduler.start not in ("uniform", "stationary"):
        start = indexed.index(scenario.scheduler.start, "scheduler.start")
    data_rng = np.random.default_rng(np.random.SeedSequence([scenario.run.seed, _DATA_TAG]))
    model = model_class(scenario.model.kind)(scenario, indexed, data_rng)  # type: ignore[call-arg]
    if scenario.metrics.excess and not model.has_best_family:
        raise ConfigError(
            "metrics.excess",
            f"model {scenario.model.kind!r} has its exact target in the family: no best-in-family KL to subtract",
        )
    world = World(
        scenario=scenario,
        built_graph=graph,
        indexed=indexed,
        model=model,
        requests=tuple(requests),
        start=start,
        links=LinkModel(scenario.links.rate_bps, scenario.links.latency_s),
    )
    for forgotten in target_stages(world):  # a target that cannot be found fails here, in one line
        model.target(model.fixed_data, forgotten)
    return world


def target_stages(world: World) -> list[frozenset[int]]:
    """The forgotten sets whose targets the runs of a variant with data drawn once will need: none,
    then each request's node added in the order the requests arrive (by iteration; timed requests
    last, in file order). Empty for data drawn per run."""
    if world.model.fixed_data is None:
        return []
    order = sorted(
        world.requests,
        key=lambda r: (r.at_iteration is None, r.at_iteration or 0),
    )
    stages = [frozenset[int]()]
    for request in order:
        stages.append(stages[-1] | {request.node})
    return stages


@dataclass
class RunOutput:
    """The rows one run contributes to the three tables (columns as arrays / dicts)."""

    run: int
    seed: int
    run_row: dict[str, Any]
    request_rows: list[dict[str, Any]]
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # slots each node held the token, by node index

    @property
    def runs(self) -> tuple[int, ...]:
        return (self.run,)


@dataclass
class BatchOutput:
    """The rows of many runs of one variant, column by column (the vectorised engine's output for
    learning without requests): the same values the runs' :class:`RunOutput` would hold."""

    runs: tuple[int, ...]  # run indices, ascending
    run_columns: dict[str, np.ndarray]  # runs.csv columns after variant and run, one entry per run
    metric_runs: np.ndarray  # the run index of each metrics row
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # summed over the runs

    @property
    def run(self) -> int:
        return self.runs[0]


def simulate_run(world: World, run: int, seed: int) -> RunOutput:
    """Run one token walk of ``world`` with the given run seed and compute its metrics."""
    sc = world.scenario
    walk_ss, start_ss, protocol_ss, data_ss = (
        run_stream(seed, s) for s in (WALK, START, PROTOCOL, DATA)
    )
    model = world.model
    data = (
        model.fixed_data
        if model.fixed_data is not None
        else model.draw_data(np.random.default_rng(data_ss))
    )
    walker = Walker(world.indexed, sc.scheduler.kind, np.random.default_rng(walk_ss))
    start = start_node(world, np.random.default_rng(start_ss))
    protocol = make_protocol(world, data, protocol_ss)
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
    return measure(world, data, record, protocol.stats(), run, seed)


def start_node(world: World, rng: np.random.Generator | None) -> int:
    """The first holder: the fixed start node, or drawn uniformly / from the stationary distribution."""
    sc = world.scenario
    if world.start is not None:
        return world.start
    assert rng is not None
    if sc.scheduler.start == "stationary":
        pi = stationary_distribution(world.indexed, sc.scheduler.kind)
        return int(rng.choice(world.nodes, p=pi))
    return int(rng.integers(world.nodes))


def build_protocol(
    world: World,
    data: Any,
    rng: np.random.Generator,
    *,
    forgotten: frozenset[int] = frozenset(),
    trace: StateTrace | None = None,
    start_slot: int = 0,
) -> Protocol:
    """One protocol of the scenario's kind for ``data`` (without the retrain baseline): learning
    from the prior without the ``forgotten`` nodes, recording from ``start_slot``."""
    settings = world.scenario.protocol
    return protocol_kind(settings.kind).build(
        BuildRequest(
            model=world.model, data=data, rng=rng, settings=settings.options,
            bits=settings.bits_per_entry * world.model.message_entries, nodes=world.nodes,
            forgotten=forgotten, trace=trace, start_slot=start_slot,
        )
    )  # fmt: skip


def make_protocol(world: World, data: Any, seed: np.random.SeedSequence) -> Protocol:
    """The run's protocol, built by the scenario's protocol kind from the model's capabilities, and
    paired with the retrain-from-scratch baseline (any kind gets it) when there are requests."""
    main_ss, retrain_ss = seed.spawn(2)
    main = build_protocol(world, data, np.random.default_rng(main_ss))
    if not (world.requests and world.scenario.protocol.retrain_baseline):
        return main
    retrain_rng = np.random.default_rng(retrain_ss)

    def fresh(forgotten: frozenset[int], trace: StateTrace | None, slot: int) -> Protocol:
        return build_protocol(
            world, data, retrain_rng, forgotten=forgotten, trace=trace, start_slot=slot
        )

    return WithRetrainBaseline(main, fresh)


def _target_trace(world: World, data: Any, record: RunRecord) -> tuple[np.ndarray, list[Target]]:
    """Slots at which the target changes and the exact targets from then on."""
    forgotten: frozenset[int] = frozenset()
    slots = [0]
    targets = [world.model.target(data, forgotten)]
    for arrival in sorted(record.arrivals, key=lambda a: (a.slot, a.request)):
        forgotten = forgotten | {arrival.node}
        targets.append(world.model.target(data, forgotten))
        slots.append(arrival.slot)
    return np.asarray(slots, dtype=np.int64), targets


def measure(
    world: World, data: Any, record: RunRecord, stats: dict[str, float], run: int, seed: int
) -> RunOutput:
    """The run's rows of the three tables, from its raw record (both engines use this)."""
    sc = world.scenario
    tol = sc.metrics.tolerance
    n = record.slots
    target_slots, targets = _target_trace(world, data, record)
    state = REPRESENTATIONS[record.representation]  # what the traces hold, and how to judge it
    traces = record.traces
    excess = sc.metrics.excess
    with np.errstate(all="ignore"):  # a non-finite KL is counted (nonfinite_kl_slots), not warned
        main = kl_segments(
            traces["main"], target_slots, targets, excess=excess, divergence=state.divergence
        )
        retrain: Segments | None = None
        if "retrain" in traces and len(traces["retrain"]):
            retrain = kl_segments(
                traces["retrain"], target_slots, targets, excess=excess, divergence=state.divergence
            )
    end_times = record.end_times

    def time_of(slot: int | None) -> float:
        return float(end_times[slot - 1]) if slot is not None else np.nan

    window = sc.metrics.latency_window
    final = record.stopped_early  # nothing could change any more: a stretch may end with the run

    def settled(segments: Segments, from_slot: int) -> int | None:
        return segments.first_settled(tol, from_slot, window, n, final=final)

    converged = settled(main, 1)
    request_rows: list[dict[str, Any]] = []
    completions: list[int] = []
    for arrival in sorted(record.arrivals, key=lambda a: a.request):
        done_at = settled(main, arrival.slot)
        retrain_at = settled(retrain, arrival.slot) if retrain is not None else None
        removed_at = record.removals.get(arrival.node)
        completions += [s for s in (done_at, retrain_at, removed_at) if s is not None]
        request_rows.append(
            {
                "request": arrival.request,
                "node": world.indexed.labels[arrival.node],
                "request_iteration": arrival.slot,
                "request_time": arrival.time,
                # the KL had settled under the tolerance in the window before the request: if not,
                # a KL-based latency times the learning or the estimator noise, not the unlearning
                "settled_at_request": main.all_at_or_below(
                    tol, max(arrival.slot - window, 1), arrival.slot - 1
                ),
                "removal_latency": _latency(removed_at, arrival.slot),
                "removal_latency_time": _latency_time(removed_at, arrival, time_of),
                "latency": _latency(done_at, arrival.slot),
                "latency_time": _latency_time(done_at, arrival, time_of),
                "retrain_latency": _latency(retrain_at, arrival.slot),
                "retrain_latency_time": _latency_time(retrain_at, arrival, time_of),
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
                    "settled_at_request": None,
                    "removal_latency": np.nan,
                    "removal_latency_time": np.nan,
                    "latency": np.nan,
                    "latency_time": np.nan,
                    "retrain_latency": np.nan,
                    "retrain_latency_time": np.nan,
                }
            )
    request_rows.sort(key=lambda row: int(row["request"]))

    cover = cover_iteration(record.holders, world.nodes)
    extra = [s for s in [converged, *completions] if s is not None and s >= 1]
    slots = recorded_slots(n, sc.metrics.record_every, extra)
    idx = slots - 1
    labels = node_labels(world)
    metrics = {
        "iteration": slots,
        "time": end_times[idx],
        "holder": labels[record.holders[idx]],
        "kl": main.at(slots),
        "bits": record.bits[idx],
    }
    has_best = any(t.best_family_kl is not None for t in targets)
    if has_best:
        metrics["best_family_kl"] = main.best_at(slots)
    columns = world.model.evaluation_columns()
    if columns:
        trace = traces["main"]
        evaluated = state.evaluate(world.model, data, trace.states[trace.at(slots)])
        for column in columns:
            metrics[column] = evaluated[column]
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
        "best_family_kl": targets[-1].best_family_kl if has_best else np.nan,
        "damped_steps": stats.get("damped_steps", np.nan),
        "domain_recoveries": stats.get("domain_recoveries", np.nan),
        "nonfinite_kl_slots": main.nonfinite_slots(n),
    }
    # every other counter the protocol reports becomes a column of runs.csv (Protocol.stats)
    run_row.update({key: value for key, value in stats.items() if key not in run_row})
    visits = np.bincount(record.holders, minlength=world.nodes)
    return RunOutput(run, seed, run_row, request_rows, metrics, visits)


def _latency(done_at: int | None, request_slot: int) -> float:
    """i* − r + 1 (slots); 0 when the removal slot is r − 1 (nothing to remove on arrival)."""
    return float(done_at - request_slot + 1) if done_at is not None else np.nan


def _latency_time(
    done_at: int | None, arrival: Arrival, time_of: Callable[[int | None], float]
) -> float:
    """Simulated seconds from the request's arrival to the end of slot i* (0 if nothing to do)."""
    if done_at is None:
        return np.nan
    if done_at < arrival.slot:
        return 0.0
    return time_of(done_at) - arrival.time
