"""Observers: whatever wants to know how a run goes, told as it goes.

An observer is told when a run starts (its manifest), when each sample is finished (the line
the run log gets), when each judge call ends (model, times, usage, error) and when the run ends
(its summary, or why it stopped). The run directory with its result collector, and the progress
line, are observers the runner always has; ``evaluate(..., observers=[...])`` adds others: the
MLflow sink (:mod:`rageval.observers.mlflow`, the ``rageval[mlflow]`` extra), the OpenTelemetry
one (:mod:`rageval.observers.otel`, ``rageval[otel]``) or your own: subclass
:class:`RunObserver` and override what you need. A package can offer one under the entry-point
group ``rageval.observers`` (``name = "module:Class"``, built with no arguments); the command
line's ``--observer NAME`` and :func:`load_observer` find it by name.

Observers are told in the order given, from the run's event loop, so a hook must be quick (a
sink that talks to a server should queue). Every event carries its run's id (``run_id``): one
observer may be given to several runs at once (two ``aevaluate`` calls gathered), and keeps
what it holds of each run by that id, as the MLflow and OpenTelemetry sinks do. An observer of
your own that raises is left out for the rest of the run with a warning: a sink that fails
never costs the run its rows. The run log's own writer is not so forgiving: a run directory
that cannot be written stops the run.

Judge calls are seen by the local engine (``engine="ray"`` makes them in its workers).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from rageval._client._run import JudgeCall
from rageval.errors import RunConfigError

if TYPE_CHECKING:
    from rageval.log import Manifest, SampleLine, Summary
    from rageval.results import EvaluationResult

__all__ = [
    "ENTRY_POINT_GROUP",
    "JudgeCall",
    "RunEnd",
    "RunObserver",
    "RunStart",
    "load_observer",
]

#: the entry-point group packages register observers under
ENTRY_POINT_GROUP = "rageval.observers"


@dataclass(frozen=True)
class RunStart:
    """A run starts (or resumes): what it is, where it is written, how much is left to do."""

    manifest: Manifest
    run_dir: Path | None
    n_rows: int
    #: rows already finished (a resumed run), which no observer is told of again
    n_finished: int
    #: this run's id, on every event of it: the finished samples' (``SampleLine.run_id``),
    #: the judge calls' (``JudgeCall.run_id``) and the end's; an observer given to several
    #: runs at once keeps what it holds of each by it
    run_id: str = ""


@dataclass(frozen=True)
class RunEnd:
    """A run ends: finished, or stopped by `error` (a fatal judge error, the budget, Ctrl-C)
    with what finished until then."""

    result: EvaluationResult
    run_dir: Path | None
    error: BaseException | None = None
    #: the run's id (``RunStart.run_id``)
    run_id: str = ""

    @cached_property
    def summary(self) -> Summary:
        """The summary the run log gets (statistics over what finished), made once."""
        return self.result.summary_model()


class RunObserver:
    """Told how a run goes; every hook does nothing unless overridden."""

    def on_start(self, start: RunStart) -> None:
        """The run starts, before any request."""

    def on_sample(self, line: SampleLine) -> None:
        """A sample is finished: every cell it has in this run, as the run log records it."""

    def on_judge_call(self, call: JudgeCall) -> None:
        """A judge call ended (answered, from the cache, or failed)."""

    def on_end(self, end: RunEnd) -> None:
        """The run ended; `end.error` says why when it stopped early."""


class Observers:
    """The run's observers, told in order. `essential` ones (the run log's writer) stop the run
    when they fail; the others are left out with a warning."""

    def __init__(self, essential: Sequence[RunObserver], others: Sequence[RunObserver]) -> None:
        self._essential = list(essential)
        self._others = list(others)

    def _tell(self, hook: str, event: object) -> None:
        for observer in self._essential:
            getattr(observer, hook)(event)
        for observer in list(self._others):
            try:
                getattr(observer, hook)(event)
            except Exception as e:
                self._others.remove(observer)
                logging.getLogger("rageval").warning(
                    "observer %s failed in %s (%s: %s); it is left out for the rest of the run",
                    type(observer).__name__,
                    hook,
                    type(e).__name__,
                    e,
                )

    def start(self, start: RunStart) -> None:
        self._tell("on_start", start)

    def sample(self, line: SampleLine) -> None:
        self._tell("on_sample", line)

    def judge_call(self, call: JudgeCall) -> None:
        self._tell("on_judge_call", call)

    def end(self, end: RunEnd) -> None:
        self._tell("on_end", end)


def load_observer(name: str) -> RunObserver:
    """The observer a package registered as `name` under the ``rageval.observers``
    entry-point group, built with no arguments (it reads its settings from the environment)."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        known = sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})
        raise RunConfigError(
            f"no observer named {name!r} (installed: {', '.join(known) or 'none'}; a package "
            f"offers one under the entry-point group {ENTRY_POINT_GROUP!r})"
        )
    observer = found[0].load()()
    if not isinstance(observer, RunObserver):
        raise RunConfigError(
            f"the observer {name!r} ({found[0].value}) is not a rageval.observers.RunObserver"
        )
    return observer
