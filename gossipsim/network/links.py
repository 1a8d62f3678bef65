"""The channels of a scenario (``[links]``), and the simulated-time horizon.

:class:`LinkModel`, homogeneous links (the walk's): a hop from node u to node v carrying ``bits`` of
payload takes ``bits / rate_bps + latency_s`` simulated seconds and is never lost. The defaults
(infinite rate, zero latency) make hops free, so time is then just compute time.

:class:`ServerLinks`, the parameter server's (``[protocol] architecture = "server"``): every agent
has a downlink (server → agent) and an uplink (agent → server), each a :class:`LinkModel` of its own
rate and latency, the same for every agent; nothing is lost (server links that lose transfers:
:class:`~gossipsim.network.arq.LossyServerLinks`). Per-link rates, losses and failures are other
:class:`~gossipsim.network.channels.Channel` subclasses: the lossy and per-edge links of
:mod:`gossipsim.network.arq`, or a channel of one's own (``[links] kind = "module:Class"``).

A run's simulated time is at most ``iterations × (seconds_per_iteration + bits / rate_bps +
latency_s)`` on the walk, ``iterations × (seconds_per_iteration + bits / downlink_rate_bps +
downlink_latency_s + bits / uplink_rate_bps + uplink_latency_s)`` with the server (the slowest
node's ``seconds_per_iteration`` when nodes compute at their own speeds), each transfer at its
worst (every retry's timeout, then a delivered attempt) over links that lose messages, and over a
channel of one's own ``iterations × (seconds_per_iteration + the transmissions of a slot × its
worst_seconds(bits))``; :func:`check_horizon` refuses settings for which that bound exceeds
:data:`MAX_SIMULATED_SECONDS`, so the clock never overflows to infinity (where the engine could not
tell one event time from the next).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from gossipsim.errors import ConfigError
from gossipsim.network.arq import EdgeLinks, LossyServerLinks
from gossipsim.network.channels import KIND_KEY, Channel
from gossipsim.network.messages import SERVER

#: the setting of one compute time for every node (or one per node)
COMPUTE_KEY = "compute.seconds_per_iteration"

#: largest simulated time a run may reach: far below the float maximum (1.8e308) so that sums and
#: means of times over many runs stay finite too
MAX_SIMULATED_SECONDS = 1e300


@dataclass(frozen=True)
class LinkModel(Channel):
    """Homogeneous links: every edge has rate ``rate_bps`` (bit/s) and one-way latency ``latency_s``;
    nothing is lost. Declares the fast path's ``homogeneous-delay`` kernel (every hop the same
    delay)."""

    kernel = "homogeneous-delay"

    rate_bps: float = math.inf
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.rate_bps > 0):
            raise ConfigError(
                "links.rate_bps", f"must be > 0 bit/s (got {self.rate_bps!r}); use inf for no limit"
            )
        if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
            raise ConfigError(
                "links.latency_s", f"must be a finite number >= 0 seconds (got {self.latency_s!r})"
            )

    def delay(self, u: int, v: int, bits: float) -> float:
        """Seconds for a hop u → v carrying ``bits`` of payload."""
        return bits / self.rate_bps + self.latency_s

    @property
    def takes_no_time(self) -> bool:
        """Whether every transmission is instantaneous (infinite rate, no latency)."""
        return math.isinf(self.rate_bps) and self.latency_s == 0


#: the keys that set a :class:`ServerLinks` (downlink rate, downlink latency, uplink rate, uplink
#: latency), named by the time check
SERVER_LINK_KEYS = (
    "links.downlink_rate_bps",
    "links.downlink_latency_s",
    "links.uplink_rate_bps",
    "links.uplink_latency_s",
)


@dataclass(frozen=True)
class ServerLinks(Channel):
    """The parameter server's links: a transfer from the server (:data:`~gossipsim.network.messages.SERVER`)
    to an agent goes over the agent's ``downlink``, one from an agent to the server over its
    ``uplink`` (each ``bits / rate_bps + latency_s``, the same for every agent); nothing is lost.
    Declares the fast path's ``homogeneous-server-links`` kernel (every agent's downlink alike,
    every uplink alike). ``keys``: the
    settings each value came from (:data:`SERVER_LINK_KEYS` order; ``links.rate_bps`` where a
    link inherits it), for the errors of :func:`check_horizon`."""

    kernel = "homogeneous-server-links"

    downlink: LinkModel = LinkModel()
    uplink: LinkModel = LinkModel()
    keys: tuple[str, str, str, str] = field(default=SERVER_LINK_KEYS, compare=False, repr=False)

    def delay(self, sender: int, receiver: int, bits: float) -> float:
        """Seconds for a transfer of ``bits`` between the server and an agent."""
        if sender == SERVER:
            return self.downlink.delay(sender, receiver, bits)
        if receiver == SERVER:
            return self.uplink.delay(sender, receiver, bits)
        raise ValueError(
            f"the server's links carry transfers to or from the server, not {sender} -> {receiver}"
        )

    @property
    def takes_no_time(self) -> bool:
        """Whether every transfer is instantaneous (both links of infinite rate, no latency)."""
        return self.downlink.takes_no_time and self.uplink.takes_no_time


def check_horizon(
    iterations: int,
    compute_seconds: float | Sequence[float],
    links: Channel,
    bits: float,
    compute_key: str = COMPUTE_KEY,
    *,
    transmissions: int = 1,
    local: tuple[float, int] = (0.0, 1),
) -> float:
    """The bound ``iterations × (compute + the transmissions of a slot)`` of a run's simulated
    time, or a :class:`ConfigError` naming the setting that makes it exceed
    :data:`MAX_SIMULATED_SECONDS`. A slot's transmissions: one hop, ``bits / rate + latency``, on
    the walk; a download and an upload of ``bits`` each with the server; with lossy or per-edge
    links (:mod:`gossipsim.network.arq`) the longest hop over any link, ``bits / rate + latency +
    (max_retries + 1) × timeout`` where it loses messages; with lossy server links
    (:class:`~gossipsim.network.arq.LossyServerLinks`) a download and an upload each at its worst,
    ``bits / rate + latency + (max_retries + 1) × timeout`` of its own link where it loses.
    Compute times per node (a sequence, one per node) bound it by the slowest node's;
    ``compute_key`` names the setting they come from.

    Any other channel (one of one's own, ``[links] kind``) is asked for the longest one
    transmission can take, :meth:`~gossipsim.network.channels.Channel.worst_seconds`, and a slot
    makes ``transmissions`` of them (1 on the walk, 2 with the server); an overflow names
    ``links.kind``. A channel that knows no bound (None) is bounded by its compute time alone and
    the bound returned is infinite (no request time is refused; the engine stops a run whose
    clock overflows, naming ``links``).

    ``local``: ``[compute] seconds_per_local_iteration`` and the local iterations of a slot, whose
    product a slot computes on top."""
    per_node = not isinstance(compute_seconds, int | float)
    compute = float(max(compute_seconds)) if per_node else float(compute_seconds)  # type: ignore[arg-type]
    slowest = "the slowest node's " if per_node else ""
    # (key, seconds per slot, what it is)
    parts = [
        (compute_key, compute, f"{slowest}{compute:g} s of compute per slot"),
    ]  # fmt: skip
    per_local, count = local
    if per_local:
        parts.append(("compute.seconds_per_local_iteration", float(per_local) * count,
                      f"{per_local:g} s × {count} local iterations per slot"))  # fmt: skip
    if not isinstance(links, EdgeLinks | ServerLinks | LinkModel | LossyServerLinks):
        return _own_bound(iterations, parts, links, bits, transmissions)
    if isinstance(links, EdgeLinks):
        return _bound(iterations, parts + _edge_parts(links, bits), _EDGE_FORMULA)
    if isinstance(links, LossyServerLinks):
        return _bound(iterations, parts + _lossy_server_parts(links, bits), _LOSSY_SERVER_FORMULA)
    if isinstance(links, ServerLinks):
        down_rate, down_latency, up_rate, up_latency = links.keys
        named = [
            (down_rate, down_latency, links.downlink, "transfer"),
            (up_rate, up_latency, links.uplink, "transfer"),
        ]
        formula = (
            "bits / downlink_rate_bps + downlink_latency_s + bits / uplink_rate_bps + "
            "uplink_latency_s"
        )
    elif isinstance(links, LinkModel):
        named = [("links.rate_bps", "links.latency_s", links, "hop")]
        formula = "bits / rate_bps + latency_s"
    else:  # pragma: no cover - the built-in kinds above
        raise TypeError(f"no time horizon is known for the channel {type(links).__name__}")
    for rate, latency, link, per in named:
        parts.append((rate, float(bits) / link.rate_bps,  # inf when the rate is too small
                      f"{bits:g}-bit messages at {link.rate_bps:g} bit/s"))  # fmt: skip
        parts.append((latency, float(link.latency_s), f"{link.latency_s:g} s of latency per {per}"))
    return _bound(iterations, parts, formula)


def _own_bound(
    iterations: int,
    parts: list[tuple[str, float, str]],
    links: Channel,
    bits: float,
    transmissions: int,
) -> float:
    """The bound over a channel of one's own (:func:`check_horizon`)."""
    name = f"{type(links).__module__}:{type(links).__qualname__}"
    worst = links.worst_seconds(float(bits))
    if worst is None:
        _bound(iterations, parts, "the transmissions of a slot")
        return math.inf
    what = "transmission" if transmissions == 1 else f"each of {transmissions} transmissions"
    parts.append((KIND_KEY, transmissions * float(worst),
                  f"up to {float(worst):g} s per {what} of {bits:g}-bit messages over {name} "
                  "(its worst_seconds)"))  # fmt: skip
    times = "" if transmissions == 1 else f"{transmissions} × "
    return _bound(iterations, parts, f"{times}the channel's worst_seconds(bits)")


_EDGE_FORMULA = "bits / rate_bps + latency_s + (max_retries + 1) × timeout_s of the slowest link"


def _edge_parts(links: EdgeLinks, bits: float) -> list[tuple[str, float, str]]:
    """The parts of the longest hop over lossy or per-edge links: those of the link whose worst
    hop is longest, named by the key or the edge that sets them."""
    worst, where = links.default, "links."
    longest = worst.worst_seconds(float(bits))
    for edge, link in links.edges.items():
        seconds = link.worst_seconds(float(bits))
        if not seconds <= longest:  # also NaN, inf
            worst, where, longest = link, links.names.get(edge, f"edge {edge} "), seconds
    parts = [
        (f"{where}rate_bps", float(bits) / worst.rate_bps,
         f"{bits:g}-bit messages at {worst.rate_bps:g} bit/s"),
        (f"{where}latency_s", float(worst.latency_s), f"{worst.latency_s:g} s of latency per hop"),
    ]  # fmt: skip
    if worst.loss > 0:
        parts.append((f"{where}timeout_s", (worst.max_retries + 1) * worst.timeout_s,
                      f"{worst.max_retries + 1} timeouts of {worst.timeout_s:g} s per hop"))  # fmt: skip
    return parts


_LOSSY_SERVER_FORMULA = (
    "bits / downlink_rate_bps + downlink_latency_s + (downlink_max_retries + 1) × "
    "downlink_timeout_s + the same of the uplink"
)


def _lossy_server_parts(links: LossyServerLinks, bits: float) -> list[tuple[str, float, str]]:
    """The parts of a slot's download and upload over lossy server links, each at its worst
    (:meth:`~gossipsim.network.arq.Link.worst_seconds`: every retry's timeout, then a delivered
    attempt), named by the key that sets them."""
    parts = []
    keys = links.keys
    for (rate, latency, timeout), link in (
        (keys[:3], links.downlink),
        (keys[3:], links.uplink),
    ):
        parts.append((rate, float(bits) / link.rate_bps,  # inf when the rate is too small
                      f"{bits:g}-bit messages at {link.rate_bps:g} bit/s"))  # fmt: skip
        parts.append(
            (latency, float(link.latency_s), f"{link.latency_s:g} s of latency per transfer")
        )
        if link.loss > 0:
            parts.append((timeout, (link.max_retries + 1) * link.timeout_s,
                          f"{link.max_retries + 1} timeouts of {link.timeout_s:g} s per transfer"))  # fmt: skip
    return parts


def _bound(iterations: int, parts: list[tuple[str, float, str]], formula: str) -> float:
    seconds = [p[1] for p in parts]
    per_slot = math.fsum(seconds) if all(map(math.isfinite, seconds)) else math.inf
    bound = iterations * per_slot
    if bound <= MAX_SIMULATED_SECONDS:
        return bound
    key, _, shown = max(parts, key=lambda p: p[1])
    raise ConfigError(
        key,
        f"{shown} over {iterations} slots overflow the simulated clock (a run may last at most "
        f"{MAX_SIMULATED_SECONDS:g} s: iterations × (seconds_per_iteration + {formula}) must stay "
        "below it)",
    )
