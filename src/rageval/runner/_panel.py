"""A judge panel: several judges (other models, other servers) that each score every judge cell
of a run, the cell keeping their mean (docs/panels.md).

The panel is one seam in the runner: :func:`rageval.runner._schedule.make_plans` makes a plan
per judge, as it does for the endpoints a run spreads its rows over, and the panel's plan holds
them as its seats; the scheduler scores a row's judge metrics with every seat (each through its
own request cache and kept cells, so a re-run pays nothing twice) and its other metrics once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from rageval.errors import RunConfigError

if TYPE_CHECKING:
    from rageval.judge import Judge


def judge_name(judge: Judge) -> str:
    """The name a judge of a panel has unless it is given one: ``model@base_url``."""
    return f"{judge.model}@{judge.base_url}" if judge.base_url else judge.model


class Panel:
    """Judges that each score every judge cell of a run: ``evaluate(data, llm=Panel([...]))``.

    A judge metric's cell is scored once by each judge; its value is the mean of the judges'
    measured values (the cell is not measured only when no judge measured it) and the run log
    keeps each judge's result under its name (:class:`rageval.log.PanelVote`). Metrics without
    a judge, and metrics with their own judge (``metric.llm``), are scored once. The summary
    gives, per judge metric, Krippendorff's α between the judges, with its interval.

    Args:
        judges: two judges or more: a list (each named ``model@base_url``) or a mapping from
            the name to keep each judge's values under to the judge.
    """

    def __init__(self, judges: Sequence[Judge] | Mapping[str, Judge]) -> None:
        from rageval.judge import Judge

        named = (
            list(judges.items())
            if isinstance(judges, Mapping)
            else [(judge_name(j) if isinstance(j, Judge) else "", j) for j in judges]
        )
        if len(named) < 2:
            raise RunConfigError(f"a panel needs two judges or more, got {len(named)}")
        for name, judge in named:
            if not isinstance(judge, Judge):
                raise RunConfigError(f"a panel's judges must be Judges, got {judge!r}")
            if not name or not isinstance(name, str):
                raise RunConfigError(f"a panel's judge needs a name, got {name!r}")
        names = [name for name, _ in named]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise RunConfigError(
                f"judge(s) named twice in the panel: {', '.join(twice)} (give each its own "
                "name: Panel({'name': Judge(...), ...}))"
            )
        #: the names, in the panel's order
        self.names: tuple[str, ...] = tuple(names)
        #: the judges, in the same order
        self.judges: tuple[Judge, ...] = tuple(judge for _, judge in named)

    def __iter__(self) -> Iterator[tuple[str, Judge]]:
        return iter(zip(self.names, self.judges, strict=True))

    def __len__(self) -> int:
        return len(self.judges)

    def __repr__(self) -> str:
        return f"Panel({', '.join(self.names)})"
