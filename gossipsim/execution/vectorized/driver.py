"""The vectorized engine's driver: what it can run (:func:`unavailable`, by the kernels a protocol,
scheduler and channel declare) and how a variant's runs are cut into batches and handed to a
kernel (:func:`simulate_runs`): the conjugate first-visit kernel (:mod:`.first_visits`), batched
steps (:mod:`.steps`), drawn stays (:mod:`.stays`) or the per-run path (:mod:`.per_run`)."""

from __future__ import annotations

from collections.abc import Sequence

from gossipsim.core.capabilities import EXACT_FACTORS
from gossipsim.execution.vectorized.first_visits import (
    drawn_first_visits,
    drawn_unlearning,
    learning_batch,
    unlearning_batch,
    unlearning_cells,
)
from gossipsim.execution.vectorized.per_run import per_run_batch
from gossipsim.execution.vectorized.stays import drawn_unavailable
from gossipsim.measurement.outputs import BatchOutput
from gossipsim.protocols import protocol_kind
from gossipsim.scheduling import scheduler_for
from gossipsim.states.representations import representation
from gossipsim.world.world import World

ENGINES = ("auto", "event", "vectorized")
#: the kernels this engine implements, by the name a protocol kind declares
#: (:meth:`~gossipsim.protocols.ProtocolKind.kernel`): exact conjugate G-FVL changes the state only at
#: first visits and first visits after a request
KERNELS = ("conjugate-first-visits", "batched-steps")
#: the scheduler kernels it implements (:attr:`~gossipsim.scheduling.Scheduler.kernel`)
SCHEDULER_KERNELS = ("batched-step",)
#: the channel kernels it implements (:attr:`~gossipsim.network.channels.Channel.kernel`): on the walk
#: every hop costs the same delay, with the server every agent's downlink and uplink are alike;
#: nothing is lost (:func:`~gossipsim.world.world.slot_costs`)
CHANNEL_KERNELS = ("homogeneous-delay", "homogeneous-server-links")
#: ``auto`` vectorises a variant only with at least this many runs: below about 16 runs the event
#: engine is as fast (measured on the Fig. 3 and karate unlearning scenarios)
MIN_VECTORIZED_RUNS = 16
BATCH = 256  # runs advanced together (memory: BATCH × 2 × 8192 uniforms per block)
LEARNING_BATCH = 1024  # runs per batch of the all-vectorised learning path
#: runs × slots (or runs × nodes) held at once by a batch: a few hundred MiB of walk and clock arrays
MAX_BATCH_SLOTS = 20_000_000


def unavailable(world: World) -> str | None:
    """Why the vectorised engine cannot run ``world`` (None when it can)."""
    sc = world.scenario
    if sc.topology.draw == "per-run":
        return "the graph is drawn per run (topology.draw = per-run)"
    kernel = protocol_kind(sc.protocol.kind).kernel(world.model)
    if kernel not in KERNELS:  # only what declares a kernel this engine has is vectorised
        return f"protocol {sc.protocol.kind!r} declares no vectorised kernel for model {sc.model.kind!r}"
    if kernel == "batched-steps" and world.model.fixed_data is None:
        return "the data are drawn per run (data.draw = per-run): batched steps share one data set"
    scheduler = scheduler_for(sc.scheduler.kind)
    if scheduler.kernel not in SCHEDULER_KERNELS:
        return f"scheduler {sc.scheduler.kind!r} declares no vectorised kernel"
    if any(r.at_time is not None for r in world.requests):
        return "an unlearning request arrives at a simulated time"
    channel = getattr(world.links, "kernel", None)
    if channel not in CHANNEL_KERNELS:
        return f"the channel {type(world.links).__name__} declares no vectorised kernel"
    if sc.metrics.tolerance is None and kernel == "batched-steps":
        kind = protocol_kind(sc.protocol.kind)
        if not representation(kind.representation_name).particle_sets:
            return (
                'metrics.tolerance = "relative" judges each run after it ends, and the batched '
                "steps keep only the states an absolute tolerance can need"
            )
    if sc.scheduler.stays == "drawn":
        return drawn_unavailable(world)
    return None


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
        fit = MAX_BATCH_SLOTS // unlearning_cells(world)
    else:
        fit = MAX_BATCH_SLOTS // max(run.iterations, world.nodes)  # runs × (slots or nodes) arrays
    vectorised = simple and fit >= MIN_VECTORIZED_RUNS
    if vectorised:
        size = min(LEARNING_BATCH, fit)
    elif run.stop_when_done:  # runs usually stop long before the slot budget: keep batches wide
        size = BATCH
    else:  # each run keeps its walk until the end: bound runs × slots
        size = min(BATCH, max(1, MAX_BATCH_SLOTS // run.iterations))
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
    :data:`MAX_BATCH_SLOTS`."""
    cells = unlearning_cells(world) - 6 * world.scenario.run.iterations
    size = max(1, min(LEARNING_BATCH, MAX_BATCH_SLOTS // cells))
    out = []
    for start in range(0, len(runs), size):
        batch = list(runs[start : start + size])
        if world.requests:
            out.append(unlearning_batch(world, batch, drawn_unlearning))
        else:
            out.append(learning_batch(world, batch, drawn_first_visits))
    return out


def too_long(world: World) -> str | None:
    """Why ``auto`` should not vectorise ``world`` for memory's sake (None: it may): runs that keep
    their whole walk cannot be batched 16 at a time within :data:`MAX_BATCH_SLOTS`."""
    run = world.scenario.run
    if not run.stop_when_done and MAX_BATCH_SLOTS // run.iterations < MIN_VECTORIZED_RUNS:
        return (
            f"runs of {run.iterations} slots are too long to batch {MIN_VECTORIZED_RUNS} at a time "
            "in memory"
        )
    return None
