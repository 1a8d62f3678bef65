"""gossipsim's version: what ``gossipsim --version``, summary.json and the code fingerprint say
(``gossipsim.__version__`` hands it on; setup.cfg reads it here)."""

__version__ = "0.1.0"
