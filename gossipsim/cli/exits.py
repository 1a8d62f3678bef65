"""How a command ends: its exit status, and the one line it prints on stderr for an error or a
table's infinite or NaN numbers (never a traceback).

User errors exit with :data:`EXIT_USAGE` (what :func:`gossipsim.cli.parser.main` does with a
:class:`~gossipsim.errors.ConfigError`); a failure after the runs (theory, figures, writing the
tables) with :data:`EXIT_FAILED`, the tables kept; Ctrl-C with :data:`EXIT_INTERRUPTED`.
"""

from __future__ import annotations

import sys

EXIT_USAGE = 2
EXIT_FAILED = 1  # runs failed, or the runs are done but a step after them failed
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


def error_line(message: str) -> None:
    print(f"gossipsim: error: {message}", file=sys.stderr)


def warn_nonfinite(lines: list[str], held: list[str]) -> None:
    """One warning per table holding infinite or NaN numbers (``lines``), with the floating-point
    warnings ``held`` back while they were computed as the likely cause; nothing otherwise."""
    from gossipsim.core.libwarnings import nonfinite_warning

    for line in lines:
        print(f"gossipsim: warning: {nonfinite_warning(line, held)}", file=sys.stderr)
