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

**Lost transfers.** The round is chained (``Round(chained=True, compute_after=1)``): the upload
depends on the download, the computation comes between them. On links that lose transfers
(:class:`~gossipsim.network.arq.LossyServerLinks`, ``[links] downlink_loss``, ``uplink_loss``;
stop-and-wait ARQ, every attempt's bits counted) a download lost for good means that the agent
does not compute and sends no upload (no bits, no compute or upload time: the slot lasts the
download's timeouts); an upload lost for good means that the server does not apply it. Either way
the slot is an iteration without an update: the server's state stays as it was, and so does the
agent's own (its factor, score, residual or history: the agent knows from ARQ that its upload was
not acknowledged, and nothing it computed counts). The wrapper commits a slot's update only once
every transfer of its round arrived: built with ``lossy=True`` it saves what the slot may change
before the protocol computes (:meth:`~gossipsim.protocols.base.Protocol.checkpoint`) and, told by
the engine that a transfer was lost (:meth:`on_round`), takes the slot back
(:meth:`~gossipsim.protocols.base.Protocol.take_back`); the protocol's own rounds likewise. The
protocol computes before the round is carried out, so a slot taken back has spent the random
draws of its computation (the streams never rewind; the draws of a later slot are other numbers
than without the loss, with the same law). Without ``lossy`` a lost transfer is an error (nothing
was saved to take back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gossipsim.network.messages import SERVER, Message, Round, Transfer
from gossipsim.protocols.base import Protocol
from gossipsim.protocols.wrapped import Wrapped


def server_round(agent: int, download: Message, upload: Message) -> Round:
    """The slot's round with ``agent``: the ``download`` of the server's state to it, its
    computation, then the ``upload`` of its update to the server, one after the other, the upload
    sent only if the download arrived (chained). The vectorised engine charges the same round
    (:func:`gossipsim.world.world.slot_costs`)."""
    return Round(
        (Transfer(SERVER, agent, download), Transfer(agent, SERVER, upload)),
        sequential=True,
        chained=True,
        compute_after=1,
    )


class ServerRounds(Wrapped):
    """Run ``protocol`` with a parameter server: each slot a download and an upload (see the
    module docstring); ``lossy``: the links may lose a transfer, and a slot whose round loses one
    is taken back."""

    def __init__(self, protocol: Protocol, lossy: bool = False) -> None:
        super().__init__(protocol)
        self.lossy = lossy
        # no token to lose: a round with an agent that fails is taken back (on_round) instead
        self.recovers_token = lossy
        self._saved: Any = None  # the protocol's checkpoint before the current slot (lossy)
        self._saved_bits: float | None = None
        self._state_bits: float | None = None  # size of the state the server holds
        self._own_round = False  # whether the last slot's round was the protocol's own
        # the rounds made for the current (message, download size), by agent: a constant-size
        # protocol returns the same message every slot, so each agent's round is made once
        self._made_for: tuple[Message, float] | None = None
        self._rounds: dict[int, Round] = {}

    def on_token(self, holder: int, slot: int) -> Message | Round:
        if self.lossy:
            self._saved = self.protocol.checkpoint(holder)
            self._saved_bits = self._state_bits
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

    def hand_over(self, slot: int, holder: int) -> None:
        """Nothing to keep: the server holds the state, and no token moves (failures)."""

    def on_round(self, slot: int, delivered: Sequence[bool]) -> None:
        if not all(delivered):
            if not self.lossy:
                raise ValueError(
                    f"slot {slot}: a transfer between the server and the agent was lost, and "
                    "nothing was saved to take the slot back: build ServerRounds(protocol, "
                    "lossy=True) for links that lose transfers"
                )
            # the server does not apply the update, and the agent keeps nothing of it
            self.protocol.take_back(self._saved, slot)
            self._state_bits = self._saved_bits  # the server holds the state it held
        self._saved = None
        if self._own_round:
            self.protocol.on_round(slot, delivered)
