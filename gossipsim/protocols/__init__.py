"""Protocols: what a node does with the token (learn, forget, retrain), chosen by ``[protocol] kind``.

The kinds are registered in :data:`PROTOCOL_KINDS` (:mod:`gossipsim.protocols.registry`); a new one
is a :class:`ProtocolKind` subclass plus one :func:`register_protocol` line below, or a plug-in named
by import path in the scenario (``kind = "mypackage.module:MyKind"``).
"""

from .base import Protocol, StateTrace
from .gfvl import ConjugateGFVL, FactorTrace
from .gfvl_kind import GFVL, GFVLSettings
from .natgrad import NaturalGradientGFVL
from .registry import (
    PROTOCOL_KINDS,
    BuildRequest,
    ProtocolKind,
    import_object,
    protocol_kind,
    register_protocol,
)
from .retrain import WithRetrainBaseline

register_protocol(GFVL())

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
    "StateTrace",
    "WithRetrainBaseline",
    "import_object",
    "protocol_kind",
    "register_protocol",
]
