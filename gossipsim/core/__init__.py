"""Foundations every stage uses: immutable settings containers, the key schema, user text files, the
registries of kinds and what a kind must define, capabilities, random streams, memory units,
library warnings, table columns. Imports nothing else of gossipsim but :mod:`gossipsim.errors`."""
