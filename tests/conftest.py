"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from gossipsim.figures import canvas


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Figure]]:
    """The figures the plot functions draw, kept open for inspection instead of saved."""
    figures: list[Figure] = []

    def keep(fig: Figure, path: Path, box: Any = None) -> Path:
        figures.append(fig)
        return path

    monkeypatch.setattr(canvas, "_save", keep)
    yield figures
    for fig in figures:
        plt.close(fig)
