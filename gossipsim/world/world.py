"""One variant's world (graph, model with its data, requests, links) and the assembly of a run's
protocol from it: what both engines share before a run starts.

Randomness (all explicit, no global state): random graphs and data drawn once come from the scenario
seed alone (the graph from ``[topology] seed`` when given; data: shared by every variant with the
same data settings and node count); each run's streams come from its own seed
(:mod:`gossipsim.core.streams`), and so does its graph with ``[topology] draw = "per-run"``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from gossipsim.core.streams import DATA_TAG, LINKS_TAG, TOPOLOGY, TOPOLOGY_TAG, run_stream
from gossipsim.engine.records import Request
from gossipsim.engine.slottables import SlotCosts, round_seconds
from gossipsim.errors import ConfigError
from gossipsim.families import ExponentialFamily
from gossipsim.models import Model, model_class
from gossipsim.network.arq import EdgeLinks
from gossipsim.network.channels import Channel
from gossipsim.network.failures import Failures, Outage
from gossipsim.network.links import COMPUTE_KEY, check_horizon
from gossipsim.network.messages import Message, Round
from gossipsim.protocols import (
    BuildRequest,
    Protocol,
    StateTrace,
    WithRetrainBaseline,
    protocol_kind,
)
from gossipsim.protocols.centre import AtTheCentre, data_upload
from gossipsim.protocols.selection import SelectionSettings
from gossipsim.protocols.server import ServerRounds, server_round
from gossipsim.scheduling import IndexedGraph, scheduler_for, stationary_distribution
from gossipsim.states.representations import Representation, Target, representation
from gossipsim.study import budget
from gossipsim.study.sections import EDGE_ATTRIBUTE_KINDS, check_requests_can_arrive
from gossipsim.topology import build_indexed

if TYPE_CHECKING:
    from gossipsim.study.scenario import Scenario


def node_labels(world: World) -> np.ndarray:
    """The graph's node labels as an array: integers when they all are, else objects."""
    labels = world.indexed.labels
    if isinstance(labels, range):
        return np.arange(labels.start, labels.stop, labels.step, dtype=np.int64)
    if all(isinstance(x, int) and not isinstance(x, bool) for x in labels):
        return np.asarray(labels, dtype=np.int64)
    return np.asarray(labels, dtype=object)


@dataclass
class World:
    """Everything the runs of one variant share: graph, model (with its data when drawn once),
    requests, links (the walk's, or the server's with ``[protocol] architecture = "server"``)."""

    scenario: Scenario
    indexed: IndexedGraph
    model: Model
    requests: tuple[Request, ...]
    start: int | None
    links: Channel
    built_graph: nx.Graph | None = None  # the NetworkX graph, when the topology built one
    #: bits of one message (the protocol kind's entries for this model: ProtocolSettings.message_bits)
    message_bits: float = 0.0
    #: the compute time of a slot: one number for every holder, or one per node index
    #: (:func:`node_compute_seconds`)
    compute_seconds: float | tuple[float, ...] = 0.0
    #: ``[failures]`` with node indices (None: nothing fails)
    failures: Failures | None = None

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


def graph_seed(scenario: Scenario) -> np.random.SeedSequence:
    """The seed of a variant's graph drawn once: ``SeedSequence([S, TOPOLOGY_TAG])`` with S the
    ``[topology] seed`` when given, else the scenario seed (so ``topology.seed = S`` is exactly the
    graph of ``scenario.seed = S``)."""
    topo = scenario.topology
    root = topo.seed if topo.seed is not None else scenario.run.seed
    return np.random.SeedSequence([root, TOPOLOGY_TAG])


def _build_graph(
    scenario: Scenario, seed: np.random.SeedSequence
) -> tuple[IndexedGraph, nx.Graph | None]:
    topo = scenario.topology
    if topo.graph is not None:  # a graph object given from Python: checked and frozen already
        return IndexedGraph.from_networkx(topo.graph), topo.graph
    return build_indexed(
        topo.kind, topo.nodes, topo.params, path=topo.path, base_dir=scenario.base_dir, seed=seed
    )


