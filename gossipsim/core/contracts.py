"""What a kind of one's own must define, checked when the kind is loaded (``gossipsim validate``).

A kind (a model, a protocol kind, a scheduler) subclasses one of gossipsim's bases. The methods it
must write are those still abstract on its class, wherever in its bases they were declared
(:func:`abstract_methods`: Python's ABC machinery counts only abstract methods of ABC bases, and
would miss those of a mix-in such as :class:`~gossipsim.models.particle.ParticleCapable`), plus the
ones its declarations need, which its base names in a classmethod ``unmet_needs()`` (a model's
capabilities, a scheduler's vectorised kernel). :func:`check_complete` refuses a kind that lacks
any in one line naming the key, the kind and each missing method with its arguments, before
anything runs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from typing import Any

from gossipsim.errors import ConfigError

#: the guide to writing a kind of one's own, named in the refusal
GUIDE = "docs/extending.md"


def abstract_methods(cls: type) -> list[str]:
    """The names of ``cls``'s methods and properties that are still abstract (declared with
    ``@abstractmethod`` in any of its bases, ABC or not, and not defined since)."""
    return sorted(
        name
        for name in dir(cls)
        if getattr(inspect.getattr_static(cls, name, None), "__isabstractmethod__", False)
    )


def lacks(cls: type, name: str) -> bool:
    """Whether ``cls`` has no attribute ``name``, or only an abstract one."""
    found = inspect.getattr_static(cls, name, None)
    return found is None or bool(getattr(found, "__isabstractmethod__", False))


def lacking(cls: type, names: Iterable[str]) -> list[str]:
    """Those of ``names`` that ``cls`` lacks (:func:`lacks`)."""
    return [name for name in names if lacks(cls, name)]


def missing_methods(obj: Any) -> list[str]:
    """What the class of ``obj`` (a class, or an instance) must define and does not: its abstract
    methods and its base's ``unmet_needs()``, sorted."""
    return list(_missing(obj if isinstance(obj, type) else type(obj)))


@functools.cache  # a kind is looked up once per variant, request and figure: 1 ms each uncached
def _missing(cls: type) -> tuple[str, ...]:
    needs = getattr(cls, "unmet_needs", None)
    unmet = list(needs()) if callable(needs) else []
    return tuple(sorted(set(abstract_methods(cls)) | set(unmet)))


def _with_arguments(cls: type, name: str) -> str:
    """``name(arguments)`` as the base declares it (``name`` alone for a property or attribute)."""
    for base in cls.__mro__:
        if name in vars(base):
            found = vars(base)[name]
            break
    else:
        return name
    function = getattr(found, "__func__", found)  # a classmethod's or staticmethod's function
    if not inspect.isfunction(function):
        return name
    skip = 0 if isinstance(found, staticmethod) else 1  # self, or cls
    names = list(inspect.signature(function).parameters)[skip:]
    return f"{name}({', '.join(names)})"


def check_complete(obj: Any, key: str, what: str, path: str | None = None) -> None:
    """Refuse ``obj`` (a kind's class or instance) in one line naming ``key`` when it lacks a method
    it must define (:func:`missing_methods`); ``what`` says what it is ("model", "protocol kind",
    "scheduler"), ``path`` how the scenario named it."""
    missing = missing_methods(obj)
    if not missing:
        return
    cls = obj if isinstance(obj, type) else type(obj)
    name = path or f"{cls.__module__}:{cls.__qualname__}"
    shown = ", ".join(_with_arguments(cls, m) for m in missing)
    raise ConfigError(
        key, f"{name!r} does not define {shown}, which a {what} must define ({GUIDE} lists them)"
    )
