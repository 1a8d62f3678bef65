"""Exact and theoretical walk quantities for a world, written to summary.json next to the simulation."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from . import cover as ct
from .errors import ConfigError

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


def theory_for(world: Any) -> dict[str, Any]:
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
      one is known (:func:`gossipsim.covertime.theoretical_cover`);
    * ``expected_unlearning_latency`` of each requested node (graphs up to 20,000 nodes): exact for
      a holder at the request drawn from the walk's stationary distribution, which
      ``expected_unlearning_latency_assumes`` says (the simulated holder at the request depends on
      the start and on when the request arrives);

    plus :func:`target_summary`. With ``[topology] draw = "per-run"`` every run walks its own
    graph: no exact or theoretical figure of one graph applies, and ``graph_note`` says so instead.
    """
    sc = world.scenario
    kind = sc.scheduler.kind
    start = cover_start(world)
    out: dict[str, Any] = {
        "nodes": world.nodes,
        "scheduler": kind,
        "start": world.indexed.labels[start] if isinstance(start, int) else start,
    }
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
        out["expected_unlearning_latency"] = {
            str(world.indexed.labels[r.node]): ct.expected_unlearning_latency(
                world.indexed, world.indexed.labels[r.node], kind, start="stationary"
            )
            for r in world.requests
        }
        out["expected_unlearning_latency_assumes"] = (
            "holder at the request drawn from the stationary distribution of the "
            f"{kind} scheduler; latency = slots until the node holds the token, the request slot "
            "included"
        )
    out.update(target_summary(world))
    return out


def target_summary(world: Any) -> dict[str, Any]:
    """For data drawn once: the best-in-family KL of the target (all data, and without the requested
    nodes) and, for models with held-out metrics, those metrics of the target posterior itself."""
    model = world.model
    data = model.fixed_data
    if data is None:
        return {}
    out: dict[str, Any] = {}
    forgotten: frozenset[int] = frozenset()
    stages = [("all", forgotten)]
    for r in world.requests:
        forgotten = forgotten | {r.node}
        stages.append(
            (
                f"without {','.join(str(world.indexed.labels[n]) for n in sorted(forgotten))}",
                forgotten,
            )
        )
    for name, nodes in stages:
        target = model.target(data, nodes)
        entry: dict[str, Any] = {}
        if target.best_family_kl is not None:
            entry["best_family_kl"] = target.best_family_kl
        state = getattr(target, "eta", None)
        if state is not None and model.evaluation_columns():
            values = model.evaluate(data, np.asarray(state)[None, :])
            entry.update({k: float(np.asarray(v)[0]) for k, v in values.items()})
        if entry:
            out.setdefault("target", {})[name] = entry
    return out
