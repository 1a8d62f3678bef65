"""The registry of topology kinds: what each ``[topology] kind`` is, which keys it takes, its builder.

A kind is one :class:`TopologyKind` record in :data:`TOPOLOGY_KINDS`, added by :func:`register`
(the shipped kinds are registered in :mod:`gossipsim.topology.kinds`, one call each). Each of its
keys is one :class:`ParamSpec`: type, default, allowed values and one line of documentation, stated
once and used for checking a scenario (:func:`validate`), for ``gossipsim list`` and the CLI's
``--param``, and for the reference table of ``docs/scenarios.md`` (:func:`reference_table`, which a
test compares with the document).

Examples
--------
A new kind is a builder ``(nodes, <params>..., [seed]) -> networkx.Graph`` and one call:

>>> import networkx as nx
>>> kind = register(
...     "wheel", nx.wheel_graph, "hub 0 linked to a cycle 1..K-1", size=lambda n: (n, 2 * n - 2)
... )
>>> from gossipsim.topology import build_topology
>>> build_topology("wheel", 6).degree[0]
5
>>> unregister("wheel") is kind
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from gossipsim.errors import ConfigError

__all__ = [
    "NODES_RULES",
    "TOPOLOGY_KINDS",
    "ParamSpec",
    "TopologyKind",
    "TopologySpec",
    "reference_table",
    "register",
    "unregister",
    "validate",
]

#: how a kind uses ``nodes``: ``required`` (the builder's first argument), ``optional`` (passed as
#: None when absent; the builder derives the size from its parameters, as the grid does) or
#: ``fixed`` (the graph brings its own nodes: the builder does not take it, and a given ``nodes``
#: must equal the built graph's node count)
NODES_RULES = ("required", "optional", "fixed")

_TYPE_WORDS = {int: "integer", float: "number", str: "string"}


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a topology kind: its type, default, allowed values and documentation.

    Attributes
    ----------
    name : str
        Key under ``[topology]`` (errors name it as ``topology.<name>``); also the keyword argument
        of the kind's builder.
    type : type
        ``int``, ``float`` or ``str`` (an int is accepted where a float is expected; bools never).
    description : str
        One line for help texts and the documentation.
    default : object or None
        Value used when the key is absent; ``None`` means there is no default: the key is required
        unless ``optional``.
    check : str
        The allowed values, as shown in error messages, e.g. ``"0 <= p <= 1"``; for numbers with
        bounds it is derived from them when not given.
    low, high : float or None
        The allowed interval [low, high] of a number (checked when the scenario is read), with
        ``low`` excluded when ``low_open``. Ranges that depend on ``nodes`` are checked by the
        builder (:class:`~gossipsim.topology.checks.OutOfRange`) and stated in ``check``.
    low_open : bool
        Whether ``low`` itself is excluded.
    optional : bool
        Whether the key may be absent without a default (the builder then gets no value for it and
        derives one, as the grid's ``rows`` and ``cols`` from ``nodes``).

    Examples
    --------
    >>> TOPOLOGY_KINDS["erdos_renyi"].params["p"].check
    '0 <= p <= 1'
    >>> ParamSpec("radius", float, "connection distance", low=0.0, low_open=True).check
    'radius > 0'
    """

    name: str
    type: type
    description: str
    default: object | None = None
    check: str = ""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    optional: bool = False

    def __post_init__(self) -> None:
        if self.type not in _TYPE_WORDS:
            raise ValueError(f"parameter {self.name!r}: type must be int, float or str")
        if not self.check:
            object.__setattr__(self, "check", self._bounds_text())
        if not self.check:
            raise ValueError(f"parameter {self.name!r}: say which values are allowed (check=...)")

    def _bounds_text(self) -> str:
        low, high = self.low, self.high
        if low is not None and high is not None:
            return f"{low:g} {'<' if self.low_open else '<='} {self.name} <= {high:g}"
        if low is not None:
            return f"{self.name} {'>' if self.low_open else '>='} {low:g}"
        if high is not None:
            return f"{self.name} <= {high:g}"
        return ""

    def value(self, value: object) -> int | float | str:
        """``value`` checked against the type and bounds, converted (int, float or str).

        Raises
        ------
        ConfigError
            Naming ``topology.<name>`` and the allowed values.
        """
        key = f"topology.{self.name}"
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ConfigError(key, f"must be an integer, got {value!r}; allowed: {self.check}")
            if not self._within(int(value)):
                raise ConfigError(key, f"must be {self.check}, got {value!r}")
            return int(value)
        if self.type is float:
            if isinstance(value, bool) or not isinstance(
                value, int | float | np.integer | np.floating
            ):
                raise ConfigError(key, f"must be a number, got {value!r}; allowed: {self.check}")
            x = float(value)
            if not math.isfinite(x):
                raise ConfigError(
                    key, f"must be a finite number, got {value!r}; allowed: {self.check}"
                )
            if not self._within(x):
                raise ConfigError(key, f"must be {self.check}, got {value!r}")
            return x
        if not isinstance(value, str | os.PathLike):
            raise ConfigError(key, f"must be a string, got {value!r}; allowed: {self.check}")
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    def _within(self, x: float) -> bool:
        below = self.low is not None and (x <= self.low if self.low_open else x < self.low)
        return not below and not (self.high is not None and x > self.high)

    def reference(self) -> str:
        """The parameter as the documentation's table shows it (one line of Markdown)."""
        if self.default is not None:
            need = f"default {self.default}"
        else:
            need = "optional" if self.optional else "required"
        return (
            f"`{self.name}` ({_TYPE_WORDS[self.type]}, {need}): {self.description}; "
            f"allowed: {self.check}"
        )


