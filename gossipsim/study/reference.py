"""The key tables of ``docs/scenarios.md``, generated from the keys the code checks.

Each table sits between ``<!-- keys:NAME -->`` and ``<!-- /keys -->`` in the document; NAME is a
section of :data:`gossipsim.study.settings.SCHEMA`, ``models`` (every model's own keys), ``gfvl`` (the
G-FVL protocol's keys; ``svgd``, ``dsvgd`` and ``fedavg`` likewise), ``regression-data`` (the data keys of the regression models), ``KIND-data``
(those of a model kind whose data keys differ, e.g. ``bnn-data``) or ``topology-kinds`` (the
topology registry's kinds and parameters). ``python -m gossipsim.study.reference docs/scenarios.md``
rewrites the tables in place; a test checks that the document is up to date.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gossipsim.core.registry import MODEL_KINDS, PROTOCOL_KINDS
from gossipsim.core.schema import Key, reference_rows, reference_table
from gossipsim.study.failure_settings import OUTAGE_KEYS
from gossipsim.study.settings import SCHEMA
from gossipsim.topology import reference_table as topology_reference_table

_REGION = re.compile(r"(<!-- keys:([\w-]+) -->\n)(.*?)(<!-- /keys -->)", re.S)


def _models_table() -> str:
    """Every model's own ``[model]`` keys (beyond kind, prior and temperature)."""
    head = ["| model | key | default | allowed | meaning |", "|---|---|---|---|---|"]
    rows = [
        f"| `{name}` {row}"
        for name, model in MODEL_KINDS.items()
        for row in reference_rows(model.model_keys)
    ]
    return "\n".join(head + rows)


def _regression_models() -> list[str]:
    return [n for n, m in MODEL_KINDS.items() if m.data_keys]


def tables() -> dict[str, str]:
    """Region name -> its generated Markdown table."""
    out = {name: reference_table(keys) for name, keys in SCHEMA.items()}
    out["models"] = _models_table()
    regression = _regression_models()
    if regression:
        shared = MODEL_KINDS[regression[0]].data_keys
        out["regression-data"] = reference_table(shared)
        for name in regression:  # a model with data keys of its own: its own table
            if MODEL_KINDS[name].data_keys != shared:
                out[f"{name}-data"] = reference_table(MODEL_KINDS[name].data_keys)
    gfvl: tuple[Key, ...] = PROTOCOL_KINDS["gfvl"].keys
    out["gfvl"] = reference_table(gfvl)
    out["svgd"] = reference_table(PROTOCOL_KINDS["svgd"].keys)
    out["dsvgd"] = reference_table(PROTOCOL_KINDS["dsvgd"].keys[len(PROTOCOL_KINDS["svgd"].keys) :])
    out["fedavg"] = reference_table(PROTOCOL_KINDS["fedavg"].keys)
    out["failures-outage"] = reference_table(OUTAGE_KEYS)
    out["topology-kinds"] = topology_reference_table()
    return out


def render(text: str) -> str:
    """``text`` with every key table regenerated."""
    generated = tables()

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in generated:
            raise KeyError(f"unknown key table {name!r}; known: {', '.join(generated)}")
        return f"{match.group(1)}{generated[name]}\n{match.group(4)}"

    return _REGION.sub(replace, text)


def regions(text: str) -> list[str]:
    """The names of the key tables ``text`` holds, in order."""
    return [m.group(2) for m in _REGION.finditer(text)]


if __name__ == "__main__":
    for path in map(Path, sys.argv[1:] or ["docs/scenarios.md"]):
        path.write_text(render(path.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"{path}: {', '.join(regions(path.read_text(encoding='utf-8')))}")
