"""Scenario files: TOML → validated, frozen dataclasses.

Every error is a :class:`~gossipsim.errors.ConfigError` naming the offending key (``links.rate_bps``,
``unlearning[1].node``, ...) and what is allowed. The format is documented in ``docs/scenarios.md``;
:data:`SECTIONS` below is the list of sections and keys, used both for validation and for the docs.

A ``[sweep]`` table maps dotted keys to lists of values; the cartesian product of the lists becomes
the scenario's *variants*, each a complete scenario validated on its own.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from . import budget
from .errors import ConfigError
from .registry import MODEL_KINDS, PROTOCOL_KINDS, import_object
from .scheduling import SCHEDULER_KINDS
from .textfiles import read_text

# section -> key -> one-line description (the scenario reference in docs/scenarios.md follows this)
SECTIONS: dict[str, dict[str, str]] = {
    "scenario": {
        "name": "name of the study, a file name: no / or \\, not . or .. (default: the file name)",
        "description": "free text",
        "seed": "integer seed of everything random (default 0)",
        "runs": "number of independent runs per variant (default 100)",
        "iterations": "slots per run (default 1000)",
        "stop_when_done": "stop a run once converged and every request served (default false)",
    },
    "topology": {
        "kind": "graph kind (see `gossipsim list`)",
        "nodes": "total number of nodes K",
        "path": "graph file for kind edgelist/graphml, relative to the scenario file",
        "*": "kind-specific parameters (see `gossipsim list` and the topology table below)",
    },
    "model": {
        "kind": "beta-bernoulli | gamma-poisson | normal-normal | dirichlet-categorical | "
        "beta-exponential | linear-regression | logistic-regression",
        "family": "regression models: gaussian-full (default) | gaussian-diagonal (logistic only)",
        "prior": "table of prior parameters (see `gossipsim list`)",
        "temperature": "α of eq. (2), > 0 (default 1)",
        "sigma": "normal-normal, linear-regression: known noise standard deviation in [1e-150, 1e150] "
        "(default 1)",
        "categories": "dirichlet-categorical: number of categories (default: length of prior.alpha)",
    },
    "data": {
        "points_per_node": "observations per node: one integer, or a list with one per node (default 100)",
        "path": "CSV file with columns node,x (one observation per row) instead of synthetic data",
        "draw": "once (default: one data set shared by all runs and variants with the same data settings) | per-run",
        "*": "generator parameters: theta, rate, mean, sigma, probs; a scalar or a list with one per node",
        "dataset": "regression models: synthetic | breast_cancer | wine | digits | iris | diabetes",
        "partition": "regression models: iid | dirichlet | labels",
        "concentration": "Dirichlet label-skew concentration β > 0",
        "labels_per_node": "labels partition: classes per node",
        "sizes": "iid partition: equal | random",
        "test_fraction": "held-out fraction in (0, 1) (default 0.2)",
        "features": "synthetic regression data: dimension (default 5)",
        "noise": "synthetic linear data: noise standard deviation",
    },
    "protocol": {
        "kind": "gfvl",
        "retrain_baseline": "also run the retrain-from-scratch baseline on the same walk (default true)",
        "bits_per_entry": "payload bits per natural-parameter entry (default 64)",
        "local_iterations": "non-conjugate models: natural-gradient steps L per visit (default 1)",
        "learning_rate": "non-conjugate models: ρ > 0 (default 0.005)",
        "schedule": "constant (default) | inverse: ρ_i = ρ / (1 + (i − 1)/decay_iterations)",
        "decay_iterations": "τ of the inverse schedule, > 0 (default 1000)",
        "samples": "Monte Carlo samples S >= 1 (default 30)",
        "samples_per": "point (default: S per data point, as the authors' code) | total (S in all, eq. 18)",
        "baseline": "REINFORCE baseline c (default 0)",
        "estimator": "reinforce (default) | reparameterization | exact (where the model has it)",
        "refine_after_unlearning": "keep taking natural-gradient steps after a request (default true)",
    },
    "scheduler": {
        "kind": "metropolis-hastings (default) | simple-random-walk | uniform",
        "start": "uniform (default) | stationary | a node id",
    },
    "compute": {"seconds_per_iteration": "simulated compute time of one slot, >= 0 (default 0)"},
    "links": {
        "rate_bps": "link rate in bit/s, > 0 (default inf: no limit)",
        "latency_s": "one-way link latency in seconds, >= 0 (default 0)",
    },
    "unlearning": {
        "node": "id of the node asking to be forgotten",
        "at_iteration": "the request arrives before this slot (>= 1)",
        "at_time": "or: the request arrives at this simulated time (s, >= 0)",
    },
    "metrics": {
        "tolerance": "KL threshold for convergence and latency, > 0 (default 1e-9)",
        "record_every": "write every n-th slot to metrics.csv (default 1)",
        "excess": "judge convergence and latency by KL − best-in-family KL (default false)",
        "latency_window": "slots the KL must stay within the tolerance for convergence and latency to count: "
        "an integer >= 1, or auto (default: 1 for exact updates, 100 for Monte Carlo gradient estimators)",
        "ece_bins": "bins M of the expected calibration error (default 10)",
    },
    "sweep": {
        "*": "dotted key = [values, ...]; the cartesian product becomes the variants",
        "cases": "[[sweep.cases]] tables of dotted key = value set together (one sweep dimension)",
    },
}


@dataclass(frozen=True)
class RunSettings:
    name: str
    seed: int = 0
    runs: int = 100
    iterations: int = 1000
    stop_when_done: bool = False
    description: str = ""


@dataclass(frozen=True)
class TopologySettings:
    kind: str
    nodes: int | None = None
    path: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelSettings:
    kind: str
    prior: dict[str, Any] = field(default_factory=dict)
    temperature: float = 1.0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DataSettings:
    points_per_node: int | tuple[int, ...] = 100
    path: str | None = None
    draw: str = "once"
    params: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProtocolSettings:
    """``[protocol]``: the kind, the keys every kind has, and the kind's own settings object
    (``options``: e.g. :class:`~gossipsim.protocols.GFVLSettings`), validated by the kind."""

    kind: str = "gfvl"
    retrain_baseline: bool = True
    bits_per_entry: int = 64
    options: Any = field(
        default_factory=lambda: import_object(
            "gossipsim.protocols.gfvl_kind:GFVLSettings", "protocol"
        )()
    )


@dataclass(frozen=True)
class SchedulerSettings:
    kind: str = "metropolis-hastings"
    start: Any = "uniform"


@dataclass(frozen=True)
class LinkSettings:
    rate_bps: float = math.inf
    latency_s: float = 0.0


@dataclass(frozen=True)
class UnlearningSettings:
    node: Any
    at_iteration: int | None = None
    at_time: float | None = None


@dataclass(frozen=True)
class MetricsSettings:
    tolerance: float = 1e-9
    record_every: int = 1
    excess: bool = False
    ece_bins: int = 10
    latency_window: int = 1


@dataclass(frozen=True)
class Scenario:
    """One fully validated scenario (a single variant: no sweep left in it)."""

    run: RunSettings
    topology: TopologySettings
    model: ModelSettings
    data: DataSettings = field(default_factory=DataSettings)
    protocol: ProtocolSettings = field(default_factory=ProtocolSettings)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    compute_seconds: float = 0.0
    links: LinkSettings = field(default_factory=LinkSettings)
    unlearning: tuple[UnlearningSettings, ...] = ()
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    base_dir: str = "."

    def resolved(self) -> dict[str, Any]:
        """The scenario with every default filled in, as plain data (written to summary.json)."""
        out = asdict(self)
        options = self.protocol.options  # the kind's own keys, beside the common ones
        out["protocol"] = {
            "kind": self.protocol.kind,
            "retrain_baseline": self.protocol.retrain_baseline,
            "bits_per_entry": self.protocol.bits_per_entry,
            **(
                asdict(options)
                if is_dataclass(options) and not isinstance(options, type)
                else dict(options or {})
            ),
        }
        out["links"]["rate_bps"] = _jsonable_float(self.links.rate_bps)
        return out


@dataclass(frozen=True)
class Variant:
    """One point of the sweep: its label, the swept values, and the scenario it makes."""

    label: str
    values: dict[str, Any]
    scenario: Scenario


@dataclass(frozen=True)
class Study:
    """A scenario file: its variants (one if there is no sweep) and where it came from."""

    name: str
    path: str | None
    raw: dict[str, Any]
    sweep: dict[str, list[Any]]
    variants: tuple[Variant, ...]

    @property
    def runs(self) -> int:
        return self.variants[0].scenario.run.runs

    @property
    def seed(self) -> int:
        return self.variants[0].scenario.run.seed

    def with_overrides(self, *, runs: int | None = None, seed: int | None = None) -> Study:
        """The same study with ``runs`` and/or ``seed`` replaced (the CLI's --runs and --seed)."""
        raw = copy.deepcopy(self.raw)
        section = raw.setdefault("scenario", {})
        if runs is not None:
            section["runs"] = runs
        if seed is not None:
            section["seed"] = seed
        return parse_study(raw, path=self.path)


def _jsonable_float(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def load_scenario(path: str | os.PathLike[str]) -> Study:
    """Read and validate a scenario file; raises :class:`ConfigError` naming the offending key.

    The file is UTF-8 text (a byte-order mark, as some editors write, is allowed); any other
    encoding, a binary file, invalid TOML or nesting deeper than :data:`MAX_DEPTH` is a one-line
    error saying where."""
    p = Path(path)
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


def check_structure(raw: Mapping[str, Any]) -> None:
    """Refuse values nested deeper than :data:`MAX_DEPTH` and integers outside TOML's 64-bit range,
    naming the key, before anything recurses into the tables or converts an integer to a float."""
    stack: list[tuple[Any, str, int]] = [(raw, "", 0)]
    while stack:
        value, key, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(
                key, f"nests tables or arrays too deeply (at most {MAX_DEPTH} levels)"
            )
        if isinstance(value, Mapping):
            stack += [(v, f"{key}.{k}" if key else str(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            stack += [(v, f"{key}[{i}]", depth + 1) for i, v in enumerate(value)]
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


def parse_study(raw: Mapping[str, Any], *, path: str | None = None) -> Study:
    """Validate a scenario given as nested dicts (what ``tomllib`` returns)."""
    check_structure(raw)
    raw_dict: dict[str, Any] = copy.deepcopy(dict(raw))
    for section in raw_dict:
        if section not in SECTIONS:
            raise ConfigError(section, f"unknown section; allowed: {', '.join(SECTIONS)}")
    sweep_table = raw_dict.pop("sweep", {})
    cases = _sweep_cases(sweep_table.pop("cases", None) if isinstance(sweep_table, dict) else None)
    sweep = _flatten_sweep(sweep_table)
    base_dir = str(Path(path).resolve().parent) if path else os.getcwd()
    default_name = Path(path).stem if path else "scenario"
    keys = list(sweep)
    variants = []
    for case_label, case in cases:
        for combo in itertools.product(*(sweep[k] for k in keys)):
            values = {**case, **dict(zip(keys, combo, strict=True))}
            variant_raw = copy.deepcopy(raw_dict)
            for dotted, value in values.items():
                _set_dotted(variant_raw, dotted, value)
            scenario = parse_scenario(variant_raw, base_dir=base_dir, default_name=default_name)
            swept = dict(zip(keys, combo, strict=True))
            if case_label is not None:
                label = case_label + (", " + _label(swept, "") if swept else "")
            else:
                label = _label(values, scenario.run.name)
            variants.append(Variant(label, values, scenario))
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ConfigError("sweep", "two variants have the same label; sweep values must differ")
    # memory and simulated time, before any graph or data is built (checked again on the built world)
    budget.check_study(v.scenario for v in variants)
    raw_out = dict(raw_dict)
    if sweep or cases != [(None, {})]:
        raw_out["sweep"] = {
            **sweep,
            **(
                {"cases": [{**c, **({"label": lab} if lab else {})} for lab, c in cases]}
                if cases != [(None, {})]
                else {}
            ),
        }
    return Study(variants[0].scenario.run.name, path, raw_out, sweep, tuple(variants))


def _sweep_cases(cases: Any) -> list[tuple[str | None, dict[str, Any]]]:
    """``[[sweep.cases]]``: each table sets several dotted keys together (and may name itself with
    ``label``); the cases form one dimension of the sweep."""
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
        if not flat:
            raise ConfigError(f"sweep.cases[{i}]", "sets no key")
        out.append((label, flat))
    return out


def _flatten_assignments(table: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    sweepable = [s for s in SECTIONS if s not in ("sweep", "unlearning")]
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


def _flatten_sweep(table: Any, prefix: str = "") -> dict[str, list[Any]]:
    """Dotted key -> list of values. A section name whose values are all tables (``topology =
    [{ kind = "ring" }, { kind = "random_regular", degree = 3 }]``) merges each table into the section."""
    if not isinstance(table, dict):
        raise ConfigError("sweep", "must be a table of dotted key = [values, ...]")
    sweepable = [s for s in SECTIONS if s not in ("sweep", "unlearning")]
    out: dict[str, list[Any]] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten_sweep(value, dotted + "."))
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


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    if len(parts) == 1:  # a whole section: merge the table into it
        section = raw.setdefault(parts[0], {})
        if not isinstance(section, dict):
            raise ConfigError(f"sweep.{dotted}", f"[{parts[0]}] is not a table")
        section.update(copy.deepcopy(value))
        return
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"sweep.{dotted}", f"{part!r} is not a table")
        node = child
    node[parts[-1]] = value


def _label(values: Mapping[str, Any], name: str) -> str:
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


# ----------------------------------------------------------------------------- field readers


class _Section:
    """Reads typed values out of one section, naming ``section.key`` in every error."""

    def __init__(self, raw: Mapping[str, Any], name: str, allowed: set[str] | None = None) -> None:
        value = raw.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(name, "must be a table ([" + name + "])")
        self.values = dict(value)
        self.name = name
        if allowed is not None:
            for key in self.values:
                if key not in allowed:
                    raise ConfigError(
                        f"{name}.{key}", f"unknown key; allowed: {', '.join(sorted(allowed))}"
                    )

    def key(self, k: str) -> str:
        return f"{self.name}.{k}"

    def integer(self, k: str, default: int | None, minimum: int | None = None) -> int | None:
        v = self.values.get(k, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(self.key(k), f"must be an integer (got {v!r})")
        if minimum is not None and v < minimum:
            raise ConfigError(self.key(k), f"must be >= {minimum} (got {v})")
        return v

    def number(
        self,
        k: str,
        default: float | None,
        *,
        positive: bool = False,
        nonnegative: bool = False,
        finite: bool = True,
    ) -> float | None:
        v = self.values.get(k, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ConfigError(self.key(k), f"must be a number (got {v!r})")
        v = float(v)
        if math.isnan(v) or (finite and math.isinf(v)):
            raise ConfigError(self.key(k), f"must be a finite number (got {v})")
        if positive and not v > 0:
            raise ConfigError(self.key(k), f"must be > 0 (got {v:g})")
        if nonnegative and not v >= 0:
            raise ConfigError(self.key(k), f"must be >= 0 (got {v:g})")
        return v

    def boolean(self, k: str, default: bool) -> bool:
        v = self.values.get(k, default)
        if not isinstance(v, bool):
            raise ConfigError(self.key(k), f"must be true or false (got {v!r})")
        return v

    def string(
        self, k: str, default: str | None, choices: Mapping[str, Any] | None = None
    ) -> str | None:
        v = self.values.get(k, default)
        if v is None:
            return None
        if not isinstance(v, str):
            raise ConfigError(self.key(k), f"must be a string (got {v!r})")
        if choices is not None and v not in choices:
            raise ConfigError(self.key(k), f"unknown value {v!r}; allowed: {', '.join(choices)}")
        return v


def parse_scenario(
    raw: Mapping[str, Any], *, base_dir: str = ".", default_name: str = "scenario"
) -> Scenario:
    """Validate one variant (no ``[sweep]``) given as nested dicts."""
    for section in raw:
        if section not in SECTIONS or section == "sweep":
            raise ConfigError(
                section,
                f"unknown section; allowed: {', '.join(s for s in SECTIONS if s != 'sweep')}",
            )

    s = _Section(raw, "scenario", set(SECTIONS["scenario"]))
    run = RunSettings(
        name=check_name(str(s.string("name", default_name)), from_file="name" not in s.values),
        seed=_int(s.integer("seed", 0, minimum=0)),
        runs=_int(s.integer("runs", 100, minimum=1)),
        iterations=_int(s.integer("iterations", 1000, minimum=1)),
        stop_when_done=s.boolean("stop_when_done", False),
        description=s.string("description", "") or "",
    )

    t = _Section(raw, "topology")
    if "kind" not in t.values:
        raise ConfigError("topology.kind", "is required (see `gossipsim list` for the kinds)")
    kind = t.string("kind", None)
    params = {k: v for k, v in t.values.items() if k not in ("kind", "nodes", "path")}
    topology = TopologySettings(
        kind=str(kind),
        nodes=t.integer("nodes", None, minimum=2),
        path=t.string("path", None),
        params=params,
    )

    m = _Section(raw, "model")
    model_kind = m.string("kind", None)
    if model_kind is None:
        raise ConfigError("model.kind", f"is required; allowed: {', '.join(MODEL_KINDS)}")
    model_cls = MODEL_KINDS.lookup(model_kind, "model.kind")
    model_allowed = {"kind", "prior", "temperature", *model_cls.model_keys}
    for key in m.values:
        if key not in model_allowed:
            raise ConfigError(
                f"model.{key}",
                f"unknown key for kind {model_kind!r}; allowed: {', '.join(sorted(model_allowed))}",
            )
    prior, options = model_cls.prepare(m.values)
    model = ModelSettings(
        kind=model_kind,
        prior=prior,
        temperature=_float(m.number("temperature", 1.0, positive=True)),
        options=options,
    )

    d = _Section(raw, "data")
    generator_keys = {p.name for p in model_cls.data_params}
    data_allowed = {"points_per_node", "path", "draw", *generator_keys, *model_cls.data_keys}
    for key in d.values:
        if key not in data_allowed:
            raise ConfigError(
                f"data.{key}",
                f"unknown key for model {model_kind!r}; allowed: {', '.join(sorted(data_allowed))}",
            )
    if "path" in d.values and not model_cls.reads_files:
        raise ConfigError("data.path", f"model {model_kind!r} does not read observation files")
    ppn_raw = d.values.get("points_per_node", 100)
    points: int | tuple[int, ...]
    if isinstance(ppn_raw, list):
        for i, v in enumerate(ppn_raw):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(
                    f"data.points_per_node[{i}]", f"must be an integer >= 0 (got {v!r})"
                )
        points = tuple(ppn_raw)
    else:
        points = _int(d.integer("points_per_node", 100, minimum=0))
    data_path = d.string("path", None)
    if data_path is not None and (set(d.values) & (generator_keys | {"points_per_node"})):
        raise ConfigError(
            "data.path",
            "observations come from the file: remove the generator keys and points_per_node",
        )
    data = DataSettings(
        points_per_node=points,
        path=data_path,
        draw=str(d.string("draw", "once", {"once": 1, "per-run": 1})),
        params={k: v for k, v in d.values.items() if k in generator_keys},
        options={k: v for k, v in d.values.items() if k in model_cls.data_keys},
    )

    pr = _Section(raw, "protocol")
    kind_name = str(pr.string("kind", "gfvl"))
    protocol_cls = PROTOCOL_KINDS.lookup(kind_name, "protocol.kind")
    protocol_cls.check_model(model_cls)
    protocol = ProtocolSettings(
        kind=kind_name,
        retrain_baseline=pr.boolean("retrain_baseline", True),
        bits_per_entry=_int(pr.integer("bits_per_entry", 64, minimum=1)),
        options=protocol_cls.settings(pr.values, model_cls),
    )

    sc = _Section(raw, "scheduler", set(SECTIONS["scheduler"]))
    start = sc.values.get("start", "uniform")
    if isinstance(start, bool) or not isinstance(start, int | str):
        raise ConfigError(
            "scheduler.start", f'must be "uniform", "stationary" or a node id (got {start!r})'
        )
    scheduler = SchedulerSettings(
        kind=str(sc.string("kind", "metropolis-hastings", SCHEDULER_KINDS)), start=start
    )

    c = _Section(raw, "compute", set(SECTIONS["compute"]))
    compute = _float(c.number("seconds_per_iteration", 0.0, nonnegative=True))

    ln = _Section(raw, "links", set(SECTIONS["links"]))
    links = LinkSettings(
        rate_bps=_float(ln.number("rate_bps", math.inf, positive=True, finite=False)),
        latency_s=_float(ln.number("latency_s", 0.0, nonnegative=True)),
    )

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
        name = f"unlearning[{i}]"
        u = _Section({name: req}, name, set(SECTIONS["unlearning"]))
        if "node" not in u.values:
            raise ConfigError(f"{name}.node", "is required")
        node = u.values["node"]
        if isinstance(node, bool) or not isinstance(node, int | str):
            raise ConfigError(f"{name}.node", f"must be a node id (got {node!r})")
        has_iter, has_time = "at_iteration" in u.values, "at_time" in u.values
        if has_iter == has_time:
            raise ConfigError(name, "give exactly one of at_iteration and at_time")
        unlearning.append(
            UnlearningSettings(
                node=node,
                at_iteration=u.integer("at_iteration", None, minimum=1),
                at_time=u.number("at_time", None, nonnegative=True),
            )
        )
    seen: dict[Any, int] = {}
    for i, req in enumerate(unlearning):
        if req.node in seen:
            raise ConfigError(
                f"unlearning[{i}].node",
                f"node {req.node!r} is already forgotten by unlearning[{seen[req.node]}]",
            )
        seen[req.node] = i

    me = _Section(raw, "metrics", set(SECTIONS["metrics"]))
    metrics = MetricsSettings(
        tolerance=_float(me.number("tolerance", 1e-9, positive=True)),
        record_every=_int(me.integer("record_every", 1, minimum=1)),
        excess=me.boolean("excess", False),
        ece_bins=_int(me.integer("ece_bins", 10, minimum=1)),
        latency_window=_latency_window(
            me, stochastic=protocol_cls.stochastic(protocol.options, model_cls)
        ),
    )
    return Scenario(
        run=run,
        topology=topology,
        model=model,
        data=data,
        protocol=protocol,
        scheduler=scheduler,
        compute_seconds=compute,
        links=links,
        unlearning=tuple(unlearning),
        metrics=metrics,
        base_dir=base_dir,
    )


#: ``latency_window = "auto"`` for protocols whose steps use Monte Carlo gradient estimates
STOCHASTIC_LATENCY_WINDOW = 100


def _latency_window(section: _Section, *, stochastic: bool) -> int:
    """``[metrics] latency_window``: an integer >= 1, or "auto" (1 for deterministic updates, where
    the KL is a first passage of the state itself; :data:`STOCHASTIC_LATENCY_WINDOW` when the steps
    are noisy, so that a dip of the estimator noise under the tolerance does not count)."""
    value = section.values.get("latency_window", "auto")
    if value == "auto":
        return STOCHASTIC_LATENCY_WINDOW if stochastic else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            section.key("latency_window"), f'must be an integer >= 1 or "auto" (got {value!r})'
        )
    return value


def _int(x: int | None) -> int:
    assert x is not None
    return x


def _float(x: float | None) -> float:
    assert x is not None
    return x
