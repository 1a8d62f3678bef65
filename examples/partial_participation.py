"""A protocol of one's own, plugged into gossipsim without editing it (docs/extending.md).

G-FVL with partial participation: a node that holds the token adds its exact conjugate factor to
the posterior with probability ``participation`` and otherwise only passes the token on; it tries
again at its next visit. Once its factor is in, later visits change nothing, as in G-FVL
(eqs. 13-14 of the core paper). A node that asks to be forgotten has its factor subtracted at its
next visit (eq. 21), or never adds it.

With ``participation = 1`` this is conjugate G-FVL exactly: the same tables, slot for slot.

Run it from the repository's top folder (the module must be importable, here from ``examples/``)::

    PYTHONPATH=examples gossipsim run examples/partial_participation.toml
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from gossipsim.core.capabilities import EXACT_FACTORS
from gossipsim.core.schema import Key
from gossipsim.errors import ConfigError
from gossipsim.network.messages import Message
from gossipsim.protocols import BuildRequest, Protocol, ProtocolKind, StateTrace


class PartialParticipation(Protocol):
    """One run's protocol: the state is the posterior's natural parameters η (recorded in a
    :class:`StateTrace` at every change; gossipsim computes the KL divergences from it)."""

    def __init__(
        self,
        prior: np.ndarray,
        factors: np.ndarray,
        rng: np.random.Generator,
        participation: float,
        *,
        bits: float,
        forgotten: Iterable[int] = (),
        trace: StateTrace | None = None,
        start_slot: int = 0,
    ) -> None:
        self.eta = np.array(prior, dtype=float)
        self.factors = np.asarray(factors, dtype=float)
        self.rng = rng
        self.participation = participation
        self.message = Message(bits)  # the same size at every hop: one object
        nodes = self.factors.shape[0]
        self.contributed = np.zeros(nodes, dtype=bool)  # the node's factor is in η
        self.forgotten = np.zeros(nodes, dtype=bool)
        self.forgotten[list(forgotten)] = True
        self.removed: dict[int, int] = {}
        self.skipped = 0  # visits at which a node chose not to update
        self.trace = StateTrace() if trace is None else trace
        self.trace.record(start_slot, self.eta)  # the prior, from start_slot on

    def on_token(self, holder: int, slot: int) -> Message:
        if self.forgotten[holder]:
            if self.contributed[holder]:  # eq. (21): η ← η − s_k
                self.eta -= self.factors[holder]
                self.contributed[holder] = False
                self.removed[holder] = slot
                self.trace.record(slot, self.eta)
        elif not self.contributed[holder]:
            if self.rng.random() < self.participation:  # eq. (13): η ← η + s_k
                self.eta += self.factors[holder]
                self.contributed[holder] = True
                self.trace.record(slot, self.eta)
            else:
                self.skipped += 1
        return self.message

    def on_request(self, node: int, slot: int) -> None:
        if self.forgotten[node]:
            return
        self.forgotten[node] = True
        if not self.contributed[node]:
            self.removed[node] = slot - 1  # nothing to remove

    def done(self) -> bool:
        # nothing left to add or to remove: every node has contributed or is forgotten, and no
        # forgotten node's factor is still in η
        return bool(np.all(self.contributed != self.forgotten))

    def removals(self) -> dict[int, int]:
        return dict(self.removed)

    def stats(self) -> dict[str, float]:
        return {"skipped_updates": float(self.skipped)}  # a column of runs.csv

    def traces(self) -> dict[str, StateTrace]:
        return {"main": self.trace}


class PartialGFVL(ProtocolKind):
    """``[protocol] kind = "partial_participation:PartialGFVL"``: its keys, its needs, its build."""

    name = "partial_participation:PartialGFVL"
    description = "G-FVL in which a visited node updates with probability `participation`"
    keys = (
        Key(
            "participation",
            "number",
            0.5,
            "probability that a visited node adds its factor",
            minimum=0.0,
            exclusive_minimum=True,
            maximum=1.0,
        ),
    )

    def check_model(self, model: type) -> None:
        if EXACT_FACTORS not in getattr(model, "capabilities", frozenset()):
            raise ConfigError(
                "protocol.kind",
                f"{self.name} needs a model with exact conjugate factors; "
                f"{getattr(model, 'kind', model)!r} has none",
            )

    def build(self, request: BuildRequest) -> PartialParticipation:
        settings: dict[str, Any] = request.settings  # read from [protocol] by ProtocolKind.settings
        return PartialParticipation(
            request.model.prior,
            request.model.factors(request.data),
            request.rng,
            settings["participation"],
            bits=request.bits,
            forgotten=request.forgotten,
            trace=request.trace,
            start_slot=request.start_slot,
        )
