"""How a run executes, as one object: :class:`RunConfig`, beside :class:`RunSpec` (what it
scores).

Every command that runs an evaluation -- ``evaluate``, ``calibrate``, ``align`` and whatever
comes next -- takes the same RunConfig, so each gets every run option from this one definition:
where the run is written and whether it continues one (``run_dir``, ``resume``,
``overwrite``), where rows are scored (``engine``, ``ray_address``, ``ray_actors``), what it
may spend (``max_cost``) and whether its judge requests go through a Batch API (``batch``),
whether the endpoints are checked first (``probe``), the progress line, the human label
columns, the observers, and whether the judges' request cache is used (``cache``). It is
checked once, when it is made, and the run's manifest records it whole
(:meth:`RunConfig.record`).

The Python API keeps its keyword arguments (``evaluate(data, run_dir=..., max_cost=...)``):
they are :class:`RunKeywords`, which :func:`run_config` turns into the RunConfig; ``config=``
gives one whole instead. On the command line one resolver reads the layers in order -- the
flags, the environment, the config file (a new run's) or the run's manifest (a resumed run's)
-- and makes the RunConfig and the judges' :class:`~rageval.judge.JudgeSpec`
(:func:`rageval.cli._shared.resolve_run`; docs/running.md).

A resumed run takes from its manifest every field of :data:`RESUMED` that is not given again
(:func:`resumed`): the engine, the budget, batch mode, the endpoint check, the human labels and
the request cache are the run's own unless the call (a flag, a keyword) says otherwise; what is
given wins for this session and is recorded as the run's from then on.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from rageval._extras import require
from rageval.errors import RunConfigError
from rageval.judge import BatchSettings
from rageval.judge._spec import JudgeChoice
from rageval.observers import RunObserver
from rageval.runner._panel import Panel, judge_name
from rageval.runner.engines import ENGINES, Engine

if TYPE_CHECKING:
    from rageval.judge import Judge
    from rageval.runner._prepare import LabelsArg

__all__ = ["RESUMED", "JudgeSetup", "RunConfig", "RunKeywords", "made", "resumed", "run_config"]


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How a run executes (see the module docstring); every field has the default a run has
    when it is not given.

    Args:
        run_dir: the run directory the run log is written to (None: none).
        resume: continue the run in `run_dir`; what the spec leaves out is the run's own.
        overwrite: replace a run already in `run_dir` (by default that is an error).
        engine: where rows are scored: "local" (this process) or "ray" (Ray Data).
        ray_address: with engine="ray", the cluster to join.
        ray_actors: with engine="ray", the actors that score rows.
        max_cost: USD the judges may spend in this run (None: no budget); a run that would
            pass it stops with BudgetReached, what finished kept.
        batch: send judge requests through the endpoint's Batch API (True: the default
            settings, or resuming a batched run its own; None: not batched, resuming as the
            run was).
        probe: check each endpoint first with one quick request (and read a llama.cpp
            server's slots).
        progress: None: a progress line where stderr is a terminal (a plain line a minute
            elsewhere); True: the redrawn line anywhere; False: none.
        human_labels: label columns of the data, each with the metric it rectifies.
        observers: told how the run goes (rageval.observers).
        cache: use the judges' request caches (False: every request is sent, none stored).
    """

    run_dir: Path | None = None
    resume: bool = False
    overwrite: bool = False
    engine: Engine = "local"
    ray_address: str | None = None
    ray_actors: int | None = None
    max_cost: float | None = None
    batch: BatchSettings | bool | None = None
    probe: bool = True
    progress: bool | None = None
    human_labels: LabelsArg | None = None
    observers: tuple[RunObserver, ...] = ()
    cache: bool = True

    def __post_init__(self) -> None:
        if self.run_dir is not None and not isinstance(self.run_dir, Path):
            object.__setattr__(self, "run_dir", Path(self.run_dir))
        if not isinstance(self.observers, tuple):
            object.__setattr__(self, "observers", tuple(self.observers))
        self._check()

    def _check(self) -> None:
        if self.engine not in ENGINES:
            raise RunConfigError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.engine != "ray" and (self.ray_address is not None or self.ray_actors is not None):
            raise RunConfigError("ray_address and ray_actors need engine='ray'")
        if self.ray_actors is not None and self.ray_actors < 1:
            raise RunConfigError(f"ray_actors must be at least 1, got {self.ray_actors}")
        if self.resume and self.run_dir is None:
            raise RunConfigError("resume=True needs the run_dir of the run to continue")
        if self.resume and self.overwrite:
            raise RunConfigError(
                "resume=True continues the run in run_dir; overwrite=True replaces it"
            )
        cost = self.max_cost
        if cost is not None and not (
            isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0
        ):
            raise RunConfigError(f"max_cost must be a positive number of USD, got {cost!r}")
        if self.engine == "ray" and (cost is not None or self.batch not in (None, False)):
            raise RunConfigError(
                "max_cost and batch work with the local engine, not with engine='ray'"
            )
        bad = [o for o in self.observers if not isinstance(o, RunObserver)]
        if bad:
            raise RunConfigError(
                f"observers must be rageval.observers.RunObserver objects, got {bad[0]!r}"
            )
        if self.engine == "ray":
            require("ray", "engine='ray'")

    @property
    def batch_settings(self) -> BatchSettings | None:
        """The Batch API's settings when the run is batched (None: it is not)."""
        return BatchSettings() if self.batch is True else self.batch or None

    def part(self, run_dir: str | os.PathLike[str] | None) -> RunConfig:
        """This configuration for one of several runs a command makes (align's): its own
        `run_dir`, started afresh. The budget is the command's: its runs share one
        (:func:`rageval.runner._cost.limit_spending` takes the one already open)."""
        return dataclasses.replace(
            self, run_dir=Path(run_dir) if run_dir is not None else None, resume=False
        )

    def record(self) -> dict[str, Any]:
        """The configuration as the run's manifest records it (JSON: observers by class, the
        batch settings as a table)."""
        settings = self.batch_settings
        labels = self.human_labels
        return {
            "run_dir": str(self.run_dir) if self.run_dir is not None else None,
            "resume": self.resume,
            "overwrite": self.overwrite,
            "engine": self.engine,
            "ray_address": self.ray_address,
            "ray_actors": self.ray_actors,
            "max_cost": self.max_cost,
            "batch": dataclasses.asdict(settings) if settings is not None else None,
            "probe": self.probe,
            "progress": self.progress,
            "human_labels": _labels_record(labels) if labels is not None else None,
            "observers": [f"{type(o).__module__}.{type(o).__qualname__}" for o in self.observers],
            "cache": self.cache,
        }


