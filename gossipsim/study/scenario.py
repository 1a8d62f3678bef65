"""Scenario files: TOML → validated, frozen dataclasses.

Every error is a :class:`~gossipsim.errors.ConfigError` naming the offending key (``links.rate_bps``,
``unlearning[1].node``, ...) and what is allowed. The format is documented in ``docs/scenarios.md``;
:data:`SECTION_NAMES` below is the list of sections and keys, used both for validation and for the docs.

A ``[sweep]`` table maps dotted keys to lists of values; the cartesian product of the lists becomes
the scenario's *variants*, each a complete scenario validated on its own.
"""

from __future__ import annotations

import copy
import itertools
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from gossipsim.core.frozen import FrozenDict, freeze, thaw
from gossipsim.core.registry import MODEL_KINDS, PROTOCOL_KINDS
from gossipsim.core.schema import read_keys
from gossipsim.core.textfiles import checked_path, read_text
from gossipsim.errors import ConfigError
from gossipsim.network.links import check_horizon
from gossipsim.scheduling import check_scheduler
from gossipsim.study import budget
from gossipsim.study.settings import (
    ABSOLUTE_TOLERANCE,
    SCHEMA,
    SECTION_NAMES,
    STOCHASTIC_LATENCY_WINDOW,
    DataSettings,
    LinkSettings,
    MetricsSettings,
    ModelSettings,
    ModelSpec,
    ProtocolSettings,
    RunSettings,
    Scenario,
    SchedulerSettings,
    TopologySettings,
    UnlearningSettings,
    describe_graph,
)
from gossipsim.study.sweeps import (
    GRAPH_SWEEP_KEY,
    GraphSweep,
    flatten_sweep,
    graph_sweep,
    set_dotted,
    sweep_cases,
    variant_label,
)
from gossipsim.topology import TOPOLOGY_KINDS, check_graph_object
from gossipsim.topology.registry import validate as validate_topology

_MISSING: Any = object()


@dataclass(frozen=True)
class Variant:
    """One point of the sweep: its label, the swept values, and the scenario it makes."""

    label: str
    values: dict[str, Any]
    scenario: Scenario

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", freeze(self.values))


#: what :meth:`Study.replace` takes for "leave the key out" (the default applies)
UNSET = None


