"""Homogeneous links: the channel of every scenario (``[links]``), and the simulated-time horizon.

A hop from node u to node v carrying ``bits`` of payload takes ``bits / rate_bps + latency_s``
simulated seconds and is never lost. The defaults (infinite rate, zero latency) make hops free, so
time is then just compute time. Per-link rates, losses and failures are other
:class:`~gossipsim.channels.Channel` subclasses.

A run's simulated time is at most ``iterations × (seconds_per_iteration + bits / rate_bps +
latency_s)``; :func:`check_horizon` refuses settings for which that bound exceeds
:data:`MAX_SIMULATED_SECONDS`, so the clock never overflows to infinity (where the engine could not
tell one event time from the next).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .channels import Channel
from .errors import ConfigError

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


def check_horizon(iterations: int, compute_seconds: float, links: LinkModel, bits: float) -> float:
    """The bound ``iterations × (compute + bits / rate + latency)`` of a run's simulated time, or a
    :class:`ConfigError` naming the setting that makes it exceed :data:`MAX_SIMULATED_SECONDS`."""
    parts = {
        "compute.seconds_per_iteration": float(compute_seconds),
        "links.rate_bps": float(bits) / links.rate_bps,  # inf when the rate is too small
        "links.latency_s": float(links.latency_s),
    }
    per_slot = math.fsum(parts.values()) if all(map(math.isfinite, parts.values())) else math.inf
    bound = iterations * per_slot
    if bound <= MAX_SIMULATED_SECONDS:
        return bound
    key = max(parts, key=lambda k: parts[k])
    shown = {
        "compute.seconds_per_iteration": f"{compute_seconds:g} s of compute per slot",
        "links.rate_bps": f"{bits:g}-bit messages at {links.rate_bps:g} bit/s",
        "links.latency_s": f"{links.latency_s:g} s of latency per hop",
    }[key]
    raise ConfigError(
        key,
        f"{shown} over {iterations} slots overflow the simulated clock (a run may last at most "
        f"{MAX_SIMULATED_SECONDS:g} s: iterations × (seconds_per_iteration + bits / rate_bps + "
        "latency_s) must stay below it)",
    )
