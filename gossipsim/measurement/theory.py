"""Exact and theoretical walk quantities for a world, written to summary.json next to the simulation."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import numpy as np

import gossipsim.cover as ct
from gossipsim.errors import ConfigError
from gossipsim.logdensity.densitygrid import density_grid
from gossipsim.scheduling import scheduler_for

# exact hitting times by a sparse solve stay well under a second below this size
THEORY_MAX_NODES = 20_000
# all-pairs hitting times for Matthews' bounds: about a second at this size
MATTHEWS_SUMMARY_MAX_NODES = 2_000


def cover_start(world: Any) -> str | int:
    """The scenario's start as the cover-time functions take it: the index of the fixed first holder
    (``world.start``), else ``"uniform"`` or ``"stationary"`` (``scheduler.start``)."""
    if world.start is not None:
        return int(world.start)
    start = world.scenario.scheduler.start
    return "stationary" if start == "stationary" else "uniform"


def theory_for(world: Any, arrival_slots: Mapping[int, int] | None = None) -> dict[str, Any]:
    """The ``theory`` block of one variant in summary.json, for the walk the variant simulates.

    Every cover figure is for the scenario's scheduler (``scheduler.kind``) and start
    (``scheduler.start``), recorded as ``scheduler`` and ``start`` (the fixed node's label, or
    ``"uniform"`` / ``"stationary"``):

    * ``exact_cover_moves`` (with ``exact_cover_method`` and ``exact_cover_detail``): the exact
      expected cover moves by a closed form or the subset chain (up to 22 nodes); otherwise, for
      graphs up to 2,000 nodes, ``matthews_cover_moves`` = Matthews' ``[lower, upper]`` bounds,
      which hold for every start (``matthews_cover_assumes``);
    * ``theoretical_cover_moves`` (with ``theoretical_cover_method``, ``"closed-form"`` or
      ``"asymptotic"``, and ``theoretical_cover_assumes``): the value for the topology kind, where
      one is known (:func:`gossipsim.cover.theoretical_cover`);
    * ``removal_latency``: one entry per request (in request order): the exact expectation of the
      removal latency the runs measure (``expected``, :func:`gossipsim.cover.removal_latency_law`:
      the walk's law at the request's slot from the scenario's start, 0 when the node had not held
      the token before it) with ``nothing_to_remove`` (the probability of that 0) and ``method``
      saying what was computed; for runs of n = ``scenario.iterations`` slots, which see latencies
      up to n − r + 1, also ``restricted_expected`` = E[min(L, τ)] with τ = ``restricted_to`` =
      n − r + 2 (what a Kaplan–Meier restricted mean of censored runs estimates) and
      ``served_within_run`` = P(L ≤ n − r + 1); for a request at a time whose slot depends on the walk (links that
      take time), a slot too late for the exact law, or the server over links that lose
      transfers (a removal waits for a delivered round), ``expected`` is None and ``method`` says
      why (graphs up to 20,000 nodes);
    * ``next_visit_latency`` of each requested node: the expected slots until it holds the token
      from a holder drawn from the stationary distribution, its factor present
      (``next_visit_latency_assumes``): the limit for requests long after the start, not the
      expectation at a given slot;

    plus :func:`target_summary`. With ``[topology] draw = "per-run"`` every run walks its own
    graph: no exact or theoretical figure of one graph applies, and ``graph_note`` says so instead;
    with ``[failures]`` the walk is not the failure-free one, and ``failures_note`` says so; over
    links that can lose a message for good, ``lossy_links_note`` says how likely that is per hop.
    A scheduler whose transitions depend on the protocol's state (``Scheduler.reads_state``: the
    importance-weighted walks ``ksd-walk``, ``hip-walk``) has no exact value of any kind:
    ``state_note`` says so, no cover figure is given, and each ``removal_latency`` entry has
    ``expected`` None with ``method`` saying why (where the value does not depend on the walk, as a
    protocol that drops the data at the request, it is given).
    """
    sc = world.scenario
    kind = sc.scheduler.kind
    start = cover_start(world)
    out: dict[str, Any] = {
        "nodes": world.nodes,
        "scheduler": kind,
        "start": world.indexed.labels[start] if isinstance(start, int) else start,
    }
    if scheduler_for(kind).reads_state:  # never another walk's numbers (the matrix it would read)
        out["state_note"] = ct.state_dependent_note(kind)
        if world.requests:
            out["removal_latency"] = [
                removal_latency_entry(world, r, (arrival_slots or {}).get(r), {})
                for r in range(len(world.requests))
            ]
        out.update(target_summary(world))
        return out
    if sc.failures is not None:
        out["failures_note"] = (
            "[failures]: nodes and links fail while the token moves, and the walk goes over the "
            "live graph of the moment, so the exact cover and hitting times of the failure-free "
            "walk (and the removal latencies computed from them) do not apply"
        )
        out.update(target_summary(world))
        return out
    lost_for_good = _loss_for_good(world)
    if lost_for_good is None or lost_for_good > 0:
        bound = (
            "its probability per hop is not known for this channel"
            if lost_for_good is None
            else f"probability at most {lost_for_good:.3g} per hop: the worst link's "
            "loss^(max_retries + 1)"
        )
        out["lossy_links_note"] = (
            "a message lost for good keeps the token at its sender for another slot, which the "
            "exact cover and hitting times here do not count: they hold where that never "
            f"happens ({bound})"
        )
    if sc.topology.draw == "per-run":
        out["graph_note"] = (
            "topology.draw = per-run: each run draws its own graph, so the exact cover and "
            "hitting times of one graph do not apply; the simulated figures average over graphs"
        )
        out.update(target_summary(world))
        return out
    try:
        exact = ct.exact_cover_moves_with_method(world.indexed, kind, out["start"])
        out["exact_cover_moves"] = exact.moves
        out["exact_cover_method"] = exact.method
        out["exact_cover_detail"] = exact.detail
    except ConfigError:
        if world.nodes <= MATTHEWS_SUMMARY_MAX_NODES:
            lo, hi = ct.matthews_bounds(world.indexed, kind)
            out["matthews_cover_moves"] = [lo, hi]
            out["matthews_cover_assumes"] = (
                f"bounds for the {kind} scheduler, valid for every start"
            )
    params = {k: v for k, v in sc.topology.params.items() if isinstance(v, int | float)}
    with contextlib.suppress(TypeError, ValueError):
        theory = ct.theoretical_cover(
            sc.topology.kind, world.nodes, scheduler=kind, start=start, **params
        )
        if theory is not None:
            out["theoretical_cover_moves"] = theory.moves
            out["theoretical_cover_method"] = theory.method
            out["theoretical_cover_assumes"] = theory.assumes
    if world.requests and world.nodes <= THEORY_MAX_NODES:
        labels = world.indexed.labels
        hitting = {  # one sparse solve per requested node
            r.node: ct.hitting_times_to(world.indexed, labels[r.node], kind) for r in world.requests
        }
        out["removal_latency"] = [
            removal_latency_entry(world, r, (arrival_slots or {}).get(r), hitting)
            for r in range(len(world.requests))
        ]
        from gossipsim.core.registry import PROTOCOL_KINDS

        protocol = PROTOCOL_KINDS.lookup(sc.protocol.kind, "protocol.kind")
        if getattr(protocol, "removes_at", "next-visit") == "next-slot":  # every slot, every client
            out["next_visit_latency"] = {str(labels[node]): 1.0 for node in hitting}
            out["next_visit_latency_assumes"] = (
                "every client takes part in every slot: a contributing node is removed at the "
                "slot its request arrives before"
            )
        elif getattr(protocol, "removes_at", "next-visit") != "never":  # else nothing is removed
            pi = scheduler_for(kind).stationary(world.indexed)
            out["next_visit_latency"] = {  # 1 + Σ_v π(v) H(v, k): ct.next_visit_latency
                str(labels[node]): 1.0 + float(pi @ h) for node, h in hitting.items()
            }
            assumes = (
                "holder drawn from the stationary distribution of the "
                f"{kind} scheduler and the node's factor in the state (a request long after the "
                "start); latency = slots until the node holds the token, the request slot included"
            )
            if _lossy_server(world):
                assumes += (
                    "; over the server's lossy links the runs measure more: a removal waits for "
                    "a round whose download and upload both arrive"
                )
            out["next_visit_latency_assumes"] = assumes
    out.update(target_summary(world))
    return out


#: why no exact removal latency is given where the server's links lose transfers
LOSSY_SERVER_NOTE = (
    "not computed: the server's links lose transfers, and a node's contribution leaves the state "
    "at its first round whose download and upload both arrive, later than the scheduler's next "
    "visit whose law is known"
)


def _lossy_server(world: Any) -> bool:
    """Whether ``world`` runs the parameter server over links that lose transfers."""
    return world.scenario.protocol.architecture == "server" and bool(world.links.lossy)


def _loss_for_good(world: Any) -> float | None:
    """The largest probability, over the walk's links, that a hop's message is lost for good
    (every attempt of stop-and-wait ARQ lost): 0 for links that lose nothing, None for a lossy
    channel that is not built of ARQ links (a channel of one's own)."""
    links = world.links
    if not links.lossy or world.scenario.protocol.architecture != "walk":
        return 0.0
    default = getattr(links, "default", None)
    if default is None:
        return None
    candidates = [default, *getattr(links, "edges", {}).values()]
    return max(
        (float(link.loss) ** (int(link.max_retries) + 1) for link in candidates if link.loss > 0),
        default=0.0,
    )


def request_slot(world: Any, request: int, observed: int | None) -> int | None:
    """The slot before which request ``request`` arrives in every run: its ``at_iteration``, or
    for a request at a time the slot it arrived before in every run (``observed``) when the slots'
    start times cannot depend on the walk (links that take no time and one compute time for
    every node: every slot lasts ``compute.seconds_per_iteration``); None otherwise."""
    req = world.requests[request]
    if req.at_iteration is not None:
        return int(req.at_iteration)
    free_hops = world.links.takes_no_time  # the walk's hops, or the server's transfers
    alike = not isinstance(world.compute_seconds, tuple)  # else slot lengths follow the holders
    return int(observed) if observed is not None and free_hops and alike else None


def removal_latency_entry(
    world: Any, request: int, observed: int | None, hitting: Mapping[int, np.ndarray]
) -> dict[str, Any]:
    """The ``removal_latency`` entry of one request (see :func:`theory_for`); ``hitting``: the
    hitting times to each requested node (by index)."""
    req = world.requests[request]
    label = world.indexed.labels[req.node]
    entry: dict[str, Any] = {"request": request, "node": label, "at_slot": None, "expected": None}
    slot = request_slot(world, request, observed)
    if slot is None:
        entry["method"] = (
            "not computed: the request arrives at a time and the slot it arrives before depends "
            "on the walk (links take time per hop, or nodes compute at their own speeds); "
            "next_visit_latency is the value from a stationary holder"
        )
        return entry
    entry["at_slot"] = slot
    from gossipsim.core.registry import PROTOCOL_KINDS

    protocol = PROTOCOL_KINDS.lookup(world.scenario.protocol.kind, "protocol.kind")
    if getattr(protocol, "removes_at", "next-visit") == "never":
        entry.update(
            method=(
                f"not computed: {world.scenario.protocol.kind} has no unlearning of its own: the "
                "node's contribution stays in its state; the request is served by the retrain "
                "baseline (retrain_latency)"
            ),
            no_unlearning=True,
        )
        return entry
    if getattr(protocol, "removes_at", "next-visit") == "next-slot" and not _lossy_server(world):
        entry.update(
            expected=0.0 if slot <= 1 else 1.0,
            method=(
                "every client takes part in every slot: removed at the request's slot (removal "
                "latency 1; 0 before slot 1, when the node had contributed nothing)"
            ),
        )
        return entry
    if getattr(protocol, "removes_at", "next-visit") == "request":
        entry.update(
            expected=0.0,
            method="the protocol drops the node's data at the request (removal latency 0)",
        )
        return entry
    # none known with data drawn per run: the node holds some in every run then (the models whose
    # data are drawn per run refuse a node without rows)
    if _lossy_server(world):
        entry["method"] = LOSSY_SERVER_NOTE
        return entry
    points = world.points
    if points and points[req.node] == 0:
        entry.update(expected=0.0, nothing_to_remove=1.0, method="the node has no data: 0")
        return entry
    kind = world.scenario.scheduler.kind
    if scheduler_for(kind).reads_state:  # the walk's law moves with the protocol's state
        entry["method"] = f"not computed: {ct.state_dependent_note(kind)}"
        return entry
    start = cover_start(world)
    try:
        law = ct.removal_latency_law(
            world.indexed, label, slot, kind, world.indexed.labels[start]
            if isinstance(start, int) else start, hitting=hitting[req.node],
            horizon=max(world.scenario.run.iterations - slot + 2, 1),
        )  # fmt: skip
    except ConfigError as exc:  # a slot too late for the exact law on this graph
        entry["method"] = f"not computed: {exc.message}"
        return entry
    where = f"node {world.indexed.labels[start]}" if isinstance(start, int) else f"a {start} node"
    if law.restricted_mean is not None:  # what a run of scenario.iterations slots can see
        entry.update(
            restricted_to=law.horizon,
            restricted_expected=law.restricted_mean,
            served_within_run=law.served_within,
        )
    entry.update(
        expected=law.mean,
        nothing_to_remove=law.nothing_to_remove,
        method=(
            f"exact: the {kind} walk's law at slot {slot:,} from {where} at slot 1; 0 when the "
            "node had not held the token before the request, else the slots until it does"
        ),
    )
    return entry


def target_summary(world: Any) -> dict[str, Any]:
    """For data drawn once: the best-in-family KL of the target (all data, and without the requested
    nodes) and, for models with held-out metrics, those metrics of the target posterior itself;
    with particle sets kept (``[metrics] particles``) and a model that knows its 2-D target's
    density exactly, ``target_density``: that density on a grid, for every stage
    (:func:`gossipsim.logdensity.densitygrid.density_grid`; the contours of the ``particles`` figure).

    The target is the one the protocol's states are judged against (its representation's,
    :func:`gossipsim.world.world.representation_of`): a particle protocol's is known through its score
    only, so it has neither a best-in-family KL nor metrics of its own here (the Gaussian optimum of
    the model's G-FVL prior would be another posterior)."""
    from gossipsim.world.world import representation_of

    states = representation_of(world.scenario)
    model = world.model
    data = model.fixed_data
    if data is None:
        return {}
    out: dict[str, Any] = {}
    forgotten: frozenset[int] = frozenset()
    stages = [("all", forgotten)]
    for r in world.requests:
        forgotten = forgotten | {r.node}
        stages.append((f"without {','.join(_labels(world, forgotten))}", forgotten))
    for name, nodes in stages:
        target = states.target(model, data, nodes)
        entry: dict[str, Any] = {}
        if target.best_family_kl is not None:
            entry["best_family_kl"] = target.best_family_kl
        state = getattr(target, "eta", None)
        if state is not None and model.evaluation_columns():
            values = model.evaluate(data, np.asarray(state)[None, :])
            entry.update({k: float(np.asarray(v)[0]) for k, v in values.items()})
        if entry:
            out.setdefault("target", {})[name] = entry
    exact_density = getattr(model, "exact_density", None)  # a plug-in model may have none
    if states.particle_sets and world.scenario.metrics.particles != "none" and exact_density:
        densities = [(_labels(world, nodes), exact_density(data, nodes)) for _, nodes in stages]
        if all(density is not None for _, density in densities):
            grid = density_grid(densities)
            if grid is not None:
                out["target_density"] = grid
    return out


def _labels(world: Any, nodes: frozenset[int]) -> list[str]:
    """The labels of ``nodes`` (indices), as text, in index order."""
    return [str(world.indexed.labels[n]) for n in sorted(nodes)]
