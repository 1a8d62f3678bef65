"""Protocols: what a node does with the token (learn, forget, retrain), one module per family."""

from .base import Protocol, StateTrace
from .gfvl import ConjugateGFVL, FactorTrace
from .natgrad import NaturalGradientGFVL
from .retrain import WithRetrainBaseline

PROTOCOL_KINDS: dict[str, str] = {
    "gfvl": "gossip federated variational learning (Algorithm 1): exact conjugate updates (eqs. 13-14) or "
    "natural-gradient steps (eq. 17); unlearning by subtracting the node's natural parameter (eq. 21)",
}

__all__ = [
    "PROTOCOL_KINDS",
    "ConjugateGFVL",
    "FactorTrace",
    "NaturalGradientGFVL",
    "Protocol",
    "StateTrace",
    "WithRetrainBaseline",
]
