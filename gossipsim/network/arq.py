"""Lossy and per-edge links: stop-and-wait ARQ over links of their own rate, latency and loss.

A :class:`Link` is one link's values. A message of ``bits`` is sent by stop-and-wait ARQ: each
attempt is lost independently with probability ``loss``; a delivered attempt takes ``bits /
rate_bps + latency_s``, a lost one costs ``timeout_s`` from its start, after which the message is
sent again; after ``max_retries`` failed retries (``max_retries + 1`` failed attempts) the message
is lost for good. Every attempt carries the whole message, so the bits sent are ``bits ×
attempts``. With F failed attempts before the first delivered one (F geometric, ``P(F = f) =
loss^f (1 − loss)``) a delivered message takes ``F · timeout_s + bits / rate_bps + latency_s``;
with a retry limit far above F's range the expected time of a hop is therefore::

    bits / rate_bps + latency_s + timeout_s · loss / (1 − loss)

and the expected number of attempts ``1 / (1 − loss)``. F is drawn at once (one geometric draw
from the run's channel stream per message, none on a link without loss), the same law as one
Bernoulli draw per attempt.

:class:`EdgeLinks`: each edge's :class:`Link` (edge attributes on the graph), the scenario's
``[links]`` values on every other edge; a hop u → v uses edge (u, v)'s (one dictionary look-up per
hop). Nothing is lost: the engine asks only for :meth:`EdgeLinks.delay`. :class:`LossyLinks`: the
same with loss on at least one link (homogeneous lossy links are a :class:`LossyLinks` without edge
links); the engine asks for :meth:`LossyLinks.transmit`. :class:`LossyServerLinks`: the parameter
server's downlinks and uplinks, each a :class:`Link`, when either loses transfers. None declares a
vectorised kernel: they run on the event engine, and ``engine = "auto"`` says why
(:meth:`EdgeLinks.why_event_engine`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from gossipsim.network.channels import Channel, Delivery
from gossipsim.network.messages import SERVER, Message

#: ``[links] max_retries`` when not given: with loss 0.5 a message is lost for good once in 2^101
DEFAULT_MAX_RETRIES = 100


def failed_attempts(u: float, loss: float) -> int:
    """The failed attempts before a delivered one, P(F = f) = loss^f · (1 − loss), from a uniform
    u in [0, 1): F = ⌊log(1 − u) / log(loss)⌋ (P(F ≥ f) = loss^f)."""
    return int(math.log1p(-u) / math.log(loss))


class Uniforms:
    """A run's channel stream read in blocks of :data:`UNIFORM_BLOCK` uniforms (one Generator
    call a block, not one a message): the n-th message's uniform is the stream's n-th, whatever
    the block size."""

    __slots__ = ("rng", "block", "pos")

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.block: list[float] = []
        self.pos = 0

    def next(self) -> float:
        if self.pos == len(self.block):
            self.block = self.rng.random(UNIFORM_BLOCK).tolist()
            self.pos = 0
        u = self.block[self.pos]
        self.pos += 1
        return u


#: uniforms a :class:`Uniforms` draws at once
UNIFORM_BLOCK = 4096


@dataclass(frozen=True, slots=True)
class Link:
    """One link's values (checked where they are read: ``[links]`` and edge attributes)."""

    rate_bps: float = math.inf
    latency_s: float = 0.0
    loss: float = 0.0
    timeout_s: float = math.inf  # only read when loss > 0 (then the settings give it)
    max_retries: int = DEFAULT_MAX_RETRIES

    def delay(self, bits: float) -> float:
        """Seconds of a delivered attempt of ``bits``."""
        return bits / self.rate_bps + self.latency_s

    def send(self, bits: float, rng: np.random.Generator | Uniforms) -> Delivery:
        """Send ``bits`` by stop-and-wait ARQ (see the module): the time until delivery, or until
        the last attempt's timeout for a message lost for good; the bits of every attempt. The
        failed attempts before a delivered one are geometric, drawn from one uniform by the
        inverse of their distribution function (``rng`` a generator, or :class:`Uniforms` read
        from it in blocks)."""
        if self.loss == 0:
            return Delivery(bits / self.rate_bps + self.latency_s, bits=bits)
        u = rng.next() if isinstance(rng, Uniforms) else float(rng.random())
        return self.outcome(failed_attempts(u, self.loss), bits)

    def outcome(self, failed: int, bits: float) -> Delivery:
        """The delivery of ``bits`` by stop-and-wait ARQ after ``failed`` failed attempts (however
        they were drawn): delivered at the next attempt, ``failed · timeout_s + bits / rate_bps +
        latency_s`` seconds and ``failed + 1`` attempts' bits; lost for good once ``failed``
        exceeds ``max_retries``, after ``max_retries + 1`` attempts and their timeouts."""
        if failed > self.max_retries:
            attempts = self.max_retries + 1
            return Delivery(attempts * self.timeout_s, lost=True, bits=attempts * bits,
                            attempts=attempts)  # fmt: skip
        return Delivery(
            failed * self.timeout_s + bits / self.rate_bps + self.latency_s,
            bits=(failed + 1) * bits,
            attempts=failed + 1,
        )

    def worst_seconds(self, bits: float) -> float:
        """The longest a message of ``bits`` can take: every retry's timeout then a delivered
        attempt (at most ``(max_retries + 1) · timeout_s + bits / rate_bps + latency_s``)."""
        if self.loss == 0:
            return self.delay(bits)
        return (self.max_retries + 1) * self.timeout_s + self.delay(bits)


