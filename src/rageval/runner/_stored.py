"""A run directory's own record of how its run was configured, read back from the manifest.

With it, `--resume DIR` (or `evaluate(None, run_dir=DIR, resume=True)`) needs nothing else:
the data file, the metrics and their parameters, the judge's settings, the embeddings, the
column map and what to do with invalid rows all come from `manifest.json`. Anything given
explicitly still wins (and the run directory's checks refuse what would change the run).

The judge's settings are read from `Judge.describe()` as the manifest stores it, as a
`JudgeSpec` (a manifest of an earlier rageval lacks some settings: they take their defaults);
the API key never is (it comes from the environment variable the manifest names).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval._client._cache import recorded_cache
from rageval.errors import RunDirError
from rageval.judge import JudgeSpec, PriceTable
from rageval.judge._spec import JudgeChoice
from rageval.log import Manifest
from rageval.runner._panel import Panel
from rageval.runner._prepare import RunSpec, embeddings_from_spec
from rageval.runner._probe import key_variable
from rageval.runner._runconfig import JudgeSetup, made as made_judge
from rageval.runner._rundir import resumable_manifest, stored_metric

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.metrics.base import Metric


def stored_judge(described: Mapping[str, Any]) -> JudgeChoice:
    """The judge a manifest describes, as its JudgeSpec, recorded price and cache (the key
    aside: it is read from the same environment variable)."""
    variable = key_variable(described)
    if variable is None:
        given = str(described.get("api_key_from") or "its key").removeprefix("the ")
        raise RunDirError(
            f"the run's judge was given {given} in Python, which a run directory cannot "
            "record: pass the judge again (llm=... or --llm/--base-url)"
        )
    spec = JudgeSpec.of_described(described).model_copy(update={"api_key_env": variable})
    price = described.get("price")  # the price the run used (absent: none known, or an older run)
    prices = PriceTable({spec.model: price}) if isinstance(price, Mapping) else None
    return JudgeChoice(spec, prices=prices, cache=recorded_cache(described.get("cache")))


@dataclass(frozen=True)
class StoredRun:
    """What `manifest.json` says about the run in `path`."""

    path: Path
    manifest: Manifest
    #: the data file the run read (absolute), None for data given in memory
    data_path: Path | None
    #: (registry name, constructor parameters, the metric's own judge as described, or None)
    metrics: list[tuple[str, dict[str, Any], Mapping[str, Any] | None]]
    #: the directories the modules of the user's own metrics were imported from
    import_roots: list[str]
    #: the run's judge as Judge.describe() put it, None when the run had no judge
    judge: Mapping[str, Any] | None
    #: an --embeddings spec ("local", "openai:MODEL"), None when the run used none
    embeddings: str | None
    embeddings_base_url: str | None
    #: the remote embeddings' request cache: the cache= argument that reopens it
    embeddings_cache: str | bool
    column_map: dict[str, str] | None
    on_invalid: str
    #: the run's language for rows without their own (None: detected per row)
    language: str | None = None

    def data_file(self) -> Path:
        """The data file, which must still be where the run found it; for data given in
        memory, the copy of its rows the run directory keeps."""
        if self.data_path is None:
            source = self.manifest.data.source or "data given in memory"
            kept = self.manifest.data.rows_file
            if kept is None:  # a run of an earlier rageval, which kept no copy
                raise RunDirError(
                    f"cannot resume {self.path} by itself: its data was not a file ({source}); "
                    "pass the same data again"
                )
            copy = self.path / kept
            if not copy.is_file():
                raise RunDirError(
                    f"cannot resume {self.path} by itself: the copy of its data ({source} given "
                    f"in memory) is gone from {copy}; pass the same data again"
                )
            return copy
        if not self.data_path.is_file():
            raise RunDirError(
                f"cannot resume {self.path}: its data file {self.data_path} is gone (moved or "
                f"deleted?); pass the data where it is now: rageval evaluate DATA --resume "
                f"{self.path}"
            )
        return self.data_path

    def make_metrics(self) -> list[Metric]:
        for root in self.import_roots:
            # as the run that recorded it could: ahead of the other entries, as `python -m`
            # and the command line put the current directory
            if root not in sys.path:
                sys.path.insert(0, root)
        made = []
        for name, params, own_judge in self.metrics:
            try:
                metric = stored_metric(name, params)
            except KeyError as e:  # a metric defined outside rageval, not imported now
                raise RunDirError(f"cannot resume {self.path}: {e.args[0]}") from None
            if own_judge is not None:
                metric.llm = made_judge(stored_judge(own_judge))
            made.append(metric)
        return made

    def make_judge(self) -> Judge | list[Judge] | Panel | None:
        """The run's judge; one per endpoint when its rows were spread over several; its panel
        when it was judged by one."""
        setup = self.judges()
        return setup.make() if setup is not None else None

    def judges(self) -> JudgeSetup | None:
        """The run's judges as its manifest describes them (see :meth:`make_judge`)."""
        if self.manifest.panel:
            return JudgeSetup(
                tuple(stored_judge(p.judge.model_dump()) for p in self.manifest.panel),
                panel=tuple(p.name for p in self.manifest.panel),
            )
        if not self.judge:
            return None
        choice = stored_judge(self.judge)
        urls = self.judge.get("base_urls") or [choice.spec.base_url]
        return JudgeSetup(tuple(choice.under({"base_url": url}) for url in urls))

    def complete(self, spec: RunSpec) -> RunSpec:
        """A resumed run's `spec`: each argument as given, else as this run's manifest has it
        (the data, its column map, the metrics, the judge, the embeddings, `on_invalid`,
        `repeats`)."""
        stored_on_invalid = self.on_invalid if self.on_invalid in ("raise", "skip") else None
        return dataclasses.replace(
            spec,
            data=spec.data if spec.data is not None else self.data_file(),
            column_map=spec.column_map if spec.column_map is not None else self.column_map,
            metrics=spec.metrics if spec.metrics is not None else self.make_metrics(),
            llm=spec.llm if spec.llm is not None else self.make_judge(),
            embeddings=spec.embeddings if spec.embeddings is not None else self.make_embeddings(),
            on_invalid=spec.on_invalid or stored_on_invalid,  # type: ignore[arg-type]
            repeats=spec.repeats if spec.repeats is not None else self.manifest.repeats,
            language=spec.language if spec.language is not None else self.language,
        )

    def make_embeddings(self) -> Embeddings | None:

        if self.embeddings is None:
            return None
        return embeddings_from_spec(
            self.embeddings, base_url=self.embeddings_base_url, cache=self.embeddings_cache
        )


