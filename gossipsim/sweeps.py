"""``[sweep]``: dotted keys and their lists of values, ``[[sweep.cases]]``, and the variants'
labels. A sweep's variants are the cartesian product of its dimensions; each is validated as a
whole scenario by :mod:`gossipsim.scenario`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError
from .settings import SECTION_NAMES


def sweep_cases(cases: Any) -> list[tuple[str | None, dict[str, Any]]]:
    """``[[sweep.cases]]``: each table sets several dotted keys together (and may name itself with
    ``label``); the cases form one dimension of the sweep."""
    if cases is None:
        return [(None, {})]
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        raise ConfigError(
            "sweep.cases",
            'must be an array of tables: [[sweep.cases]] "protocol.local_iterations" = 10 ...',
        )
    out: list[tuple[str | None, dict[str, Any]]] = []
    for i, case in enumerate(cases):
        case = dict(case)
        label = case.pop("label", None)
        if label is not None and not isinstance(label, str):
            raise ConfigError(f"sweep.cases[{i}].label", "must be a string")
        flat = _flatten_assignments(case, f"sweep.cases[{i}]")
        if not flat:
            raise ConfigError(f"sweep.cases[{i}]", "sets no key")
        out.append((label, flat))
    return out


def _flatten_assignments(table: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    sweepable = [s for s in SECTION_NAMES if s not in ("sweep", "unlearning")]
    out: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and "." not in dotted and dotted in sweepable and prefix == "":
            out.update(_flatten_assignments(value, where, dotted + "."))
            continue
        section = dotted.split(".")[0]
        if section not in sweepable or "." not in dotted:
            raise ConfigError(
                f"{where}.{dotted}", f"needs a dotted key into one of: {', '.join(sweepable)}"
            )
        out[dotted] = value
    return out


def flatten_sweep(table: Any, prefix: str = "") -> dict[str, list[Any]]:
    """Dotted key -> list of values. A section name whose values are all tables (``topology =
    [{ kind = "ring" }, { kind = "random_regular", degree = 3 }]``) merges each table into the section."""
    if not isinstance(table, dict):
        raise ConfigError("sweep", "must be a table of dotted key = [values, ...]")
    sweepable = [s for s in SECTION_NAMES if s not in ("sweep", "unlearning")]
    out: dict[str, list[Any]] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_sweep(value, dotted + "."))
            continue
        if not (isinstance(value, list) and value):
            raise ConfigError(f"sweep.{dotted}", "must be a non-empty list of values")
        section = dotted.split(".")[0]
        if section not in sweepable:
            raise ConfigError(
                f"sweep.{dotted}",
                f"cannot sweep {section!r}; allowed sections: {', '.join(sweepable)}",
            )
        if "." not in dotted and not all(isinstance(v, dict) for v in value):
            raise ConfigError(
                f"sweep.{dotted}",
                "a whole section is swept with a list of tables; otherwise use a dotted key such as topology.kind",
            )
        out[dotted] = value
    return out


def set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    if len(parts) == 1:  # a whole section: merge the table into it
        section = raw.setdefault(parts[0], {})
        if not isinstance(section, dict):
            raise ConfigError(f"sweep.{dotted}", f"[{parts[0]}] is not a table")
        section.update(copy.deepcopy(value))
        return
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"sweep.{dotted}", f"{part!r} is not a table")
        node = child
    node[parts[-1]] = value


def variant_label(values: Mapping[str, Any], name: str) -> str:
    if not values:
        return name
    if len(values) == 1:
        return _show(next(iter(values.values())))
    lasts = [k.split(".")[-1] for k in values]
    names = lasts if len(set(lasts)) == len(lasts) else list(values)
    parts = []
    for key, n, v in zip(values, names, values.values(), strict=True):
        parts.append(_show(v) if "." not in key else f"{n}={_show(v)}")
    return ", ".join(parts)


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else str(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{k}={_show(v)}" for k, v in value.items() if k != "kind")
        if "kind" in value:
            return f"{value['kind']}({inner})" if inner else str(value["kind"])
        return "{" + inner + "}"
    return str(value)
