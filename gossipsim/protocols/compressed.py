"""Compressed particle updates (paper 000, Section III): ``[protocol] compression = { ... }`` and
``downlink_compression = { ... }`` of ``dsvgd``.

**With the parameter server, the paper variant.** The scheduled agent downloads the server's global particles θ^(i−1) (uncompressed: N_p × d entries
of ``bits_per_entry`` bits, as without compression), runs its visit (the paper variant's L SVGD
steps, or Forget-SVGD at its removal slot) to θ^(i), and uploads ΔΘ = θ^(i) − θ^(i−1) sparsified
to the largest k whose upload fits the budget and quantized (:mod:`gossipsim.compression`); the
server adds the decoded update, so the agent and the server both hold θ^(i−1) + decode(ΔΘ), the
reference of the next update. The upload's bits are eqs. 9-11 exactly: the range ``a_max`` of the
quantizer is fixed by the scenario, so nothing else is sent. With ``error_feedback`` the agent
adds what compression left out of its previous upload to the next one. A forgotten agent's visit
changes nothing and uploads nothing (0 bits).

**With the parameter server, the sound variant.** The agent downloads the global particles θ and
the aggregate S of the agents' scores (2 N_p × d arrays, uncompressed; AdaGrad's history is each
agent's own here, see below), runs its visit, and uploads two compressed N_p × d arrays, each in
half the budget: the particles' update ΔΘ and the change Δg_k of its score contribution. The
server adds decode(ΔΘ) to θ and decode(Δg_k) to S and keeps each agent's decoded contribution ĝ_k
(the sum of what it decoded from that agent); the agent keeps the same ĝ_k (it knows what it
sent), so S = Σ_k ĝ_k at both ends, and a removal subtracts the server's ĝ_k exactly (nothing to
upload for it). The history cannot be kept in step at both ends without being uploaded too (a
third N_p × d array), so each agent keeps its own cumulative AdaGrad history, grown only at the
entries its uploads sent (a coordinate's steps shrink as 1/√(the times it reached the server); a
history grown everywhere shrank the steps of coordinates sent once in a hundred visits as if they
had moved at each, and compressed learning all but stopped); a removal restarts every agent's (the
target changed). A forgotten agent's
visits step on the others' scores, as without compression, and upload ΔΘ alone (half the budget).
Error feedback applies to ΔΘ only: Δg_k is the difference between the agent's score and the ĝ_k
the server holds, so what one upload leaves out is in the next one already (a residual added on
top counted it twice, and the particles spread without bound).

**Downlink.** ``downlink_compression = { entry_bits, a_max }`` (paper variant) quantizes the
download whole (:func:`gossipsim.compression.quantize`, N_b bits an entry): the agent starts its
visit from the quantized particles θ̃, uploads θ^(i) − θ̃ and the server adds it to θ (its own,
exact reference). The download costs N_p · d · N_b bits.

**On the walk** there is no reference both ends hold (the next holder never saw the previous
state), so an update cannot be sent as a sparse delta; the token itself is quantized whole:
``compression = { entry_bits, a_max }`` with ``architecture = "walk"`` (paper variant) quantizes
the particles the holder passes on, N_p · d · N_b bits a message.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gossipsim.compression import (
    SCHEMES,
    EncodedUpdate,
    decode,
    encode,
    feedback_step,
    groups_of,
    largest_k,
    quantize,
    upload_bits,
)
from gossipsim.compression.encoding import kept_range
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
        "the scenario: nothing is sent for it), or `max`: each upload's largest kept magnitude, "
        "sent as one 32-bit float (counted)", minimum=0, exclusive_minimum=True,
        words=("max",)),
    Key("error_feedback", "boolean", False, "carry what compression left out of an upload to the "
        "agent's next one (beyond the paper)"),
)  # fmt: skip

#: bits of the quantizer's range when it is sent with each upload (``a_max = "max"``): a float32
RANGE_BITS = 32

_BUDGET = re.compile(r"^\s*(?:(\d+(?:\.\d*)?|\.\d+)\s*)?d\s*$")


@dataclass(frozen=True)
class CompressionSettings:
    """``[protocol] compression``: the scheme, the budget (bits, or ``budget_factor`` × d), N_b,
    α, a_max and error feedback."""

    architecture: str
    scheme: str
    budget_bits: float | None
    budget_factor: float | None
    entry_bits: int
    alpha: float
    a_max: float | None  # None: each upload's largest kept magnitude, sent (RANGE_BITS)
    error_feedback: bool

    @property
    def range_bits(self) -> int:
        """Bits an upload spends on the quantizer's range: 0 when the scenario fixes it."""
        return 0 if self.a_max is not None else RANGE_BITS

    def budget(self, d: int) -> float:
        """R_u in bits for d coordinates."""
        if self.budget_bits is not None:
            return self.budget_bits
        assert self.budget_factor is not None
        return self.budget_factor * d

    def k(self, d: int, particles: int, share: float = 1.0) -> int:
        """The largest k whose upload fits ``share`` of the budget (at least one entry: refused
        otherwise)."""
        budget = share * self.budget(d) - self.range_bits
        k = largest_k(self.scheme, d, particles, self.entry_bits, budget, self.alpha)
        if k == 0:
            part = "" if share == 1.0 else f" ({share:g} of the budget: one of two arrays)"
            if self.range_bits:
                part += f" (after the {self.range_bits} bits of a_max = max)"
            raise ConfigError(
                "protocol.compression.budget",
                f"{budget:g} bits{part} do not hold one entry of a {self.scheme} upload of "
                f"{particles} particles of d = {d} (its position and {self.entry_bits} bits for "
                "each particle's value); give a larger budget",
            )
        return k


