"""What a run of the event engine records, and what it is given: an unlearning :class:`Request`,
its :class:`Arrival` at the protocol, the :class:`Event` s other than a plain hop and the whole
:class:`RunRecord` (one entry per slot) that measurement reads. Data only: the engine that fills
them is :mod:`gossipsim.engine.token`; the vectorized engine fills the same records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gossipsim.engine.protocol_api import StateTrace


@dataclass(frozen=True)
class Request:
    """An unlearning request for node index ``node``, at an iteration (slot) or a simulated time."""

    node: int
    at_iteration: int | None = None
    at_time: float | None = None

    def __post_init__(self) -> None:
        if (self.at_iteration is None) == (self.at_time is None):
            raise ValueError("a request needs exactly one of at_iteration and at_time")


@dataclass(frozen=True)
class Arrival:
    """Request ``request`` (index into the run's requests) reached the protocol before ``slot``."""

    request: int
    node: int
    slot: int
    time: float


@dataclass(frozen=True, slots=True)
class Event:
    """Something other than a plain hop, at the end of ``slot`` (simulated ``time``): ``kind`` is
    ``lost`` (the token sent from ``sender`` to ``receiver`` was lost), ``holder-lost`` (``sender``
    went down holding the token; ``receiver`` keeps its copy), ``regenerated`` (``receiver``
    holds the token after a loss), ``round`` (the slot was a round of ``transfers`` transfers, of which
    ``delivered`` arrived) or ``ended`` (the token was lost for good)."""

    slot: int
    time: float
    kind: str
    sender: int = -1
    receiver: int = -1
    transfers: int = 0
    delivered: int = 0


@dataclass
class RunRecord:
    """Raw record of one run: one entry per slot, plus request arrivals, the protocol's traces,
    its removal slots (:meth:`~gossipsim.protocols.base.Protocol.removals`), the events other than
    a plain hop and the retransmissions of a lossy channel."""

    holders: np.ndarray
    end_times: np.ndarray
    bits: np.ndarray
    arrivals: list[Arrival]
    traces: dict[str, StateTrace]
    stopped_early: bool = False
    requests: Sequence[Request] = field(default_factory=tuple)
    removals: dict[int, int] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    representation: str = "natural-parameters"  # what the traces' states are
    #: failed attempts that a lossy channel sent again (ARQ), over the run
    retransmissions: int = 0
    #: seconds a lost token waited for the node that restarts it to be up again (failures)
    token_wait_seconds: float = 0.0
    #: seconds during which every node was down, up to the run's last slot (failures)
    all_down_seconds: float = 0.0
    #: the protocol's values per slot (:meth:`~gossipsim.protocols.base.Protocol.series`)
    series: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def slots(self) -> int:
        return int(self.holders.size)