@dataclass(frozen=True, eq=False)
class EdgeLinks(Channel):
    """Per-edge links without loss: edge (u, v) (by node index, both directions) has its own
    :class:`Link` in ``edges``; every other edge has ``default``'s. ``names``: how the settings
    name each such edge (for the errors of :func:`~gossipsim.network.links.check_horizon`)."""

    default: Link = Link()
    edges: Mapping[tuple[int, int], Link] = field(default_factory=dict)
    names: Mapping[tuple[int, int], str] = field(default_factory=dict, repr=False)

    def link(self, u: int, v: int) -> Link:
        """The link a hop u → v uses."""
        return self.edges.get((u, v), self.default)

    def delay(self, sender: int, receiver: int, bits: float) -> float:
        return self.edges.get((sender, receiver), self.default).delay(bits)

    def links(self) -> list[Link]:
        """The default link and every edge's own."""
        return [self.default, *self.edges.values()]

    @property
    def takes_no_time(self) -> bool:
        return all(
            math.isinf(link.rate_bps) and link.latency_s == 0 and link.loss == 0
            for link in self.links()
        )

    def why_event_engine(self) -> str:
        return (
            "per-edge links (edge attributes rate_bps, latency_s, ...) run on the event engine: "
            "each hop costs its own edge's time"
        )


@dataclass(frozen=True, eq=False)
class LossyLinks(EdgeLinks):
    """Links with loss (on at least one of them), by stop-and-wait ARQ (:meth:`Link.send`)."""

    lossy: ClassVar[bool] = True
    #: the current run's channel stream, read in blocks (replaced when another run's comes)
    _uniforms: Uniforms = field(
        default_factory=lambda: Uniforms(np.random.default_rng(0)), init=False, repr=False
    )

    def transmit(
        self, sender: int, receiver: int, message: Message, rng: np.random.Generator
    ) -> Delivery:
        uniforms = run_uniforms(self, rng)
        edges = self.edges
        link = edges.get((sender, receiver), self.default) if edges else self.default
        return link.send(message.bits, uniforms)

    def why_event_engine(self) -> str:
        return "lossy links (links.loss > 0) run on the event engine"


def run_uniforms(channel: Any, rng: np.random.Generator) -> Uniforms:
    """The block reader of the run's channel stream ``rng`` that a frozen lossy ``channel`` keeps
    in its ``_uniforms`` (a new one when another run's stream comes: the runs of a worker share
    the channel)."""
    uniforms: Uniforms = channel._uniforms
    if uniforms.rng is not rng:
        uniforms = Uniforms(rng)
        object.__setattr__(channel, "_uniforms", uniforms)
    return uniforms


#: the settings a :class:`LossyServerLinks`'s values come from, for the errors of
#: :func:`~gossipsim.network.links.check_horizon`: per direction (downlink, then uplink) the rate,
#: latency and timeout keys
LOSSY_SERVER_LINK_KEYS = (
    "links.downlink_rate_bps",
    "links.downlink_latency_s",
    "links.downlink_timeout_s",
    "links.uplink_rate_bps",
    "links.uplink_latency_s",
    "links.uplink_timeout_s",
)


@dataclass(frozen=True, eq=False)
class LossyServerLinks(Channel):
    """The parameter server's links when they lose transfers: every agent's ``downlink`` (server →
    agent) and ``uplink`` (agent → server) a :class:`Link` of its own loss, timeout and retry limit
    (the same for every agent), each transfer sent by stop-and-wait ARQ (:meth:`Link.send`) with
    one draw from the run's channel stream per transfer over a link that loses (none over the
    other). ``keys``: the settings each value came from (:data:`LOSSY_SERVER_LINK_KEYS` order).
    No vectorised kernel: the event engine runs it."""

    lossy: ClassVar[bool] = True

    downlink: Link = Link()
    uplink: Link = Link()
    keys: tuple[str, ...] = field(default=LOSSY_SERVER_LINK_KEYS, compare=False, repr=False)
    _uniforms: Uniforms = field(
        default_factory=lambda: Uniforms(np.random.default_rng(0)), init=False, repr=False
    )

    def link(self, sender: int, receiver: int) -> Link:
        """The link of a transfer: the agent's downlink from the server, its uplink to it."""
        if sender == SERVER:
            return self.downlink
        if receiver == SERVER:
            return self.uplink
        raise ValueError(
            f"the server's links carry transfers to or from the server, not {sender} -> {receiver}"
        )

    def delay(self, sender: int, receiver: int, bits: float) -> float:
        """Seconds of a transfer delivered at its first attempt."""
        return self.link(sender, receiver).delay(bits)

    def transmit(
        self, sender: int, receiver: int, message: Message, rng: np.random.Generator
    ) -> Delivery:
        return self.link(sender, receiver).send(message.bits, run_uniforms(self, rng))

    @property
    def takes_no_time(self) -> bool:
        return False  # a lost attempt costs its timeout

    def why_event_engine(self) -> str:
        return (
            "lossy server links (links.downlink_loss or links.uplink_loss > 0) run on the event "
            "engine"
        )


def edge_channel(
    default: Link,
    edges: Mapping[tuple[int, int], Link] | None = None,
    names: Mapping[tuple[int, int], str] | None = None,
) -> EdgeLinks:
    """The channel of ``default`` links with these per-edge ones: :class:`LossyLinks` if any link
    loses messages, else :class:`EdgeLinks`."""
    edges = dict(edges or {})
    lossy = default.loss > 0 or any(link.loss > 0 for link in edges.values())
    return (LossyLinks if lossy else EdgeLinks)(default, edges, dict(names or {}))
