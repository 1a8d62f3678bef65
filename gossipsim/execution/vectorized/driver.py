"""The vectorized engine's driver: how a variant's runs are cut into batches and handed to a
kernel (what it can run is :mod:`.capability`'s) (:func:`simulate_runs`): the conjugate first-visit kernel (:mod:`.first_visits`), batched
steps (:mod:`.steps`), drawn stays (:mod:`.stays`) or the per-run path (:mod:`.per_run`)."""

from __future__ import annotations

from collections.abc import Sequence

from gossipsim.core.capabilities import EXACT_FACTORS
from gossipsim.execution.vectorized import capability
from gossipsim.execution.vectorized.first_visits import (
    drawn_first_visits,
    drawn_unlearning,
    learning_batch,
    unlearning_batch,
    unlearning_cells,
)
from gossipsim.execution.vectorized.per_run import per_run_batch
from gossipsim.measurement.outputs import BatchOutput
from gossipsim.protocols import protocol_kind
from gossipsim.world.world import World

BATCH = 256  # runs advanced together (memory: BATCH × 2 × 8192 uniforms per block)
LEARNING_BATCH = 1024  # runs per batch of the all-vectorised learning path


def simulate_runs(world: World, runs: Sequence[int]) -> list[BatchOutput]:
    """The outputs of ``runs`` (run indices, ascending) of ``world``, one :class:`BatchOutput` per
    batch of runs.

    With exact factors, no extra evaluation columns and first-passage latencies, everything is
    computed across the batch at once: the walks, the states after first visits, the metrics
    (:func:`learning_batch` without requests; :func:`unlearning_batch` and
    :func:`~gossipsim.measurement.batch.measure_batch` with them). Otherwise the walks are vectorised and
    each run's protocol and metrics are processed with the event engine's own code
    (:func:`per_run_batch`).
    """
    if world.scenario.scheduler.stays == "drawn":  # each stay drawn at once (fastpath_stays)
        return _drawn(world, runs)
    if protocol_kind(world.scenario.protocol.kind).kernel(world.model) == "batched-steps":
        from gossipsim.execution.vectorized.steps import (
            simulate_stepped,  # it builds on this module's walks
        )

        return simulate_stepped(world, runs)
    out: list[BatchOutput] = []
    model = world.model
    simple = (
        not model.evaluation_columns()
        and EXACT_FACTORS in model.capabilities
        and world.scenario.metrics.latency_window == 1  # the batch judges a first passage
        and world.scenario.metrics.tolerance is not None  # ... under an absolute threshold
    )
    run = world.scenario.run
    if world.requests:
        fit = capability.MAX_BATCH_SLOTS // unlearning_cells(world)
    else:
        fit = capability.MAX_BATCH_SLOTS // max(
            run.iterations, world.nodes
        )  # runs × (slots or nodes) arrays
    vectorised = simple and fit >= capability.MIN_VECTORIZED_RUNS
    if vectorised:
        size = min(LEARNING_BATCH, fit)
    elif run.stop_when_done:  # runs usually stop long before the slot budget: keep batches wide
        size = BATCH
    else:  # each run keeps its walk until the end: bound runs × slots
        size = min(BATCH, max(1, capability.MAX_BATCH_SLOTS // run.iterations))
    for start in range(0, len(runs), size):
        batch = list(runs[start : start + size])
        if vectorised and world.requests:
            out.append(unlearning_batch(world, batch))
        elif vectorised:
            out.append(learning_batch(world, batch))
        else:
            out += per_run_batch(world, batch)
    return out


def _drawn(world: World, runs: Sequence[int]) -> list[BatchOutput]:
    """``runs`` of ``world`` with their walks drawn stay by stay
    (:func:`~gossipsim.execution.vectorized.stays.walk_stays`), in batches whose runs × nodes arrays (first
    visits, visits, first visits since each request, trace states) stay within
    :data:`capability.MAX_BATCH_SLOTS`."""
    cells = unlearning_cells(world) - 6 * world.scenario.run.iterations
    size = max(1, min(LEARNING_BATCH, capability.MAX_BATCH_SLOTS // cells))
    out = []
    for start in range(0, len(runs), size):
        batch = list(runs[start : start + size])
        if world.requests:
            out.append(unlearning_batch(world, batch, drawn_unlearning))
        else:
            out.append(learning_batch(world, batch, drawn_first_visits))
    return out