def _labels_record(labels: LabelsArg) -> list[list[str]]:
    pairs = labels.items() if hasattr(labels, "items") else labels
    out = []
    for column, metrics in pairs:
        named = (
            [metrics] if isinstance(metrics, str) or not isinstance(metrics, Sequence) else metrics
        )
        out += [[column, m if isinstance(m, str) else m.name] for m in named]
    return out


class RunKeywords(TypedDict, total=False):
    """The fields of :class:`RunConfig` as keyword arguments of ``evaluate()``,
    ``calibrate()`` and ``align()`` (``run_dir`` may be any path)."""

    run_dir: str | os.PathLike[str] | None
    resume: bool
    overwrite: bool
    engine: Engine
    ray_address: str | None
    ray_actors: int | None
    max_cost: float | None
    batch: BatchSettings | bool | None
    probe: bool
    progress: bool | None
    human_labels: LabelsArg | None
    observers: Sequence[RunObserver]
    cache: bool


def run_config(config: RunConfig | None, keywords: RunKeywords) -> RunConfig:
    """The RunConfig of a call: `config` when given whole (then no keyword of it may be given
    too), else the one `keywords` state; resuming, what is not given is the run's own
    (:func:`resumed`: a RunConfig given whole gives every field but ``batch=None``, "as the
    run was"). Every command reads its RunConfig here, so a resume reads the stored layer the
    same way for each.

    Args:
        config: a RunConfig given whole, or None.
        keywords: the call's keyword arguments of a RunConfig.
    """
    given: dict[str, Any] = {k: v for k, v in keywords.items() if k in _FIELDS}
    if given.get("observers", ()) is None:  # None: no observers, as the default
        del given["observers"]
    if config is not None:
        if given:
            raise RunConfigError(
                f"{', '.join(sorted(given))} given beside config=: give them in the RunConfig "
                "(dataclasses.replace(config, ...))"
            )
        return resumed(config, _FIELDS - {"batch"} if config.batch is None else _FIELDS)
    if "observers" in given:
        given["observers"] = tuple(given["observers"])
    return resumed(RunConfig(**given), given)


_FIELDS = frozenset(f.name for f in dataclasses.fields(RunConfig))


def refuse_unknown_keywords(command: Callable[..., Any], run: Collection[str]) -> None:
    """A keyword in `run` that is no RunConfig field is Python's TypeError for `command`
    (``pairwise()``, ``generate()``), naming the closest keyword it takes."""
    unknown = sorted(set(run) - _FIELDS)
    if not unknown:
        return
    own = [
        p.name for p in inspect.signature(command).parameters.values() if p.kind != p.VAR_KEYWORD
    ]
    close = difflib.get_close_matches(unknown[0], [*own, *sorted(_FIELDS)], n=1)
    meant = f" (did you mean {close[0]!r}?)" if close else ""
    name = command.__name__.removeprefix("a")
    raise TypeError(f"{name}() got an unexpected keyword argument {unknown[0]!r}{meant}")


