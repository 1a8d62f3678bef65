"""What a node does when it holds the token: the interface between the engine and protocols.

The engine (:mod:`gossipsim.engine.token`) knows nothing about models: at every slot it calls
:meth:`Protocol.on_token` of the protocol it was given, which returns what the holder sends (a
:class:`~gossipsim.network.messages.Message` passed on with the token, or a
:class:`~gossipsim.network.messages.Round` of transfers between a server and clients), delivers unlearning
requests through :meth:`Protocol.on_request`, tells it of lost transmissions
(:meth:`Protocol.on_loss`, which decides who holds the token next) and of a round's outcome
(:meth:`Protocol.on_round`), and asks :meth:`Protocol.done` whether anything is left to do. A
protocol that can take a slot back (:meth:`Protocol.checkpoint`, :meth:`Protocol.take_back`) runs
with a parameter server whose links lose transfers. A new
algorithm is a new :class:`Protocol` subclass (and a protocol kind,
:mod:`gossipsim.protocols.registry`); the engine is never edited. This module imports nothing of
gossipsim's but the messages, so the engine reaches no protocol implementation.

Protocols record their own state in a :class:`StateTrace` each time it changes, as raw arrays; the
metrics (KL divergences, latencies) are computed from the traces after the run, vectorised, so the
per-hop work stays small.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gossipsim.network.messages import Message, Round


@dataclass(frozen=True, slots=True)
class Recovery:
    """After the token was lost on its way: ``holder`` holds the next slot, ``after`` seconds after
    the loss is known (the sender keeping the token and trying again, or another node regenerating
    it); a ``holder`` of None ends the run (the token is gone)."""

    holder: int | None
    after: float = 0.0


class StateTrace:
    """Piecewise-constant record of a state vector over slots.

    ``record(slot, state)`` says "at the end of ``slot`` the state is ``state``"; the state at any
    later slot is the last one recorded at or before it (a later record for the same slot wins).
    Slot 0 is the state before the first slot.
    """

    __slots__ = ("_slots", "_states")

    def __init__(self) -> None:
        self._slots: list[int] = []
        self._states: list[np.ndarray] = []

    def record(self, slot: int, state: np.ndarray) -> None:
        self._slots.append(slot)
        self._states.append(np.array(state, dtype=float, copy=True))

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def slots(self) -> np.ndarray:
        return np.asarray(self._slots, dtype=np.int64)

    @property
    def states(self) -> np.ndarray:
        return np.asarray(self._states, dtype=float)

    def at(self, slots: np.ndarray) -> np.ndarray:
        """Index into :attr:`states` of the state in force at each of ``slots`` (-1 before any)."""
        return np.searchsorted(self.slots, np.asarray(slots), side="right") - 1

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` records only (a slot taken back: :meth:`Protocol.take_back`)."""
        del self._slots[length:]
        del self._states[length:]


class RecordedTrace(StateTrace):
    """A trace recorded elsewhere, as arrays: its record slots (ascending) and the states recorded
    then (the vectorised engine's batched kernels hand each run's trace to the measurement this
    way). It takes no further records."""

    __slots__ = ("_slot_array", "_state_array")

    def __init__(self, slots: np.ndarray, states: np.ndarray) -> None:
        super().__init__()
        self._slot_array = np.asarray(slots, dtype=np.int64)
        self._state_array = np.asarray(states, dtype=float)

    def record(self, slot: int, state: np.ndarray) -> None:
        raise TypeError("a RecordedTrace takes no further records")

    def truncate(self, length: int) -> None:
        raise TypeError("a RecordedTrace takes no further records")

    def __len__(self) -> int:
        return int(self._slot_array.size)

    @property
    def slots(self) -> np.ndarray:
        return self._slot_array

    @property
    def states(self) -> np.ndarray:
        return self._state_array


