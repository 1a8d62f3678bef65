"""Cover times and unlearning latencies of the token walk (kept for imports): the code lives in
:mod:`gossipsim.cover`, one module per job (exact values, closed forms, Monte Carlo, hitting times,
Matthews' bounds, the cover iteration of a recorded walk). A test that replaces a function patches
it in the module that uses it.
"""

from .cover import *  # noqa: F403  (the same names, re-exported)
from .cover import __all__ as __all__
