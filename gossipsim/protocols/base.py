"""The protocol interface (:mod:`gossipsim.protocol_api`), importable from the protocols package."""

from ..protocol_api import Protocol, Recovery, StateTrace

__all__ = ["Protocol", "Recovery", "StateTrace"]
