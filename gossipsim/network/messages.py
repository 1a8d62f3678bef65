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
    """A payload of ``bits`` bits (``payload``: what a receiver reads, if anything)."""

    bits: float
    payload: Any = None


@dataclass(frozen=True, slots=True)
class Transfer:
    """One message of a round, from node ``sender`` to node ``receiver`` (either may be
    :data:`SERVER`)."""

    sender: int
    receiver: int
    message: Message


@dataclass(frozen=True, slots=True)
class Round:
    """A slot spent on ``transfers`` between a server and clients (``sequential``: one after another,
    else all at once: the slot lasts as long as the slowest).

    A ``chained`` round is sequential and each of its transfers depends on the ones before it: on a
    channel that loses a transfer for good, the transfers after it are not sent (no bits, no time).
    ``compute_after`` places the slot's computation in a chained round: after its first
    ``compute_after`` transfers (0: before them all); a transfer lost before it means that nothing is
    computed (no compute time). The parameter server's round (a download, the agent's computation,
    an upload: :func:`~gossipsim.protocols.server.server_round`) is chained with
    ``compute_after = 1``."""

    transfers: Sequence[Transfer] = field(default_factory=tuple)
    sequential: bool = False
    chained: bool = False
    compute_after: int = 0

    def __post_init__(self) -> None:
        if self.chained and not self.sequential:
            raise ValueError("a chained round is sequential: its transfers go one after another")
        if not 0 <= self.compute_after <= len(self.transfers):
            raise ValueError(
                f"compute_after must be 0..{len(self.transfers)} (the transfers before the "
                f"computation), got {self.compute_after}"
            )

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