def world_for_run(world: World, seed: int) -> World:
    """The world run ``seed`` (its integer run seed) simulates: ``world`` itself, or, with
    ``[topology] draw = "per-run"``, a copy on the run's own graph, drawn from the run's
    :data:`~gossipsim.core.streams.TOPOLOGY` stream (the same whatever worker runs it). A random kind's
    labels are 0..K-1 in every draw, so requests, the start node and the data keep their nodes."""
    if world.scenario.topology.draw != "per-run":
        return world
    indexed, graph = _build_graph(world.scenario, run_stream(seed, TOPOLOGY))
    if tuple(indexed.labels) != tuple(world.indexed.labels):  # pragma: no cover - random kinds
        raise ConfigError("topology.draw", "a graph drawn per run changed the node labels")
    links = world.links
    if world.scenario.links.drawn or world.scenario.links.kind is not None:
        links = _channel(world.scenario, indexed, graph)  # the run's own edges' links
    return dataclasses.replace(world, indexed=indexed, built_graph=graph, links=links)


def build_world(
    scenario: Scenario, *, targets: Mapping[frozenset[int], Target] | None = None
) -> World:
    """Build and check the graph, the model and the data of one variant (all user errors raised
    here). With ``[topology] draw = "per-run"`` the graph built here (from :func:`graph_seed`)
    is the one the checks and the figures use; each run draws its own (:func:`world_for_run`).

    ``targets`` are the variant's targets as another process found them for the same scenario
    (``world.model.known_targets()``: a pool worker or a Dask task given them by the process that
    checked the sweep); those are not searched for again."""
    indexed, graph = _build_graph(scenario, graph_seed(scenario))
    compute = node_compute_seconds(scenario, indexed, graph)
    requests = []
    for i, req in enumerate(scenario.unlearning):
        node = indexed.index(req.node, f"unlearning[{i}].node")
        requests.append(Request(node, req.at_iteration, req.at_time))
    failures = _failures(scenario, indexed)
    start: int | None = None
    if scenario.scheduler.start not in ("uniform", "stationary"):
        start = indexed.index(scenario.scheduler.start, "scheduler.start")
    data_rng = np.random.default_rng(np.random.SeedSequence([scenario.run.seed, DATA_TAG]))
    spec = dataclasses.replace(
        scenario.model_spec, check_budget=functools.partial(budget.check_world, scenario)
    )
    model = model_class(scenario.model.kind)(spec, indexed, data_rng)  # type: ignore[call-arg]
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
        links=_channel(scenario, indexed, graph),
        message_bits=scenario.protocol.message_bits(type(model).sizes(spec, indexed.size)),
        compute_seconds=compute,
        failures=failures,
    )
    if scenario.compute_attribute is not None:  # bounds on a run's time, now that they are known
        assert isinstance(compute, tuple)
        budget.check_time(scenario, type(model).sizes(spec, indexed.size), compute)
        if not _edge_kind(scenario) and failures is None:  # edges' links: _check_time judges
            check_requests_can_arrive(scenario, max(compute), type(model))
    _check_time(world)
    if targets:
        model.adopt_targets(targets)
    states = representation_of(scenario)
    for forgotten in target_stages(world):  # a target that cannot be found fails here, in one line
        states.target(model, model.fixed_data, forgotten)
    return world


def _failures(scenario: Scenario, indexed: IndexedGraph) -> Failures | None:
    """``[failures]`` with its outages' nodes as indices (None: nothing fails)."""
    f = scenario.failures
    if f is None:
        return None
    outages = tuple(
        Outage(indexed.index(o.node, f"failures.outage[{i}].node"), o.from_s, o.to_s)
        for i, o in enumerate(f.outages)
    )
    # the settings' fields, the outages' nodes as indices
    kept = {k.name: getattr(f, k.name) for k in dataclasses.fields(Failures) if k.name != "outages"}
    return Failures(**kept, outages=outages)


def node_compute_seconds(
    scenario: Scenario, indexed: IndexedGraph, graph: nx.Graph | None
) -> float | tuple[float, ...]:
    """Each slot's compute time: ``[compute] seconds_per_iteration`` when it is one number, else
    one time per node index (the graph's node order, as ``indexed.labels``): the list given, or
    each node's ``[compute] node_attribute`` read from ``graph`` (a finite number >= 0 at every
    node); plus, at every node alike, the slot's local iterations at ``[compute]
    seconds_per_local_iteration`` each (:attr:`Scenario.local_compute_seconds`, added after the
    node's time: a zero adds nothing). A slot at holder k (with the server: the scheduled agent
    k) computes for entry k. A centralised protocol computes at the centre, so it takes one
    number only."""
    local = scenario.local_compute_seconds
    per_node = _per_node_seconds(scenario, indexed, graph)
    if isinstance(per_node, tuple):
        return tuple(c + local for c in per_node) if local else per_node
    return per_node + local if local else per_node


