"""Which divergence a metrics table holds, and how figures and summaries name it.

Each recorded state is judged by its representation's divergence to the target
(:mod:`gossipsim.states.representations`): natural parameters by KL(q ‖ target), in the column ``kl``
(``retrain_kl`` for the retrain baseline); particle sets by the kernelized Stein discrepancy, in
``ksd`` (``retrain_ksd``); a point estimate (``fedavg``) by the norm of the target's score at it,
in ``score_norm``. A results folder does not record which: it is read from the table
itself, so that any metrics table (a folder's, one of an older gossipsim, one a notebook built)
says what it holds. A variant's divergence is the first divergence column (``kl``, ``ksd``,
``score_norm``, then the divergence of any representation registered in this process) that holds
a value in that variant's rows. Every variant of a folder usually has the same one; a sweep over ``protocol.kind``
that mixes G-FVL and a particle protocol has both columns, each empty in the other's rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Divergence:
    """A divergence column and the words for it."""

    column: str  # its column in metrics.csv ("kl")
    name: str  # in a sentence: "the KL was not within the tolerance"
    axis: str  # a y axis label
    title: str  # a figure's title ("KL divergence to the target")
    stacked: str  # the label of a short panel (lines broken)
    without: str  # a y axis label once nodes are forgotten

    @property
    def retrain_column(self) -> str:
        """The retrain baseline's copy of the column."""
        return f"retrain_{self.column}"


KL = Divergence(
    column="kl",
    name="KL",
    axis="KL(q ‖ target) (nats)",
    title="KL divergence to the target",
    stacked="KL(q ‖ target)\n(nats)",
    without="KL(q ‖ target without\nthe forgotten nodes) (nats)",
)
KSD = Divergence(
    column="ksd",
    name="KSD",
    axis="KSD to the target\n(kernelized Stein discrepancy)",
    title="Kernelized Stein discrepancy to the target",
    stacked="KSD to the target\n(kernelized Stein\ndiscrepancy)",
    without="KSD to the target without\nthe forgotten nodes",
)
#: a point estimate's (``fedavg``, :mod:`gossipsim.states.pointstate`): the norm of the target's
#: score at the point, 0 at the posterior's mode
SCORE_NORM = Divergence(
    column="score_norm",
    name="score norm",
    axis="‖∇ log target‖ at the point",
    title="Norm of the target's score at the point (0 at its mode)",
    stacked="‖∇ log target‖\nat the point",
    without="‖∇ log target without\nthe forgotten nodes‖",
)
#: gossipsim's divergences by column
DIVERGENCES: dict[str, Divergence] = {d.column: d for d in (KL, KSD, SCORE_NORM)}


def divergence(column: str) -> Divergence:
    """The divergence of ``column``: gossipsim's own words for ``kl`` and ``ksd``, plain ones
    built from the name for a representation of one's own."""
    if column in DIVERGENCES:
        return DIVERGENCES[column]
    name = column.upper()
    return Divergence(
        column=column,
        name=name,
        axis=f"{name} to the target",
        title=f"{name} to the target",
        stacked=f"{name} to\nthe target",
        without=f"{name} to the target without\nthe forgotten nodes",
    )


def divergence_columns() -> tuple[str, ...]:
    """The columns a divergence may be in: ``kl``, ``ksd``, then those of the representations
    registered in this process."""
    from gossipsim.states.representations import REPRESENTATIONS

    names = [*DIVERGENCES, *(r.divergence_name for r in REPRESENTATIONS.values())]
    return tuple(dict.fromkeys(names))


def divergences(
    metrics: pd.DataFrame, variants: Iterable[str] | None = None
) -> dict[str, Divergence]:
    """Each variant's divergence in ``metrics`` (a metrics table: ``variant`` and the divergence
    columns), for ``variants`` (default: those of the table): the first divergence column that
    holds a value in the variant's rows (KL where the table has none)."""
    if variants is None:
        variants = [str(v) for v in dict.fromkeys(metrics["variant"])]
    variants = list(variants)
    present = [c for c in divergence_columns() if c in metrics.columns]
    if len(present) <= 1:  # one divergence for every variant: nothing to read
        only = divergence(present[0] if present else KL.column)
        return dict.fromkeys(variants, only)
    counts = metrics.groupby("variant", observed=True, sort=False)[present].count()
    held = {str(v): [c for c, n in zip(present, row, strict=True) if n > 0]
            for v, row in zip(counts.index, counts.to_numpy(), strict=True)}  # fmt: skip
    return {v: divergence((held.get(v) or present)[0]) for v in variants}


def distinct(found: Mapping[str, Divergence] | Sequence[Divergence]) -> list[Divergence]:
    """The distinct divergences of ``found`` (variant -> divergence, or a list), in order."""
    values = found.values() if isinstance(found, Mapping) else found
    return list({d.column: d for d in values}.values())


def joined_names(found: Mapping[str, Divergence] | Sequence[Divergence]) -> str:
    """ "KL", "KSD", or "KL or KSD" for a table that holds both."""
    shown = [d.name for d in distinct(found)] or [KL.name]
    return " or ".join(shown)


def title(found: Mapping[str, Divergence] | Sequence[Divergence]) -> str:
    """A figure's title for the divergences of ``found``: the one's own, else the words for all."""
    shown = distinct(found)
    if len(shown) == 1:
        return shown[0].title
    return f"Divergence to the target ({joined_names(shown)})"
