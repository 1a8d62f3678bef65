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

Three classes fuzz the results folder (issue 21): damaged parts of an interrupted sweep (bits
flipped, truncations, garbage, headers edited with their checksum stale or forged to match,
parts renamed, copied, emptied, deleted), damaged tables of a finished one (bits, truncations,
deletions, CSV cells and rows, summary.json keys), and commands run at once on one folder (some
killed). Each outcome is a one-line refusal or report, or tables identical to an uninterrupted
run's: never silently different tables.
"""

from __future__ import annotations

import copy
import json
import math
import os
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

from gossipsim.cli.parser import main
from gossipsim.core.registry import MODEL_KINDS, PROTOCOL_KINDS
from gossipsim.study.settings import SCHEMA
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


# ------------------------------------------------------------------------- the results folder
#
# Three classes more (issue 21): damaged parts of an interrupted sweep, damaged tables of a
# finished one, and commands run at once on one folder. Every outcome must be a one-line refusal
# or report, or tables identical to an uninterrupted run's: never silently different tables,
# never a traceback.

FOLDER_SEED = 20261127
FAST_PART_CASES = 6
SLOW_PART_CASES = 400
FAST_TABLE_CASES = 16
SLOW_TABLE_CASES = 400
SLOW_CONCURRENT_TRIALS = 6


def _folder_study() -> Any:
    import gossipsim as gs
    from tests.folders import sweep_raw

    return gs.parse_study(sweep_raw(runs=6))


@dataclass
class PartTemplate:
    study: Any
    reference: Any  # the uninterrupted run's Results
    folder: Path  # an interrupted sweep: parts of both engines


@pytest.fixture(scope="module")
def part_template(tmp_path_factory) -> PartTemplate:
    import gossipsim as gs
    from gossipsim.execution.runner import build_world
    from gossipsim.execution.vectorized.driver import simulate_runs
    from gossipsim.results.store import RunStore
    from tests.folders import interrupted

    study = _folder_study()
    folder = tmp_path_factory.mktemp("parts") / "R"
    interrupted(study, folder, [(0, [0, 1, 2]), (0, [4]), (1, [1, 3])])
    (batch,) = simulate_runs(build_world(study.variants[1].scenario), [4, 5])
    RunStore(folder, study, resume=True).save(1, batch)  # a batch of the vectorised engine
    return PartTemplate(study, gs.run(study), folder)


def _flip(rng: random.Random, data: bytearray) -> str:
    where = [rng.randrange(len(data)) for _ in range(rng.choice([1, 1, 2, 4]))]
    for i in where:
        data[i] ^= 1 << rng.randrange(8)
    return f"bits flipped at {where}"


WEIRD_HEADER_VALUES: list[Any] = [
    None, -1, -8, 0, 3, 2**62, 2**64, 1.5, "", "x", "<f8", [], [-1], [2**62, 2**62], {}, [None],
]  # fmt: skip
#: dtypes a forged header may name: each refused, or of another itemsize than the array's
FORGED_DTYPES = ["|O", "<f4", "<i4", "|b1", "<U3", "V8", "banana", "<M8[s]", "object:<i8", 5]


def _forge_header(rng: random.Random, header: dict[str, Any]) -> tuple[str, int | None]:
    """A malformed header (item 3's kinds) for a part whose checksum then matches: each must be
    refused; returns what was changed and the header-length field to write (None: its own)."""
    choice = rng.randrange(7)
    arrays = [e for e in header["arrays"] if e[1] != "json"]
    if choice == 0:
        length = rng.choice([2**62, 2**64 - 1, 2**40, 10**9])
        return f"header length {length}", length
    if choice == 1 and arrays:
        entry = rng.choice(arrays)
        size = len(json.dumps(entry[2]))
        entry[2] = rng.choice([[-1], [2**62], [2**31, 2**31], [], [0], [n + 1 for n in entry[2]]])
        return f"shape of {entry[0]} (was {size} long)", None
    if choice == 2 and arrays:
        entry = rng.choice(arrays)
        import numpy as np

        before = np.dtype(entry[1].removeprefix("object:")).itemsize
        options = [
            d
            for d in FORGED_DTYPES
            if not isinstance(d, str)
            or d == "banana"
            or not _same_itemsize(d.removeprefix("object:"), before)
        ]
        entry[1] = rng.choice(options)
        return f"dtype of {entry[0]} -> {entry[1]!r}", None
    if choice == 3 and arrays:
        entry = rng.choice(arrays)
        entry[3] = rng.choice([-8, -16, entry[3] + 1, entry[3] + 8, 2**62, None, "0"])
        return f"offset of {entry[0]} -> {entry[3]!r}", None
    if choice == 4:
        rows = header["fields"].get("run_rows") or header["fields"].get("failures")
        if rows and isinstance(rows[0], dict):
            rows[0]["seed"] = rng.choice([None, -1, "7", 1.5])
            return f"seed -> {rows[0]['seed']!r}", None
        header["runs"] = rng.choice([[], [header["runs"][0]] * 2, [-1], [10**6], None, "x"])
        return f"runs -> {header['runs']!r}", None
    if choice == 5:
        key = rng.choice(["kind", "fields", "arrays", "failed", "variant"])
        header[key] = rng.choice(WEIRD_HEADER_VALUES)
        return f"{key} -> {header[key]!r}", None
    header["runs"] = list(reversed(header["runs"])) if len(header["runs"]) > 1 else [10**6]
    return f"runs -> {header['runs']!r}", None


def _same_itemsize(dtype: str, size: int) -> bool:
    import numpy as np

    try:
        return np.dtype(dtype).itemsize == size
    except TypeError:
        return False


def _mutate_part(rng: random.Random, folder: Path) -> str:
    """Damage one part of ``folder`` (or its set of parts) the way a disk, a copy or a person
    might: flipped bits, a truncation, garbage appended, a header edited (its checksum stale or,
    as a forgery, matching), a part renamed, copied, emptied or deleted."""
    from tests.folders import forged, parts_of, split

    parts = parts_of(folder)
    part = rng.choice(parts)
    data = bytearray(part.read_bytes())
    kind = rng.randrange(9)
    if kind <= 2:
        what = _flip(rng, data)
    elif kind == 3:
        cut = rng.randrange(len(data))
        data = data[:cut]
        what = f"truncated to {cut} bytes"
    elif kind == 4:
        data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        what = "bytes appended"
    elif kind == 5:  # the header edited in place, its checksum left as it was
        header, arrays = split(bytes(data))
        what = _forge_header(rng, header)[0] + " (checksum stale)"
        text = json.dumps(header).encode()
        data = data[:17] + data[17:49] + len(text).to_bytes(8, "little") + text + arrays
    elif kind == 6:  # a forgery: the checksum matches the malformed header
        header, arrays = split(bytes(data))
        what, length = _forge_header(rng, header)
        data = bytearray(forged(header, arrays, length=length))
        what += " (checksum matching)"
    elif kind == 7:
        other = (
            folder
            / ".gossipsim"
            / "parts"
            / f"v{rng.randrange(3):04d}-r{rng.randrange(8):06d}.part"
        )
        if rng.random() < 0.5:
            part.rename(other)
            return f"{part.name} renamed {other.name}"
        other.write_bytes(bytes(data))
        return f"{part.name} copied to {other.name}"
    else:
        if rng.random() < 0.5:
            part.unlink()
            return f"{part.name} deleted"
        data = bytearray()
        what = "emptied"
    part.write_bytes(bytes(data))
    return f"{part.name}: {what}"


def check_part_case(template: PartTemplate, rng: random.Random, folder: Path) -> str:
    """Damage a copy of the template's folder, then --resume from Python: "refused" (one line),
    "reported" (the damage named in a warning, tables identical) or "identical"; raise an
    AssertionError on a traceback or tables that differ from the uninterrupted run's."""
    import shutil
    import warnings

    import gossipsim as gs
    from gossipsim.results.status import status
    from tests.folders import same_tables

    shutil.copytree(template.folder, folder)
    what = _mutate_part(rng, folder)
    try:
        with time_limit(TIME_LIMIT_S):
            info = status(folder)
            assert info["done"] + info["failed"] + info["remaining"] == 12, (what, info)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                res = gs.run(template.study, out=folder, resume=True, plots=False)
    except gs.ConfigError as exc:
        assert "\n" not in str(exc), f"{what}: {exc}"
        return "refused"
    except (Exception, CaseTimeout) as exc:
        raise AssertionError(f"{what}: {type(exc).__name__}: {exc}") from exc
    try:
        same_tables(template.reference, res)
        same_tables(template.reference, gs.load_results(folder))
    except AssertionError as exc:
        raise AssertionError(f"{what}: tables differ from the uninterrupted run: {exc}") from exc
    lines = [str(w.message) for w in caught]
    assert all("\n" not in line for line in lines), (what, lines)
    return "reported" if any("damaged" in line for line in lines) else "identical"


def _fuzz_parts(template: PartTemplate, count: int, seed: int, tmp_path: Path) -> Counter[str]:
    rng = random.Random(seed)
    return Counter(check_part_case(template, rng, tmp_path / f"p{i:04d}") for i in range(count))


def test_part_fuzzer_fast_profile(part_template, tmp_path):
    outcomes = _fuzz_parts(part_template, FAST_PART_CASES, FOLDER_SEED, tmp_path)
    assert outcomes["reported"] >= FAST_PART_CASES // 3, outcomes
    print(dict(outcomes))


@pytest.mark.slow
def test_part_fuzzer_long_profile(part_template, tmp_path):
    outcomes = _fuzz_parts(part_template, SLOW_PART_CASES, FOLDER_SEED + 1, tmp_path)
    print(dict(outcomes))


@dataclass
class TableTemplate:
    reference: Any  # load_results of the folder as written
    folder: Path  # a finished folder: CSV and (with pyarrow) Parquet copies


@pytest.fixture(scope="module")
def table_template(tmp_path_factory) -> TableTemplate:
    import gossipsim as gs

    folder = tmp_path_factory.mktemp("tables") / "R"
    gs.run(_folder_study(), out=folder, plots=False)
    return TableTemplate(gs.load_results(folder), folder)


CELL_VALUES = ["abc", "", "nan", "1e309", "-1", "0", "3.5", "1e-300", "True", '"', "ring"]


def _mutate_tables(rng: random.Random, folder: Path) -> str:
    """Damage a finished folder (:func:`_damage_tables`), half the time after deleting its Parquet
    copies (allowed): the CSV files are then what is read, so their damage is what would load (as
    metrics.csv truncated mid-row with the copies gone did, issue 21)."""
    if rng.random() < 0.5:
        for copy_ in folder.glob("*.parquet"):
            copy_.unlink()
        return "Parquet copies deleted; " + _damage_tables(rng, folder)
    return _damage_tables(rng, folder)


def _damage_tables(rng: random.Random, folder: Path) -> str:
    """Damage the finished folder's files: bits flipped or a file truncated, emptied or deleted
    (a table, a Parquet copy, summary.json, the record), a CSV cell edited or a row deleted or
    duplicated, a key of summary.json set to another value or deleted, or every Parquet copy
    deleted (allowed: the CSV files are read)."""
    files = sorted(
        p for p in [*folder.iterdir(), folder / ".gossipsim" / "study.json"] if p.is_file()
    )
    kind = rng.randrange(9)
    csv_files = [p for p in files if p.suffix == ".csv" and p.stem != "failures"]
    if kind in (4, 5) and not csv_files:  # a folder of Parquet files only
        kind = 0
    if kind <= 1:
        path = rng.choice(files)
        data = bytearray(path.read_bytes())
        what = _flip(rng, data)
        path.write_bytes(bytes(data))
        return f"{path.name}: {what}"
    if kind == 2:
        path = rng.choice(files)
        data = path.read_bytes()
        cut = rng.randrange(len(data) + 1)
        path.write_bytes(data[:cut])
        return f"{path.name}: truncated to {cut} of {len(data)} bytes"
    if kind == 3:
        path = rng.choice(files)
        path.unlink()
        return f"{path.name}: deleted"
    if kind in (4, 5):
        path = rng.choice(csv_files)
        lines = path.read_text().splitlines(keepends=True)
        if len(lines) < 2:
            return f"{path.name}: left as it is (no rows)"
        row = rng.randrange(1, len(lines))
        if kind == 4:
            cells = lines[row].rstrip("\n").split(",")
            col = rng.randrange(len(cells))
            cells[col] = rng.choice(CELL_VALUES)
            lines[row] = ",".join(cells) + "\n"
            what = f"row {row} column {col} -> {cells[col]!r}"
        elif rng.random() < 0.5:
            del lines[row]
            what = f"row {row} deleted"
        else:
            lines.insert(row, lines[row])
            what = f"row {row} duplicated"
        path.write_text("".join(lines))
        return f"{path.name}: {what}"
    if kind in (6, 7):
        path = folder / "summary.json"
        summary = json.loads(path.read_text())
        key = rng.choice(sorted(summary))
        if kind == 6:
            summary[key] = copy.deepcopy(rng.choice(WEIRD_VALUES + [{"runs": "x"}]))
            what = f"{key} -> {str(summary[key])[:40]}"
        else:
            del summary[key]
            what = f"{key} deleted"
        path.write_text(json.dumps(summary, indent=2))
        return f"summary.json: {what}"
    for copy_ in folder.glob("*.parquet"):
        copy_.unlink()
    return "every Parquet copy deleted"


def check_table_case(template: TableTemplate, rng: random.Random, folder: Path) -> str:
    """Damage a copy of a finished folder, then load it: "refused" (one line) or "identical"
    tables; status must not raise, and never call the folder damaged when it loads."""
    import shutil

    import gossipsim as gs
    from gossipsim.results.status import status
    from tests.folders import same_tables

    shutil.copytree(template.folder, folder)
    what = _mutate_tables(rng, folder)
    try:
        with time_limit(TIME_LIMIT_S):
            try:
                info: dict[str, Any] | None = status(folder)
            except gs.ConfigError as exc:
                assert "\n" not in str(exc), f"{what}: {exc}"
                info = None
            res = gs.load_results(folder)
    except gs.ConfigError as exc:
        assert "\n" not in str(exc), f"{what}: {exc}"
        return "refused"
    except (Exception, CaseTimeout) as exc:
        raise AssertionError(f"{what}: {type(exc).__name__}: {exc}") from exc
    try:
        same_tables(template.reference, res)
    except AssertionError as exc:
        raise AssertionError(f"{what}: loaded tables differ from those written: {exc}") from exc
    # status may call a file damaged that load_results did not read: a CSV file whose Parquet
    # copy was read (the Parquet copy is whole), never one the tables came from
    for entry in info.get("damaged", []) if info is not None else []:
        name = entry.split(":")[0]
        assert name.endswith(".csv") and (folder / name).with_suffix(".parquet").is_file(), (
            what,
            info,
        )
    return "identical"


def _fuzz_tables(template: TableTemplate, count: int, seed: int, tmp_path: Path) -> Counter[str]:
    rng = random.Random(seed)
    return Counter(check_table_case(template, rng, tmp_path / f"t{i:04d}") for i in range(count))


def test_damaged_tables_fuzzer_fast_profile(table_template, tmp_path):
    outcomes = _fuzz_tables(table_template, FAST_TABLE_CASES, FOLDER_SEED, tmp_path)
    assert outcomes["refused"] >= FAST_TABLE_CASES // 3, outcomes
    print(dict(outcomes))


@pytest.mark.slow
def test_damaged_tables_fuzzer_long_profile(table_template, tmp_path):
    outcomes = _fuzz_tables(table_template, SLOW_TABLE_CASES, FOLDER_SEED + 1, tmp_path)
    print(dict(outcomes))


# commands at once on one folder: real processes (the lock is the OS's), each slowed a little so
# that they overlap
SLOWED = """
import sys, time
from gossipsim.execution import executors
from gossipsim.results import store
store.COMMIT_SECONDS = 0.1
run_unit = executors.run_unit
def slow_unit(study, unit):
    time.sleep(float(sys.argv[1]))
    return run_unit(study, unit)
executors.run_unit = slow_unit
from gossipsim.cli.parser import main
sys.exit(main(sys.argv[2:]))
"""


def concurrent_trial(
    rng: random.Random, folder: Path, scenario: Path, reference: Any
) -> Counter[str]:
    """2-3 commands (run, --resume) started at random moments on one folder, one of them perhaps
    killed (kill -9): each ends with exit 0, or 2 and one line saying the folder is in use (or
    130/-9 when killed); then --resume completes the uninterrupted run's tables."""
    import subprocess
    import sys
    import time

    import gossipsim as gs
    from gossipsim.results.status import status
    from tests.folders import same_tables

    outcomes: Counter[str] = Counter()
    procs = []
    for _ in range(rng.choice([2, 2, 3])):
        extra = rng.choice([[], ["--resume"]])
        cmd = [sys.executable, "-c", SLOWED, str(rng.choice([0.005, 0.02])), "run", str(scenario),
               "--out", str(folder), "--no-plots", "--progress", "off", "--engine", "event", *extra]  # fmt: skip
        procs.append(
            subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        )
        time.sleep(rng.choice([0.0, 0.3, 0.8]))
    if rng.random() < 0.4:
        time.sleep(rng.random())
        rng.choice(procs).kill()
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        if proc.returncode == 0:
            outcomes["finished"] += 1
        elif proc.returncode == -9:
            outcomes["killed"] += 1
        else:
            assert proc.returncode == 2, (proc.returncode, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "is in use by another gossipsim command" in lines[0], err
            outcomes["refused"] += 1
    info = status(folder)
    assert info["running"] is None and info["remaining"] >= 0, info
    assert info["done"] + info["failed"] + info["remaining"] == info["runs"], info
    res = gs.run(gs.load_scenario(scenario), out=folder, resume=True, plots=False)
    same_tables(reference, res)
    return outcomes


def _concurrent(trials: int, seed: int, tmp_path: Path, runs: int = 40) -> Counter[str]:
    import gossipsim as gs
    from tests.folders import sweep_raw

    raw = sweep_raw(runs=runs, iterations=200)
    scenario = tmp_path / "c.toml"
    scenario.write_text(to_toml(raw))
    reference = gs.run(gs.parse_study(raw))
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    for i in range(trials):
        outcomes += concurrent_trial(rng, tmp_path / f"c{i:03d}", scenario, reference)
    return outcomes


def test_concurrent_commands_fast_profile(tmp_path, capsys, monkeypatch):
    """A command running on a folder (here in a thread: the lock is the OS's, per open file, so it
    holds between threads as between processes) while others start on it: run, --resume and
    Results.write are refused in one line naming the holder; the first completes its tables. (The
    long profile runs real processes, some killed.)"""
    import threading
    import time

    import gossipsim as gs
    from gossipsim.execution import executors
    from gossipsim.results import folderlock
    from tests.folders import same_tables, sweep_raw

    monkeypatch.setattr(folderlock, "RETRY_SECONDS", 0.05)
    raw = sweep_raw(runs=8, iterations=200)
    scenario = tmp_path / "c.toml"
    scenario.write_text(to_toml(raw))
    reference = gs.run(gs.parse_study(raw))
    folder = tmp_path / "R"
    release = threading.Event()
    real = executors.run_unit

    def held(study: Any, unit: Any) -> Any:  # the first command waits, holding the folder
        if threading.current_thread().name == "first":
            release.wait(30)
        return real(study, unit)

    monkeypatch.setattr(executors, "run_unit", held)
    done: dict[str, Any] = {}
    first = threading.Thread(
        target=lambda: done.update(
            res=gs.run(gs.parse_study(raw), out=folder, engine="event", plots=False)
        ),
        name="first",
    )
    first.start()
    try:
        deadline = time.monotonic() + 30
        while folderlock.holder(folder) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        args = ["run", str(scenario), "--out", str(folder), "--no-plots"]
        for extra in ([], ["--resume"]):
            capsys.readouterr()
            assert main([*args, *extra]) == 2
            lines = capsys.readouterr().err.strip().splitlines()
            assert len(lines) == 1 and f"(process {os.getpid()})" in lines[0], lines
        with pytest.raises(gs.ConfigError, match="in use by another gossipsim command"):
            reference.write(folder)
    finally:
        release.set()
        first.join(60)
    same_tables(reference, done["res"])
    same_tables(reference, gs.load_results(folder))


@pytest.mark.slow
def test_concurrent_commands_long_profile(tmp_path):
    outcomes = _concurrent(SLOW_CONCURRENT_TRIALS, FOLDER_SEED + 1, tmp_path)
    assert outcomes["refused"] >= 1, outcomes
    print(dict(outcomes))
