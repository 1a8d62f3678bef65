"""Settings keys stated once: type, default, allowed range and the line of documentation.

A :class:`Key` reads and checks one value of a scenario table, raising a
:class:`~gossipsim.errors.ConfigError` that names ``section.key`` and what is allowed (the
scikit-learn way: parameters validated at the boundary). :func:`read_keys` reads a whole table
against a tuple of keys (unknown keys are errors), and :func:`reference_rows` turns the same
tuple into the rows of the documentation's tables, so the docs cannot drift from the checks.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gossipsim.errors import ConfigError

KINDS = (
    "integer", "number", "boolean", "string", "choice", "node", "integers", "table", "numbers",
)  # fmt: skip


@dataclass(frozen=True)
class Key:
    """One setting: ``kind`` is integer, number, boolean, string, choice (one of ``choices``),
    node (a node id: an integer or a string), integers (one integer, or a list of them: one per
    node), numbers (one number, or a list of them, or of such lists: the model checks the shape)
    or table.

    Numbers are finite unless ``finite`` is false; ``minimum`` / ``maximum`` bound them (with
    ``exclusive_minimum`` for "> minimum"). ``words`` are strings accepted besides (e.g. ``auto``
    for an integer). A ``default`` of None makes the key optional (absent: None) unless
    ``required``; ``default_text`` describes, for the docs, a default computed elsewhere."""

    name: str
    kind: str
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: Collection[str] = ()  # a live registry (a dict of kinds) is allowed
    finite: bool = True
    words: tuple[str, ...] = ()
    required: bool = False
    default_text: str = ""
    reason: str = ""  # why the range is what it is (added to range errors)
    #: kind numbers: only a list (of lists) of numbers, never one number (e.g. one entry per node)
    list_only: bool = False
    #: kind numbers: one number, or a flat list of numbers with one per node (no lists of lists)
    per_node: bool = False
    #: kind integers: what a list is, for the docs and errors (default: one integer per node)
    list_text: str = ""
    #: kind integers: the bound of a list's entries, when not ``minimum``
    list_minimum: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown key kind {self.kind!r}")

    def allowed(self) -> str:
        """What the key accepts, in words (for errors and the docs)."""
        extra = "".join(f" or {w}" for w in self.words)
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "string":
            return "a string"
        if self.kind == "node":
            return "a node id (an integer or a string)" + extra
        if self.kind == "table":
            return "a table"
        what = "an integer" if self.kind in ("integer", "integers") else "a number"
        bounds = []
        if self.minimum is not None:
            bounds.append(
                f"{'>' if self.exclusive_minimum else '>='} {format_number(self.minimum)}"
            )
        if self.maximum is not None:
            bounds.append(
                f"{'<' if self.exclusive_maximum else '<='} {format_number(self.maximum)}"
            )
        if self.list_only:
            return (
                "a list (of lists) of numbers"
                + (" " + " and ".join(bounds) if bounds else "")
                + extra
            )
        listed = {
            "integers": f", or {self.list_text}"
            if self.list_text
            else ", or a list of them (one per node)",
            "numbers": ", or a list of them (one per node)"
            if self.per_node
            else ", or a list (of lists) of them",
        }.get(self.kind, "")
        return what + (" " + " and ".join(bounds) if bounds else "") + listed + extra

    def read(self, table: Mapping[str, Any], section: str) -> Any:
        """The checked value of this key in ``table`` (the default when absent)."""
        where = f"{section}.{self.name}"
        if self.name not in table:
            if self.required:
                raise ConfigError(where, f"is required: {self.allowed()}")
            return self.default
        return self.check(table[self.name], where)

    def check(self, value: Any, where: str) -> Any:
        """``value`` checked against this key (errors name ``where``)."""
        if isinstance(value, str) and value in self.words:
            return value
        if self.kind == "node":
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ConfigError(where, f"must be {self.allowed()} (got {value!r})")
            return value
        if self.kind == "table":
            if not isinstance(value, dict):
                raise ConfigError(where, f"must be a table (got {value!r})")
            return value
        if self.kind == "integers" and isinstance(value, list):
            low = self.minimum if self.list_minimum is None else self.list_minimum
            item = Key(self.name, "integer", None, self.doc, minimum=low)
            return tuple(item.check(v, f"{where}[{i}]") for i, v in enumerate(value))
        if self.kind == "numbers" and isinstance(value, list | tuple):
            if not value:
                raise ConfigError(where, f"must be {self.allowed()} (got an empty list)")
            entry = (  # an entry may be a number (of a per-node list: only a number)
                replace(self, kind="number", per_node=False)
                if self.per_node
                else replace(self, list_only=False)
            )
            return tuple(entry.check(v, f"{where}[{i}]") for i, v in enumerate(value))
        if self.list_only:
            raise ConfigError(where, f"must be {self.allowed()} (got {value!r})")
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise ConfigError(where, f"must be true or false (got {value!r})")
            return value
        if self.kind in ("string", "choice"):
            if not isinstance(value, str):
                raise ConfigError(where, f"must be a string (got {value!r})")
            if self.kind == "choice" and value not in self.choices:
                raise ConfigError(
                    where, f"unknown value {value!r}; allowed: {', '.join(self.choices)}"
                )
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(where, f"must be {self.allowed()} (got {value!r})")
        if self.kind in ("integer", "integers"):
            if not isinstance(value, int):
                raise ConfigError(where, f"must be an integer (got {value!r})")
        else:
            value = float(value)
            if math.isnan(value) or (self.finite and math.isinf(value)):
                raise ConfigError(where, f"must be {self.allowed()}, a finite number (got {value})")
        low_ok = self.minimum is None or (
            value > self.minimum if self.exclusive_minimum else value >= self.minimum
        )
        high_ok = self.maximum is None or (
            value < self.maximum if self.exclusive_maximum else value <= self.maximum
        )
        if not (low_ok and high_ok):
            reason = f": {self.reason}" if self.reason else ""
            raise ConfigError(
                where, f"must be {self.allowed()} (got {format_number(value)}){reason}"
            )
        return value


def read_keys(
    keys: Sequence[Key], table: Mapping[str, Any], section: str, *, also: Sequence[str] = ()
) -> dict[str, Any]:
    """Every key of ``keys`` read from ``table``; a key of the table that is neither one of them
    nor in ``also`` (read by someone else) is an error listing what is allowed."""
    known = {k.name for k in keys}
    for name in table:
        if name not in known and name not in also:
            allowed = ", ".join(sorted(known | set(also)))
            raise ConfigError(f"{section}.{name}", f"unknown key; allowed: {allowed}")
    return {k.name: k.read(table, section) for k in keys}


def reference_rows(keys: Sequence[Key]) -> list[str]:
    """Markdown table rows ``| key | default | allowed | meaning |`` for the documentation."""
    return [f"| `{k.name}` | {_default_cell(k)} | {k.allowed()} | {k.doc} |" for k in keys]


def reference_table(keys: Sequence[Key]) -> str:
    """The whole Markdown table of ``keys`` (header included)."""
    head = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    return "\n".join(head + reference_rows(keys))


def _default_cell(key: Key) -> str:
    if key.default_text:
        return key.default_text
    if key.required:
        return "required"
    if key.default is None:
        return "none"
    return _fmt_default(key.default)


#: whole numbers below this are echoed digit by digit (beyond, ``%g`` is shorter and as exact)
WHOLE_DIGITS_BELOW = 1e15


def format_number(x: float) -> str:
    """A number as an error or the docs echo it: an integer, or a float holding a whole number
    below :data:`WHOLE_DIGITS_BELOW`, in full (``1000000``, never ``1e+06``); any other number in
    its shortest form (``%g``: ``0.5``, ``1e+300``)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    if math.isfinite(x) and x == int(x) and abs(x) < WHOLE_DIGITS_BELOW:
        return str(int(x))
    return f"{x:g}"


def _fmt_default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"`{value}`" if value else '""'
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, dict) and not value:
        return "{}"
    return str(value)