def _per_node_seconds(
    scenario: Scenario, indexed: IndexedGraph, graph: nx.Graph | None
) -> float | tuple[float, ...]:
    """``[compute] seconds_per_iteration`` or ``node_attribute``, read and checked (see
    :func:`node_compute_seconds`)."""
    compute = scenario.compute_seconds
    name = scenario.compute_attribute
    if name is None and not isinstance(compute, tuple):
        return float(compute)
    key = "compute.seconds_per_iteration" if name is None else "compute.node_attribute"
    if protocol_kind(scenario.protocol.kind).centralised:
        raise ConfigError(
            key,
            f"protocol {scenario.protocol.kind!r} computes at the centre, not at the nodes: give "
            "seconds_per_iteration as one number",
        )
    if name is None:
        assert isinstance(compute, tuple)
        if len(compute) != indexed.size:
            raise ConfigError(
                key,
                f"a per-node list needs one value per node ({indexed.size}, in graph order), got "
                f"{len(compute)}",
            )
        return tuple(float(c) for c in compute)
    times = []
    for label in indexed.labels:
        attributes = graph.nodes[label] if graph is not None else {}
        if name not in attributes:
            raise ConfigError(
                key, f"node {label!r} has no attribute {name!r} (every node needs it, a number)"
            )
        value = attributes[name]
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            raise ConfigError(
                key, f"node {label!r}'s {name!r} is {value!r}, not a number (seconds >= 0)"
            )
        value = float(value)
        if not (0.0 <= value < np.inf):
            raise ConfigError(
                key, f"node {label!r}'s {name!r} is {value:g}: must be a finite number >= 0"
            )
        times.append(value)
    return tuple(times)


def _channel(scenario: Scenario, indexed: IndexedGraph, graph: nx.Graph | None) -> Channel:
    """The runs' channel: ``[links]``, and on the walk the link attributes of the graph's edges
    (a graph file's or a NetworkX graph's; the indexed graph keeps none). A channel of one's own
    (``[links] kind``) is built from its keys for the graph, with the seed of values drawn per
    edge."""
    architecture = _links_of(scenario)
    links = scenario.links
    if links.kind is not None:
        seed = np.random.SeedSequence([scenario.run.seed, LINKS_TAG])
        return links.own_channel(architecture, indexed, seed, graph)
    if architecture != "walk":
        if protocol_kind(scenario.protocol.kind).centralised:  # no downloads: uplinks only
            links = dataclasses.replace(links, downlink_loss=0.0)
        return links.channel(architecture)
    if links.drawn:  # every edge draws its values, in the indexed graph's edge order
        rng = np.random.default_rng(np.random.SeedSequence([scenario.run.seed, LINKS_TAG]))
        labels = indexed.labels
        adjacency = graph.adj if graph is not None else None
        every = (
            (u, v, (labels[u], labels[v]),
             adjacency[labels[u]][labels[v]] if adjacency is not None else {})
            for u, v in zip(*(e.tolist() for e in indexed.edges()), strict=True)
        )  # fmt: skip
        return links.channel(architecture, every, rng)
    if graph is None:
        return links.channel(architecture)
    index_of = indexed.index_of
    edges = (
        (index_of[u], index_of[v], (u, v), attributes)
        for u, v, attributes in graph.edges(data=True)
        if attributes
    )
    return links.channel(architecture, edges)


