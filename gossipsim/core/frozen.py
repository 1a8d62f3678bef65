"""Immutable containers for validated settings: :class:`FrozenDict` and :func:`freeze` / :func:`thaw`.

A :class:`~gossipsim.study.scenario.Study` and the settings objects are frozen dataclasses; the tables
they hold (``model.prior``, ``topology.params``, the study's ``raw`` scenario, ...) are frozen too,
recursively: dicts become :class:`FrozenDict` and lists :class:`FrozenList`. They are ``dict`` and
``list`` subclasses whose mutating methods raise ``TypeError``, so code that checks
``isinstance(x, dict)`` or ``isinstance(x, list)`` (the models read per-node lists so), NumPy,
``json.dumps`` and ``==`` with plain dicts and lists work unchanged; they pickle and deep-copy as
themselves, and hash when their items do. :func:`thaw` gives plain, mutable copies
back (what an edit such as :meth:`Study.replace <gossipsim.study.scenario.Study.replace>` starts from).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]


class FrozenDict(dict[str, Any]):
    """A dict that cannot be changed after construction (every mutating method raises TypeError).

    >>> d = FrozenDict({"a": 1})
    >>> d == {"a": 1}, isinstance(d, dict)
    (True, True)
    >>> d["b"] = 2
    Traceback (most recent call last):
    ...
    TypeError: FrozenDict is immutable (cannot call __setitem__); build a new one
    """

    __slots__ = ()

    def _refuse(self, name: str) -> NoReturn:
        raise TypeError(f"FrozenDict is immutable (cannot call {name}); build a new one")

    def __setitem__(self, key: Any, value: Any) -> NoReturn:
        self._refuse("__setitem__")

    def __delitem__(self, key: Any) -> NoReturn:
        self._refuse("__delitem__")

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        self._refuse("|=")

    def clear(self) -> NoReturn:
        self._refuse("clear")

    def pop(self, *args: Any) -> NoReturn:
        self._refuse("pop")

    def popitem(self) -> NoReturn:
        self._refuse("popitem")

    def setdefault(self, *args: Any) -> NoReturn:
        self._refuse("setdefault")

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("update")

    def __hash__(self) -> int:  # type: ignore[override,unused-ignore]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self  # nothing inside can change (built by freeze)

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """A list that cannot be changed after construction (every mutating method raises TypeError).

    >>> x = FrozenList([1, 2])
    >>> x == [1, 2], isinstance(x, list), hash(x) == hash((1, 2))
    (True, True, True)
    >>> x.append(3)
    Traceback (most recent call last):
    ...
    TypeError: FrozenList is immutable (cannot call append); build a new one
    """

    __slots__ = ()

    def _refuse(self, name: str) -> NoReturn:
        raise TypeError(f"FrozenList is immutable (cannot call {name}); build a new one")

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        self._refuse("__setitem__")

    def __delitem__(self, index: Any) -> NoReturn:
        self._refuse("__delitem__")

    def __iadd__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        self._refuse("+=")

    def __imul__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        self._refuse("*=")

    def append(self, value: Any) -> NoReturn:
        self._refuse("append")

    def extend(self, values: Any) -> NoReturn:
        self._refuse("extend")

    def insert(self, index: Any, value: Any) -> NoReturn:
        self._refuse("insert")

    def pop(self, *args: Any) -> NoReturn:
        self._refuse("pop")

    def remove(self, value: Any) -> NoReturn:
        self._refuse("remove")

    def clear(self) -> NoReturn:
        self._refuse("clear")

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("sort")

    def reverse(self) -> NoReturn:
        self._refuse("reverse")

    def __hash__(self) -> int:  # type: ignore[override,unused-ignore]
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, tuple[list[Any]]]:  # type: ignore[override,unused-ignore]
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"


def freeze(value: Any) -> Any:
    """``value`` with every dict (any Mapping) made a :class:`FrozenDict` and every list a
    :class:`FrozenList`, recursively (tuples stay tuples, their items frozen); other values are
    returned as they are."""
    if isinstance(value, FrozenDict | FrozenList):
        return value
    if isinstance(value, Mapping):
        return FrozenDict((k, freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        if set(map(type, value)) <= _ATOMS:  # numbers and text (a long prior vector): as they are
            return FrozenList(value)
        return FrozenList(freeze(v) for v in value)
    if isinstance(value, tuple) and type(value) is tuple:
        if set(map(type, value)) <= _ATOMS:
            return value
        return tuple(freeze(v) for v in value)
    return value


#: values :func:`freeze` returns as they are, found by exact type (a list of a million of them is
#: frozen in milliseconds, not item by item)
_ATOMS = frozenset({int, float, str, bool, type(None)})


def thaw(value: Any) -> Any:
    """A plain, mutable copy of ``value``: mappings become dicts, lists and tuples lists,
    recursively (as ``tomllib`` gives a scenario). Other values are shared, not copied."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def frozen_items(pairs: Iterable[tuple[str, Any]]) -> FrozenDict:
    """A :class:`FrozenDict` of ``pairs``, each value frozen."""
    return FrozenDict((k, freeze(v)) for k, v in pairs)


def freeze_fields(obj: Any, *names: str) -> None:
    """Freeze the tables of a frozen dataclass (dicts become FrozenDicts, lists FrozenLists)."""
    for name in names:
        object.__setattr__(obj, name, freeze(getattr(obj, name)))