@dataclass(frozen=True)
class TopologyKind:
    """What a topology kind is, which keys it takes and how it is built.

    Attributes
    ----------
    name : str
        The ``kind`` string.
    description : str
        One line for help texts and the documentation.
    build : callable
        The builder, called with keyword arguments named as the parameters: ``build(nodes,
        **params)`` (``nodes`` an int, or None for ``nodes="optional"``), ``build(**params)`` for
        ``nodes="fixed"``; plus ``seed=<int>`` for random kinds; ``path`` is a resolved
        :class:`~pathlib.Path` for file kinds. Returns a :class:`networkx.Graph` (checked
        afterwards: self-loops dropped, connected, at least 2 nodes).
    params : dict of str to ParamSpec
        Kind-specific parameters (``nodes`` is not listed here; see ``nodes``).
    nodes : str
        One of :data:`NODES_RULES`.
    random : bool
        Whether the graph is drawn from the seed (the builder takes ``seed``).
    from_file : bool
        Whether the graph is read from ``path`` (resolved against the scenario's folder).
    size : callable or None
        ``size(nodes, **params) -> (nodes, expected edges)`` before building, for the memory check
        (:mod:`gossipsim.study.budget`); None (or a None result) when known only once built.
    arrays : callable or None
        ``arrays(nodes, **params, seed=<int>) -> (u, v)``: the same graph's edges drawn straight
        into arrays (:mod:`gossipsim.topology.arrays`), used by
        :func:`~gossipsim.topology.build_indexed` instead of ``build``.

    Examples
    --------
    >>> spec = TOPOLOGY_KINDS["random_regular"]
    >>> spec.random, spec.needs_nodes, list(spec.params)
    (True, True, ['degree'])
    """

    name: str
    description: str
    build: Callable[..., nx.Graph]
    params: dict[str, ParamSpec]
    nodes: str = "required"
    random: bool = False
    from_file: bool = False
    size: Callable[..., tuple[int, float] | None] | None = None
    arrays: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None

    @property
    def needs_nodes(self) -> bool:
        """Whether ``nodes`` is required (it is optional for grids given ``rows`` and ``cols``,
        and for bundled and file graphs, where it is only checked against the real node count)."""
        return self.nodes == "required"

    def reference(self) -> str:
        """The kind's row of the documentation's table (Markdown)."""
        graph = self.description + ("; drawn from the seed" if self.random else "")
        nodes = {
            "required": "required",
            "optional": "optional",
            "fixed": "optional; checked against the " + ("file" if self.from_file else "graph"),
        }[self.nodes]
        params = "<br>".join(p.reference() for p in self.params.values()) or "none"
        cells = [f"`{self.name}`", graph, nodes, params]
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


#: the former name of :class:`TopologyKind`
TopologySpec = TopologyKind

TOPOLOGY_KINDS: dict[str, TopologyKind] = {}
"""All topology kinds, in documentation order: kind name -> :class:`TopologyKind`."""

_RESERVED = ("kind", "nodes")


