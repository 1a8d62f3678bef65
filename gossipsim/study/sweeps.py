"""``[sweep]``: dotted keys and their lists of values, ``[[sweep.cases]]``, graphs given from
Python (``sweep.topology``), and the variants' labels. A sweep's variants are the cartesian product
of its dimensions; each is validated as a whole scenario by :mod:`gossipsim.study.sections`."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from gossipsim.errors import ConfigError
from gossipsim.study.settings import GRAPH_DESCRIPTION, SECTION_NAMES, describe_graph

#: the sweep key whose values may be NetworkX graphs (each replaces the whole ``topology``)
GRAPH_SWEEP_KEY = "topology"


@dataclass(frozen=True)
class GraphSweep:
    """``sweep.topology`` given as NetworkX graphs from Python: one variant per graph.

    ``graphs`` maps each graph's label (the sweep value, the variant's ``topology`` column) to the
    checked, frozen graph; ``described`` maps it to the graph's description, which the study's
    ``raw`` records in its place (:func:`~gossipsim.study.settings.describe_graph`)."""

    graphs: dict[str, nx.Graph]
    described: dict[str, str]


def graph_sweep(
    value: Any,
    check_graph: Callable[[Any, str], nx.Graph],
    known: Mapping[str, nx.Graph] | None = None,
) -> GraphSweep | None:
    """``sweep.topology`` as a sweep over graphs, or None when it is not one (tables, dotted keys).

    It is one when it is a list holding a graph (labels: each graph's ``G.graph["name"]``, else
    ``"graph i"`` by its position from 1) or a mapping label -> graph holding a graph or a graph's
    description (a study's ``raw``; ``known`` gives the graphs by label, as
    :meth:`~gossipsim.study.scenario.Study.replace` passes them). Every entry must then be a graph; each
    is checked and frozen by ``check_graph(graph, key)``
    (:func:`~gossipsim.topology.check_graph_object`). Bad entries, an empty mapping or list, and
    two graphs with one label are one-line errors naming the entry."""
    key = f"sweep.{GRAPH_SWEEP_KEY}"
    if isinstance(value, list | tuple):
        if not any(isinstance(v, nx.Graph) for v in value):
            return None
        labelled: list[tuple[str, Any, str]] = []
        for i, graph in enumerate(value):
            where = f"{key}[{i}]"
            if not isinstance(graph, nx.Graph):
                raise ConfigError(where, _not_a_graph(graph))
            name = graph.graph.get("name")
            label = name if isinstance(name, str) and name.strip() else f"graph {i + 1}"
            labelled.append((label, graph, where))
        seen: dict[str, str] = {}
        for label, _, where in labelled:
            if label in seen:
                raise ConfigError(
                    where,
                    f"has the label {label!r} (its graph['name']), as {seen[label]} has; give "
                    "sweep.topology as a mapping label -> graph",
                )
            seen[label] = where
    elif isinstance(value, Mapping):
        if not value:
            raise ConfigError(key, "is empty; give a list of graphs or a mapping label -> graph")
        if not any(isinstance(v, nx.Graph) or is_graph_description(v) for v in value.values()):
            return None
        labelled = []
        for label, graph in value.items():
            if not isinstance(label, str) or not label.strip():
                raise ConfigError(
                    key, f"labels of graphs must be non-empty strings (got {label!r})"
                )
            labelled.append((label, graph, f"{key}.{label}"))
    else:
        return None
    graphs: dict[str, nx.Graph] = {}
    described: dict[str, str] = {}
    for label, graph, where in labelled:
        if is_graph_description(graph):
            if known is None or label not in known:
                raise ConfigError(
                    where,
                    f"{graph!r} describes a NetworkX graph given from Python, and no such graph "
                    "is given; a scenario file sweeps graph files with topology = "
                    '[{ kind = "graphml", path = "a.graphml" }, ...]',
                )
            graphs[label] = known[label]
            described[label] = graph
            continue
        if not isinstance(graph, nx.Graph):
            raise ConfigError(where, _not_a_graph(graph))
        checked = check_graph(graph, where)
        graphs[label] = checked
        described[label] = describe_graph(checked)
    return GraphSweep(graphs, described)


def _not_a_graph(value: Any) -> str:
    return (
        f"must be a NetworkX graph (got {type(value).__name__}): a sweep over graphs holds "
        "graphs only (sweep other topology keys as dotted keys, e.g. topology.nodes)"
    )


def is_graph_description(value: Any) -> bool:
    """Whether ``value`` is how a study's ``raw`` records a graph object (its description)."""
    return isinstance(value, str) and value.startswith(GRAPH_DESCRIPTION)


