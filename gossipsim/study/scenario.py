"""Scenario files: TOML → a validated, frozen :class:`Study` of one or more variants.

A scenario file (or the nested dicts ``tomllib`` returns, or a scenario given from Python with
graph objects) is read here into a :class:`Study`: its values checked
(:mod:`gossipsim.study.values`), its ``[sweep]`` expanded into *variants*, the cartesian product of
the swept lists (:mod:`gossipsim.study.sweeps`), each a complete scenario validated on its own
(:mod:`gossipsim.study.sections`), the swept keys' values outside the sweep checked too, and the
whole study's memory and simulated time (:mod:`gossipsim.study.budget`). :meth:`Study.replace`
changes dotted keys and validates again.

Every error is a :class:`~gossipsim.errors.ConfigError` naming the offending key (``links.rate_bps``,
``unlearning[1].node``, ...) and what is allowed. The format is documented in ``docs/scenarios.md``;
:data:`~gossipsim.study.settings.SECTION_NAMES` is the list of sections, and
:data:`~gossipsim.study.settings.SCHEMA` their keys, used both for validation and for the docs.
"""

from __future__ import annotations

import copy
import itertools
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from gossipsim.core.frozen import FrozenDict, freeze, thaw
from gossipsim.core.registry import MODEL_KINDS, PROTOCOL_KINDS
from gossipsim.core.textfiles import checked_path, read_text
from gossipsim.errors import ConfigError
from gossipsim.study import budget
from gossipsim.study.sections import GRAPH_KIND, parse_scenario
from gossipsim.study.settings import SECTION_NAMES, Scenario, describe_graph
from gossipsim.study.sweeps import (
    GRAPH_SWEEP_KEY,
    GraphSweep,
    flatten_sweep,
    graph_sweep,
    set_dotted,
    sweep_cases,
    variant_label,
)
from gossipsim.study.values import MAX_DEPTH, check_structure, plain_value
from gossipsim.topology import check_graph_object

_MISSING: Any = object()
#: the key of a table given from Python
TABLE_KEY = "data.table"


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
    (``sweep.topology``), by label (empty without one); ``table`` the table of ``data.table``
    given from Python, or None. Change a key with :meth:`replace`."""

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
    #: the checked, read-only table of ``data.table`` given from Python
    #: (:class:`~gossipsim.data.tables.Table`), or None; ``raw`` records it by its description
    table: Any = field(default=None, repr=False, compare=False)

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
        graph, table = self.graph, self.table
        for dotted, new in changes.items():
            if not isinstance(dotted, str) or not dotted or any(not p for p in dotted.split(".")):
                raise ConfigError(str(dotted), "must be a dotted key such as topology.nodes")
            if dotted in ("data", TABLE_KEY):
                table = None  # a new table, or a new section (parse_study takes the table out)
            if dotted == TABLE_KEY:
                _set_key(raw, dotted, new)
                continue
            if dotted == "data" and isinstance(new, Mapping) and "table" in new:
                rest = plain_value({k: v for k, v in new.items() if k != "table"}, dotted)
                _set_key(raw, dotted, {**rest, "table": new["table"]})
                continue
            new = plain_value(new, dotted)
            if dotted == "topology" or (
                dotted.startswith("topology.") and isinstance(new, nx.Graph)
            ):
                graph = None  # a new graph object, or a new section, replaces the old graph
            _set_key(raw, dotted, new)
        return parse_study(
            raw, path=self.path, graph=graph, swept_graphs=self.swept_graphs, table=table
        )

    def with_overrides(self, *, runs: int | None = None, seed: int | None = None) -> Study:
        """The same study with ``runs`` and/or ``seed`` replaced (the CLI's --runs and --seed)."""
        changes = {"scenario.runs": runs, "scenario.seed": seed}
        return self.replace({k: v for k, v in changes.items() if v is not None})


def _set_key(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set (or, for None, remove) ``dotted`` in the plain scenario ``raw`` (see Study.replace)."""
    section, _, rest = dotted.partition(".")
    if section not in SECTION_NAMES:
        raise ConfigError(section, f"unknown section; allowed: {', '.join(SECTION_NAMES)}")
    if not isinstance(value, nx.Graph) and dotted != TABLE_KEY:  # a table is taken by parse_study
        value = thaw(value)
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


def parse_study(
    raw: Mapping[str, Any],
    *,
    path: str | None = None,
    graph: Any = None,
    swept_graphs: Mapping[str, Any] | None = None,
    table: Any = None,
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
    as :attr:`Study.swept_graphs` (what :meth:`Study.replace` passes back as ``swept_graphs``).

    From Python, ``data.table`` may be a table for the models that read tables: ``(X, y)`` or a
    pandas DataFrame with the column ``data.label_column`` (:func:`_take_table`), checked and
    copied, kept as :attr:`Study.table` and recorded in ``raw`` by its description (rows, features,
    sha256 of the arrays); ``table`` is that table when ``raw`` already holds the description."""
    raw, table = _take_table(raw, table)
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
                variant_raw, base_dir=base_dir, default_name=default_name, graph=variant_graph,
                table=table,
            )  # fmt: skip
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
    probes = _check_swept_bases(
        raw_dict, variants[0].values, graphs, graph, base_dir, default_name, table
    )
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
        graphs.graphs if graphs is not None else {}, tuple(probes), table,
    )  # fmt: skip


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
    table: Any = None,
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
                probe, base_dir=base_dir, default_name=default_name, graph=probe_graph, table=table
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


