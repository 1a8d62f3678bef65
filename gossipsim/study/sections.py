"""One scenario (a variant: no ``[sweep]``) read from its sections into a validated, frozen
:class:`~gossipsim.study.settings.Scenario`: each fixed section with its keys in
:data:`~gossipsim.study.settings.SCHEMA`, the keys a kind adds by the kind (a model's, a
protocol's, a topology's parameters); a graph object of ``topology`` (kind ``networkx``) against
its keys, the tolerance rule, unlearning requests that no run could receive, and the study's name,
which names its results folder. Every error is a :class:`~gossipsim.errors.ConfigError` naming the
offending key (``links.rate_bps``, ``unlearning[1].node``, ...) and what is allowed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gossipsim.core.registry import MODEL_KINDS, PROTOCOL_KINDS
from gossipsim.core.schema import read_keys
from gossipsim.errors import ConfigError
from gossipsim.network.channels import channel_class
from gossipsim.network.links import check_horizon
from gossipsim.scheduling import (
    SCHEDULERS,
    ImportanceWeightedWalk,
    check_scheduler,
    scheduler_for,
)
from gossipsim.study.failure_settings import OUTAGE_KEYS, FailureSettings, OutageSettings
from gossipsim.study.link_settings import DRAWN_LINK_KEYS, LinkSettings
from gossipsim.study.settings import (
    ABSOLUTE_TOLERANCE,
    SCHEMA,
    STOCHASTIC_LATENCY_WINDOW,
    DataSettings,
    MetricsSettings,
    ModelSettings,
    ProtocolSettings,
    RunSettings,
    Scenario,
    SchedulerSettings,
    TopologySettings,
    UnlearningSettings,
)
from gossipsim.topology import TOPOLOGY_KINDS
from gossipsim.topology.registry import validate as validate_topology

#: the topology kind of a NetworkX graph given from Python
GRAPH_KIND = "networkx"
#: topology kinds whose edges may carry link attributes (``rate_bps``, ``loss``, ...)
EDGE_ATTRIBUTE_KINDS = (GRAPH_KIND, "graphml")


def parse_scenario(
    raw: Mapping[str, Any],
    *,
    base_dir: str = ".",
    default_name: str = "scenario",
    graph: Any = None,
    table: Any = None,
) -> Scenario:
    """Validate one variant (no ``[sweep]``) given as nested dicts: each fixed section is read with
    its keys in :data:`~gossipsim.study.settings.SCHEMA`; the keys a kind adds are read by the kind.
    ``graph`` is the checked graph object of a ``topology`` of kind ``networkx``, ``table`` the
    checked table of ``data.table`` given from Python (:func:`parse_study` passes them)."""
    for section in raw:
        if section not in SCHEMA:
            raise ConfigError(section, f"unknown section; allowed: {', '.join(SCHEMA)}")

    s = read_keys(SCHEMA["scenario"], _table(raw, "scenario"), "scenario")
    name = s["name"] if s["name"] is not None else default_name
    run = RunSettings(
        name=check_name(name, from_file=s["name"] is None),
        seed=s["seed"],
        runs=s["runs"],
        iterations=s["iterations"],
        stop_when_done=s["stop_when_done"],
        max_bits=s["max_bits"],
        max_time=s["max_time"],
        description=s["description"],
    )

    topology = _topology(_table(raw, "topology"), graph)

    m_raw = _table(raw, "model")
    if "kind" not in m_raw:
        raise ConfigError("model.kind", f"is required; allowed: {', '.join(MODEL_KINDS)}")
    kind = SCHEMA["model"][0].read(m_raw, "model")
    model_cls = MODEL_KINDS.lookup(kind, "model.kind")
    m = read_keys(
        (*SCHEMA["model"], *model_cls.model_keys), m_raw, "model"
    )  # the model's own keys: type and range here, the rest in prepare
    prior, options = model_cls.prepare(m_raw)
    model = ModelSettings(kind=kind, prior=prior, temperature=m["temperature"], options=options)

    d_raw = _table(raw, "data")
    table = _data_table(d_raw, table, model_cls, kind)
    generator_keys = {p.name for p in model_cls.data_params}
    generator_keys |= set(model_cls.renamed_data_params)  # the model names the new key
    data_keys = {k.name for k in model_cls.data_keys}
    d = read_keys(
        (*SCHEMA["data"], *model_cls.data_keys), d_raw, "data", also=tuple(generator_keys)
    )
    if "path" in d_raw and not model_cls.reads_files:
        raise ConfigError("data.path", f"model {kind!r} does not read observation files")
    if d["path"] is not None and (set(d_raw) & (generator_keys | {"points_per_node"})):
        raise ConfigError(
            "data.path",
            "observations come from the file: remove the generator keys and points_per_node",
        )
    data = DataSettings(
        points_per_node=d["points_per_node"],
        path=d["path"],
        draw=d["draw"],
        params={k: v for k, v in d_raw.items() if k in generator_keys},
        options={k: v for k, v in d_raw.items() if k in data_keys},
        table=table,
    )

    pr_raw = _table(raw, "protocol")
    common = {k.name for k in SCHEMA["protocol"]}
    pr = read_keys(SCHEMA["protocol"], {k: v for k, v in pr_raw.items() if k in common}, "protocol")
    protocol_cls = PROTOCOL_KINDS.lookup(pr["kind"], "protocol.kind")
    protocol_cls.check_model(model_cls)
    protocol = ProtocolSettings(
        kind=pr["kind"],
        retrain_baseline=pr["retrain_baseline"],
        bits_per_entry=pr["bits_per_entry"],
        options=protocol_cls.settings(pr_raw, model_cls),  # the kind reads its own keys
        architecture=pr["architecture"],
    )

    sc = read_keys(SCHEMA["scheduler"], _table(raw, "scheduler"), "scheduler")
    scheduler = SchedulerSettings(
        kind=check_scheduler(sc["kind"], "scheduler.kind"),
        start=sc["start"],
        stays=sc["stays"],
        selection_floor=sc["selection_floor"],
        indicator_bandwidth=sc["indicator_bandwidth"],
    )
    _check_state_dependent_walk(scheduler, protocol.architecture)
    compute_table = _table(raw, "compute")
    compute = read_keys(SCHEMA["compute"], compute_table, "compute")
    if compute["node_attribute"] is not None and "seconds_per_iteration" in compute_table:
        raise ConfigError(
            "compute.node_attribute",
            "give one of seconds_per_iteration (a number, or one per node) and node_attribute "
            "(each node's own, from the graph)",
        )
    per_node = compute["node_attribute"] is not None or isinstance(
        compute["seconds_per_iteration"], list | tuple
    )
    if per_node and getattr(protocol_cls, "every_client", False):
        raise ConfigError(
            "compute.node_attribute"
            if compute["node_attribute"] is not None
            else "compute.seconds_per_iteration",
            f"protocol {pr['kind']!r} has every client compute in every slot, and a slot is "
            "charged one compute time (the scheduled agent's): give seconds_per_iteration as one "
            "number",
        )
    links = _links(_table(raw, "links"))
    # a centralised kind's upload goes over the server's links, whatever the architecture
    centralised = bool(getattr(protocol_cls, "centralised", False))
    links.check(
        "server" if centralised else pr["architecture"], centralised=centralised, kind=protocol_cls
    )

    failures = _failures(raw, protocol_cls, protocol, scheduler.kind, model_cls)
    _check_selection(scheduler, protocol, protocol_cls, links, failures)

    requests = raw.get("unlearning", [])
    if isinstance(requests, dict):
        requests = [requests]
    if not isinstance(requests, list):
        raise ConfigError(
            "unlearning",
            "must be an array of tables: [[unlearning]] node = ..., at_iteration = ...",
        )
    unlearning = []
    for i, req in enumerate(requests):
        where = f"unlearning[{i}]"
        table = _table({where: req}, where)
        u = read_keys(SCHEMA["unlearning"], table, where)
        if ("at_iteration" in table) == ("at_time" in table):
            raise ConfigError(where, "give exactly one of at_iteration and at_time")
        unlearning.append(
            UnlearningSettings(node=u["node"], at_iteration=u["at_iteration"], at_time=u["at_time"])
        )
    if unlearning and protocol_cls.removes_at == "never" and not protocol.retrain_baseline:
        raise ConfigError(
            "protocol.retrain_baseline",
            f"{protocol.kind} has no unlearning of its own: its requests are served by retraining "
            "from scratch; set retrain_baseline = true (or remove the [[unlearning]] requests)",
        )
    seen: dict[Any, int] = {}
    for i, req in enumerate(unlearning):
        if req.node in seen:
            raise ConfigError(
                f"unlearning[{i}].node",
                f"node {req.node!r} is already forgotten by unlearning[{seen[req.node]}]",
            )
        seen[req.node] = i

    me = read_keys(SCHEMA["metrics"], _table(raw, "metrics"), "metrics")
    window = me["latency_window"]
    if window == "auto":  # 1 for deterministic updates, where the KL is a first passage of the
        # state itself; longer when the steps are noisy, so that a dip of the estimator noise
        # under the tolerance does not count
        stochastic = protocol_cls.stochastic(protocol.options, model_cls)
        window = STOCHASTIC_LATENCY_WINDOW if stochastic else 1
    metrics = MetricsSettings(
        tolerance=_tolerance(me, _table(raw, "metrics"), protocol_cls),
        relative_tolerance=me["relative_tolerance"],
        record_every=me["record_every"],
        excess=me["excess"],
        ece_bins=me["ece_bins"],
        latency_window=window,
        particles=me["particles"],
        particle_runs=me["particle_runs"],
    )
    scenario = Scenario(
        run=run,
        topology=topology,
        model=model,
        data=data,
        protocol=protocol,
        scheduler=scheduler,
        compute_seconds=compute["seconds_per_iteration"],
        links=links,
        unlearning=tuple(unlearning),
        failures=failures,
        metrics=metrics,
        base_dir=base_dir,
        compute_attribute=compute["node_attribute"],
        seconds_per_local_iteration=compute["seconds_per_local_iteration"],
        local_iterations_per_slot=protocol_cls.slot_local_iterations(protocol.options),
    )
    # a node attribute's times, and links an edge may set slower than [links], are known once the
    # graph is built (the world checks the time horizon then): request times wait for it
    # (a channel of one's own is built for the graph: the world checks it)
    edge_links = (topology.kind in EDGE_ATTRIBUTE_KINDS or bool(links.drawn)) and (
        protocol.architecture == "walk"
    )
    # failures make waits no bound can know; a channel of one's own is bounded once it is built
    timed = not (edge_links or failures is not None or links.kind is not None)
    check_requests_can_arrive(scenario, scenario.slowest_compute if timed else None, model_cls)
    return scenario


def _failures(
    raw: Mapping[str, Any], protocol_cls: Any, protocol: Any, scheduler: str, model_cls: Any
) -> FailureSettings | None:
    """``[failures]`` with its ``[[failures.outage]]`` tables, or None without the section (or
    with nothing in it that fails); what cannot run under failures is refused here."""
    table = dict(_table(raw, "failures"))
    outages_raw = table.pop("outage", [])
    if isinstance(outages_raw, dict):
        outages_raw = [outages_raw]
    if not isinstance(outages_raw, list):
        raise ConfigError(
            "failures.outage",
            "must be an array of tables: [[failures.outage]] node = ..., from_s = ..., to_s = ...",
        )
    f = read_keys(SCHEMA["failures"], table, "failures")
    outages = []
    for i, entry in enumerate(outages_raw):
        where = f"failures.outage[{i}]"
        o = read_keys(OUTAGE_KEYS, _table({where: entry}, where), where)
        if not o["to_s"] > o["from_s"]:
            raise ConfigError(
                f"{where}.to_s",
                f"must be after from_s (got from_s = {o['from_s']:g}, to_s = {o['to_s']:g})",
            )
        outages.append(OutageSettings(node=o["node"], from_s=o["from_s"], to_s=o["to_s"]))
    for up, down in (("node_up_s", "node_down_s"), ("link_up_s", "link_down_s")):
        if (f[up] is None) != (f[down] is None):
            given, missing = (up, down) if f[down] is None else (down, up)
            raise ConfigError(
                f"failures.{missing}",
                f"is required with failures.{given}: give both mean times (s) or neither",
            )
    if not table and not outages:
        return None  # an empty section: nothing fails
    if f["token_timeout_s"] is None:
        raise ConfigError(
            "failures.token_timeout_s",
            "is required when nodes or links fail: the seconds after which a lost token is "
            "regenerated (a number > 0)",
        )
    if getattr(protocol_cls, "centralised", False):
        raise ConfigError(
            "failures",
            f"protocol {protocol.kind!r} learns at a centre holding every node's data: no node "
            "takes part after its upload, so none can fail",
        )
    server = protocol.architecture == "server"
    if server:
        if f["link_up_s"] is not None:
            raise ConfigError(
                "failures.link_up_s",
                "links of the graph fail on the walk; with the server (architecture = "
                '"server") the agents fail, not its links',
            )
        if getattr(protocol_cls, "every_client", False):
            raise ConfigError(
                "failures",
                f"protocol {protocol.kind!r} has every client in every slot's round, and the "
                "server's failures model one scheduled agent: remove [failures]",
            )
        if not getattr(protocol_cls, "takes_back", False):
            raise ConfigError(
                "failures",
                f"protocol {protocol.kind!r} cannot take a slot back, which a round with an agent "
                "that fails needs with the server",
            )
    else:
        if "down_clients" in table:
            raise ConfigError(
                "failures.down_clients", 'is for the parameter server (architecture = "server")'
            )
        why = protocol_cls.without_recovery(protocol.options, model_cls)
        if why is not None:
            raise ConfigError("failures", f"{why}; remove [failures] or choose another protocol")
    walk = scheduler_for(scheduler)
    if not server and not walk.reads_liveness:
        live = [k for k, v in SCHEDULERS.items() if v.reads_liveness]
        raise ConfigError(
            "scheduler.kind",
            f"{scheduler!r} does not see which nodes are up; under [failures] use one that "
            f"does: {', '.join(live)}",
        )
    return FailureSettings(
        token_timeout_s=f["token_timeout_s"],
        node_up_s=f["node_up_s"],
        node_down_s=f["node_down_s"],
        link_up_s=f["link_up_s"],
        link_down_s=f["link_down_s"],
        outages=tuple(outages),
        requests_from_down=f["requests_from_down"],
        down_clients=f["down_clients"],
    )


def _check_selection(
    settings: SchedulerSettings,
    protocol: Any,
    protocol_cls: Any,
    links: LinkSettings,
    failures: FailureSettings | None,
) -> None:
    """003's client selection (a scheduler kind with an ``indicator``) needs the server, a protocol
    whose clients compute the indicator, and links that lose nothing; one line if not."""
    kind = settings.kind
    scheduler = scheduler_for(kind)
    indicator = scheduler.indicator
    if settings.selection_floor and not (indicator is not None and scheduler.ignores_graph):
        raise ConfigError(
            "scheduler.selection_floor",
            'applies to the server\'s client selection (kind = "ksd" or "hip") only',
        )
    if settings.indicator_bandwidth is not None and indicator is None:
        raise ConfigError(
            "scheduler.indicator_bandwidth",
            'applies to client selection (kind = "ksd", "hip", "ksd-walk" or "hip-walk") only',
        )
    if indicator is None:
        return
    server = protocol.architecture == "server"
    if scheduler.ignores_graph and not server:
        raise ConfigError(
            "scheduler.kind",
            f"{kind!r} is the parameter server's client selection: set protocol.architecture = "
            f'"server" (on the walk, the importance-weighted walk is kind = "{kind}-walk")',
        )
    if indicator not in getattr(protocol_cls, "selection_indicators", frozenset()):
        offered = [k.name for k in PROTOCOL_KINDS.values()
                   if indicator in getattr(k, "selection_indicators", ())]  # fmt: skip
        raise ConfigError(
            "scheduler.kind",
            f"{kind!r} needs a protocol whose clients compute the {indicator.upper()} indicator "
            f"from particles ({', '.join(offered)}); protocol {protocol.kind!r} has none",
        )
    options = protocol.options
    if not server:
        if indicator == "hip" and getattr(options, "variant", "sound") != "sound":
            raise ConfigError(
                "scheduler.kind",
                f"{kind!r} pairs a node's scores with the average the token carries, the sound "
                'variant\'s aggregate: use protocol.variant = "sound" or kind = "ksd-walk"',
            )
        if getattr(options, "compression", None) is not None:
            raise ConfigError(
                "protocol.compression",
                f"the importance-weighted walk ({kind!r}) runs an uncompressed token: remove "
                "compression or use another scheduler",
            )
        return  # lossy links and failures: the weights are hints the walk reads
    for key in ("compression", "downlink_compression"):
        if getattr(options, key, None) is not None:
            raise ConfigError(
                f"protocol.{key}",
                f"client selection ({kind!r}) runs uncompressed rounds: remove {key} or use "
                "another scheduler",
            )
    lossy = links.loss > 0 or any(
        (getattr(links, f"{way}_loss") or 0.0) > 0 for way in ("downlink", "uplink")
    )
    if lossy or failures is not None or links.kind is not None:
        raise ConfigError(
            "scheduler.kind",
            f"client selection ({kind!r}) assumes the built-in links that lose nothing: its "
            "broadcast and reports are not retransmitted or taken back; remove [links] loss, "
            "[links] kind and [failures]",
        )


def _check_state_dependent_walk(scheduler: SchedulerSettings, architecture: str) -> None:
    """Selection on the walk (``ksd-walk``, ``hip-walk``) moves the token over the graph's links:
    with the parameter server, the server's selection kind of the same indicator is the one. A
    walk whose transitions depend on the protocol's state (``reads_state``) has no stationary
    distribution of its own: no stationary start."""
    walk = scheduler_for(scheduler.kind)
    if isinstance(walk, ImportanceWeightedWalk) and architecture == "server":
        raise ConfigError(
            "scheduler.kind",
            f"{scheduler.kind!r} is selection on the walk (the token moves over the graph's "
            f'links); with architecture = "server" the server selects the clients itself: use '
            f'kind = "{walk.indicator}"',
        )
    if walk.reads_state and scheduler.start == "stationary":
        raise ConfigError(
            "scheduler.start",
            f"the stationary distribution of {scheduler.kind!r} moves with the protocol's state "
            '(the weights it publishes change as it runs): start "uniform" or at a node',
        )


def _links(ln_raw: dict[str, Any]) -> LinkSettings:
    """``[links]``: the built-in links' keys (values drawn per edge among them), or, with ``kind``
    (a channel of one's own, imported here by its path), that channel's own keys
    (:attr:`~gossipsim.network.channels.Channel.link_keys`) and no other."""
    if "kind" in ln_raw:
        kind_key = SCHEMA["links"][0]
        kind = kind_key.read(ln_raw, "links")
        own = read_keys((kind_key, *channel_class(kind).link_keys), ln_raw, "links")
        del own["kind"]
        return LinkSettings(kind=kind, options=own)
    drawn = {}  # link values drawn per edge: { lognormal = [mu, sd] }, ...
    for name in DRAWN_LINK_KEYS:
        if isinstance(ln_raw.get(name), Mapping):
            from gossipsim.families.drawn import parse_drawn  # here: only a drawn value needs it

            drawn[name] = parse_drawn(ln_raw.pop(name), "positive", f"links.{name}")
    ln = read_keys(SCHEMA["links"], ln_raw, "links")
    return LinkSettings(**ln, drawn=drawn)


def _topology(t_raw: dict[str, Any], graph: Any) -> TopologySettings:
    """``[topology]``: its own keys read here, the kind's parameters kept for the build; a graph
    object (kind networkx) checked against ``nodes``; ``seed`` and ``draw`` only for random kinds."""
    own = {k.name for k in SCHEMA["topology"]}
    description = t_raw.pop("graph", None)
    t = read_keys(SCHEMA["topology"], {k: v for k, v in t_raw.items() if k in own}, "topology")
    params = {k: v for k, v in t_raw.items() if k not in own}  # the kind's (ranges that depend on
    # the node count are checked when the graph is built)
    kind = t["kind"]
    if kind == GRAPH_KIND or description is not None:
        if graph is None or kind != GRAPH_KIND:
            raise ConfigError(
                "topology.graph" if description is not None else "topology.kind",
                f"kind {GRAPH_KIND!r} takes a NetworkX graph given from Python "
                "({'topology': G}); a scenario file reads a graph file with kind = \"graphml\" "
                'or "edgelist" and path',
            )
        for name in ("path", *params):
            if name in t_raw:
                raise ConfigError(f"topology.{name}", "unknown key for a graph object")
        count = graph.number_of_nodes()
        if t["nodes"] is not None and t["nodes"] != count:
            raise ConfigError(
                "topology.nodes", f"nodes = {t['nodes']} but the graph object has {count} nodes"
            )
    spec = TOPOLOGY_KINDS.get(kind)
    if spec is not None:  # the kind's keys, types and bounds now, not first when the graph is built
        validate_topology(kind, t["nodes"], params, t["path"])
    random = spec is not None and spec.random
    for name, fixed in (("seed", None), ("draw", "once")):
        if t[name] != fixed and not random and (spec is not None or kind == GRAPH_KIND):
            what = "a graph object" if kind == GRAPH_KIND else f"kind {kind!r}"
            raise ConfigError(
                f"topology.{name}",
                f"is only for random kinds; {what} has one graph, drawn from no seed",
            )
    if t["seed"] is not None and t["draw"] == "per-run":
        raise ConfigError(
            "topology.seed", 'holds one graph fixed: not with draw = "per-run" (each run\'s own)'
        )
    return TopologySettings(
        kind=kind,
        nodes=t["nodes"] if kind != GRAPH_KIND else graph.number_of_nodes(),
        path=t["path"],
        params=params,
        seed=t["seed"],
        draw=t["draw"],
        graph=graph if kind == GRAPH_KIND else None,
    )


def check_requests_can_arrive(
    scenario: Scenario, compute_seconds: float | None, model_cls: Any
) -> None:
    """Refuse a request that no run can ever receive: one for a slot after the run's last, or for a
    time after the longest a run can last, iterations × (compute + message bits / rate + latency),
    every slot moving the token (with the server: a download and an upload in every slot; a
    request arrives before the first slot starting at or after it). ``compute_seconds`` is the
    longest computation of a slot (the slowest node's; None: not known yet, times not checked)."""
    run, links, protocol = scenario.run, scenario.links, scenario.protocol
    spec = scenario.model_spec
    horizon: float | None = None
    for i, req in enumerate(scenario.unlearning):
        where = f"unlearning[{i}]"
        if req.at_iteration is not None and req.at_iteration > run.iterations:
            raise ConfigError(
                f"{where}.at_iteration",
                f"is {req.at_iteration}, after the run's last slot (scenario.iterations = "
                f"{run.iterations}): the request could never arrive",
            )
        if req.at_time is None or compute_seconds is None:
            continue
        compute_key = (
            "compute.node_attribute"
            if scenario.compute_attribute is not None
            else "compute.seconds_per_iteration"
        )
        if horizon is None:
            try:
                bits = protocol.message_bits(model_cls.sizes(spec, 0))
            except ConfigError:
                return  # settings the build refuses in its own words
            link = links.channel(protocol.architecture)
            horizon = check_horizon(run.iterations, compute_seconds, link, bits, compute_key)
        if req.at_time > horizon:
            transmissions = (
                "a download and an upload of the message over the server's links"
                if protocol.architecture == "server"
                else "message bits / links.rate_bps + links.latency_s"
            )
            if link.lossy:
                transmissions += ", each with every retry's timeout where its link loses"
            slowest = (
                "the slowest node's "
                if scenario.compute_attribute is not None
                or isinstance(scenario.compute_seconds, tuple)
                else ""
            )
            raise ConfigError(
                f"{where}.at_time",
                f"is {req.at_time:g} s, after the longest a run can last ({horizon:g} s: "
                f"scenario.iterations × ({slowest}{compute_key} + {transmissions})): the "
                "request could never arrive",
            )


def _data_table(d_raw: dict[str, Any], table: Any, model_cls: Any, kind: str) -> Any:
    """The table of ``data.table`` (taken out of ``d_raw``, where the scenario holds its
    description): given from Python, for a model that reads tables, not beside ``data.path``, read
    with the ``label_column`` the scenario names; None without ``data.table``."""
    if "table" not in d_raw:
        return None
    description = d_raw.pop("table")
    if table is None or not isinstance(description, str):
        raise ConfigError(
            "data.table",
            "takes (X, y) or a pandas DataFrame given from Python ({'data': {'table': (X, y)}}); "
            "a scenario file names a data file with data.path",
        )
    if not getattr(model_cls, "reads_tables", False):
        raise ConfigError("data.table", f"model {kind!r} does not read tables given from Python")
    if "path" in d_raw:
        raise ConfigError(
            "data.table", "give one of data.path (a file) and data.table (from Python), not both"
        )
    if table.label_column is None and "label_column" in d_raw:
        raise ConfigError(
            "data.label_column", "applies to a DataFrame or a data file, not to (X, y)"
        )
    column = d_raw.get("label_column", table.label_column)
    if table.label_column is not None and column != table.label_column:
        raise ConfigError(
            "data.label_column",
            f"is {column!r} but the DataFrame of data.table was read with {table.label_column!r}: "
            "give data.table again beside the new label_column",
        )
    return table


def _table(raw: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Section ``name`` of ``raw`` (empty when absent); anything but a table is an error."""
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(name, "must be a table ([" + name + "])")
    return dict(value)


def _tolerance(
    metrics: Mapping[str, Any], table: Mapping[str, Any], protocol_cls: Any
) -> float | None:
    """``[metrics] tolerance`` resolved: a number, or None for the relative rule; ``auto`` is
    :data:`ABSOLUTE_TOLERANCE` where the protocol's divergence has a scale of its own (a KL) and
    relative where it does not (the KSD). ``relative_tolerance`` given with an absolute one is an
    error naming it."""
    from gossipsim.states.representations import representation

    tolerance = metrics["tolerance"]
    if tolerance == "auto":
        scaled = representation(protocol_cls.representation_name).absolute_scale
        tolerance = ABSOLUTE_TOLERANCE if scaled else "relative"
    if tolerance == "relative":
        return None
    if "relative_tolerance" in table:
        raise ConfigError(
            "metrics.relative_tolerance",
            f'applies to tolerance = "relative" only (this variant\'s tolerance is {tolerance:g}, '
            "an absolute threshold)",
        )
    return float(tolerance)


def check_name(name: str, key: str = "scenario.name", *, from_file: bool = False) -> str:
    """A study's name, which names its results folder (``results/<name>``): a plain file name."""
    problem = None
    if not name:
        problem = "is empty"
    elif name in (".", ".."):
        problem = "is not a file name"
    elif "/" in name or "\\" in name:
        problem = "contains a path separator"
    elif any(ord(c) < 32 or ord(c) == 127 for c in name):
        problem = "contains a control character (NUL, newline, ...)"
    elif len(name.encode("utf-8", "surrogatepass")) > 255:
        problem = "is longer than 255 bytes"
    if problem is not None:
        origin = " (the scenario file's name; set [scenario] name)" if from_file else ""
        raise ConfigError(
            key,
            f"{_short(name)}{origin} {problem}; a name is a file name: 1 to 255 bytes, without "
            "/ or \\, not . or .., no control characters",
        )
    return name


def _short(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut in the middle when long (one-line messages)."""
    if len(text) > limit:
        text = text[: limit // 2] + "[...]" + text[-limit // 2 :]
    return repr(text)


__all__ = ["GRAPH_KIND", "check_name", "parse_scenario"]
