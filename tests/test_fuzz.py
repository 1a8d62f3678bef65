"""Fuzzing: mutated scenarios, data files and graph files must be rejected in one line or run cleanly.

A deterministic mutation generator (``random.Random`` with a fixed seed, no external state) starts
from small valid scenarios of every model and mutates one or two things at a time: a key of any
section set to a value of the wrong type or outside its domain (zero, negative, huge, tiny, NaN,
infinite, empty, a path, a nested table, ...), an unknown or missing key, a whole section replaced,
a data CSV or an edge list with bad rows, odd headers, byte-order marks or other encodings. For each
case ``gossipsim validate`` and then, if it passes, ``gossipsim run`` (one run, a few slots) must

- exit 0, with tables written (and, for every tenth case, figures drawn) and every KL finite (a
  run whose KL is not a number fails, and exits 1: a defect here); or
- exit 2 with exactly one line on stderr and no results folder;

never an exception (a traceback), exit 1 (a run that fails after validation passed), or a hang (a
per-case time limit). The fast profile runs in ``make test``; ``pytest -m slow`` runs thousands.
"""

from __future__ import annotations

import copy
import math
import random
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gossipsim.cli import main
from gossipsim.registry import MODEL_KINDS, PROTOCOL_KINDS
from gossipsim.settings import SCHEMA
from gossipsim.topology import TOPOLOGY_KINDS
from tests.helpers import to_toml


def _documented_keys() -> dict[str, dict[str, str]]:
    """Section -> key -> its documentation and allowed words: the schema's keys, every model's
    and protocol kind's own keys, and the kinds' names (what the docs list)."""

    def text(key: Any) -> str:
        return " ".join([key.doc, *key.choices, *key.words])

    out = {section: {k.name: text(k) for k in keys} for section, keys in SCHEMA.items()}
    out["model"]["kind"] += " " + " ".join(MODEL_KINDS)
    out["topology"]["kind"] += " " + " ".join(TOPOLOGY_KINDS)
    for model in MODEL_KINDS.values():
        out["model"].update({k.name: text(k) for k in model.model_keys})
        out["data"].update({k.name: text(k) for k in model.data_keys})
        out["data"].update({p.name: p.description for p in model.data_params})
    for kind in PROTOCOL_KINDS.values():
        out["protocol"].update({k.name: text(k) for k in kind.keys})
    return out


SECTIONS = _documented_keys()
FAST_CASES = 300
SLOW_CASES = 3000
#: cases drawing their figures too (a case's figures cost twice its run): one in FAST_PLOTS_EVERY
#: in the fast profile, one in SLOW_PLOTS_EVERY in the long one
FAST_PLOTS_EVERY = 30
SLOW_PLOTS_EVERY = 10
TIME_LIMIT_S = 30
SEED = 20261126

THETAS = [{"beta": [11 - i, i]} for i in range(1, 5)]

