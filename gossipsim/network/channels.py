"""Channels: what a transmission between two nodes costs, or whether it is lost.

The engine asks the channel of every hop (and of every transfer of a server round) for a
:class:`Delivery`: the seconds until the message arrives, or, for a lost message, until the loss is
known (a timeout), with ``lost`` set. :class:`~gossipsim.network.links.LinkModel` (homogeneous links: rate
and latency, never lost) is the channel of every scenario today; per-edge rates, losses, ARQ and
link failures are further :class:`Channel` subclasses (lossy and per-edge links:
:mod:`gossipsim.network.arq`). A channel that never loses anything says so
(``lossy = False``) and gives its delay as a plain number, which keeps the engine's per-hop work
small. The fast path runs a channel only if it declares a kernel (``kernel``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, NamedTuple

import numpy as np

from gossipsim.network.messages import Message


class Delivery(NamedTuple):
    """The outcome of one transmission: its ``delay`` in seconds (until it arrived, or until its
    loss is known), whether it was ``lost``, the ``bits`` actually sent (every attempt's: None, the
    message's bits once) and the number of ``attempts`` (1 + the retransmissions of an ARQ
    channel). A named tuple: made once per hop of a lossy channel, where a frozen dataclass's
    construction cost a third of the hop."""

    delay: float
    lost: bool = False
    bits: float | None = None
    attempts: int = 1


class Channel(ABC):
    """The links of a run."""

    #: whether a transmission can be lost (then the engine calls :meth:`transmit`)
    lossy: ClassVar[bool] = False
    #: the fast path's kernel for this channel, or None (never vectorised)
    kernel: ClassVar[str | None] = None

    @abstractmethod
    def delay(self, sender: int, receiver: int, bits: float) -> float:
        """Seconds for a delivered transmission of ``bits`` from ``sender`` to ``receiver``."""

    def transmit(
        self, sender: int, receiver: int, message: Message, rng: np.random.Generator
    ) -> Delivery:
        """One transmission of ``message``; lossless by default."""
        return Delivery(self.delay(sender, receiver, message.bits))

    @property
    def takes_no_time(self) -> bool:
        """Whether every transmission is instantaneous (then a slot's start cannot depend on the
        walk); False unless a channel knows better."""
        return False

    def why_event_engine(self) -> str:
        """Why the vectorised engine cannot run this channel (it declares no kernel it has), in
        words for ``engine = "auto"``."""
        return f"the channel {type(self).__name__} declares no vectorised kernel"