@dataclass(frozen=True)
class Study:
    """A scenario file: its variants (one if there is no sweep) and where it came from.

    Frozen in fact: ``raw`` (the scenario as given, sweep included, JSON-able: a graph object is
    recorded by :func:`~gossipsim.study.settings.describe_graph`) and ``sweep`` are
    :class:`~gossipsim.core.frozen.FrozenDict` s; ``graph`` is the checked, frozen graph object of
    ``topology`` (kind ``networkx``), or None; ``swept_graphs`` those of a sweep over graphs
    (``sweep.topology``), by label (empty without one). Change a key with :meth:`replace`."""

    name: str
    path: str | None
    raw: dict[str, Any]
    sweep: dict[str, Any]
    variants: tuple[Variant, ...]
    graph: Any = field(default=None, repr=False)
    swept_graphs: dict[str, Any] = field(default_factory=dict, repr=False)
    #: (swept key, the first variant with that key at its value outside the sweep), for each swept
    #: key the file also sets: what :func:`gossipsim.api.check` builds to check that value
    base_probes: tuple[tuple[str, Scenario], ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw", freeze(self.raw))
        object.__setattr__(self, "sweep", freeze(self.sweep))
        object.__setattr__(self, "swept_graphs", FrozenDict(self.swept_graphs))

    @property
    def runs(self) -> int:
        return self.variants[0].scenario.run.runs

    @property
    def seed(self) -> int:
        return self.variants[0].scenario.run.seed

    def replace(self, key: str | Mapping[str, Any], value: Any = _MISSING) -> Study:
        """A new study with dotted keys set, validated as the file would be (errors name the key).

        ``study.replace("topology.nodes", 50)`` or ``study.replace({"topology.nodes": 50,
        "scenario.runs": 10})``. A key is ``section.key`` (deeper: ``model.prior.a``), a whole
        section (``"topology"``: its table, or a NetworkX graph, replaces the section) or
        ``sweep.<dotted key>`` (a sweep dimension's list of values; ``sweep.topology`` may be a list
        of NetworkX graphs or a mapping label -> graph). A value of None removes the key (its
        default applies). Setting a swept key fixes it: that sweep dimension is dropped; a key that
        ``[[sweep.cases]]`` set is an error."""
        if isinstance(key, Mapping):
            if value is not _MISSING:
                raise ConfigError("replace", "give a mapping of keys, or one key and its value")
            changes = dict(key)
        elif not isinstance(key, str):
            raise ConfigError(
                "replace",
                "expected a dotted key and its value, or a mapping of dotted keys to values (got "
                f"{type(key).__name__})",
            )
        else:
            if value is _MISSING:
                raise ConfigError(str(key), "replace needs a value (None removes the key)")
            changes = {key: value}
        raw = thaw(self.raw)
        graph = self.graph
        for dotted, new in changes.items():
            if not isinstance(dotted, str) or not dotted or any(not p for p in dotted.split(".")):
                raise ConfigError(str(dotted), "must be a dotted key such as topology.nodes")
            new = plain_value(new, dotted)
            if dotted == "topology" or (
                dotted.startswith("topology.") and isinstance(new, nx.Graph)
            ):
                graph = None  # a new graph object, or a new section, replaces the old graph
            _set_key(raw, dotted, new)
        return parse_study(raw, path=self.path, graph=graph, swept_graphs=self.swept_graphs)

    def with_overrides(self, *, runs: int | None = None, seed: int | None = None) -> Study:
        """The same study with ``runs`` and/or ``seed`` replaced (the CLI's --runs and --seed)."""
        changes = {"scenario.runs": runs, "scenario.seed": seed}
        return self.replace({k: v for k, v in changes.items() if v is not None})


def _set_key(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set (or, for None, remove) ``dotted`` in the plain scenario ``raw`` (see Study.replace)."""
    section, _, rest = dotted.partition(".")
    if section not in SECTION_NAMES:
        raise ConfigError(section, f"unknown section; allowed: {', '.join(SECTION_NAMES)}")
    value = thaw(value) if not isinstance(value, nx.Graph) else value
    if section == "sweep":
        sweep = raw.setdefault("sweep", {})
        if not rest or rest == "cases":
            raise ConfigError(dotted, "set a sweep dimension: sweep.<dotted key> = [values]")
        if value is None:
            sweep.pop(rest, None)
        else:
            sweep[rest] = value
        return
    sweep = raw.get("sweep")
    if isinstance(sweep, dict):
        for case in sweep.get("cases") or []:
            if isinstance(case, dict) and any(
                k == dotted or k.startswith(dotted + ".") or dotted.startswith(k + ".")
                for k in case
            ):
                raise ConfigError(dotted, "is set by [[sweep.cases]]; change the cases instead")
        for swept in [k for k in sweep if k != "cases"]:  # the key is fixed now: drop its dimension
            if swept == dotted or swept.startswith(dotted + ".") or dotted.startswith(swept + "."):
                del sweep[swept]
        if not sweep:
            del raw["sweep"]
    if not rest:
        if value is None:
            raw.pop(section, None)
        else:
            raw[section] = value
        return
    node = raw
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            if value is None:
                return
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(dotted, f"{part!r} is not a table")
        node = child
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value


def load_scenario(path: str | os.PathLike[str] | Mapping[str, Any]) -> Study:
    """Read and validate a scenario file; raises :class:`ConfigError` naming the offending key.

    The file is UTF-8 text (a byte-order mark, as some editors write, is allowed); any other
    encoding, a binary file, invalid TOML or nesting deeper than :data:`MAX_DEPTH` is a one-line
    error saying where. A scenario given as nested dicts (what ``tomllib`` returns) is validated
    as :func:`parse_study` does."""
    if isinstance(path, Mapping):
        return parse_study(path)
    p = checked_path(path, "scenario file")
    text = read_text(p, "scenario file")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("scenario file", f"{p.name} is not valid TOML: {exc}") from None
    except RecursionError:  # the parser recurses once per level of nested inline tables/arrays
        raise ConfigError(
            "scenario file",
            f"{p.name} nests tables or arrays too deeply (at most {MAX_DEPTH} levels)",
        ) from None
    return parse_study(raw, path=str(p))


#: deepest nesting of tables and arrays a scenario may have (real ones use at most about 6)
MAX_DEPTH = 32
#: TOML integers are 64-bit; larger ones (which Python's parser accepts) are refused
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def plain_value(value: Any, key: str) -> Any:
    """A scenario value given from Python as the TOML value it stands for: NumPy scalars as the
    Python ``bool``, ``int`` or ``float`` they hold (``np.int64(3)`` is the integer 3), NumPy
    arrays as lists, tables and arrays converted all the way down (a copy; graph objects kept). A
    generator or other one-pass iterator is refused naming ``key``: a scenario is read more than
    once (each variant, the results folder's record), so it needs a list."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, Mapping) and not isinstance(value, nx.Graph):
        return {k: plain_value(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain_value(v, f"{key}[{i}]") for i, v in enumerate(value))
    if isinstance(value, Iterator):
        raise ConfigError(
            key or "scenario",
            f"is a {type(value).__name__}, which can be read only once; give a list (e.g. "
            "list(...) of it)",
        )
    return value


def check_structure(raw: Mapping[str, Any]) -> None:
    """Refuse values nested deeper than :data:`MAX_DEPTH` and integers outside TOML's 64-bit range,
    naming the key, before anything recurses into the tables or converts an integer to a float."""
    # (value, its dotted key, its depth, whether a graph object may be there)
    stack: list[tuple[Any, str, int, bool]] = [(raw, "", 0, False)]
    while stack:
        value, key, depth, graph_ok = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(
                key, f"nests tables or arrays too deeply (at most {MAX_DEPTH} levels)"
            )
        if isinstance(value, nx.Graph):
            if graph_ok or key in ("topology", "topology.graph"):
                continue
            raise ConfigError(
                key,
                "a NetworkX graph goes only in topology ({'topology': G} or {'topology': "
                "{'graph': G, ...}}) or in sweep.topology (a list of graphs, or a mapping "
                "label -> graph)",
            )
        graphs_below = key == f"sweep.{GRAPH_SWEEP_KEY}"  # a sweep over graphs: its entries
        if isinstance(value, Mapping):
            stack += [
                (v, f"{key}.{k}" if key else str(k), depth + 1, graphs_below)
                for k, v in value.items()
            ]
        elif isinstance(value, list | tuple):
            stack += [(v, f"{key}[{i}]", depth + 1, graphs_below) for i, v in enumerate(value)]
        elif isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            hint = (
                " (write a larger node id as a string)" if key.endswith(("node", "start")) else ""
            )
            raise ConfigError(
                key, f"integers must lie in TOML's 64-bit range, -2^63 to 2^63 - 1{hint}"
            )


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


def parse_study(
    raw: Mapping[str, Any],
    *,
    path: str | None = None,
    graph: Any = None,
    swept_graphs: Mapping[str, Any] | None = None,
) -> Study:
    """Validate a scenario given as nested dicts (what ``tomllib`` returns).

    From Python, ``topology`` may be a NetworkX graph (``{"topology": G}``, or ``{"topology":
    {"graph": G}}`` beside other topology keys): kind ``networkx``, checked and frozen by
    :func:`~gossipsim.topology.check_graph_object`, kept as :attr:`Study.graph` and recorded in
    ``raw`` by its description. ``graph`` is that checked graph when ``raw`` already holds the
    description (what :meth:`Study.replace` passes).

    ``sweep.topology`` may be a list of NetworkX graphs or a mapping label -> graph
    (:func:`~gossipsim.study.sweeps.graph_sweep`): one variant per graph, whose whole ``topology`` it
    is (a ``topology`` beside the sweep is not used, and not recorded), its label the value of the
    variant's ``topology`` key; ``raw`` records each graph by its description, the graphs are kept
    as :attr:`Study.swept_graphs` (what :meth:`Study.replace` passes back as ``swept_graphs``)."""
    if isinstance(raw, Mapping):
        raw = plain_value(raw, "")
    check_structure(raw)
    raw_dict, graph = _take_graph(raw, graph)
    for section in raw_dict:
        if section not in SECTION_NAMES:
            raise ConfigError(section, f"unknown section; allowed: {', '.join(SECTION_NAMES)}")
    sweep_table = raw_dict.pop("sweep", {})
    cases = sweep_cases(sweep_table.pop("cases", None) if isinstance(sweep_table, dict) else None)
    graphs = _graph_dimension(sweep_table, cases, swept_graphs)
    if graphs is not None:  # each variant's topology is one of the graphs: the base's is not used
        raw_dict.pop("topology", None)
        graph = None
    sweep = flatten_sweep(sweep_table, graphs=graphs)
    base_dir = str(Path(path).resolve().parent) if path else os.getcwd()
    default_name = Path(path).stem if path else "scenario"
    keys = list(sweep)
    variants = []
    for case_label, case in cases:
        for combo in itertools.product(*(sweep[k] for k in keys)):
            values = {**case, **dict(zip(keys, combo, strict=True))}
            variant_raw, variant_graph = _variant_raw(raw_dict, values, graphs, graph)
            scenario = parse_scenario(
                variant_raw, base_dir=base_dir, default_name=default_name, graph=variant_graph
            )
            swept = dict(zip(keys, combo, strict=True))
            if case_label is not None:
                label = case_label + (", " + variant_label(swept, "") if swept else "")
            else:
                label = variant_label(values, scenario.run.name)
            variants.append(Variant(label, values, scenario))
    _check_particle_table(variants)
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ConfigError("sweep", "two variants have the same label; sweep values must differ")
    probes = _check_swept_bases(raw_dict, variants[0].values, graphs, graph, base_dir, default_name)
    # memory and simulated time, before any graph or data is built (checked again on the built world)
    budget.check_study(v.scenario for v in variants)
    raw_out = dict(raw_dict)
    if sweep or cases != [(None, {})]:
        raw_out["sweep"] = {
            **{  # a sweep over graphs as label -> description
                k: graphs.described if graphs is not None and k == GRAPH_SWEEP_KEY else v
                for k, v in sweep.items()
            },
            **(
                {"cases": [{**c, **({"label": lab} if lab else {})} for lab, c in cases]}
                if cases != [(None, {})]
                else {}
            ),
        }
    return Study(
        variants[0].scenario.run.name, path, raw_out, sweep, tuple(variants), graph,
        graphs.graphs if graphs is not None else {}, tuple(probes),
    )  # fmt: skip


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


def records_particle_sets(scenario: Scenario) -> bool:
    """Whether the scenario's protocol records particle sets (what particles.csv holds)."""
    from gossipsim.states.representations import representation

    kind = PROTOCOL_KINDS.lookup(scenario.protocol.kind, "protocol.kind")
    return representation(kind.representation_name).particle_sets


def _check_particle_table(variants: list[Variant]) -> None:
    """``[metrics] particles`` asks for particle sets: it applies to the variants whose protocol
    records them (a sweep may set G-FVL beside SVGD and DSVGD, whose variants write none) and is
    refused in one line when no variant's does."""
    asked = [v.scenario for v in variants if v.scenario.metrics.particles != "none"]
    if not asked or any(records_particle_sets(v.scenario) for v in variants):
        return
    kind = asked[0].protocol.kind
    raise ConfigError(
        "metrics.particles",
        f"only particle protocols (svgd, dsvgd) record particle sets; protocol.kind = {kind!r} "
        'records natural parameters: remove the key or set it to "none"',
    )


def _variant_raw(
    raw_dict: dict[str, Any], values: Mapping[str, Any], graphs: GraphSweep | None, graph: Any
) -> tuple[dict[str, Any], Any]:
    """The scenario of one variant: the base with the variant's swept ``values`` set, and its
    graph object (of a sweep over graphs, else the base's)."""
    variant_raw = copy.deepcopy(raw_dict)
    variant_graph = graph
    for dotted, value in values.items():
        if graphs is not None and dotted == GRAPH_SWEEP_KEY:
            variant_raw[dotted] = {"kind": GRAPH_KIND, "graph": graphs.described[value]}
            variant_graph = graphs.graphs[value]
        else:
            set_dotted(variant_raw, dotted, value)
    return variant_raw, variant_graph


def _check_swept_bases(
    raw_dict: dict[str, Any],
    first: Mapping[str, Any],
    graphs: GraphSweep | None,
    graph: Any,
    base_dir: str,
    default_name: str,
) -> list[tuple[str, Scenario]]:
    """Refuse a swept key whose value outside the sweep (the file's own ``[topology] nodes`` beside
    ``"topology.nodes" = [...]``) is invalid. No variant uses that value, but it is the study's
    value of the key once the sweep over it is dropped (``--set`` on the key, or
    ``Study.replace({"sweep.<key>": None})``), so a typo there must not wait until then. Each is
    checked in the first variant with that one key back at its base value; only errors about the
    key itself count (a base value may be valid alone and not beside the other swept values).
    Returns the probes that parse, for :func:`gossipsim.api.check` to build (values such as
    ``data.theta`` are checked by the model, when the world is built)."""
    probes = []
    for key in first:
        if graphs is not None and key == GRAPH_SWEEP_KEY:
            continue  # a sweep over graphs replaces the whole topology: the base is not used
        found, _ = _get_dotted(raw_dict, key)
        if not found:
            continue  # the key's default applies, valid by definition
        others = {k: v for k, v in first.items() if k != key}
        probe, probe_graph = _variant_raw(raw_dict, others, graphs, graph)
        try:
            scenario = parse_scenario(
                probe, base_dir=base_dir, default_name=default_name, graph=probe_graph
            )
        except ConfigError as exc:
            raise_for_swept_base(exc, key)
            continue
        probes.append((key, scenario))
    return probes


def raise_for_swept_base(exc: ConfigError, key: str) -> None:
    """Raise ``exc`` as an error of the value of the swept ``key`` outside its sweep, when it is
    about that key (else return: an error of another key, valid alone)."""
    if exc.key == key or exc.key.startswith((key + ".", key + "[")):
        raise ConfigError(
            exc.key,
            f"{exc.message} (the value outside the sweep over {key}, which applies when "
            "that sweep is dropped; give a valid value or leave the key out)",
        ) from None
    if key.startswith(exc.key + "."):
        raise ConfigError(
            key,
            f"{exc.message} (with the value outside the sweep over {key}, which applies "
            "when that sweep is dropped; give a valid value or leave the key out)",
        ) from None


def _get_dotted(raw: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    """Whether the dotted key is set in ``raw``, and its value."""
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _graph_dimension(
    sweep_table: Any,
    cases: list[tuple[str | None, dict[str, Any]]],
    known: Mapping[str, Any] | None,
) -> GraphSweep | None:
    """The sweep over graphs of ``sweep.topology`` (:func:`~gossipsim.study.sweeps.graph_sweep`), or
    None; refused beside other swept topology keys or cases that set topology keys, which the
    graphs would silently replace."""
    if not isinstance(sweep_table, dict):
        return None
    graphs = graph_sweep(sweep_table.get(GRAPH_SWEEP_KEY), check_graph_object, known)
    if graphs is None:
        return None
    prefix = GRAPH_SWEEP_KEY + "."
    other = [k for k in sweep_table if k.startswith(prefix)]
    other += [k for _, case in cases for k in case if k.startswith(prefix)]
    if other:
        raise ConfigError(
            f"sweep.{GRAPH_SWEEP_KEY}",
            f"a sweep over graphs sets the whole topology; {other[0]} cannot be set beside it",
        )
    return graphs


def _take_graph(raw: Mapping[str, Any], graph: Any) -> tuple[dict[str, Any], Any]:
    """``raw`` as plain dicts with a graph object of ``topology`` replaced by its description
    (``topology.graph``), and that graph checked and frozen (else the ``graph`` given)."""
    if not isinstance(raw, Mapping):
        raise ConfigError("scenario", f"must be a table of sections (got {type(raw).__name__})")
    topology = raw.get("topology")
    given = None
    if isinstance(topology, nx.Graph):
        given, table = topology, {}
    elif isinstance(topology, Mapping) and isinstance(topology.get("graph"), nx.Graph):
        given, table = topology["graph"], {k: v for k, v in topology.items() if k != "graph"}
    out = thaw({k: v for k, v in raw.items() if k != "topology" or given is None})
    if given is not None:
        if table.setdefault("kind", GRAPH_KIND) != GRAPH_KIND:
            raise ConfigError(
                "topology.kind",
                f"is {table['kind']!r} but topology holds a graph object: use kind = "
                f"{GRAPH_KIND!r} or leave kind out",
            )
        graph = check_graph_object(given, "topology")
        out["topology"] = {**thaw(table), "graph": describe_graph(graph)}
    return out, graph


#: the topology kind of a NetworkX graph given from Python
GRAPH_KIND = "networkx"


def parse_scenario(
    raw: Mapping[str, Any],
    *,
    base_dir: str = ".",
    default_name: str = "scenario",
    graph: Any = None,
) -> Scenario:
    """Validate one variant (no ``[sweep]``) given as nested dicts: each fixed section is read with
    its keys in :data:`~gossipsim.study.settings.SCHEMA`; the keys a kind adds are read by the kind.
    ``graph`` is the checked graph object of a ``topology`` of kind ``networkx``
    (:func:`parse_study` passes it)."""
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
        kind=check_scheduler(sc["kind"], "scheduler.kind"), start=sc["start"], stays=sc["stays"]
    )
    compute = read_keys(SCHEMA["compute"], _table(raw, "compute"), "compute")
    ln = read_keys(SCHEMA["links"], _table(raw, "links"), "links")
    links = LinkSettings(**ln)

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
    _check_requests_can_arrive(unlearning, run, compute["seconds_per_iteration"], links, protocol,
                               model_cls, ModelSpec(model, data, base_dir, protocol=protocol))  # fmt: skip
    return Scenario(
        run=run,
        topology=topology,
        model=model,
        data=data,
        protocol=protocol,
        scheduler=scheduler,
        compute_seconds=compute["seconds_per_iteration"],
        links=links,
        unlearning=tuple(unlearning),
        metrics=metrics,
        base_dir=base_dir,
    )


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


def _check_requests_can_arrive(
    requests: list[UnlearningSettings],
    run: RunSettings,
    compute_seconds: float,
    links: LinkSettings,
    protocol: ProtocolSettings,
    model_cls: Any,
    spec: ModelSpec,
) -> None:
    """Refuse a request that no run can ever receive: one for a slot after the run's last, or for a
    time after the longest a run can last, iterations × (compute + message bits / rate + latency),
    every slot moving the token (with the server: a download and an upload in every slot; a
    request arrives before the first slot starting at or after it)."""
    horizon: float | None = None
    for i, req in enumerate(requests):
        where = f"unlearning[{i}]"
        if req.at_iteration is not None and req.at_iteration > run.iterations:
            raise ConfigError(
                f"{where}.at_iteration",
                f"is {req.at_iteration}, after the run's last slot (scenario.iterations = "
                f"{run.iterations}): the request could never arrive",
            )
        if req.at_time is None:
            continue
        if horizon is None:
            try:
                bits = protocol.message_bits(model_cls.sizes(spec, 0))
            except ConfigError:
                return  # settings the build refuses in its own words
            link = links.channel(protocol.architecture)
            horizon = check_horizon(run.iterations, compute_seconds, link, bits)
        if req.at_time > horizon:
            transmissions = (
                "a download and an upload of the message over the server's links"
                if protocol.architecture == "server"
                else "message bits / links.rate_bps + links.latency_s"
            )
            raise ConfigError(
                f"{where}.at_time",
                f"is {req.at_time:g} s, after the longest a run can last ({horizon:g} s: "
                f"scenario.iterations × (compute.seconds_per_iteration + {transmissions})): the "
                "request could never arrive",
            )


def _table(raw: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Section ``name`` of ``raw`` (empty when absent); anything but a table is an error."""
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(name, "must be a table ([" + name + "])")
    return dict(value)


__all__ = [
    "SECTION_NAMES",
    "DataSettings",
    "LinkSettings",
    "MetricsSettings",
    "ModelSettings",
    "ModelSpec",
    "ProtocolSettings",
    "RunSettings",
    "Scenario",
    "SchedulerSettings",
    "Study",
    "TopologySettings",
    "UnlearningSettings",
    "Variant",
    "GRAPH_KIND",
    "check_name",
    "check_structure",
    "load_scenario",
    "parse_scenario",
    "parse_study",
]
