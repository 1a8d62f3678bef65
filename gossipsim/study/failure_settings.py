"""The keys of ``[failures]`` and ``[[failures.outage]]`` and their settings objects
(:mod:`gossipsim.network.failures` runs them; :mod:`gossipsim.study.settings` lists the section in
its schema)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gossipsim.core.schema import Key

FAILURES_KEYS = (
    Key("node_up_s", "number", None, "mean up time of a node (s): nodes alternate up and down "
        "for exponential times ([Failures and churn](#failures-and-churn)); with `node_down_s`; "
        "inf: they never fail (a sweep's baseline)", minimum=0, exclusive_minimum=True,
        finite=False),
    Key("node_down_s", "number", None, "mean down time of a node (s); with `node_up_s`",
        minimum=0, exclusive_minimum=True),
    Key("link_up_s", "number", None, "mean up time of a link (s): links alternate up and down "
        "the same way; with `link_down_s`; inf: they never fail", minimum=0,
        exclusive_minimum=True, finite=False),
    Key("link_down_s", "number", None, "mean down time of a link (s); with `link_up_s`",
        minimum=0, exclusive_minimum=True),
    Key("token_timeout_s", "number", None, "seconds without an acknowledgement (or a sign of "
        "life of the holder) after which a node regenerates the token from its copy; required "
        "with any failure", minimum=0, exclusive_minimum=True),
    Key("requests_from_down", "choice", "wait", "an unlearning request from a node that is "
        "down: `wait` until it is up (its latency includes the wait) or `delegate` (served at "
        "once, by a neighbour holding what the node would need)", choices=("wait", "delegate")),
    Key("down_clients", "choice", "skip", "with the parameter server, a round with an agent that "
        "is down: `skip` (an iteration without an update, `token_timeout_s` long) or `wait` for "
        "the agent to be up", choices=("skip", "wait")),
)  # fmt: skip

OUTAGE_KEYS = (
    Key("node", "node", None, "the node that is down", required=True),
    Key("from_s", "number", None, "start of the outage (s)", minimum=0, required=True),
    Key("to_s", "number", None, "end of the outage (s), after `from_s`", minimum=0,
        exclusive_minimum=True, required=True),
)  # fmt: skip


def _default(name: str) -> Any:
    return next(key.default for key in FAILURES_KEYS if key.name == name)


@dataclass(frozen=True)
class OutageSettings:
    """``[[failures.outage]]``: node (its label) down from ``from_s`` to ``to_s``."""

    node: Any
    from_s: float
    to_s: float


@dataclass(frozen=True)
class FailureSettings:
    """``[failures]`` (:mod:`gossipsim.network.failures`); None on the scenario: no failures."""

    token_timeout_s: float
    node_up_s: float | None = None
    node_down_s: float | None = None
    link_up_s: float | None = None
    link_down_s: float | None = None
    outages: tuple[OutageSettings, ...] = ()
    requests_from_down: str = _default("requests_from_down")
    down_clients: str = _default("down_clients")