def _check_time(world: World) -> None:
    """Refuse per-edge links (or a channel of one's own) whose longest hop overflows the
    simulated clock, and a request at a time after the longest a run can last where the
    scenario's check could not know it (edges that may set their own links:
    :data:`~gossipsim.study.sections.EDGE_ATTRIBUTE_KINDS`; a channel of one's own)."""
    sc = world.scenario
    timed = [(i, r) for i, r in enumerate(world.requests) if r.at_time is not None]
    edge_kind = _edge_kind(sc)
    own = sc.links.kind is not None
    if not own and not isinstance(world.links, EdgeLinks) and not (timed and edge_kind):
        return
    server = _links_of(sc) == "server" and not protocol_kind(sc.protocol.kind).centralised
    horizon = check_horizon(
        sc.run.iterations,
        world.compute_seconds,
        world.links,
        world.message_bits,
        "compute.node_attribute" if sc.compute_attribute is not None else COMPUTE_KEY,
        transmissions=2 if server else 1,
    )
    hop = "one download and one upload" if server else "the longest hop"
    links = f"{sc.links.kind}'s worst_seconds" if own else "any edge's links"
    for i, req in timed if edge_kind and sc.failures is None else ():
        if req.at_time is not None and req.at_time > horizon:
            raise ConfigError(
                f"unlearning[{i}].at_time",
                f"is {req.at_time:g} s, after the longest a run can last ({horizon:g} s: "
                f"scenario.iterations × (compute.seconds_per_iteration + {hop} of {links})): "
                "the request could never arrive",
            )


def _edge_kind(scenario: Scenario) -> bool:
    """Whether a hop's links are known only once the graph is built: the graph's edges may set
    their own links (a graph file's or a NetworkX graph's attributes, or values drawn per edge)
    on the walk, or a channel of one's own (``[links] kind``) is built for the graph."""
    if scenario.links.kind is not None:
        return True
    return (scenario.topology.kind in EDGE_ATTRIBUTE_KINDS or bool(scenario.links.drawn)) and (
        _links_of(scenario) == "walk"
    )


def _links_of(scenario: Scenario) -> str:
    """The architecture whose links a variant's runs use: the server's uplinks for a centralised
    kind's upload (:mod:`gossipsim.protocols.centre`), whatever ``[protocol] architecture``."""
    if protocol_kind(scenario.protocol.kind).centralised:
        return "server"
    return scenario.protocol.architecture


def representation_of(scenario: Scenario) -> Representation:
    """What the scenario's protocol kind records (natural parameters, particle sets, ...)."""
    return representation(protocol_kind(scenario.protocol.kind).representation_name)


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


def start_node(world: World, rng: np.random.Generator | None, view: Any = None) -> int:
    """The first holder: the fixed start node, or drawn uniformly / from the stationary
    distribution; with client selection (a ``view`` holding the protocol's weights, a scheduler
    that reads them), drawn from the selection distribution of the initial state."""
    sc = world.scenario
    if world.start is not None:
        return world.start
    assert rng is not None
    weights = getattr(view, "weights", None)
    if weights is not None and scheduler_for(sc.scheduler.kind).indicator is not None:
        return int(rng.choice(world.nodes, p=weights / weights.sum()))
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
    selects: bool = False,
) -> Protocol:
    """One protocol of the scenario's kind for ``data`` (without the retrain baseline): learning
    from the prior without the ``forgotten`` nodes, recording from ``start_slot``; with
    ``selects``, computing the client-selection indicators the scheduler draws from, if its kind
    asks for them (:func:`selection_settings`)."""
    settings = world.scenario.protocol
    return protocol_kind(settings.kind).build(
        BuildRequest(
            model=world.model, data=data, rng=rng, settings=settings.options,
            bits=world.message_bits, nodes=world.nodes, forgotten=forgotten, trace=trace,
            start_slot=start_slot, record_every=world.scenario.metrics.record_every,
            iterations=world.scenario.run.iterations, bits_per_entry=settings.bits_per_entry,
            selection=selection_settings(world.scenario, world.indexed.degree) if selects else None,
        )
    )  # fmt: skip


def selection_settings(scenario: Scenario, degrees: Any = ()) -> SelectionSettings | None:
    """What 003's client selection asks of the protocol when the scheduler's kind draws from
    indicators (``ksd``, ``hip``: :attr:`Scheduler.indicator
    <gossipsim.scheduling.Scheduler.indicator>`), else None; on the walk (``ksd-walk``,
    ``hip-walk``) with the nodes' ``degrees`` (who receive each node's indicator). The retrain
    baseline follows the main world's schedule and computes none."""
    scheduler = scheduler_for(scenario.scheduler.kind)
    if scheduler.indicator is None:
        return None
    h = scenario.scheduler.indicator_bandwidth
    if scheduler.ignores_graph:  # the server's draw
        return SelectionSettings(scheduler.indicator, scenario.scheduler.selection_floor, None, h)
    return SelectionSettings(
        scheduler.indicator, degrees=tuple(int(d) for d in degrees), bandwidth=h
    )


