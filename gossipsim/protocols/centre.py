"""A centralised protocol kind (``svgd``, and any kind whose :attr:`ProtocolKind.centralised
<gossipsim.protocols.registry.ProtocolKind.centralised>` is true): learning at a centre that holds
every node's data, with no walk.

What it costs, on both engines: **the one upload of every node's data to the centre, at the
start**, and nothing afterwards.

- In slot 1 every node sends its data to the centre, all at once (a
  :class:`~gossipsim.network.messages.Round` of one :class:`~gossipsim.network.messages.Transfer` per node to
  :data:`~gossipsim.network.messages.SERVER`, not sequential): ``bits_per_entry`` × the numbers of the
  node's data (:meth:`Model.node_data_entries <gossipsim.models.base.Model.node_data_entries>`:
  its training rows, features and labels, as the model holds them; a Gaussian-mixture node its
  likelihood factor's weights, means and variance) over the node's uplink (``[links]
  uplink_rate_bps`` and ``uplink_latency_s``, the walk's ``rate_bps`` and ``latency_s`` where not
  given). Slot 1 ends after its computation and the slowest upload.
- Every later slot costs its computation only: no token moves and no bits are sent (the
  protocol's steps happen at the centre; a request is served there).

The scheduler still picks a node each slot (the ``holder`` column of metrics.csv), which the
centralised protocol ignores; runs.csv has no cover time for it (NaN) and visits.csv no rows, and
the walk's figures (cover time, visits) leave it out. ``[protocol] architecture`` changes nothing
of it: the centre is the server. The vectorised engine charges the same
(:func:`gossipsim.world.world.slot_costs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gossipsim.network.messages import SERVER, Message, Round, Transfer
from gossipsim.protocols.base import Protocol
from gossipsim.protocols.wrapped import Wrapped

#: a slot at the centre after the upload: no transfer, no token moves
AT_THE_CENTRE = Round(())


def data_upload(model: Any, data: Any, nodes: int, bits_per_entry: int) -> Round:
    """The round of slot 1: every node's upload of its data to the centre, at once (node order)."""
    return Round(
        tuple(
            Transfer(k, SERVER, Message(float(bits_per_entry * model.node_data_entries(data, k))))
            for k in range(nodes)
        ),
        sequential=False,
    )


class AtTheCentre(Wrapped):
    """Run a centralised ``protocol``: the ``upload`` round in its first slot, then an empty round
    every slot (no token moves, nothing is sent); what the protocol itself returns is not sent."""

    def __init__(self, protocol: Protocol, upload: Round) -> None:
        super().__init__(protocol)
        self.upload = upload
        self._uploaded = False

    def on_token(self, holder: int, slot: int) -> Message | Round:
        self.protocol.on_token(holder, slot)
        if self._uploaded:
            return AT_THE_CENTRE
        self._uploaded = True
        return self.upload

    def on_round(self, slot: int, delivered: Sequence[bool]) -> None:
        if not all(delivered):
            raise ValueError(
                f"slot {slot}: a node's upload of its data to the centre was lost; a centralised "
                "protocol needs lossless links"
            )
