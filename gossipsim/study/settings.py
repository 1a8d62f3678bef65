"""The scenario's schema and settings objects: every key of every fixed section stated once.

Each section's keys (:class:`~gossipsim.core.schema.Key`: type, default, allowed range, the line of
documentation) are listed in :data:`SCHEMA`; :mod:`gossipsim.study.sections` reads the sections with them,
the dataclasses below take their defaults from them, and the tables of ``docs/scenarios.md`` are
generated from them (``python -m gossipsim.study.settings`` prints them; a test checks the docs). Keys that
belong to a kind are stated by the kind: topology parameters in the topology registry, ``[model]``
and ``[data]`` keys of a model on its class, ``[protocol]`` keys of a protocol kind on the kind.

Models receive a :class:`ModelSpec` (their own sections), not the whole scenario.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from gossipsim.core.frozen import FrozenDict, freeze_fields
from gossipsim.core.registry import import_object
from gossipsim.core.schema import Key
from gossipsim.study.failure_settings import (
    FAILURES_KEYS,
    FailureSettings,
)
from gossipsim.study.link_settings import (
    LINKS_KEYS,
    LinkSettings,
)

_LIMITS = "see [Limits](#limits-memory-and-simulated-time)"

SCENARIO_KEYS = (
    Key("name", "string", None, "name of the study; the default results folder is `results/<name>`, "
        "so it is a file name: 1 to 255 bytes, no `/` or `\\`, not `.` or `..`, no control characters "
        "(NUL, newline)", default_text="the file name"),
    Key("seed", "integer", 0, "seed of everything random", minimum=0),
    Key("runs", "integer", 100, "runs per variant (`--runs` overrides)", minimum=1),
    Key("iterations", "integer", 1000, f"slots per run (a run's memory grows with it: {_LIMITS})",
        minimum=1),
    Key("stop_when_done", "boolean", False, "end a run after the first slot at whose end the "
        "protocol has nothing left to do (converged, every request served) and no request is still "
        "to arrive; tables then stop there, and plots carry each run's final state forward"),
    Key("max_bits", "number", None, "end a run after the first slot by whose end it has sent at "
        "least this many payload bits (its `bits`), for comparisons at equal cost; `iterations` "
        "stays the cap (event engine: `auto` says why)", minimum=0, exclusive_minimum=True),
    Key("max_time", "number", None, "end a run after the first slot that ends at or after this "
        "simulated time (s, its `time`); `iterations` stays the cap (event engine: `auto` says "
        "why)", minimum=0, exclusive_minimum=True),
    Key("description", "string", "", "free text"),
)  # fmt: skip

TOPOLOGY_KEYS = (
    Key("kind", "string", None, "graph kind (the table below; `gossipsim list`)", required=True),
    Key("nodes", "integer", None, "total number of nodes K (required or optional by kind: the "
        "table below)", minimum=2),
    Key("path", "string", None, "graph file of kind `edgelist` or `graphml`, relative to the "
        "scenario file's folder"),
    Key("seed", "integer", None, "random kinds: draw the graph from this seed instead of "
        "`scenario.seed` (the graph `scenario.seed = S` gives, held fixed while `scenario.seed` "
        "varies; see [Seeds](#seeds))", minimum=0, default_text="`scenario.seed`"),
    Key("draw", "choice", "once", "random kinds: `once`, one graph for every run of the variant; "
        "`per-run`, each run draws its own graph from its run seed (event engine; no exact theory)",
        choices=("once", "per-run")),
)  # fmt: skip
#: besides these, ``[topology]`` holds the kind's parameters (the topology registry states them)

MODEL_KEYS = (
    Key("kind", "string", None, "the model (the tables below; `gossipsim list`), or an import path "
        "`module:Class` to a Model subclass of your own", required=True),
    Key("prior", "table", {}, "prior parameters (the tables below give each model's and its "
        "defaults)"),
    Key("temperature", "number", 1.0, "α of eq. (2)", minimum=0, exclusive_minimum=True),
)  # fmt: skip
#: besides these, ``[model]`` holds the model's own keys (``Model.model_keys``)

DATA_KEYS = (
    Key("points_per_node", "integers", 100, "observations per node: one integer for all, or a list "
        "with one per node in graph order", minimum=0),
    Key("path", "string", None, "a CSV file `node,x` (one observation per row) instead of "
        "synthetic data (models that read files: below); for linear and logistic regression and "
        "the BNN, a data set of one's own (CSV, Parquet or .npz: [Your own data "
        "set](#your-own-data-set-data-path)), relative to the scenario file's folder"),
    Key("draw", "choice", "once", "`once`: one data set from the scenario seed, shared by every run "
        "and every variant with the same data settings and node count; `per-run`: new data in "
        "every run from the run's seed", choices=("once", "per-run")),
)  # fmt: skip
#: besides these, ``[data]`` holds the model's generator parameters and data keys

#: the values of ``[protocol] architecture``
ARCHITECTURES = ("walk", "server")

PROTOCOL_KEYS = (
    Key("kind", "string", "gfvl", "the protocol (`gossipsim list`), or an import path "
        "`module:Class` to a ProtocolKind of your own"),
    Key("retrain_baseline", "boolean", True, "with at least one request, also simulate the "
        "retrain-from-scratch baseline on the same walk"),
    Key("bits_per_entry", "integer", 64, "payload bits per number a message carries", minimum=1),
    Key("architecture", "choice", "walk", "`walk`: the token moves from agent to agent over the "
        "graph's links; `server`: a parameter server holds the state and each slot is a round with "
        "the agent the scheduler picks, a download then an upload over the server's links "
        "([Architectures](#architectures-walk-and-server))", choices=ARCHITECTURES),
)  # fmt: skip
#: besides these, ``[protocol]`` holds the kind's own keys (``ProtocolKind.keys``)

#: the values of ``[scheduler] stays``: step every slot, or draw each stay's length at once
STAYS = ("stepped", "drawn")

SCHEDULER_KEYS = (
    Key("kind", "string", "metropolis-hastings", "the walk rule (below), or an import path "
        "`module:Class` to a Scheduler of your own"),
    Key("start", "node", "uniform", "the first holder: drawn uniformly, from the walk's stationary "
        "distribution, or a fixed node", words=("uniform", "stationary")),
    Key("stays", "choice", "stepped", "`stepped`: every slot of the walk is a step drawn from the "
        "run's walk stream (the same walks on either engine); `drawn`: the vectorised engine draws "
        "each stay's length at once (geometric) and the next holder from the walk's jump chain, "
        "for protocols whose repeated visits change nothing (exact conjugate G-FVL): the same law, "
        "other random draws, far faster when the walk mostly waits "
        "([Drawn stays](#drawn-stays-walks-that-mostly-wait))", choices=STAYS),
    Key("selection_floor", "number", 0.0, "client selection (`ksd`, `hip`): the share of the uniform "
        "distribution mixed into the selection distribution, (1 − floor)·P + floor/K, so that "
        "every client stays selectable; 0 is the paper's rule", minimum=0, maximum=1),
    Key("indicator_bandwidth", "number", None, "client selection: h of the indicators' RBF kernel "
        "exp(−‖x − x'‖²/h); absent: the SVGD steps' own (003's 0.55, a standard deviation, is h = "
        "0.605)", minimum=0, exclusive_minimum=True),
)  # fmt: skip

COMPUTE_KEYS = (
    Key("seconds_per_iteration", "numbers", 0.0, "simulated compute time of one slot (s): one "
        "number for every node, or a list with one per node in graph order (the slot's holder's; "
        "with the server, the scheduled agent's)", minimum=0, per_node=True),
    Key("node_attribute", "string", None, "instead: the name of a numeric node attribute of the "
        "graph (a GraphML file's or a NetworkX graph's) holding each node's compute time of a "
        "slot (s)"),
    Key("seconds_per_local_iteration", "number", 0.0, "simulated compute time of one local "
        "iteration (s), added to a slot's time once per local iteration the slot computes (L = "
        "`protocol.local_iterations` natural-gradient, SGD or SVGD steps, with DSVGD's "
        "`fit_iterations` as written; 1 for exact updates; [Local iterations cost time]"
        "(#local-iterations-cost-time))", minimum=0),
)  # fmt: skip


UNLEARNING_KEYS = (
    Key("node", "node", None, "the node asking to be forgotten (once per node)", required=True),
    Key("at_iteration", "integer", None, "the request arrives before this slot (give exactly one "
        "of at_iteration and at_time)", minimum=1),
    Key("at_time", "number", None, "or: the request arrives at this simulated time (s)",
        minimum=0),
)  # fmt: skip

#: the values of ``[metrics] particles``: which particle sets particles.csv holds
PARTICLE_TABLES = ("none", "final", "recorded")

#: ``latency_window = "auto"`` for protocols whose steps use Monte Carlo gradient estimates
STOCHASTIC_LATENCY_WINDOW = 100
#: ``tolerance = "auto"`` for a KL divergence; particle protocols (KSD) settle relatively
ABSOLUTE_TOLERANCE = 1e-9
#: the default ρ of ``tolerance = "relative"``
RELATIVE_TOLERANCE = 2.0

METRICS_KEYS = (
    Key("tolerance", "number", "auto", "threshold of the divergence for convergence and latency "
        "(with `excess`, of KL − best-in-family KL): a number; `relative`: "
        "`relative_tolerance` × the run's own divergence before the request "
        "([Settling](#settling-absolute-and-relative-tolerances)); `auto`: "
        f"{ABSOLUTE_TOLERANCE:g} for a KL, `relative` for the KSD of particle protocols",
        minimum=0, exclusive_minimum=True, words=("auto", "relative")),
    Key("relative_tolerance", "number", RELATIVE_TOLERANCE, "ρ of `tolerance = \"relative\"`: "
        "settled where the divergence is at most ρ × the median of the run's own divergence over "
        "the last tenth of the slots before the request (before the first request, or the run's "
        "end, for convergence)", minimum=1),
    Key("latency_window", "integer", "auto", "slots W the KL must stay within the tolerance for "
        "convergence and latency to count; `auto`: 1 for exact updates, "
        f"{STOCHASTIC_LATENCY_WINDOW} for Monte Carlo estimators", minimum=1, words=("auto",)),
    Key("record_every", "integer", 1, "write every n-th slot to metrics.csv (and the slots where "
        "a run converges or a request is served)", minimum=1),
    Key("excess", "boolean", False, "judge convergence and latency by KL − best-in-family KL"),
    Key("ece_bins", "integer", 10, "bins M of the expected calibration error", minimum=1),
    Key("particles", "choice", "none", "particle protocols: write their particle sets to "
        "`particles.csv` (`none`; `final`: each world's last record; `recorded`: every record, "
        "the slots metrics.csv writes and the removal slots), for the first `particle_runs` runs "
        "([Particle sets](#particle-sets-particlescsv))", choices=PARTICLE_TABLES),
    Key("particle_runs", "integer", 1, "with `particles`: runs 0 … n − 1 of each variant keep "
        "their particle sets (the table holds records × N rows a run and world)", minimum=1),
)  # fmt: skip

#: every fixed section and its keys (``[sweep]`` is described in the docs; it holds dotted keys)
SCHEMA: dict[str, tuple[Key, ...]] = {
    "scenario": SCENARIO_KEYS,
    "topology": TOPOLOGY_KEYS,
    "model": MODEL_KEYS,
    "data": DATA_KEYS,
    "protocol": PROTOCOL_KEYS,
    "scheduler": SCHEDULER_KEYS,
    "compute": COMPUTE_KEYS,
    "links": LINKS_KEYS,
    "failures": FAILURES_KEYS,
    "unlearning": UNLEARNING_KEYS,
    "metrics": METRICS_KEYS,
}
#: the sections of a scenario file
SECTION_NAMES = (*SCHEMA, "sweep")


def default(section: str, name: str) -> Any:
    """The default of ``section.name`` as :data:`SCHEMA` states it."""
    for key in SCHEMA[section]:
        if key.name == name:
            return key.default
    raise KeyError(f"{section}.{name}")


def _gfvl_settings() -> Any:
    return import_object("gossipsim.protocols.gfvl_kind:GFVLSettings", "protocol")()


@dataclass(frozen=True)
class RunSettings:
    name: str
    seed: int = default("scenario", "seed")
    runs: int = default("scenario", "runs")
    iterations: int = default("scenario", "iterations")
    stop_when_done: bool = default("scenario", "stop_when_done")
    max_bits: float | None = default("scenario", "max_bits")
    max_time: float | None = default("scenario", "max_time")
    description: str = default("scenario", "description")


@dataclass(frozen=True)
class TopologySettings:
    """``[topology]``: the kind, its size, file and parameters, where its graph comes from.

    ``graph`` is the checked, frozen NetworkX graph given from Python (kind ``networkx``), else
    None; ``seed`` the graph's own seed (None: ``scenario.seed``); ``draw`` ``once`` or
    ``per-run``."""

    kind: str
    nodes: int | None = None
    path: str | None = None
    params: dict[str, Any] = field(default_factory=FrozenDict)
    seed: int | None = None
    draw: str = default("topology", "draw")
    graph: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        freeze_fields(self, "params")


@dataclass(frozen=True)
class ModelSettings:
    kind: str
    prior: dict[str, Any] = field(default_factory=FrozenDict)
    temperature: float = default("model", "temperature")
    options: dict[str, Any] = field(default_factory=FrozenDict)

    def __post_init__(self) -> None:
        freeze_fields(self, "prior", "options")


@dataclass(frozen=True)
class DataSettings:
    points_per_node: int | tuple[int, ...] = default("data", "points_per_node")
    path: str | None = None
    draw: str = default("data", "draw")
    params: dict[str, Any] = field(default_factory=FrozenDict)
    options: dict[str, Any] = field(default_factory=FrozenDict)
    #: the checked, read-only table given from Python (``data.table``:
    #: :class:`~gossipsim.data.tables.Table`), or None
    table: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        freeze_fields(self, "params", "options")


@dataclass(frozen=True)
class ProtocolSettings:
    """``[protocol]``: the kind, the keys every kind has, and the kind's own settings object
    (``options``: e.g. :class:`~gossipsim.protocols.GFVLSettings`), validated by the kind."""

    kind: str = default("protocol", "kind")
    retrain_baseline: bool = default("protocol", "retrain_baseline")
    bits_per_entry: int = default("protocol", "bits_per_entry")
    options: Any = field(default_factory=_gfvl_settings)
    architecture: str = default("protocol", "architecture")

    def message_bits(self, sizes: Any) -> float:
        """Bits of one message for a model of these sizes (:class:`gossipsim.study.budget.ModelSizes`):
        ``bits_per_entry`` × the entries the kind's state carries
        (:meth:`~gossipsim.protocols.ProtocolKind.message_entries`)."""
        from gossipsim.core.registry import PROTOCOL_KINDS

        kind = PROTOCOL_KINDS.lookup(self.kind, "protocol.kind")
        return float(self.bits_per_entry * kind.message_entries(self.options, sizes))


@dataclass(frozen=True)
class SchedulerSettings:
    kind: str = default("scheduler", "kind")
    start: Any = default("scheduler", "start")
    stays: str = default("scheduler", "stays")
    selection_floor: float = default("scheduler", "selection_floor")
    indicator_bandwidth: float | None = default("scheduler", "indicator_bandwidth")


@dataclass(frozen=True)
class UnlearningSettings:
    node: Any
    at_iteration: int | None = None
    at_time: float | None = None


@dataclass(frozen=True)
class MetricsSettings:
    #: the absolute threshold, or None: ``relative_tolerance`` × the run's own level
    #: (``"auto"`` resolved by the protocol's divergence)
    tolerance: float | None = ABSOLUTE_TOLERANCE
    relative_tolerance: float = default("metrics", "relative_tolerance")
    record_every: int = default("metrics", "record_every")
    excess: bool = default("metrics", "excess")
    ece_bins: int = default("metrics", "ece_bins")
    latency_window: int = 1  # "auto" resolved by the protocol kind (1 unless it is stochastic)
    particles: str = default("metrics", "particles")
    particle_runs: int = default("metrics", "particle_runs")

    def keeps_particles(self, run: int) -> bool:
        """Whether run ``run`` writes its particle sets to particles.csv (a particle protocol's)."""
        return self.particles != "none" and run < self.particle_runs


@dataclass(frozen=True)
class ModelSpec:
    """What a model is built from: its own sections (``[model]``, ``[data]``), the folder relative
    paths resolve against, the evaluation settings it uses (``[metrics] ece_bins``) and the
    protocol's settings (a model's memory estimate may depend on the estimator's samples).

    ``check_budget(sizes, graph)``, when given, refuses a variant whose model of these sizes cannot
    fit in memory with the rest of the runs (the world binds :func:`gossipsim.study.budget.check_world`
    to the scenario); the model calls it before it draws or reads data."""

    model: ModelSettings
    data: DataSettings = field(default_factory=DataSettings)
    base_dir: str = "."
    ece_bins: int = default("metrics", "ece_bins")
    protocol: ProtocolSettings = field(default_factory=ProtocolSettings)
    check_budget: Callable[[Any, Any], None] | None = None


@dataclass(frozen=True)
class Scenario:
    """One fully validated scenario (a single variant: no sweep left in it)."""

    run: RunSettings
    topology: TopologySettings
    model: ModelSettings
    data: DataSettings = field(default_factory=DataSettings)
    protocol: ProtocolSettings = field(default_factory=ProtocolSettings)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    #: ``[compute] seconds_per_iteration``: one number, or one per node in graph order
    compute_seconds: float | tuple[float, ...] = default("compute", "seconds_per_iteration")
    links: LinkSettings = field(default_factory=LinkSettings)
    unlearning: tuple[UnlearningSettings, ...] = ()
    #: ``[failures]``: None when no node or link ever fails
    failures: FailureSettings | None = None
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    base_dir: str = "."
    #: ``[compute] node_attribute``: the node attribute holding each node's compute time (None:
    #: ``compute_seconds``); read when the world is built
    compute_attribute: str | None = None
    #: ``[compute] seconds_per_local_iteration``
    seconds_per_local_iteration: float = default("compute", "seconds_per_local_iteration")
    #: local iterations one slot computes (the protocol kind's
    #: :meth:`~gossipsim.protocols.ProtocolKind.slot_local_iterations`)
    local_iterations_per_slot: int = 1

    @property
    def local_compute_seconds(self) -> float:
        """The compute time a slot's local iterations add to it (every node alike): ``[compute]
        seconds_per_local_iteration`` × the local iterations of a slot."""
        return self.seconds_per_local_iteration * self.local_iterations_per_slot

    @property
    def slowest_compute(self) -> float | None:
        """The longest computation of a slot at any node, for bounds on a run's time: the one
        number, or the largest of a per-node list, with the slot's local iterations'
        (:attr:`local_compute_seconds`); None when the times are a node attribute
        (known once the graph is built: :func:`gossipsim.world.world.node_compute_seconds`)."""
        if self.compute_attribute is not None:
            return None
        compute = self.compute_seconds
        slowest = max(compute) if isinstance(compute, tuple) else compute
        return slowest + self.local_compute_seconds

    @property
    def model_spec(self) -> ModelSpec:
        """The settings the model is built from (:class:`ModelSpec`)."""
        return ModelSpec(self.model, self.data, self.base_dir, self.metrics.ece_bins, self.protocol)

    def resolved(self) -> dict[str, Any]:
        """The scenario with every default filled in, as plain data (written to summary.json)."""
        graph, table = self.topology.graph, self.data.table
        # a graph object (kind networkx) and a table given from Python are described, never copied
        out = asdict(
            dataclasses.replace(
                self,
                topology=dataclasses.replace(self.topology, graph=None),
                data=dataclasses.replace(self.data, table=None),
            )
        )
        if graph is not None:
            out["topology"]["graph"] = describe_graph(graph)
        if table is not None:
            out["data"]["table"] = table.description
        else:
            del out["data"]["table"]
        options = self.protocol.options  # the kind's own keys, beside the common ones
        out["protocol"] = {
            "kind": self.protocol.kind,
            "retrain_baseline": self.protocol.retrain_baseline,
            "bits_per_entry": self.protocol.bits_per_entry,
            "architecture": self.protocol.architecture,
            **(
                asdict(options)
                if is_dataclass(options) and not isinstance(options, type)
                else dict(options or {})
            ),
        }
        out["links"] = self.links.resolved()
        return out


def describe_graph(graph: Any) -> str:
    """A graph object as the scenario records it: node and edge counts and a content hash (node
    labels in graph order with their attributes, edges with theirs), so that a results folder can
    tell whether ``--resume`` gets the same graph."""
    digest = hashlib.sha256()
    for part in (
        graph.graph,
        list(graph.nodes(data=True)),
        list(graph.edges(data=True)),
    ):
        try:
            text = json.dumps(part, sort_keys=True, default=repr)
        except TypeError:  # attribute names that do not sort (mixed types)
            text = repr(part)
        digest.update(text.encode())
    return (
        f"{GRAPH_DESCRIPTION}{graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges, "
        f"sha256 {digest.hexdigest()[:16]}"
    )


#: how :func:`describe_graph` begins
GRAPH_DESCRIPTION = "networkx graph: "


def reference(section: str) -> str:
    """The Markdown table of a section's keys (what docs/scenarios.md shows)."""
    from gossipsim.core.schema import reference_table

    return reference_table(SCHEMA[section])


if __name__ == "__main__":  # print every section's table, for docs/scenarios.md
    for name in SCHEMA:
        print(f"[{name}]\n{reference(name)}\n")