#: the keys that apply to the server only (a sparsified update needs a reference both ends hold)
SERVER_ONLY = ("scheme", "budget", "alpha", "error_feedback")


def read_compression(
    table: Any, particles: int, architecture: str = "server"
) -> CompressionSettings:
    """The ``compression`` table of ``[protocol]``, checked: one line naming the key otherwise.

    With ``architecture = "walk"`` only ``entry_bits`` and ``a_max`` apply (the token is quantized
    whole)."""
    if not isinstance(table, Mapping):
        raise ConfigError("protocol.compression", "must be a table: { scheme = ..., budget = ... }")
    if architecture != "server":
        for key in SERVER_ONLY:
            if key in table:
                raise ConfigError(
                    f"protocol.compression.{key}",
                    'applies to architecture = "server" (on the walk no reference is held by both '
                    "ends, so the token is quantized whole: give entry_bits and a_max only)",
                )
    values = read_keys(COMPRESSION_KEYS, dict(table), "protocol.compression")
    required = ("budget", "a_max") if architecture == "server" else ("a_max",)
    for key in required:
        if values[key] is None:
            raise ConfigError(f"protocol.compression.{key}", "is required")
    bits: float | None = None
    factor: float | None = None
    if architecture == "server":
        bits, factor = _read_budget(str(values["budget"]))
    try:
        groups_of(values["scheme"], particles, values["alpha"])
    except ValueError as exc:
        raise ConfigError("protocol.compression.alpha", str(exc)) from None
    return CompressionSettings(
        architecture=architecture, scheme=values["scheme"], budget_bits=bits,
        budget_factor=factor, entry_bits=int(values["entry_bits"]), alpha=float(values["alpha"]),
        a_max=_range(values["a_max"]), error_feedback=bool(values["error_feedback"]),
    )  # fmt: skip


def _range(value: Any) -> float | None:
    """a_max: a number, or None for ``max`` (sent with each upload)."""
    return None if value == "max" else float(value)


def _read_budget(text: str) -> tuple[float | None, float | None]:
    """(bits, multiple of d) of the ``budget`` key: one of the two."""
    matched = _BUDGET.match(text)
    if matched:
        factor = float(matched.group(1)) if matched.group(1) else 1.0
        if not factor > 0:
            raise ConfigError(
                "protocol.compression.budget", f"a multiple of d must be > 0 (got {text!r})"
            )
        return None, factor
    try:
        bits = float(text)
    except ValueError:
        bits = float("nan")
    if not (bits > 0 and np.isfinite(bits)):
        raise ConfigError(
            "protocol.compression.budget",
            f'a number of bits > 0 or a multiple of d ("0.5d", "d", "5d"); got {text!r}',
        )
    return bits, None


