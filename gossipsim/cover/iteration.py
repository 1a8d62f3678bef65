"""The cover iteration of one recorded walk (the ``cover_iteration`` column of ``runs.csv``)."""

from __future__ import annotations

import numpy as np

from gossipsim.errors import ConfigError


def cover_iteration(holders: np.ndarray, n_nodes: int) -> int | None:
    """First slot (1-based; slot 1 is ``holders[0]``) at which every node has held the token.

    ``holders`` is the recorded walk: the holder index of each slot. Returns ``None`` if some node
    never holds the token. The cover *moves* are this value minus one.
    """
    h = np.asarray(holders)
    if h.ndim != 1:
        raise ConfigError("holders", f"expected a 1-D array of holder indices, got shape {h.shape}")
    if n_nodes < 1:
        raise ConfigError("n_nodes", f"expected at least one node, got {n_nodes}")
    if h.size == 0:
        return None
    if h.min() < 0 or h.max() >= n_nodes:
        raise ConfigError("holders", f"holder indices must lie in 0..{n_nodes - 1}")
    first = np.full(n_nodes, -1, dtype=np.int64)
    first[h[::-1]] = np.arange(h.size - 1, -1, -1)  # reversed: each node keeps its earliest slot
    if np.any(first < 0):
        return None
    return int(first.max()) + 1
