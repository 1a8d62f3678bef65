"""Link model: how long a hop of the token takes.

A hop from node u to node v carrying ``bits`` of payload takes ``bits / rate_bps + latency_s``
simulated seconds. The defaults (infinite rate, zero latency) make hops free, so time is then just
compute time. Per-link overrides, losses and failures plug in here by subclassing :class:`LinkModel`
(the engine only calls :meth:`LinkModel.delay`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class LinkModel:
    """Homogeneous links: every edge has rate ``rate_bps`` (bit/s) and one-way latency ``latency_s``."""

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
