"""The scenario reference is generated from the keys the code checks: the two cannot drift."""

from __future__ import annotations

from pathlib import Path

from gossipsim.protocols.gfvl_kind import NATGRAD_KEYS
from gossipsim.schema import reference_rows

DOC = Path(__file__).resolve().parent.parent / "docs" / "scenarios.md"


def test_the_natural_gradient_keys_table_is_the_code_s():
    text = DOC.read_text(encoding="utf-8")
    for row in reference_rows(NATGRAD_KEYS):
        assert row in text, f"docs/scenarios.md lacks (or differs in) the row:\n{row}"
