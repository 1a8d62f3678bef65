"""Compressed uploads of particle updates to the parameter server (paper 000, Section III):
``[protocol] compression = { ... }`` of ``dsvgd`` with ``variant = "paper"`` and
``architecture = "server"``.

The scheduled agent downloads the server's global particles θ^(i−1) (uncompressed: N_p × d entries
of ``bits_per_entry`` bits, as without compression), runs its visit (the paper variant's L SVGD
steps, or Forget-SVGD at its removal slot) to θ^(i), and uploads ΔΘ = θ^(i) − θ^(i−1) sparsified
to the largest k whose upload fits the budget and quantized (:mod:`gossipsim.compression`); the
server adds the decoded update, so the agent and the server both hold θ^(i−1) + decode(ΔΘ), the
reference of the next update. The upload's bits are eqs. 9-11 exactly: the range ``a_max`` of the
quantizer is fixed by the scenario, so nothing else is sent. With ``error_feedback`` the agent
adds what compression left out of its previous upload to the next one. A forgotten agent's visit
changes nothing and uploads nothing (0 bits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gossipsim.compression import (
    SCHEMES,
    decode,
    encode,
    feedback_step,
    groups_of,
    largest_k,
    upload_bits,
)
from gossipsim.core.schema import Key, read_keys
from gossipsim.errors import ConfigError

COMPRESSION_KEYS: tuple[Key, ...] = (
    Key("scheme", "choice", "shared", "the sparsification: `per-particle` (eq. 9), `shared` (eq. "
        "10) or `alpha-shared` (eq. 11)", choices=SCHEMES),
    Key("budget", "string", None, "R_u, the bits of one upload: a number of bits (`\"20000\"`) or a "
        "multiple of d (`\"0.5d\"`, `\"d\"`, `\"5d\"`); met by the largest k that fits"),
    Key("entry_bits", "integer", 5, "N_b, bits of each kept entry: 1 sign bit and N_b − 1 "
        "magnitude bits (2^(N_b − 1) levels)", minimum=2, maximum=32),
    Key("alpha", "number", 1.0, "α of `alpha-shared`: 1/α groups of particles, each with its "
        "own pattern (1/α a whole number dividing the particles)", minimum=0,
        exclusive_minimum=True, maximum=1),
    Key("a_max", "number", None, "the quantizer's range: magnitudes are clipped to it (fixed by "
        "the scenario: nothing is sent for it)", minimum=0, exclusive_minimum=True),
    Key("error_feedback", "boolean", False, "carry what compression left out of an upload to the "
        "agent's next one (beyond the paper)"),
)  # fmt: skip

_BUDGET = re.compile(r"^\s*(?:(\d+(?:\.\d*)?|\.\d+)\s*)?d\s*$")


@dataclass(frozen=True)
class CompressionSettings:
    """``[protocol] compression``: the scheme, the budget (bits, or ``budget_factor`` × d), N_b,
    α, a_max and error feedback."""

    scheme: str
    budget_bits: float | None
    budget_factor: float | None
    entry_bits: int
    alpha: float
    a_max: float
    error_feedback: bool

    def budget(self, d: int) -> float:
        """R_u in bits for d coordinates."""
        if self.budget_bits is not None:
            return self.budget_bits
        assert self.budget_factor is not None
        return self.budget_factor * d

    def k(self, d: int, particles: int) -> int:
        """The largest k whose upload fits the budget (at least one entry: refused otherwise)."""
        k = largest_k(self.scheme, d, particles, self.entry_bits, self.budget(d), self.alpha)
        if k == 0:
            raise ConfigError(
                "protocol.compression.budget",
                f"{self.budget(d):g} bits do not hold one entry of a {self.scheme} upload of "
                f"{particles} particles of d = {d} (its position and {self.entry_bits} bits for "
                "each particle's value); give a larger budget",
            )
        return k


def read_compression(table: Any, particles: int) -> CompressionSettings:
    """The ``compression`` table of ``[protocol]``, checked: one line naming the key otherwise."""
    if not isinstance(table, Mapping):
        raise ConfigError("protocol.compression", "must be a table: { scheme = ..., budget = ... }")
    values = read_keys(COMPRESSION_KEYS, dict(table), "protocol.compression")
    for required in ("budget", "a_max"):
        if values[required] is None:
            raise ConfigError(f"protocol.compression.{required}", "is required")
    text = str(values["budget"])
    bits: float | None = None
    factor: float | None = None
    matched = _BUDGET.match(text)
    if matched:
        factor = float(matched.group(1)) if matched.group(1) else 1.0
    else:
        try:
            bits = float(text)
        except ValueError:
            bits = None
        if bits is None or not bits > 0 or not np.isfinite(bits):
            raise ConfigError(
                "protocol.compression.budget",
                f'a number of bits > 0 or a multiple of d ("0.5d", "d", "5d"); got {text!r}',
            )
    if factor is not None and not factor > 0:
        raise ConfigError(
            "protocol.compression.budget", f"a multiple of d must be > 0 (got {text!r})"
        )
    try:
        groups_of(values["scheme"], particles, values["alpha"])
    except ValueError as exc:
        raise ConfigError("protocol.compression.alpha", str(exc)) from None
    return CompressionSettings(
        scheme=values["scheme"], budget_bits=bits, budget_factor=factor,
        entry_bits=int(values["entry_bits"]), alpha=float(values["alpha"]),
        a_max=float(values["a_max"]), error_feedback=bool(values["error_feedback"]),
    )  # fmt: skip


class Uploader:
    """One run's compressed uploads: ΔΘ → what the server decodes, with its bits (and the
    residual of error feedback)."""

    def __init__(
        self, settings: CompressionSettings, particles: int, d: int, rng: np.random.Generator
    ) -> None:
        self.settings = settings
        self.k = settings.k(d, particles)
        #: what every upload costs (eqs. 9-11): k is fixed by the budget
        self.bits = float(
            upload_bits(settings.scheme, d, self.k, particles, settings.entry_bits, settings.alpha)
        )
        self.rng = rng
        self.residual: dict[int, np.ndarray] = {}

    def upload(self, agent: int, delta: np.ndarray) -> tuple[np.ndarray, float]:
        """(the decoded ΔΘ the server adds, the upload's bits) of ``agent``'s update ``delta``."""
        s = self.settings

        def compress(x: np.ndarray) -> np.ndarray:
            return decode(encode(x, s.scheme, self.k, s.entry_bits, s.a_max, self.rng, s.alpha))

        if not s.error_feedback:
            return compress(delta), self.bits
        sent, self.residual[agent] = feedback_step(
            delta, self.residual.get(agent, np.zeros_like(delta)), compress
        )
        return sent, self.bits
