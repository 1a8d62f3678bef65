"""Fuzzing the Python API's argument types (issue 21): every public entry point called with values of
the wrong type, NumPy scalars, one-pass iterators, bytes, odd paths and out-of-range numbers must
return (where the value is valid: NumPy integers are integers) or raise a
:class:`~gossipsim.errors.ConfigError` naming the argument; never another exception or a hang.

A deterministic generator (``random.Random`` with a fixed seed) picks an entry point and one or two
of its arguments to mutate. The fast profile runs in ``make test``; ``pytest -m slow`` runs more.
"""

from __future__ import annotations

import random
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gossipsim as gs
from tests.helpers import base_scenario, to_toml

SECONDS_PER_CASE = 30


def _odd_values() -> list[tuple[str, Any]]:
    """Values of the wrong type or domain for any argument (a fresh iterator each call)."""
    return [
        ("None", None),
        ("int", 42),
        ("negative", -3),
        ("zero", 0),
        ("float", 1.5),
        ("nan", float("nan")),
        ("huge int", 2**70),
        ("bool", True),
        ("bytes", b"scenario.toml"),
        ("text", "banana"),
        ("empty text", ""),
        ("NUL", "a\0b"),
        ("long name", "x" * 300),
        ("list", [1, 2]),
        ("dict", {"a": 1}),
        ("object", object()),
        ("generator", (i for i in range(3))),
        ("iterator", iter([1, 2])),
        ("complex", 1j),
        ("np.float64", np.float64(2.0)),
        ("np.bool_", np.bool_(True)),
        ("np array", np.arange(3)),
    ]


#: arguments of gs.run, with values a user would give that are valid (NumPy integers among them)
VALID_RUN_ARGUMENTS: dict[str, list[Any]] = {
    "runs": [2, np.int64(2), np.int32(1), np.uint8(3)],
    "seed": [0, np.int64(7), np.uint16(3)],
    "workers": [1, np.int64(1)],
    "engine": ["auto", "event"],
    "resume": [False, np.bool_(False)],
    "progress": [None, False],
    "tables": [None, "csv"],
    "overrides": [{"scenario.iterations": np.int64(30)}, {"data.theta": np.float32(0.5)}],
}
RUN_ARGUMENTS = [*VALID_RUN_ARGUMENTS, "cluster", "out", "make_plots"]


@dataclass
class Case:
    name: str
    call: Callable[[], Any]
    must_succeed: bool


def generate(rng: random.Random, count: int, tmp_path: Path, scenario: Path) -> Iterator[Case]:
    """``count`` calls of the API, each with one or two arguments mutated (or set to valid
    NumPy scalars, which must then succeed)."""
    entry_points = ["run", "run", "run", "load_results", "load_scenario", "replace", "scenario"]
    for i in range(count):
        entry = rng.choice(entry_points)
        label, odd = rng.choice(_odd_values())
        if entry == "load_results":
            yield Case(f"load_results({label})", lambda v=odd: gs.load_results(v), False)
        elif entry == "load_scenario":
            yield Case(f"load_scenario({label})", lambda v=odd: gs.load_scenario(v), False)
        elif entry == "replace":
            key = rng.choice(["scenario.runs", "topology.nodes", "data.theta", "unlearning"])
            study = gs.load_scenario(scenario)
            yield Case(
                f"replace({key}={label})", lambda k=key, v=odd, s=study: s.replace(k, v), False
            )
        elif entry == "scenario":
            yield Case(f"run(scenario={label})", lambda v=odd: gs.run(v, runs=1), False)
        else:
            kwargs: dict[str, Any] = {"runs": 2}
            shown = []
            valid = rng.random() < 0.4
            for name in rng.sample(RUN_ARGUMENTS if not valid else list(VALID_RUN_ARGUMENTS), 2):
                if valid:
                    j = rng.randrange(len(VALID_RUN_ARGUMENTS[name]))
                    kwargs[name] = VALID_RUN_ARGUMENTS[name][j]
                    shown.append(f"{name}=valid[{j}]")
                    continue
                if name == "out" and label in ("text", "long name"):
                    kwargs[name] = tmp_path / f"{i}-{odd}"  # a folder name (valid or too long)
                else:
                    kwargs[name] = odd
                shown.append(f"{name}={label}")
            yield Case(f"run({', '.join(shown)})", lambda kw=kwargs: gs.run(scenario, **kw), valid)


class CaseTimeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"no answer in {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _fuzz(tmp_path: Path, seed: int, count: int) -> Counter[str]:
    raw = base_scenario(scenario={"name": "fz", "seed": 1, "runs": 2, "iterations": 40})
    scenario = tmp_path / "s.toml"
    scenario.write_text(to_toml(raw))
    outcomes: Counter[str] = Counter()
    bad = []
    for case in generate(random.Random(seed), count, tmp_path, scenario):
        try:
            with _time_limit(SECONDS_PER_CASE):
                case.call()
            outcomes["returned"] += 1
        except gs.ConfigError as exc:
            outcomes["refused"] += 1
            if case.must_succeed:
                bad.append(f"{case.name}: refused valid input: {exc}")
            elif "\n" in str(exc) or not exc.key:
                bad.append(f"{case.name}: not one line naming a key: {exc!r}")
        except Exception as exc:  # anything else is the bug this test looks for
            outcomes["other"] += 1
            bad.append(f"{case.name}: {type(exc).__name__}: {exc}")
    assert not bad, "\n".join(bad)
    print(dict(outcomes))
    return outcomes


def test_fuzz_api_fast_profile(tmp_path):
    outcomes = _fuzz(tmp_path, seed=21, count=60)
    assert outcomes["refused"] >= 20 and outcomes["returned"] >= 5, outcomes


@pytest.mark.slow
def test_fuzz_api_long_profile(tmp_path):
    outcomes = _fuzz(tmp_path, seed=2121, count=600)
    assert outcomes["refused"] >= 200, outcomes


def test_generator_is_deterministic(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(to_toml(base_scenario()))
    names = [[c.name for c in generate(random.Random(5), 30, tmp_path, scenario)] for _ in "ab"]
    assert names[0] == names[1]
