"""The protocol interface (:mod:`gossipsim.engine.protocol_api`), importable from the protocols package."""

from gossipsim.engine.protocol_api import Protocol, Recovery, StateTrace

__all__ = ["Protocol", "Recovery", "StateTrace"]