BASES: dict[str, dict[str, Any]] = {
    "beta-bernoulli": {
        "scenario": {"name": "f", "seed": 1, "runs": 1, "iterations": 30},
        "topology": {"kind": "complete", "nodes": 5},
        "model": {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 10, "theta": 0.7},
        "unlearning": [{"node": 1, "at_iteration": 20}],
        "metrics": {"tolerance": 1e-9},
    },
    "gamma-poisson": {
        "scenario": {"name": "f", "seed": 2, "runs": 1, "iterations": 30},
        "topology": {"kind": "ring", "nodes": 6},
        "model": {"kind": "gamma-poisson", "prior": {"shape": 2, "rate": 1}},
        "data": {"points_per_node": 5, "mean": 3.0},
        "links": {"rate_bps": 1e6, "latency_s": 0.01},
        "compute": {"seconds_per_iteration": 0.001},
    },
    "normal-normal": {
        "scenario": {"name": "f", "seed": 3, "runs": 1, "iterations": 30},
        "topology": {"kind": "star", "nodes": 5},
        "model": {"kind": "normal-normal", "prior": {"mean": 0, "variance": 4}, "sigma": 1.5},
        "data": {"points_per_node": 5, "mean": 1.0},
        "scheduler": {"kind": "simple-random-walk", "start": "stationary"},
    },
    "dirichlet-categorical": {
        "scenario": {"name": "f", "seed": 4, "runs": 1, "iterations": 30},
        "topology": {"kind": "grid", "rows": 2, "cols": 3},
        "model": {"kind": "dirichlet-categorical", "prior": {"alpha": [1, 2, 3]}},
        "data": {"points_per_node": 5, "probs": [0.2, 0.3, 0.5]},
    },
    "beta-exponential": {
        "scenario": {"name": "f", "seed": 5, "runs": 1, "iterations": 30},
        "topology": {"kind": "complete", "nodes": 4},
        "model": {"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 4, "theta": THETAS},
        "protocol": {"learning_rate": 0.01, "samples": 3},
        "unlearning": [{"node": 3, "at_iteration": 15}],
        "metrics": {"tolerance": 0.1, "excess": True},
    },
    "logistic-regression": {
        "scenario": {"name": "f", "seed": 6, "runs": 1, "iterations": 30},
        "topology": {"kind": "erdos_renyi", "nodes": 6, "p": 0.8},
        "model": {
            "kind": "logistic-regression",
            "family": "gaussian-diagonal",
            "prior": {"mean": 0, "variance": 1},
        },
        "data": {"dataset": "synthetic", "features": 3, "points_per_node": 6},
        "protocol": {"estimator": "reparameterization", "samples": 2, "learning_rate": 0.1},
    },
    "linear-regression": {
        "scenario": {"name": "f", "seed": 7, "runs": 1, "iterations": 30},
        "topology": {"kind": "random_regular", "nodes": 6, "degree": 3},
        "model": {"kind": "linear-regression", "sigma": 1.0, "prior": {"mean": 0, "variance": 2}},
        "data": {"dataset": "synthetic", "features": 3, "points_per_node": 5},
        "unlearning": [{"node": 2, "at_time": 0.0}],
    },
}

WEIRD_VALUES: list[Any] = [
    0, -1, 1, 2, 3, 7, 2**31, 2**62, -(2**62), 10**30, 0.0, -0.5, 0.5, 1.0, 1.5, 1e-300, 1e-320,
    1e300, 1e308, -1e308, math.nan, math.inf, -math.inf, True, False, "", "x", "../../x", "/abs",
    "metropolis-hastings", "uniform", "gaussian-full", "iid", "é", "a" * 300, [], [1], [0.5, 0.5],
    [1, 2, 3], [[1, 2]], [-1, 2], ["a", 1], {}, {"a": 1}, {"beta": [1, 1]}, {"beta": [0, 1]},
]  # fmt: skip

CSV_ROWS = [
    "0,1", "1,0", "2,1", "0,0", "1,1", "3,1", "4,0",  # fine rows for beta-bernoulli nodes 0..4
]  # fmt: skip
CSV_MUTATIONS = [
    "9,1", "0,2", "0,-1", "0,nan", "0,inf", "0,1e400", "0,", ",1", "0,1,5", "a,1", "0,x", "",
    "1.5,1", "-1,0", "0, 1", "0;1", "99999999999999999999999,1", "0,1e20", "0,0.5",
]  # fmt: skip
CSV_HEADERS = ["node,x", "node,x,x", "x,node", "node", "", "node,y", "\ufeffnode,x", "Node,X"]

EDGE_LINES = ["0 1", "1 2", "2 3", "3 4", "4 0", "0 2"]
EDGE_MUTATIONS = [
    "0 0", "0 1", "0", "0 1 2", "0 1 {'weight': 3}", "a b", "18446744073709551616 0",
    "-1 2", "1.5 2", "# comment", "", "5 6", "0 1 x y", "\x00 1",
]  # fmt: skip


@dataclass
class Case:
    description: str
    raw: dict[str, Any]
    files: dict[str, bytes]


def _keys_of(raw: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(section, key) pairs to mutate: the base's own keys, every documented key of every section,
    and whole sections (key None)."""
    pairs: list[tuple[str, str | None]] = []
    for section, table in raw.items():
        if isinstance(table, dict):
            pairs += [(section, k) for k in table]
    for section, keys in SECTIONS.items():
        if section == "sweep":
            continue
        pairs += [(section, k) for k in keys if k != "*"]
        pairs.append((section, None))
    return pairs


#: words of the documented values (``SECTIONS`` descriptions), for plausible string mutations
WORDS = sorted(
    {
        w.strip("`(),:;.'\"")
        for keys in SECTIONS.values()
        for text in keys.values()
        for w in text.replace("|", " ").split()
        if w.strip("`(),:;.'\"").replace("-", "").replace("_", "").isalpha()
    }
)


def _plausible(rng: random.Random, current: Any) -> Any:
    """A value of the same type near the current one, or a documented word: these keep many cases
    valid, so that runs (not only validation) are exercised."""
    if isinstance(current, bool):
        return not current
    if isinstance(current, int):
        return rng.choice([0, 1, 2, 3, current + 1, max(current - 1, 0), current * 2, 1000])
    if isinstance(current, float):
        return rng.choice([current * 10, current / 10, 1e-6, 0.999, 1.0, 2.0 * current + 0.1])
    if isinstance(current, str):
        return rng.choice(WORDS)
    if isinstance(current, list) and current:
        return [_plausible(rng, x) for x in current]
    if isinstance(current, dict):
        return {k: _plausible(rng, v) for k, v in current.items()}
    return rng.choice([1, 0.5, "x"])


def _mutate_value(rng: random.Random, raw: dict[str, Any], section: str, key: str | None) -> str:
    table = raw.get(section)
    current = table.get(key) if isinstance(table, dict) and key is not None else None
    if current is not None and rng.random() < 0.5:
        value = _plausible(rng, current)
    else:
        value = copy.deepcopy(rng.choice(WEIRD_VALUES))
    if section == "unlearning":
        requests = raw.setdefault("unlearning", [{"node": 0, "at_iteration": 5}])
        if not isinstance(requests, list) or not requests:
            raw["unlearning"] = requests = [{"node": 0, "at_iteration": 5}]
        target = requests[0] if isinstance(requests[0], dict) else {}
        if key is None:
            raw["unlearning"] = value
            return f"unlearning = {value!r}"
        target[key] = value
        return f"unlearning[0].{key} = {value!r}"
    if key is None:
        raw[section] = value
        return f"[{section}] = {value!r}"
    table = raw.setdefault(section, {})
    if not isinstance(table, dict):
        raw[section] = table = {}
    table[key] = value
    return f"{section}.{key} = {value!r}"


def _other_mutation(rng: random.Random, raw: dict[str, Any]) -> str:
    choice = rng.randrange(5)
    sections = [s for s, t in raw.items() if isinstance(t, dict) and t]
    if choice == 0 and sections:  # delete a key
        section = rng.choice(sections)
        key = rng.choice(list(raw[section]))
        del raw[section][key]
        return f"delete {section}.{key}"
    if choice == 1:  # an unknown key
        section = rng.choice([*sections, "scenario"])
        raw.setdefault(section, {})["bogus_key"] = 1
        return f"{section}.bogus_key = 1"
    if choice == 2:  # an unknown section
        raw["bogus"] = {"a": 1}
        return "[bogus]"
    if choice == 3:  # a sweep over a key with a weird value
        section, key = rng.choice([(s, k) for s, k in _keys_of(raw) if k is not None])
        value = copy.deepcopy(rng.choice(WEIRD_VALUES))
        raw["sweep"] = {f"{section}.{key}": [value]}
        return f"sweep {section}.{key} = [{value!r}]"
    # the topology kind swapped for another with the base's parameters
    kind = rng.choice(["star", "ring", "path", "karate", "florentine", "watts_strogatz", "barabasi_albert", "grid", "erdos_renyi", "random_geometric", "lattice", "nope"])  # fmt: skip
    raw.setdefault("topology", {})["kind"] = kind
    return f"topology.kind = {kind!r}"


def _csv_case(rng: random.Random) -> Case:
    raw = copy.deepcopy(BASES["beta-bernoulli"])
    raw["data"] = {"path": "obs.csv"}
    rows = list(CSV_ROWS)
    header = "node,x"
    what = []
    for _ in range(rng.randrange(1, 3)):
        if rng.random() < 0.3:
            header = rng.choice(CSV_HEADERS)
            what.append(f"header {header!r}")
        else:
            bad = rng.choice(CSV_MUTATIONS)
            rows.insert(rng.randrange(len(rows) + 1), bad)
            what.append(f"row {bad!r}")
    text = "\n".join([header, *rows]) + "\n"
    encoding = rng.choice(["utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1"])
    what.append(encoding)
    return Case("data CSV: " + ", ".join(what), raw, {"obs.csv": text.encode(encoding, "replace")})


def _edgelist_case(rng: random.Random) -> Case:
    raw = copy.deepcopy(BASES["beta-bernoulli"])
    raw["topology"] = {"kind": "edgelist", "path": "g.edgelist"}
    raw["unlearning"] = [{"node": 1, "at_iteration": 20}]
    lines = list(EDGE_LINES)
    bad = rng.choice(EDGE_MUTATIONS)
    lines.insert(rng.randrange(len(lines) + 1), bad)
    encoding = rng.choice(["utf-8", "utf-8", "utf-8-sig", "utf-16"])
    text = "\n".join(lines) + "\n"
    return Case(
        f"edge list: line {bad!r}, {encoding}",
        raw,
        {"g.edgelist": text.encode(encoding, "replace")},
    )


def _scenario_bytes_case(rng: random.Random) -> Case:
    """A scenario file that is not plain UTF-8 TOML (written as bytes under key ``@scenario``)."""
    text = to_toml(BASES["beta-bernoulli"])
    variants = {
        "latin-1 comment": ("# é\n" + text).encode("latin-1"),
        "utf-16": text.encode("utf-16"),
        "utf-8 BOM": text.encode("utf-8-sig"),
        "binary": bytes(range(256)),
        "deep inline table": (
            text + "[sweep]\nx = " + "{a = " * 500 + "1" + "}" * 500 + "\n"
        ).encode(),
        "truncated": text.encode()[: len(text) // 2],
    }
    name = rng.choice(sorted(variants))
    return Case(f"scenario file: {name}", {}, {"@scenario": variants[name]})


def generate(count: int, seed: int = SEED) -> Iterator[Case]:
    """``count`` cases from a fixed seed (the same cases on every machine)."""
    rng = random.Random(seed)
    names = sorted(BASES)
    for _ in range(count):
        kind = rng.random()
        if kind < 0.08:
            yield _csv_case(rng)
            continue
        if kind < 0.14:
            yield _edgelist_case(rng)
            continue
        if kind < 0.155:
            yield _scenario_bytes_case(rng)
            continue
        base = rng.choice(names)
        raw = copy.deepcopy(BASES[base])
        what = []
        for _ in range(rng.choice([1, 1, 1, 2])):
            if rng.random() < 0.8:
                section, key = rng.choice(_keys_of(raw))
                what.append(_mutate_value(rng, raw, section, key))
            else:
                what.append(_other_mutation(rng, raw))
        yield Case(f"{base}: " + "; ".join(what), raw, {})


class CaseTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, int | float):
        return repr(v)  # inf, -inf and floats are valid TOML as repr writes them
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml_value(x)}' for k, x in v.items()) + " }"
    raise TypeError(v)


def fuzz_toml(raw: dict[str, Any]) -> str:
    """TOML for any mutated scenario: sections that are not tables (or arrays of tables) become
    top-level keys, written before every table header as TOML requires."""
    lines: list[str] = []
    tables: list[str] = []
    for section, table in raw.items():
        if isinstance(table, dict):
            tables.append(f"[{section}]")
            tables += [f'"{k}" = {_toml_value(v)}' for k, v in table.items()]
        elif isinstance(table, list) and table and all(isinstance(x, dict) for x in table):
            for item in table:
                tables.append(f"[[{section}]]")
                tables += [f'"{k}" = {_toml_value(v)}' for k, v in item.items()]
        else:
            lines.append(f'"{section}" = {_toml_value(table)}')
    return "\n".join(lines + tables) + "\n"


def _write_case(case: Case, folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, data in case.files.items():
        if name != "@scenario":
            (folder / name).write_bytes(data)
    path = folder / "s.toml"
    if "@scenario" in case.files:
        path.write_bytes(case.files["@scenario"])
    else:
        path.write_text(fuzz_toml(case.raw), encoding="utf-8")
    return path


def _bounded(raw: dict[str, Any]) -> bool:
    """Whether a validated scenario is small enough to run as a fuzz case (the generator may make
    valid but long studies: those are validated only)."""
    sc = raw.get("scenario", {})
    if not isinstance(sc, dict):
        return False
    iterations = sc.get("iterations", 1000)
    runs = sc.get("runs", 100)
    nodes = (
        raw.get("topology", {}).get("nodes", 10) if isinstance(raw.get("topology"), dict) else 10
    )
    points = (
        raw.get("data", {}).get("points_per_node", 10) if isinstance(raw.get("data"), dict) else 10
    )
    small = all(isinstance(v, int) and not isinstance(v, bool) for v in (iterations, runs))
    small = small and iterations <= 200 and runs <= 3
    small = small and (not isinstance(nodes, int) or nodes <= 200)
    return small and (not isinstance(points, int) or points <= 1000)


def check_case(case: Case, folder: Path, capsys: Any, *, plots: bool = False) -> str:
    """Run one case; return "rejected", "accepted" or "validated only"; raise AssertionError naming
    the case on a defect."""
    path = _write_case(case, folder)
    out = folder / "results"

    def call(argv: list[str]) -> tuple[int, str]:
        capsys.readouterr()
        try:
            with time_limit(TIME_LIMIT_S):
                code = main(argv)
        except (Exception, CaseTimeout) as exc:  # a traceback: always a defect
            raise AssertionError(f"{case.description}: {type(exc).__name__}: {exc}") from exc
        return code, capsys.readouterr().err

    code, err = call(["validate", str(path)])
    lines = [line for line in err.splitlines() if line.strip()]
    if code == 2:
        assert len(lines) == 1, f"{case.description}: rejection is not one line: {err!r}"
        return "rejected"
    assert code == 0, f"{case.description}: validate exit {code}: {err!r}"
    if not _bounded(case.raw) or "@scenario" in case.files:
        return "validated only"
    argv = ["run", str(path), "--out", str(out), "--runs", "1"] + ([] if plots else ["--no-plots"])
    code, err = call(argv)
    # a check at run time (memory for the study, say) may still refuse: one line, no folder
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, f"{case.description}: run rejection is not one line: {err!r}"
        assert not out.exists(), f"{case.description}: a rejected run left {out}"
        return "rejected"
    assert code == 0, f"{case.description}: validate passed but run exited {code}: {err!r}"
    metrics = pd.read_csv(out / "metrics.csv")
    kl = metrics["kl"].to_numpy(dtype=float)
    assert not pd.isna(kl).any() and (abs(kl) < math.inf).all(), f"{case.description}: KL {kl}"
    return "accepted"


def _fuzz(count: int, tmp_path: Path, capsys: Any, plots_every: int) -> Counter[str]:
    outcomes: Counter[str] = Counter()
    for i, case in enumerate(generate(count)):
        plots = i % plots_every == 0
        outcomes[check_case(case, tmp_path / f"c{i:05d}", capsys, plots=plots)] += 1
    return outcomes


def test_fuzz_fast_profile(tmp_path, capsys):
    outcomes = _fuzz(FAST_CASES, tmp_path, capsys, FAST_PLOTS_EVERY)
    assert sum(outcomes.values()) == FAST_CASES
    # the generator must exercise both sides: clean rejections and accepted runs
    assert outcomes["rejected"] >= FAST_CASES // 4 and outcomes["accepted"] >= 10, outcomes
    print(dict(outcomes))


@pytest.mark.slow
def test_fuzz_long_profile(tmp_path, capsys):
    outcomes = _fuzz(SLOW_CASES, tmp_path, capsys, SLOW_PLOTS_EVERY)
    assert sum(outcomes.values()) == SLOW_CASES
    print(dict(outcomes))


def test_generator_is_deterministic():
    first = [c.description for c in generate(50)]
    assert first == [c.description for c in generate(50)]
    assert len(set(first)) > 40
