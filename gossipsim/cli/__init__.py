"""The ``gossipsim`` command line."""

from gossipsim.cli.commands import main

__all__ = ["main"]
