"""Warnings of the libraries underneath (NumPy, SciPy, matplotlib) said as what they mean for the
study: the command line prints each as one ``gossipsim: warning:`` line, and a bare "overflow
encountered in dot" tells a user nothing about which numbers to distrust or what to change."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

#: (text in the library's message, its category's name or "" for any, the library, what it means
#: for the study)
_MEANINGS: tuple[tuple[str, str, str, str], ...] = (
    (
        "overflow encountered",
        "RuntimeWarning",
        "NumPy",
        "a computation exceeded the largest float (about 1.8e308), so some KL, posterior or "
        "metric values of this study are infinite or NaN (runs.csv counts the slots in "
        "nonfinite_kl_slots); use less extreme data, prior or temperature values",
    ),
    (
        "invalid value encountered",
        "RuntimeWarning",
        "NumPy",
        "a computation produced NaN (inf − inf, 0/0 or 0·inf), so some KL, posterior or metric "
        "values of this study are NaN; look for extreme data, prior or temperature values",
    ),
    (
        "divide by zero encountered",
        "RuntimeWarning",
        "NumPy",
        "a computation divided by zero, so some values of this study are infinite or NaN; look "
        "for extreme data, prior or temperature values",
    ),
    (
        "",
        "IntegrationWarning",
        "SciPy",
        "a numerical integral (SciPy's adaptive quadrature, used for a normaliser or an exact "
        "target) did not reach its accuracy, so the KL values that depend on it may be off; the "
        "posterior is probably concentrated beyond what the quadrature resolves (extreme data, "
        "prior or temperature)",
    ),
    (
        "non-positive",
        "",
        "matplotlib",
        "a figure's logarithmic axis had no positive values to show (every value 0 or less), so "
        "that panel is drawn without a range; the tables hold the numbers unchanged",
    ),
    (
        "Data has no positive values",
        "",
        "matplotlib",
        "a figure's logarithmic axis had no positive values to show (every value 0 or less), so "
        "that panel is drawn without a range; the tables hold the numbers unchanged",
    ),
)


#: NumPy's floating-point warnings (:data:`_MEANINGS`' first three): ``gossipsim run`` and ``plot``
#: hold them back and warn only where a table holds infinite or NaN numbers, naming it
#: (:mod:`gossipsim.results.nonfinite`): most change no number of the tables
FLOATING_POINT = ("overflow encountered", "invalid value encountered", "divide by zero encountered")


def floating_point(message: Warning | str, category: type[Warning]) -> bool:
    """Whether a warning is one of NumPy's floating-point warnings (:data:`FLOATING_POINT`)."""
    return issubclass(category, RuntimeWarning) and any(n in str(message) for n in FLOATING_POINT)


class HeldWarnings:
    """NumPy's floating-point warnings held back while :meth:`holding` (their texts, in order)."""

    def __init__(self) -> None:
        self.active = False
        self.texts: list[str] = []

    def take(self, message: Warning | str, category: type[Warning]) -> bool:
        """Hold the warning if it is a floating-point one and holding is on (True), else False."""
        if not (self.active and floating_point(message, category)):
            return False
        self.texts.append(" ".join(str(message).split()))
        return True

    @contextmanager
    def holding(self) -> Iterator[list[str]]:
        """Hold floating-point warnings within the block; yields the list they are held in."""
        self.active, self.texts = True, []
        try:
            yield self.texts
        finally:
            self.active = False


#: the warnings the command line holds back (its ``warnings.showwarning`` asks :meth:`take`)
HELD = HeldWarnings()


def nonfinite_warning(line: str, held: list[str]) -> str:
    """The warning for a table holding infinite or NaN numbers (``line``, from
    :func:`gossipsim.results.nonfinite.nonfinite_lines`), with the first floating-point warning held
    back while the numbers were computed as its likely cause."""
    cause = ""
    if held:
        more = f" and {len(held) - 1} more" if len(held) > 1 else ""
        cause = f" (NumPy: {held[0][:200]!r}{more})"
    return (
        f"{line}: a computation exceeded the largest float (about 1.8e308) or produced NaN"
        f"{cause}; look for extreme data, prior, temperature or step values"
    )


def meaning(message: Warning | str, category: type[Warning]) -> str:
    """The line to print for a warning: for a library warning listed in :data:`_MEANINGS`, what it
    means for the study followed by the library's own words in parentheses; any other warning
    (gossipsim's own, already said for the study) as it is, on one line."""
    text = " ".join(str(message).split())
    names = {cls.__name__ for cls in category.__mro__}
    for needle, kind, library, said in _MEANINGS:
        if (not kind or kind in names) and needle in text:
            return f"{said} ({library}: {text[:200]!r})"
    return text