def _take_table(raw: Any, table: Any) -> tuple[Any, Any]:
    """``raw`` with a table given from Python at ``data.table`` replaced by its description, and
    that table checked and copied by the model (:meth:`~gossipsim.models.base.Model.given_table`);
    else ``raw`` and the ``table`` given (whose description ``raw`` holds). Taken before anything
    converts the arrays to lists. A sweep over tables is refused."""
    if not isinstance(raw, Mapping):
        return raw, table
    _refuse_swept_table(raw.get("sweep"))
    data = raw.get("data")
    if not isinstance(data, Mapping) or "table" not in data:
        return raw, None
    given = data["table"]
    if isinstance(given, str):  # a description: the table it describes, if any
        return raw, table
    model = raw.get("model")
    kind = model.get("kind") if isinstance(model, Mapping) else None
    model_cls = MODEL_KINDS.get(kind) if isinstance(kind, str) else None
    if model_cls is None:  # parse_scenario names model.kind first
        return {**raw, "data": {**data, "table": TABLE_PLACEHOLDER}}, None
    if not model_cls.reads_tables:
        raise ConfigError(TABLE_KEY, _no_tables(str(kind)))
    table = model_cls.given_table(given, data.get("label_column"))
    return {**raw, "data": {**data, "table": table.description}}, table


#: where ``data.table`` stands while a scenario whose model.kind is wrong is read (never kept)
TABLE_PLACEHOLDER = "in-memory table"


def _no_tables(kind: str) -> str:
    readers = [name for name, cls in MODEL_KINDS.items() if getattr(cls, "reads_tables", False)]
    return (
        f"model {kind!r} does not read tables given from Python; the models that do: "
        f"{', '.join(readers)}"
    )


def _refuse_swept_table(sweep: Any) -> None:
    """A sweep over ``data.table`` (a dimension, nested or dotted, or a case setting it) is one
    line: one study per table."""
    if not isinstance(sweep, Mapping):
        return
    nested = sweep.get("data")
    cases = sweep.get("cases")
    setting = (
        [c for c in cases if isinstance(c, Mapping)] if isinstance(cases, list | tuple) else []
    )
    if (
        TABLE_KEY in sweep
        or (isinstance(nested, Mapping) and "table" in nested)
        or any(
            TABLE_KEY in c or (isinstance(c.get("data"), Mapping) and "table" in c["data"])
            for c in setting
        )
    ):
        raise ConfigError(
            f"sweep.{TABLE_KEY}",
            "a sweep over tables given from Python is not supported: run one study per table "
            "(or write them to files and sweep data.path)",
        )


__all__ = ["Study", "Variant", "load_scenario", "parse_study"]