def read_stored_run(run_dir: str | os.PathLike[str]) -> StoredRun:
    """The stored configuration of the run in `run_dir` (RunDirError if there is none)."""
    path = Path(run_dir)
    manifest = resumable_manifest(path)
    data, embeddings = manifest.data, manifest.embeddings
    return StoredRun(
        path=path,
        manifest=manifest,
        data_path=Path(data.path) if data.path else None,
        metrics=[
            (m.registered_name or m.name, dict(m.params), m.judge or None) for m in manifest.metrics
        ],
        import_roots=[m.import_root for m in manifest.metrics if m.import_root],
        judge=manifest.judge.model_dump() if manifest.judge is not None else None,
        embeddings=_embeddings_spec(embeddings.name) if embeddings else None,
        embeddings_base_url=embeddings.base_url if embeddings else None,
        embeddings_cache=_embeddings_cache(embeddings.cache if embeddings else None),
        column_map=dict(data.column_map) if data.column_map else None,
        on_invalid=str(manifest.on_invalid or "raise"),
        language=data.language,
    )


def _embeddings_cache(recorded: str | bool | None) -> str | bool:
    """The cache= argument of the run's remote embeddings: as recorded, else (a manifest
    that does not say) the default cache."""
    if recorded is None or recorded is True:
        return True
    return recorded_cache(recorded or None)


def _embeddings_spec(name: str) -> str:
    """The --embeddings spec that makes embeddings of this name."""
    provider, _, model = name.partition(":")
    if provider == "local":
        return "local"
    if provider == "openai" and model:
        return name
    raise RunDirError(
        f"the run used embeddings {name!r}, which only Python code can make again: pass them "
        "(embeddings=...)"
    )
