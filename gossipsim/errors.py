"""The one error type for user mistakes.

Everything that reads user input (scenario files, CLI arguments, graph and data files, Python API
arguments) raises :class:`ConfigError` naming the offending key and what is allowed. The CLI prints
``str(error)`` as one line and exits with status 2.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A user-input error: ``key`` names the offending setting, ``message`` says what is allowed."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)


def require(condition: bool, key: str, message: str) -> None:
    """Raise :class:`ConfigError` for ``key`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(key, message)
