"""Shared helpers for the tests: small scenarios as dicts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any


def base_scenario(**sections: Any) -> dict[str, Any]:
    """A small beta-Bernoulli scenario on the complete graph K = 10; sections override whole tables."""
    raw: dict[str, Any] = {
        "scenario": {"name": "t", "seed": 7, "runs": 20, "iterations": 200},
        "topology": {"kind": "complete", "nodes": 10},
        "model": {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 100, "theta": 0.75},
        "metrics": {"tolerance": 1e-10},
    }
    for name, table in sections.items():
        raw[name] = copy.deepcopy(table)
    return raw


def to_toml(raw: dict[str, Any]) -> str:
    """A minimal TOML writer for scenario dicts (tables, arrays of tables, scalars, lists, inline tables)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, float) and v == float("inf"):
            return "inf"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + " }"
        raise TypeError(v)

    lines: list[str] = []
    for section, table in raw.items():
        if isinstance(table, list):
            for item in table:
                lines.append(f"[[{section}]]")
                lines += [f'"{k}" = {value(v)}' for k, v in item.items()]
        elif isinstance(table, dict):
            lines.append(f"[{section}]")
            lines += [f'"{k}" = {value(v)}' for k, v in table.items()]
        else:
            lines.append(f'"{section}" = {value(table)}')
    return "\n".join(lines) + "\n"


def validate_error(raw: dict[str, Any], folder: Path, capsys: Any) -> str:
    """``gossipsim validate`` of the scenario ``raw`` (written to ``folder/s.toml``): checks exit
    status 2 and a single line on stderr, and returns that line."""
    from gossipsim.cli.parser import main

    path = folder / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def slot_hops(res: Any) -> Any:
    """Per run of a :class:`gossipsim.Results`, each slot and its successor: the holders (sender,
    receiver: the same when the token stayed), and the simulated seconds (``dt``) and bits
    (``dbits``) between the two slots' ends, from metrics.csv (every slot recorded)."""
    import numpy as np
    import pandas as pd

    m = res.metrics.sort_values(["run", "iteration"])
    same_run = m["run"].to_numpy()[1:] == m["run"].to_numpy()[:-1]
    out = pd.DataFrame(
        {
            "run": m["run"].to_numpy()[:-1],
            "sender": m["holder"].to_numpy()[:-1],
            "receiver": m["holder"].to_numpy()[1:],
            "dt": np.diff(m["time"].to_numpy()),
            "dbits": np.diff(m["bits"].to_numpy()),
        }
    )
    return out[same_run].reset_index(drop=True)