class Protocol(ABC):
    """A node's behaviour when it holds the token."""

    #: what the recorded states are (:mod:`gossipsim.states.representations`)
    representation: str = "natural-parameters"

    @abstractmethod
    def on_token(self, holder: int, slot: int) -> Message | Round:
        """Do the holder's work for ``slot``; return the message it passes on with the token (a
        constant-size protocol returns the same :class:`Message` every time), or the
        :class:`Round` of transfers the slot is spent on."""

    @abstractmethod
    def on_request(self, node: int, slot: int) -> None:
        """An unlearning request for ``node`` arrives before ``slot``."""

    @abstractmethod
    def done(self) -> bool:
        """True when no further slot can change the state (until a new request arrives)."""

    @abstractmethod
    def traces(self) -> dict[str, StateTrace]:
        """The recorded states, by world name (``"main"``, and e.g. ``"retrain"`` for a baseline)."""

    def on_loss(self, sender: int, receiver: int, slot: int, message: Message) -> Recovery:
        """The token sent at the end of ``slot`` from ``sender`` to ``receiver`` was lost: who
        holds it next. By default the sender keeps it and tries again in the next slot."""
        return Recovery(sender)

    #: whether :meth:`hand_over` and :meth:`on_holder_lost` are implemented (runs with
    #: ``[failures]`` need them)
    recovers_token: bool = False

    def hand_over(self, slot: int, holder: int) -> None:
        """Under failures: the token's state at the end of ``slot`` is the copy its custodian keeps
        (slot 0: the run's start, the first holder's own copy), and ``holder`` holds it next; until
        the next hand-over only ``holder``'s slots change the token, and :meth:`on_holder_lost`
        takes them back."""
        raise NotImplementedError(f"{type(self).__name__} cannot recover a lost token")

    def on_holder_lost(self, holder: int, slot: int) -> None:
        """Under failures: ``holder`` went down with the token during (or at the end of) ``slot``;
        the token is back to the last :meth:`hand_over`'s copy, which the protocol records at the
        end of ``slot``. ``holder``'s updates since then are lost although it made them: what it
        keeps about its contribution must agree with the restored token when it is next visited
        (the token tells it which of its updates it holds)."""
        raise NotImplementedError(f"{type(self).__name__} cannot recover a lost token")

    def serve_for(self, holder: int, node: int, slot: int) -> bool:
        """Under failures with ``requests_from_down = "delegate"``: ``holder``, a neighbour of the
        down ``node`` whose request has arrived, holds the token in ``slot`` and may remove
        ``node``'s contribution for it (it holds a copy of what the removal needs). True if it did
        (the removal then happens in ``slot``); False by default: the request waits for the
        node's own visit."""
        return False

    def on_round(self, slot: int, delivered: Sequence[bool]) -> None:
        """Which transfers of the :class:`Round` returned for ``slot`` arrived (in its order; in a
        chained round, those not sent after a lost one are False too); ignored by default (a
        protocol without rounds never gets this call)."""
        return None

    def checkpoint(self, holder: int) -> Any:
        """What :meth:`on_token` for ``holder`` may change, saved just before it, for
        :meth:`take_back`: a parameter server on links that lose transfers
        (:class:`~gossipsim.protocols.server.ServerRounds`) takes a slot back when the agent's
        download or upload is lost for good. A protocol that cannot take a slot back raises
        :class:`NotImplementedError` (the default; its kind's ``takes_back`` is then False)."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot take a slot back (no checkpoint/take_back): it needs "
            "server links that lose nothing"
        )

    def take_back(self, saved: Any, slot: int) -> None:
        """Undo the update :meth:`on_token` made in ``slot`` after :meth:`checkpoint` returned
        ``saved``: the state, every node's own state, the counters, the removals and the recorded
        states as they were before it, as if the slot had changed nothing; the random draws it
        made stay spent (the streams never rewind)."""
        raise NotImplementedError(f"{type(self).__name__} cannot take a slot back")

    def removals(self) -> dict[int, int]:
        """For each forgotten node (by index), the slot at whose end its contribution had left the
        state (the removal slot i* of its request); ``r − 1`` for a node that had contributed
        nothing when its request arrived before slot r (nothing to remove). Nodes not yet removed
        are absent."""
        return {}

    def stats(self) -> dict[str, float]:
        """Counters reported per run in runs.csv (e.g. ``damped_steps``, ``domain_recoveries``)."""
        return {}

    def series(self) -> dict[str, np.ndarray]:
        """Values per slot (one per slot of the run, in slot order) that metrics.csv writes as
        columns of their own at the slots it records (e.g. client selection's
        ``selection_entropy`` and ``indicator_bits``); none by default."""
        return {}

    def node_view(self) -> Any:
        """The :class:`~gossipsim.scheduling.NodeView` the run's scheduler may read (scores the
        protocol keeps about the nodes, changed in place as the run goes on), or None. The event
        engine's runner builds the walker with it."""
        return None
