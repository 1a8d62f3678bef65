"""What the vectorized engine can run, by the kernels a protocol, scheduler and channel declare
(:func:`unavailable`), and what ``engine = "auto"`` leaves to the event engine (:func:`too_long`):
what ``gossipsim validate`` and ``run`` decide each variant's engine by, without importing the
engine's kernels (:mod:`.driver` runs them)."""

from __future__ import annotations

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
#: runs × slots (or runs × nodes) held at once by a batch: a few hundred MiB of walk and clock arrays
MAX_BATCH_SLOTS = 20_000_000


def unavailable(world: World) -> str | None:
    """Why the vectorised engine cannot run ``world`` (None when it can)."""
    sc = world.scenario
    budget = [f"scenario.{k}" for k in ("max_bits", "max_time") if getattr(sc.run, k) is not None]
    if budget:  # each run would end at its own slot, found from its costs: the kernels do not
        return f"{' and '.join(budget)} end each run at its own cost (event engine only)"
    if sc.failures is not None:
        return "nodes or links fail ([failures]): their processes run beside the token"
    if sc.topology.draw == "per-run":
        return "the graph is drawn per run (topology.draw = per-run)"
    kernel = protocol_kind(sc.protocol.kind).kernel(world.model)
    if kernel not in KERNELS:  # only what declares a kernel this engine has is vectorised
        return protocol_kind(sc.protocol.kind).unbatched(sc.protocol.options) or (
            f"protocol {sc.protocol.kind!r} declares no vectorised kernel for model {sc.model.kind!r}"
        )
    if kernel == "batched-steps" and world.model.fixed_data is None:
        return "the data are drawn per run (data.draw = per-run): batched steps share one data set"
    scheduler = scheduler_for(sc.scheduler.kind)
    if scheduler.kernel not in SCHEDULER_KERNELS:
        return f"scheduler {sc.scheduler.kind!r} declares no vectorised kernel"
    why = protocol_kind(sc.protocol.kind).unbatched(sc.protocol.options)
    if why is not None:
        return why
    if any(r.at_time is not None for r in world.requests):
        return "an unlearning request arrives at a simulated time"
    channel = getattr(world.links, "kernel", None)
    if channel not in CHANNEL_KERNELS or world.links.lossy:  # no kernel of this engine loses one
        return world.links.why_event_engine()
    if sc.metrics.tolerance is None and kernel == "batched-steps":
        kind = protocol_kind(sc.protocol.kind)
        if not representation(kind.representation_name).particle_sets:
            return (
                'metrics.tolerance = "relative" judges each run after it ends, and the batched '
                "steps keep only the states an absolute tolerance can need"
            )
    if sc.scheduler.stays == "drawn":
        from gossipsim.execution.vectorized.stays import drawn_unavailable

        return drawn_unavailable(world)
    return None


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