def sweep_cases(cases: Any) -> list[tuple[str | None, dict[str, Any]]]:
    """``[[sweep.cases]]``: each table sets several dotted keys together (and may name itself with
    ``label``); the cases form one dimension of the sweep. A case with a label and no key is the
    scenario as it is (a baseline beside the others)."""
    if cases is None:
        return [(None, {})]
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        raise ConfigError(
            "sweep.cases",
            'must be an array of tables: [[sweep.cases]] "protocol.local_iterations" = 10 ...',
        )
    out: list[tuple[str | None, dict[str, Any]]] = []
    for i, case in enumerate(cases):
        case = dict(case)
        label = case.pop("label", None)
        if label is not None and not isinstance(label, str):
            raise ConfigError(f"sweep.cases[{i}].label", "must be a string")
        flat = _flatten_assignments(case, f"sweep.cases[{i}]")
        if not flat and label is None:
            raise ConfigError(
                f"sweep.cases[{i}]",
                "sets no key and has no label; a baseline case (the scenario as it is) needs a "
                'label, e.g. label = "baseline"',
            )
        out.append((label, flat))
    return out


def _flatten_assignments(table: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    sweepable = [s for s in SECTION_NAMES if s not in ("sweep", "unlearning")]
    out: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and "." not in dotted and dotted in sweepable and prefix == "":
            out.update(_flatten_assignments(value, where, dotted + "."))
            continue
        section = dotted.split(".")[0]
        if section not in sweepable or "." not in dotted:
            raise ConfigError(
                f"{where}.{dotted}", f"needs a dotted key into one of: {', '.join(sweepable)}"
            )
        out[dotted] = value
    return out


def flatten_sweep(
    table: Any, prefix: str = "", *, graphs: GraphSweep | None = None
) -> dict[str, list[Any]]:
    """Dotted key -> list of values. A section name whose values are all tables (``topology =
    [{ kind = "ring" }, { kind = "random_regular", degree = 3 }]``) merges each table into the
    section; a sweep over graphs (``graphs``, of ``sweep.topology``) has their labels as values."""
    if not isinstance(table, dict):
        raise ConfigError("sweep", "must be a table of dotted key = [values, ...]")
    sweepable = [s for s in SECTION_NAMES if s not in ("sweep", "unlearning")]
    out: dict[str, list[Any]] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if graphs is not None and dotted == GRAPH_SWEEP_KEY:
            out[dotted] = list(graphs.graphs)
            continue
        if isinstance(value, dict):
            if not value:
                raise ConfigError(f"sweep.{dotted}", "is an empty table: it sweeps nothing")
            out.update(flatten_sweep(value, dotted + "."))
            continue
        if not (isinstance(value, list) and value):
            raise ConfigError(f"sweep.{dotted}", "must be a non-empty list of values")
        section = dotted.split(".")[0]
        if section not in sweepable:
            raise ConfigError(
                f"sweep.{dotted}",
                f"cannot sweep {section!r}; allowed sections: {', '.join(sweepable)}",
            )
        if "." not in dotted and not all(isinstance(v, dict) for v in value):
            raise ConfigError(
                f"sweep.{dotted}",
                "a whole section is swept with a list of tables; otherwise use a dotted key such as topology.kind",
            )
        out[dotted] = value
    return out


def set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    if len(parts) == 1:  # a whole section: merge the table into it
        section = raw.setdefault(parts[0], {})
        if not isinstance(section, dict):
            raise ConfigError(f"sweep.{dotted}", f"[{parts[0]}] is not a table")
        section.update(copy.deepcopy(value))
        return
    node = raw
    for part in parts[:-1]:
        child = node.get(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"sweep.{dotted}", f"{part!r} is not a table")
        # a copy of the table (it may be another variant's, or a frozen case's): set in this
        # variant only
        child = dict(child)
        node[part] = child
        node = child
    node[parts[-1]] = value


def variant_label(values: Mapping[str, Any], name: str) -> str:
    if not values:
        return name
    if len(values) == 1:
        return _show(next(iter(values.values())))
    lasts = [k.split(".")[-1] for k in values]
    names = lasts if len(set(lasts)) == len(lasts) else list(values)
    parts = []
    for key, n, v in zip(values, names, values.values(), strict=True):
        parts.append(_show(v) if "." not in key else f"{n}={_show(v)}")
    return ", ".join(parts)


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else str(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{k}={_show(v)}" for k, v in value.items() if k != "kind")
        if "kind" in value:
            return f"{value['kind']}({inner})" if inner else str(value["kind"])
        return "{" + inner + "}"
    return str(value)
