"""A protocol run inside another that changes what its slots send (the parameter server's rounds,
:mod:`~gossipsim.protocols.server`; the centre's upload, :mod:`~gossipsim.protocols.centre`):
everything else is the wrapped protocol's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gossipsim.network.messages import Message
from gossipsim.protocols.base import Protocol, Recovery, StateTrace


class Wrapped(Protocol):
    """Passes every call but :meth:`on_token` on to ``protocol`` (its states, requests, removals,
    counters and scores are the run's)."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.representation = protocol.representation
        self.recovers_token = protocol.recovers_token

    def on_round(self, slot: int, delivered: Sequence[bool]) -> None:
        self.protocol.on_round(slot, delivered)

    def checkpoint(self, holder: int) -> Any:
        return self.protocol.checkpoint(holder)

    def take_back(self, saved: Any, slot: int) -> None:
        self.protocol.take_back(saved, slot)

    def on_request(self, node: int, slot: int) -> None:
        self.protocol.on_request(node, slot)

    def done(self) -> bool:
        return self.protocol.done()

    def traces(self) -> dict[str, StateTrace]:
        return self.protocol.traces()

    def on_loss(self, sender: int, receiver: int, slot: int, message: Message) -> Recovery:
        return self.protocol.on_loss(sender, receiver, slot, message)

    def removals(self) -> dict[int, int]:
        return self.protocol.removals()

    def hand_over(self, slot: int, holder: int) -> None:
        self.protocol.hand_over(slot, holder)

    def on_holder_lost(self, holder: int, slot: int) -> None:
        self.protocol.on_holder_lost(holder, slot)

    def serve_for(self, holder: int, node: int, slot: int) -> bool:
        return self.protocol.serve_for(holder, node, slot)

    def stats(self) -> dict[str, float]:
        return self.protocol.stats()

    def node_view(self) -> Any:
        return self.protocol.node_view()

    def series(self) -> dict[str, Any]:
        return self.protocol.series()
