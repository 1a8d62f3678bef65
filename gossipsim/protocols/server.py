"""The parameter-server architecture (``[protocol] architecture = "server"``) for any protocol.

:class:`ServerRounds` wraps a protocol written for the token walk (its ``on_token(holder, slot)``
returns the :class:`~gossipsim.network.messages.Message` the holder passes on) so that every slot is a
:class:`~gossipsim.network.messages.Round` between a parameter server and the agent the scheduler picks (the
walk's "holder" becomes "the scheduled agent"): the server holds the global state; the agent

1. downloads it (a :class:`~gossipsim.network.messages.Transfer` from :data:`~gossipsim.network.messages.SERVER`
   to the agent, over its downlink), as many bits as the state the server holds: the message the
   protocol sent at the previous slot (at slot 1, the one it sends now: the initial state has the
   same size as every state for the protocols shipped, whose messages are of constant size);
2. computes: the wrapped protocol's ``on_token(agent, slot)``, exactly the holder's work on the walk
   (the same update of the same state: a server scheduled like the walk learns the same states
   slot for slot);
3. uploads its update (a transfer from the agent to the server, over its uplink): the message the
   protocol returned. For G-FVL that is the new global state (natural parameters), the same size
   as the download.

The transfers are sequential (``Round(sequential=True)``): the slot lasts the compute time plus the
download's and the upload's delays, and both transfers' bits are counted (two messages per slot, also
when the scheduler picks the same agent again: a Metropolis–Hastings rejection is another round with
that agent). No token moves: the engine asks the scheduler for the next agent after each round. A
protocol that returns a :class:`~gossipsim.network.messages.Round` itself runs its own rounds: that round
is passed on unchanged, and so is what the engine says of it (:meth:`on_round`).

The server's links (:class:`~gossipsim.network.links.ServerLinks`, built from ``[links]``) never lose a
transfer. A channel that can lose one is refused at the first loss: the agent's update is made at
its computation and the wrapped protocol cannot take it back, so a lost download or upload has no
faithful meaning here yet.
"""

from __future__ import annotations

from collections.abc import Sequence

from gossipsim.network.messages import SERVER, Message, Round, Transfer
from gossipsim.protocols.base import Protocol
from gossipsim.protocols.wrapped import Wrapped


def server_round(agent: int, download: Message, upload: Message) -> Round:
    """The slot's round with ``agent``: the ``download`` of the server's state to it, then the
    ``upload`` of its update to the server, one after the other. The vectorised engine charges the
    same round (:func:`gossipsim.world.world.slot_costs`)."""
    return Round(
        (Transfer(SERVER, agent, download), Transfer(agent, SERVER, upload)), sequential=True
    )


class ServerRounds(Wrapped):
    """Run ``protocol`` with a parameter server: each slot a download and an upload (see the
    module docstring)."""

    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self._state_bits: float | None = None  # size of the state the server holds
        self._own_round = False  # whether the last slot's round was the protocol's own
        # the rounds made for the current (message, download size), by agent: a constant-size
        # protocol returns the same message every slot, so each agent's round is made once
        self._made_for: tuple[Message, float] | None = None
        self._rounds: dict[int, Round] = {}

    def on_token(self, holder: int, slot: int) -> Message | Round:
        message = self.protocol.on_token(holder, slot)
        if isinstance(message, Round):
            self._own_round = True
            return message
        self._own_round = False
        down = message.bits if self._state_bits is None else self._state_bits
        self._state_bits = message.bits
        made_for = self._made_for
        if made_for is None or made_for[0] is not message or made_for[1] != down:
            self._made_for = (message, down)
            self._rounds = {}
        found = self._rounds.get(holder)
        if found is None:
            found = self._rounds[holder] = server_round(holder, Message(down), message)
        return found

    def on_round(self, slot: int, delivered: Sequence[bool]) -> None:
        if self._own_round:
            self.protocol.on_round(slot, delivered)
            return
        if not all(delivered):
            raise ValueError(
                f"slot {slot}: a transfer between the server and the agent was lost; the server "
                "architecture needs lossless links (the agent's update cannot be taken back)"
            )