def register(
    name: str,
    build: Callable[..., nx.Graph],
    description: str,
    *params: ParamSpec,
    nodes: str = "required",
    random: bool = False,
    from_file: bool = False,
    size: Callable[..., tuple[int, float] | None] | None = None,
    arrays: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None,
) -> TopologyKind:
    """Add a topology kind: usable at once in scenarios, the Python API and the CLI.

    Parameters
    ----------
    name : str
        The ``kind`` string (not already registered).
    build : callable
        The builder (see :attr:`TopologyKind.build`).
    description : str
        One line for ``gossipsim list`` and the documentation.
    *params : ParamSpec
        The kind's parameters, in the order they are documented.
    nodes, random, from_file, size, arrays
        See :class:`TopologyKind`.

    Returns
    -------
    TopologyKind
        The record, also in :data:`TOPOLOGY_KINDS`.

    Raises
    ------
    ValueError
        For a name already registered or an inconsistent record.

    Notes
    -----
    Worker processes see a kind registered at run time when they are forked (the default on
    Linux); with other start methods register it in a module the workers import.
    """
    if not isinstance(name, str) or not name or name in TOPOLOGY_KINDS:
        raise ValueError(f"topology kind {name!r} is already registered or not a name")
    if nodes not in NODES_RULES:
        raise ValueError(f"topology kind {name!r}: nodes must be one of {', '.join(NODES_RULES)}")
    names = [p.name for p in params]
    if len(set(names)) != len(names) or set(names) & set(_RESERVED):
        raise ValueError(f"topology kind {name!r}: parameter names must be unique, not kind/nodes")
    if from_file != ("path" in names) or (from_file and nodes != "fixed"):
        raise ValueError(f"topology kind {name!r}: a file kind has a path and nodes='fixed'")
    if arrays is not None and (nodes != "required" or not random):
        raise ValueError(f"topology kind {name!r}: arrays are for random kinds that need nodes")
    kind = TopologyKind(
        name=name,
        description=description,
        build=build,
        params={p.name: p for p in params},
        nodes=nodes,
        random=random,
        from_file=from_file,
        size=size,
        arrays=arrays,
    )
    TOPOLOGY_KINDS[name] = kind
    return kind


def unregister(name: str) -> TopologyKind:
    """Remove a kind added by :func:`register` and return its record (KeyError if unknown)."""
    return TOPOLOGY_KINDS.pop(name)


def validate(
    kind: str,
    nodes: int | None,
    params: Mapping[str, object] | None,
    path: str | os.PathLike[str] | None,
) -> tuple[TopologyKind, int | None, dict[str, Any]]:
    """The kind's record, the node count and the parameter values, checked (one-line errors).

    Parameters are checked against their :class:`ParamSpec` (type, bounds; defaults filled in);
    ranges that depend on ``nodes`` are the builder's to check.

    Raises
    ------
    ConfigError
        Naming ``topology.kind``, ``topology.nodes``, ``topology.path`` or ``topology.<param>``.
    """
    spec = TOPOLOGY_KINDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise ConfigError(
            "topology.kind", f"unknown topology {kind!r}; allowed: {', '.join(TOPOLOGY_KINDS)}"
        )
    given: dict[str, Any] = dict(params or {})
    for name in given:
        if name not in spec.params:
            allowed = ", ".join(["nodes", *spec.params])
            raise ConfigError(
                f"topology.{name}",
                f"unknown parameter {name!r} for topology {kind!r}; allowed: {allowed}",
            )
    if path is not None:
        if not spec.from_file:
            files = ", ".join(k for k, s in TOPOLOGY_KINDS.items() if s.from_file)
            raise ConfigError(
                "topology.path", f"a file is only read for kinds {files}, not {kind!r}"
            )
        if "path" in given and str(given["path"]) != os.fspath(path):
            raise ConfigError("topology.path", f"given twice: {given['path']!r} and {path!r}")
        given["path"] = path
    n = None if nodes is None else _check_nodes(nodes)
    if spec.needs_nodes and n is None:
        raise ConfigError("topology.nodes", f"topology {kind!r} needs nodes (an integer >= 2)")
    values: dict[str, Any] = {}
    for name, ps in spec.params.items():
        if name in given:
            values[name] = ps.value(given[name])
        elif ps.default is not None:
            values[name] = ps.default
        elif not ps.optional:
            raise ConfigError(f"topology.{name}", f"topology {kind!r} needs {name} ({ps.check})")
    return spec, n, values


def _check_nodes(nodes: object) -> int:
    if isinstance(nodes, bool) or not isinstance(nodes, int | np.integer):
        raise ConfigError("topology.nodes", f"must be an integer >= 2, got {nodes!r}")
    if nodes < 2:
        raise ConfigError("topology.nodes", f"must be an integer >= 2, got {nodes}")
    return int(nodes)


def reference_table() -> str:
    """The Markdown table of every kind and its keys, as ``docs/scenarios.md`` shows it.

    Generated from :data:`TOPOLOGY_KINDS`, so the documentation states what the checks do (a test
    compares it with the document).

    Examples
    --------
    >>> print(reference_table().splitlines()[2])
    | `complete` | every pair of nodes is connected | required | none |
    """
    lines = ["| kind | graph | `nodes` | parameters |", "|---|---|---|---|"]
    lines += [spec.reference() for spec in TOPOLOGY_KINDS.values()]
    return "\n".join(lines)
