"""One run on the event engine: build its walker and protocol from the world, run the token, measure.

Randomness (all explicit, no global state):

- run ``r`` of a study uses the integer ``seed`` of row ``r`` of ``runs.csv``, derived from the
  scenario seed by ``SeedSequence(scenario_seed, spawn_key=(r,))``; from it come independent streams
  for the walk, the start node, the protocol, (with ``draw = "per-run"``) the data and (with lossy
  links) the channel
  (:mod:`gossipsim.core.streams`); with ``[failures]`` the up and down times come from a failures
  stream of their own. The same run index therefore has the same walk in every variant of a
  sweep on the same graph (common random numbers), and the same numbers whatever the number of
  workers;
- random graphs and data drawn once come from the scenario seed alone (:mod:`gossipsim.world.world`).

The world (:mod:`gossipsim.world.world`) and the measurement (:mod:`gossipsim.measurement.measure`) are shared with the
vectorised engine (:mod:`gossipsim.execution.vectorized.driver`), a peer of this module.
"""

from __future__ import annotations

import numpy as np

from gossipsim.core.streams import (
    CHANNEL,
    DATA,
    FAILURES,
    PROTOCOL,
    START,
    WALK,
    run_seed,
    run_stream,
)
from gossipsim.engine.token import run_token
from gossipsim.measurement.measure import measure
from gossipsim.measurement.outputs import BatchOutput, RunOutput
from gossipsim.network.failures import Liveness
from gossipsim.scheduling import Walker
from gossipsim.world.world import (
    World,
    build_protocol,
    build_world,
    make_protocol,
    node_labels,
    start_node,
    world_for_run,
)

__all__ = [
    "BatchOutput",
    "RunOutput",
    "World",
    "build_protocol",
    "build_world",
    "make_protocol",
    "measure",
    "node_labels",
    "run_seed",
    "run_stream",
    "simulate_run",
    "start_node",
    "DATA",
    "PROTOCOL",
    "START",
    "WALK",
]


def simulate_run(world: World, run: int, seed: int) -> RunOutput:
    """Run one token walk of ``world`` with the given run seed and compute its metrics."""
    world = world_for_run(world, seed)
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
    protocol = make_protocol(world, data, protocol_ss)
    # the scheduler may read what the protocol keeps about the nodes (its NodeView, if any)
    view = protocol.node_view()
    liveness = None
    if world.failures is not None:  # nodes and links fail: the walk sees which are up
        liveness = Liveness(
            world.indexed, world.failures, np.random.default_rng(run_stream(seed, FAILURES))
        )
        view = liveness.view_with(view)
    walker = Walker(world.indexed, sc.scheduler.kind, np.random.default_rng(walk_ss), view)
    start = start_node(world, np.random.default_rng(start_ss), view)
    # a lossy channel draws from a stream of its own (no other stream's numbers change)
    channel_rng = np.random.default_rng(run_stream(seed, CHANNEL)) if world.links.lossy else None
    record = run_token(
        walker=walker,
        protocol=protocol,
        start=start,
        iterations=sc.run.iterations,
        compute_seconds=world.compute_seconds,
        links=world.links,
        requests=world.requests,
        stop_when_done=sc.run.stop_when_done,
        max_bits=sc.run.max_bits,
        max_time=sc.run.max_time,
        channel_rng=channel_rng,
        liveness=liveness,
    )
    return measure(world, data, record, protocol.stats(), run, seed)
