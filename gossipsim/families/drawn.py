"""Data-generator parameters drawn from a distribution: ``rate = { gamma = [2, 1] }``.

A generator parameter of ``[data]`` (``theta``, ``mean``, ``sigma``, ``probs``, ...) is a number
(every node), a list with one value per node, or a one-entry table ``{ NAME = [parameters] }`` that
draws it from a distribution: a fresh value for each node each time the data are drawn (once per
study with ``draw = "once"``, once per run with ``draw = "per-run"``), from the data stream, in node
order, before that node's observations. A per-node list may mix numbers and tables.

A distribution is allowed for a parameter only when its support lies in the parameter's domain, so
every draw is a valid value (:data:`ALLOWED`); a draw beyond a finite upper limit (a Poisson mean
above 10¹⁸) is an error naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gossipsim.errors import ConfigError


@dataclass(frozen=True)
class Distribution:
    """A named distribution: its parameters (in order) and how to draw one value."""

    name: str
    params: tuple[str, ...]  # ("a", "b"); ("alpha...",) for a vector of any length
    support: str  # words for messages
    sample: Callable[[np.random.Generator, tuple[float, ...]], Any]

    def check(self, values: tuple[float, ...], key: str) -> None:
        """The parameters are finite and in range (> 0 where a scale or shape; low < high)."""
        if self.name == "dirichlet":
            if len(values) < 2 or not all(v > 0 for v in values):
                raise ConfigError(key, "{ dirichlet = [a1, a2, ...] } needs at least 2 entries > 0")
            return
        if len(values) != len(self.params):
            raise ConfigError(
                key,
                f"{{ {self.name} = [{', '.join(self.params)}] }} takes {len(self.params)} numbers",
            )
        if self.name == "uniform":
            if not values[0] < values[1]:
                raise ConfigError(key, "{ uniform = [low, high] } needs low < high")
        elif self.name in ("normal", "lognormal"):
            if not values[1] > 0:
                raise ConfigError(
                    key, f"{{ {self.name} = [{', '.join(self.params)}] }} needs sd > 0"
                )
        elif not all(v > 0 for v in values):
            raise ConfigError(
                key, f"{{ {self.name} = [{', '.join(self.params)}] }} needs parameters > 0"
            )


DISTRIBUTIONS: dict[str, Distribution] = {
    d.name: d
    for d in (
        Distribution("beta", ("a", "b"), "(0, 1)", lambda r, p: float(r.beta(p[0], p[1]))),
        Distribution(
            "gamma", ("shape", "rate"), "(0, ∞)", lambda r, p: float(r.gamma(p[0], 1.0 / p[1]))
        ),
        Distribution(
            "lognormal", ("mu", "sd"), "(0, ∞)", lambda r, p: float(r.lognormal(p[0], p[1]))
        ),
        Distribution(
            "normal", ("mean", "sd"), "the real line", lambda r, p: float(r.normal(p[0], p[1]))
        ),
        Distribution(
            "uniform", ("low", "high"), "[low, high)", lambda r, p: float(r.uniform(p[0], p[1]))
        ),
        Distribution(
            "dirichlet", ("a1", "a2", "..."), "the simplex", lambda r, p: r.dirichlet(np.asarray(p))
        ),
    )
}

#: distributions allowed per parameter domain (those whose support lies in it; ``uniform`` when
#: its bounds do)
ALLOWED: dict[str, tuple[str, ...]] = {
    "probability": ("beta", "uniform"),
    "unit-mean": ("beta", "uniform"),  # (0, 1]: beta-exponential's mean
    "positive": ("gamma", "lognormal", "uniform"),
    "poisson-rate": ("gamma", "lognormal", "uniform"),
    "real": ("normal", "uniform"),
    "simplex": ("dirichlet",),
}
#: closed interval the bounds of ``uniform`` must lie in, per domain (low > 0 where 0 is excluded)
_UNIFORM_BOUNDS: dict[str, tuple[float, float, bool]] = {  # (lowest, highest, low must be > lowest)
    "probability": (0.0, 1.0, False),
    "unit-mean": (0.0, 1.0, True),
    "positive": (0.0, math.inf, True),
    "poisson-rate": (0.0, 1e18, True),
    "real": (-math.inf, math.inf, False),
}


@dataclass(frozen=True)
class Drawn:
    """A parameter drawn from ``distribution`` with ``params`` for each node and data draw."""

    distribution: str
    params: tuple[float, ...]
    key: str  # the scenario key, for the message of a draw beyond an upper limit
    upper: float = math.inf

    def draw(self, rng: np.random.Generator) -> Any:
        value = DISTRIBUTIONS[self.distribution].sample(rng, self.params)
        if np.ndim(value) == 0 and not value <= self.upper:
            raise ConfigError(
                self.key,
                f"drew {value:g} from {self.distribution}{list(self.params)}, above the largest "
                f"allowed value {self.upper:g}; choose parameters with a smaller spread",
            )
        return value

    def describe(self) -> str:
        return f"{{ {self.distribution} = {list(self.params)} }}"


def is_drawn(value: Any) -> bool:
    """Whether ``value`` is written as a distribution: a one-entry table."""
    return isinstance(value, Mapping)


def parse_drawn(value: Mapping[str, Any], domain: str, key: str, upper: float = math.inf) -> Drawn:
    """The :class:`Drawn` a table ``{ NAME = [parameters] }`` asks for, checked against the
    parameter's ``domain``; a one-line :class:`ConfigError` naming ``key`` otherwise."""
    allowed = ALLOWED.get(domain, ())
    if not allowed:
        raise ConfigError(key, "cannot be drawn from a distribution; give a number")
    forms = ", ".join(f"{{ {n} = [{', '.join(DISTRIBUTIONS[n].params)}] }}" for n in allowed)
    if len(value) != 1:
        raise ConfigError(key, f"a drawn value is a table with one distribution: {forms}")
    name, params = next(iter(value.items()))
    if name not in allowed:
        raise ConfigError(key, f"cannot be drawn from {name!r} here; allowed: {forms}")
    if not isinstance(params, list | tuple) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in params
    ):
        raise ConfigError(key, f"{{ {name} = [...] }} takes a list of finite numbers ({forms})")
    numbers = tuple(float(x) for x in params)
    dist = DISTRIBUTIONS[name]
    dist.check(numbers, key)
    if name == "uniform":
        lowest, highest, strict = _UNIFORM_BOUNDS[domain]
        low, high = numbers
        if low < lowest or (strict and low == lowest) or high > highest:
            side = ">" if strict else ">="
            raise ConfigError(
                key,
                f"{{ uniform = [low, high] }} must draw allowed values: low {side} {lowest:g} and "
                f"high <= {highest:g}",
            )
    return Drawn(name, numbers, key, upper)


def resolve(params: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """One node's generator parameters with every :class:`Drawn` value drawn (in key order)."""
    return {
        name: value.draw(rng) if isinstance(value, Drawn) else value
        for name, value in params.items()
    }