#: the fields a resumed run takes from its manifest unless they are given again: how its rows
#: are scored and what it may spend. Not where it is written or whether it resumes (the call's
#: own), the progress line (the terminal's) or the observers (objects of the process that made
#: them: give them again)
RESUMED = (
    "engine",
    "ray_address",
    "ray_actors",
    "max_cost",
    "batch",
    "probe",
    "human_labels",
    "cache",
)


def resumed(config: RunConfig, given: Collection[str]) -> RunConfig:
    """`config` of a resumed run, each field of :data:`RESUMED` that is not in `given` as the
    run's manifest records it (the one its last session wrote); `config` itself when it does
    not resume, or when the manifest cannot be read (the resume then says why). ``batch=True``
    given resumes a batched run with its own batch settings; ``batch=None`` of a run that was
    not batched becomes False, so that the config is resolved once (resolving it again reads
    nothing).

    Args:
        config: the RunConfig the call's own layers made.
        given: the names of the fields the call gave (a flag, a keyword, the config file).
    """
    if not config.resume or config.run_dir is None:
        return config
    if set(RESUMED) <= set(given) and config.batch is not True:
        return config  # every field given: nothing to read
    stored = _stored_fields(config.run_dir)
    update = {name: value for name, value in stored.items() if name not in given}
    if config.batch is True and isinstance(stored.get("batch"), BatchSettings):
        update["batch"] = stored["batch"]
    if stored and update.get("batch", config.batch) is None:
        update["batch"] = False
    return dataclasses.replace(config, **update) if update else config


def _stored_fields(run_dir: Path) -> dict[str, Any]:
    """The :data:`RESUMED` fields the manifest in `run_dir` records, as RunConfig takes them."""
    from rageval.log import RunLogError, read_manifest

    try:
        manifest = read_manifest(run_dir)
    except (OSError, RunLogError):
        return {}
    record = manifest.run_config or {  # a manifest from before the RunConfig was recorded
        "engine": manifest.engine or "local",
        "batch": (manifest.batch_settings or {}) if manifest.batch else None,
    }
    fields = {name: record[name] for name in RESUMED if name in record}
    if fields.get("batch") is not None:
        try:
            fields["batch"] = BatchSettings(**fields["batch"])
        except (TypeError, ValueError):  # the settings of another rageval: the defaults
            fields["batch"] = BatchSettings()
    if fields.get("human_labels") is not None:
        fields["human_labels"] = [(column, metric) for column, metric in fields["human_labels"]]
    return fields


@dataclasses.dataclass(frozen=True)
class JudgeSetup:
    """The judges a command resolved, each a :class:`~rageval.judge.JudgeSpec` with its price
    table and cache (a :class:`JudgeChoice`): one judge, one per endpoint its rows are spread
    over, or a panel's (:meth:`make` makes them)."""

    choices: tuple[JudgeChoice, ...]
    #: a panel's names, one per choice (None: named ``model@base_url``); None: not a panel
    panel: tuple[str | None, ...] | None = None

    def under(self, layer: Mapping[str, Any]) -> JudgeSetup:
        """These judges with the settings `layer` gives over theirs (the command line's, over
        a resumed run's)."""
        choices = tuple(choice.under(layer) for choice in self.choices)
        return dataclasses.replace(self, choices=choices)

    def make(self, *, keys: bool = True) -> Judge | list[Judge] | Panel:
        """The judge; the list of one per endpoint; the panel (`keys` False: without refusing
        a judge whose key is not set, for a dry run, which sends nothing)."""
        judges = [made(choice, keys=keys) for choice in self.choices]
        if self.panel is not None:
            names = [name or judge_name(j) for name, j in zip(self.panel, judges, strict=True)]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise RunConfigError(f"{', '.join(twice)} twice: give each judge its name")
            return Panel(dict(zip(names, judges, strict=True)))
        return judges if len(judges) > 1 else judges[0]


def made(choice: JudgeChoice, *, keys: bool = True) -> Judge:
    """The judge `choice` states, refused at once when the key its endpoint needs is not set
    (unless `keys` is False)."""
    from rageval.errors import RagevalError
    from rageval.judge import Judge
    from rageval.runner._probe import check_key

    try:
        judge = Judge.from_spec(choice.spec, cache=choice.cache, prices=choice.prices)
    except (TypeError, ValueError) as e:  # a value the judge refuses
        if choice.source is None or isinstance(e, RagevalError):
            raise
        raise RunConfigError(f"{choice.source}: {e}") from None
    if keys:
        check_key(judge.describe(), what="judge")
    return judge
