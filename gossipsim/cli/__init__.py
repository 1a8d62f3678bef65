"""The ``gossipsim`` command line: :mod:`~gossipsim.cli.parser` reads the arguments and hands each
command to its module (:mod:`~gossipsim.cli.run`; :mod:`~gossipsim.cli.scenarios`: ``validate``
and ``list``; :mod:`~gossipsim.cli.walks`: ``covertime`` and ``hitting``;
:mod:`~gossipsim.cli.folders`: ``plot``, ``status`` and ``compare``), each importing only what its
command uses; :mod:`~gossipsim.cli.exits` holds the exit statuses and one-line messages."""

from gossipsim.cli.parser import main

__all__ = ["main"]