def make_protocol(world: World, data: Any, seed: np.random.SeedSequence) -> Protocol:
    """The run's protocol, built by the scenario's protocol kind from the model's capabilities,
    paired with the retrain-from-scratch baseline (any kind gets it) when there are requests, and
    run by a parameter server (:class:`~gossipsim.protocols.server.ServerRounds`, any kind too)
    with ``[protocol] architecture = "server"``; a centralised kind is run at the centre instead
    (:class:`~gossipsim.protocols.centre.AtTheCentre`: the upload of every node's ``data`` in slot
    1, :func:`centre_upload`), whatever the architecture."""
    main_ss, retrain_ss = seed.spawn(2)
    protocol = build_protocol(world, data, np.random.default_rng(main_ss), selects=True)
    if world.requests and world.scenario.protocol.retrain_baseline:
        retrain_rng = np.random.default_rng(retrain_ss)

        def fresh(forgotten: frozenset[int], trace: StateTrace | None, slot: int) -> Protocol:
            return build_protocol(
                world, data, retrain_rng, forgotten=forgotten, trace=trace, start_slot=slot
            )

        protocol = WithRetrainBaseline(protocol, fresh)
    if protocol_kind(world.scenario.protocol.kind).centralised:
        protocol = AtTheCentre(protocol, centre_upload(world, data))
    elif world.scenario.protocol.architecture == "server":
        # on links that lose transfers a slot whose round loses one is taken back
        protocol = ServerRounds(protocol, lossy=world.links.lossy or world.failures is not None)
    return protocol


def centre_upload(world: World, data: Any) -> Round:
    """A centralised run's round of slot 1: every node's upload of ``data`` to the centre
    (:func:`~gossipsim.protocols.centre.data_upload`, ``[protocol] bits_per_entry`` a number)."""
    protocol = world.scenario.protocol
    return data_upload(world.model, data, world.nodes, protocol.bits_per_entry)


def slot_costs(world: World, bits: float | None = None) -> SlotCosts:
    """What each slot of ``world``'s runs costs in time and bits when its protocol's messages are
    ``bits`` long (the world's :attr:`World.message_bits` by default), as the event engine charges
    it: on the walk, the compute time and a hop of the message when the token moves (every hop
    alike: the channel declares ``homogeneous-delay``); with the server (``[protocol] architecture
    = "server"``), the compute time and the round :class:`~gossipsim.protocols.server.ServerRounds`
    makes, a download of the server's state then an upload of the message, both ``bits`` long
    (messages of constant size), timed by the engine's
    :func:`~gossipsim.engine.token.round_seconds` (every agent's links alike: the channel declares
    ``homogeneous-server-links``); a centralised kind, the compute time and, in slot 1 only, the
    upload of every node's data (:func:`centre_upload`, the runs' data drawn once). The
    vectorised engine's clocks read it (:func:`~gossipsim.engine.slottables.stepped_clock`)."""
    bits = world.message_bits if bits is None else float(bits)
    compute = world.compute_seconds
    links = world.links
    if protocol_kind(world.scenario.protocol.kind).centralised:
        upload = centre_upload(world, world.model.fixed_data).transfers
        delays = [links.delay(t.sender, t.receiver, t.message.bits) for t in upload]
        sent = 0.0
        for t in upload:  # summed in the event engine's order
            sent += t.message.bits
        return SlotCosts(
            compute, first_round_seconds=round_seconds(delays, False), first_round_bits=sent
        )
    if world.scenario.protocol.architecture == "server":
        round_ = server_round(0, Message(bits), Message(bits))  # agent 0: every agent's alike
        transfers = round_.transfers
        delays = [links.delay(t.sender, t.receiver, t.message.bits) for t in transfers]
        return SlotCosts(
            compute,
            round_seconds=round_seconds(delays, round_.phase_sizes),
            round_bits=tuple(t.message.bits for t in transfers),
        )
    return SlotCosts(compute, hop_seconds=links.delay(0, 0, bits), hop_bits=bits)
