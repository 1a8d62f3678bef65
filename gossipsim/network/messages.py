"""What a hop carries: messages that know their size, codecs that wrap them, and server rounds.

A protocol's :meth:`~gossipsim.protocols.base.Protocol.on_token` returns what its holder sends on:

- a :class:`Message` (``bits``, and an optional ``payload`` for protocols whose receivers read it):
  the token moves to the next holder the scheduler picks, over the channel between them;
- a :class:`Round`: the slot is an exchange between a server and one or several clients (each a
  :class:`Transfer` over a channel), in parallel or one after another; no token moves, and the
  scheduler then picks the next agent. The parameter server is addressed as :data:`SERVER` (not a
  node of the graph); ``[protocol] architecture = "server"`` turns any protocol's messages into
  rounds (:class:`~gossipsim.protocols.server.ServerRounds`).

A :class:`Codec` turns a message into the one actually sent (its bits, and what the receiver
decodes). :class:`IdentityCodec` sends every message as it is; compression codecs (top-k
sparsification, quantisation) plug in as further codecs registered in :data:`CODECS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

#: the parameter server's address in a :class:`Transfer` (nodes are 0..K-1; the server is none of them)
SERVER = -1


@dataclass(frozen=True, slots=True)
class Message:
    """A payload of ``bits`` bits (``payload``: what a receiver reads, if anything).

    ``side_bits``: bits the holder sends in its slot besides the token, to its neighbours, at once
    and in parallel with the hop (the importance-weighted walk's indicator shared with them:
    :mod:`gossipsim.protocols.selection`); counted in the slot's bits, not timed."""

    bits: float
    payload: Any = None
    side_bits: float = 0.0


@dataclass(frozen=True, slots=True)
class Transfer:
    """One message of a round, from node ``sender`` to node ``receiver`` (either may be
    :data:`SERVER`)."""

    sender: int
    receiver: int
    message: Message


@dataclass(frozen=True, slots=True)
class Round:
    """A slot spent on ``transfers`` between a server and clients, in *phases*: the transfers of a
    phase go at once (the phase lasts as long as its slowest), the phases one after another.

    ``phases`` gives the number of transfers in each phase, in order (they add up to the number of
    transfers). Without it the round is one phase of all its transfers (all at once), or, with
    ``sequential``, one phase per transfer (one after another). Client selection's round
    (:mod:`gossipsim.protocols.selection`) has three: the broadcast of the global particles to
    every client, every client's report, the selected client's upload.

    A ``chained`` round's phases each depend on the ones before them: on a channel that loses a
    transfer for good, the phases after its phase are not sent (no bits, no time; the rest of its
    own phase is). ``compute_after`` places the slot's computation in a chained round: after its
    first ``compute_after`` transfers (0: before them all; a phase boundary); a transfer lost before
    it means that nothing is computed (no compute time). The parameter server's round (a download,
    the agent's computation, an upload: :func:`~gossipsim.protocols.server.server_round`) is
    chained with ``compute_after = 1``."""

    transfers: Sequence[Transfer] = field(default_factory=tuple)
    sequential: bool = False
    chained: bool = False
    compute_after: int = 0
    phases: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        count = len(self.transfers)
        if self.phases:
            if self.sequential:
                raise ValueError("give phases or sequential, not both")
            if any(size < 1 for size in self.phases) or sum(self.phases) != count:
                raise ValueError(
                    f"phases must be positive sizes adding up to the {count} transfers, got "
                    f"{self.phases}"
                )
        if self.chained and not (self.sequential or len(self.phases) > 1):
            raise ValueError("a chained round has phases one after another (or is sequential)")
        if not 0 <= self.compute_after <= count:
            raise ValueError(
                f"compute_after must be 0..{count} (the transfers before the "
                f"computation), got {self.compute_after}"
            )
        if self.compute_after not in self.boundaries:
            raise ValueError(
                f"compute_after must fall between phases ({self.boundaries}), got "
                f"{self.compute_after}"
            )

    @property
    def phase_sizes(self) -> tuple[int, ...]:
        """The number of transfers in each phase, in order (see the class docstring)."""
        if self.phases:
            return self.phases
        count = len(self.transfers)
        if self.sequential:
            return (1,) * count
        return (count,) if count else ()

    @property
    def boundaries(self) -> tuple[int, ...]:
        """The transfer indices at which a phase starts or the round ends (0 first)."""
        edges = [0]
        for size in self.phase_sizes:
            edges.append(edges[-1] + size)
        return tuple(edges)

    def phase_of(self) -> tuple[int, ...]:
        """Each transfer's phase index, in transfer order."""
        return tuple(p for p, size in enumerate(self.phase_sizes) for _ in range(size))

    @property
    def bits(self) -> float:
        return float(sum(t.message.bits for t in self.transfers))


class Codec(ABC):
    """Turns a message into the one sent over a channel."""

    name: ClassVar[str] = ""

    @abstractmethod
    def encode(self, message: Message) -> Message:
        """The message as sent: its size in bits and what the receiver decodes."""


class IdentityCodec(Codec):
    """Sends every message as it is (the default)."""

    name = "identity"

    def encode(self, message: Message) -> Message:
        return message


#: codecs by name (``[protocol] codec``)
CODECS: dict[str, Codec] = {}


def register_codec(codec: Codec) -> Codec:
    """Register ``codec`` under its name (the one line that adds a codec)."""
    CODECS[codec.name] = codec
    return codec


register_codec(IdentityCodec())
