"""The retrain-from-scratch baseline, paired with the protocol under test on the same walk.

:class:`WithRetrainBaseline` runs two worlds on one token walk: the protocol under test (``main``),
which serves unlearning requests its own way, and a ``retrain`` world that serves every request by
restarting from the prior and learning again without every node forgotten so far. Both see the same
holders in the same slots (the same walk realisation and slot times), so the difference between their
latencies is due to the protocol alone. Before the first request the retrain world is identical to
the main one and is not simulated; the token's payload and timing are those of the main world. What
the walk or the server's links do to the main world's messages happens to the retrain world too: a
lost token (:meth:`~gossipsim.protocols.base.Protocol.on_loss`), a round's outcome and a slot taken
back (:meth:`~gossipsim.protocols.base.Protocol.take_back`) reach both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gossipsim.network.messages import Message, Round
from gossipsim.protocols.base import Protocol, Recovery, StateTrace

FreshProtocol = Callable[[frozenset[int], StateTrace | None, int], Protocol]


class WithRetrainBaseline(Protocol):
    """Pair ``main`` with a retrain-from-scratch world built by ``fresh(forgotten, trace, slot)``."""

    def __init__(self, main: Protocol, fresh: FreshProtocol) -> None:
        self.main = main
        self.representation = main.representation
        self.fresh = fresh
        self.retrain: Protocol | None = None
        self.forgotten: frozenset[int] = frozenset()
        self.retrain_trace: StateTrace | None = None  # made by the first restart, passed on
        self.recovers_token = main.recovers_token
        self._custody: tuple[int, int] | None = None  # the last hand-over (failures)

    def on_token(self, holder: int, slot: int) -> Message | Round:
        if self.retrain is not None:
            self.retrain.on_token(holder, slot)
        return self.main.on_token(holder, slot)

    def on_request(self, node: int, slot: int) -> None:
        self.main.on_request(node, slot)
        self.forgotten = self.forgotten | {node}
        self.retrain = self.fresh(self.forgotten, self.retrain_trace, slot)
        self.retrain_trace = self.retrain.traces()["main"]
        if self._custody is not None:  # a restart since the last hand-over goes back to nothing
            self.retrain.hand_over(*self._custody)

    def done(self) -> bool:
        return self.main.done() and (self.retrain is None or self.retrain.done())

    def on_loss(self, sender: int, receiver: int, slot: int, message: Message) -> Recovery:
        """Both worlds learn of the loss (the same walk loses the same token); the main world's
        recovery is the walk's (its payload and timing are the token's)."""
        if self.retrain is not None:
            self.retrain.on_loss(sender, receiver, slot, message)
        return self.main.on_loss(sender, receiver, slot, message)

    def on_round(self, slot: int, delivered: Sequence[bool]) -> None:
        """Both worlds learn the round's outcome (the same transfers, realised once)."""
        self.main.on_round(slot, delivered)
        if self.retrain is not None:
            self.retrain.on_round(slot, delivered)

    def checkpoint(self, holder: int) -> Any:
        """Both worlds' checkpoints (the retrain world's once it exists)."""
        retrain = self.retrain
        return (
            self.main.checkpoint(holder),
            retrain,
            retrain.checkpoint(holder) if retrain is not None else None,
        )

    def take_back(self, saved: Any, slot: int) -> None:
        """Both worlds take the slot back: a lost transfer is lost to both (one walk, one
        channel)."""
        main, retrain, retrain_saved = saved
        self.main.take_back(main, slot)
        if retrain is not None:
            retrain.take_back(retrain_saved, slot)

    def hand_over(self, slot: int, holder: int) -> None:
        self._custody = (slot, holder)
        self.main.hand_over(slot, holder)
        if self.retrain is not None:
            self.retrain.hand_over(slot, holder)

    def serve_for(self, holder: int, node: int, slot: int) -> bool:
        """The main protocol's delegate (the retrain world restarted without the node at the
        request: nothing of it to remove)."""
        return self.main.serve_for(holder, node, slot)

    def on_holder_lost(self, holder: int, slot: int) -> None:
        self.main.on_holder_lost(holder, slot)
        if self.retrain is not None:
            self.retrain.on_holder_lost(holder, slot)

    def stats(self) -> dict[str, float]:
        return self.main.stats()

    def node_view(self) -> Any:
        return self.main.node_view()

    def series(self) -> dict[str, Any]:
        return self.main.series()

    def removals(self) -> dict[int, int]:
        return self.main.removals()

    def traces(self) -> dict[str, StateTrace]:
        out = dict(self.main.traces())
        out["retrain"] = self.retrain_trace if self.retrain_trace is not None else StateTrace()
        return out