DOWNLINK_KEYS: tuple[Key, ...] = (
    Key("entry_bits", "integer", 8, "N_b, bits of each entry of the download (1 sign bit, N_b − 1 "
        "magnitude bits)", minimum=2, maximum=32),
    Key("a_max", "number", None, "the quantizer's range (fixed by the scenario), or `max`: the "
        "state's largest magnitude, sent as one 32-bit float (counted)", minimum=0,
        exclusive_minimum=True, words=("max",)),
)  # fmt: skip


@dataclass(frozen=True)
class QuantizedState:
    """A state quantized whole at ``entry_bits`` an entry in [−a_max, a_max]: the walk's token or
    the server's download."""

    entry_bits: int
    a_max: float | None  # None: the state's largest magnitude, sent as RANGE_BITS

    def send(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        """(what the receiver gets, the bits it costs: every entry at N_b bits, and the range
        when it is sent)."""
        bits = float(x.size * self.entry_bits)
        a_max = self.a_max
        if a_max is None:
            a_max, bits = largest_magnitude(x), bits + RANGE_BITS
        return quantize(x, self.entry_bits, a_max, rng), bits


#: the range sent for ``a_max = "max"``: the largest |x| rounded up to a float32
largest_magnitude = kept_range


def read_downlink(table: Any) -> QuantizedState:
    """``[protocol] downlink_compression``, checked."""
    if not isinstance(table, Mapping):
        raise ConfigError(
            "protocol.downlink_compression", "must be a table: { entry_bits = ..., a_max = ... }"
        )
    values = read_keys(DOWNLINK_KEYS, dict(table), "protocol.downlink_compression")
    if values["a_max"] is None:
        raise ConfigError("protocol.downlink_compression.a_max", "is required")
    return QuantizedState(int(values["entry_bits"]), _range(values["a_max"]))


def decode_mask(encoded: EncodedUpdate) -> np.ndarray:
    """The (…, N_p, d) mask of the entries an upload sent (its particles' positions)."""
    values = encoded.values
    size = values.shape[-2] // encoded.positions.shape[-2]
    mask = np.zeros((*values.shape[:-1], encoded.d), dtype=bool)
    np.put_along_axis(mask, np.repeat(encoded.positions, size, axis=-2), True, axis=-1)
    return mask


class Uploader:
    """One run's compressed uploads: ΔΘ → what the server decodes, with its bits (and the
    residual of error feedback)."""

    def __init__(
        self,
        settings: CompressionSettings,
        particles: int,
        d: int,
        rng: np.random.Generator,
        share: float = 1.0,
    ) -> None:
        self.settings = settings
        self.k = settings.k(d, particles, share)
        #: what every upload costs (eqs. 9-11): k is fixed by the budget
        self.bits = settings.range_bits + float(
            upload_bits(settings.scheme, d, self.k, particles, settings.entry_bits, settings.alpha)
        )
        self.rng = rng
        self.residual: dict[Hashable, np.ndarray] = {}
        #: the entries the last upload sent (N_p × d, True at each particle's kept positions)
        self.kept = np.zeros((particles, d), dtype=bool)

    def upload(
        self, agent: Hashable, delta: np.ndarray, feedback: bool = True
    ) -> tuple[np.ndarray, float]:
        """(the decoded ΔΘ the server adds, the upload's bits) of ``agent``'s update ``delta``
        (``agent`` names whose error-feedback residual it is: a node, or a node and an array;
        ``feedback`` False: no residual even with error feedback on, for an update that is a
        difference to what the server holds and so carries what was not sent by itself)."""
        s = self.settings

        def compress(x: np.ndarray) -> np.ndarray:
            # a_max None: the kept entries' largest magnitude, sent with the upload
            encoded = encode(x, s.scheme, self.k, s.entry_bits, s.a_max, self.rng, s.alpha)
            self.kept = decode_mask(encoded)
            return decode(encoded)

        if not (s.error_feedback and feedback):
            return compress(delta), self.bits
        sent, self.residual[agent] = feedback_step(
            delta, self.residual.get(agent, np.zeros_like(delta)), compress
        )
        return sent, self.bits
