"""Exact and theoretical walk quantities for a world, written to summary.json next to the simulation."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from . import covertime as ct
from .errors import ConfigError

# exact hitting times by a sparse solve stay well under a second below this size
THEORY_MAX_NODES = 20_000
# all-pairs hitting times for Matthews' bounds: about a second at this size
MATTHEWS_SUMMARY_MAX_NODES = 2_000


def theory_for(world: Any) -> dict[str, Any]:
    """Expected cover moves (exact where a closed form or the subset chain applies; otherwise
    Matthews' bounds for graphs up to 2,000 nodes), the theoretical value of the kind if known, and
    the exact expected unlearning latency of each requested node from a stationary start."""
    sc = world.scenario
    kind = sc.scheduler.kind
    out: dict[str, Any] = {"nodes": world.nodes}
    try:
        exact = ct.exact_cover_moves_with_method(world.indexed, kind)
        out["exact_cover_moves"] = exact.moves
        out["exact_cover_method"] = exact.method
    except ConfigError:
        if world.nodes <= MATTHEWS_SUMMARY_MAX_NODES:
            lo, hi = ct.matthews_bounds(world.indexed, kind)
            out["matthews_cover_moves"] = [lo, hi]
    if kind == "metropolis-hastings" or kind == "simple-random-walk":
        params = {k: v for k, v in sc.topology.params.items() if isinstance(v, int | float)}
        with contextlib.suppress(TypeError, ValueError):
            out["theoretical_cover_moves"] = ct.theoretical_cover_moves(
                sc.topology.kind, world.nodes, **params
            )
    if world.requests and world.nodes <= THEORY_MAX_NODES:
        out["expected_unlearning_latency"] = {
            str(world.indexed.labels[r.node]): ct.expected_unlearning_latency(
                world.indexed, r.node, kind
            )
            for r in world.requests
        }
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
