"""Protocols: what a node does with the token (learn, forget, retrain), chosen by ``[protocol] kind``.

The kinds are registered in :data:`PROTOCOL_KINDS` (:mod:`gossipsim.protocols.registry`); a new one
is a :class:`ProtocolKind` subclass plus one line in :data:`gossipsim.core.registry.PROTOCOL_KINDS` (or :func:`register_protocol`), or a plug-in named
by import path in the scenario (``kind = "mypackage.module:MyKind"``).
"""

from gossipsim.core.registry import import_object
from gossipsim.protocols.base import Protocol, StateTrace
from gossipsim.protocols.gfvl import ConjugateGFVL, FactorTrace
from gossipsim.protocols.gfvl_kind import GFVL, GFVLSettings
from gossipsim.protocols.natgrad import NaturalGradientGFVL
from gossipsim.protocols.registry import (
    PROTOCOL_KINDS,
    BuildRequest,
    ProtocolKind,
    protocol_kind,
    register_protocol,
)
from gossipsim.protocols.retrain import WithRetrainBaseline
from gossipsim.protocols.server import ServerRounds

__all__ = [
    "GFVL",
    "PROTOCOL_KINDS",
    "BuildRequest",
    "ConjugateGFVL",
    "FactorTrace",
    "GFVLSettings",
    "NaturalGradientGFVL",
    "Protocol",
    "ProtocolKind",
    "ServerRounds",
    "StateTrace",
    "WithRetrainBaseline",
    "import_object",
    "protocol_kind",
    "register_protocol",
]
