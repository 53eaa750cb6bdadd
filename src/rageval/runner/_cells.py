"""Finished cells remembered across runs, so re-running an evaluation costs no judge or model
work.

A cell (one metric on one sample) that ended ``ok`` is kept, as a record of the runner's own,
in the file of its judge's request cache (a metric that asks no judge -- semantic_similarity,
token_f1 -- in that of the run's judge; one file, so that clearing the cache forgets kept
cells too), under ``cell:`` and the sha256 of everything its value depends on: the sample, the
metric and its configuration (its constructor's arguments, recorded automatically, and the
code of any class they name), the judges it asks (endpoint, model, sampling settings,
structured-output mode) and the embeddings it uses, and the code (rageval's version and a
digest of its source files; for a metric defined outside rageval, a digest of its source
file), so a changed prompt, argument or metric never reuses an old value. Nothing is kept for
a metric whose configuration cannot be recorded faithfully (an argument that is a function,
a lambda...) or whose source file cannot be read.
Failed and skipped cells are never kept. A run whose judge has ``cache=False`` (or that has no
judge) keeps and reuses nothing.

Without this, a re-run still sends no request (every judge call is answered by the request
cache) but re-does all the per-call work, and embeds every text again with the local model: a
kept cell is one lookup instead.

Accounting: a kept cell records the judge calls computing it took (sent, or answered by the
request cache) and which shared statement lists (:mod:`rageval.metrics._statements`) its row
had extracted for it. Reused, it books those calls as cache hits of its judge, and each
statement list its reused cells stand for that the run did not extract again as one cache hit
of the statement judge: a re-run answered from the cache reports as many judge calls answered
from the cache as the first run made (on an endpoint that ignores ``n``, a call of n
generations was n requests).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from rageval._version import __version__
from rageval.judge import Usage
from rageval.metrics._capture import source_digest
from rageval.metrics._statements import SHARED_TAG, read_by
from rageval.metrics.base import Metric, MetricResult
from rageval.metrics.evidence import FreeformEvidence, StoredEvidence
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge, RequestCache

#: 2: the metric's configuration is captured from its constructor; 3: a kept cell records
#: its judge calls and statement lists, and metrics without a judge are kept too; 4: the judge
#: is identified by its JudgeSpec's settings that change a reply (its backend among them)
_FORMAT = 4


class _StoredResult(MetricResult):
    """A result as this rageval keeps it: its evidence always names its kind, so it is read by
    that field alone, without the Python callback per cell that reading a user's plain
    evidence dict takes (a third of the time to look up a re-run's kept cells)."""

    evidence: StoredEvidence = Field(default_factory=FreeformEvidence)


class _KeptCell(BaseModel):
    """A kept cell as its record stores it."""

    result: MetricResult
    #: the judge calls computing it took
    calls: int = Field(ge=0)
    #: the shared statement lists ("response", "reference") its row had extracted for it
    statements: list[str]


class _ReadKeptCell(_KeptCell):
    """A kept cell as a lookup reads its record back."""

    result: _StoredResult


@dataclasses.dataclass(frozen=True)
class KeptCells:
    """The cells of one sample found kept from an earlier run."""

    results: dict[str, MetricResult] = dataclasses.field(default_factory=dict)
    #: by metric, the judge calls each cell stands for
    calls: dict[str, int] = dataclasses.field(default_factory=dict)
    #: the shared statement lists the cells were computed from
    statements: frozenset[str] = frozenset()


class CellStore:
    """Looks up and keeps the ``ok`` cells of a run's metrics (see the module docstring)."""

    def __init__(
        self,
        judge_of: Mapping[str, Judge | None],
        shared_judge: Judge | None,
        embeddings: Embeddings | None,
    ) -> None:
        self._judge_of = judge_of
        self._shared_judge = shared_judge
        self._shared = shared_judge.spec.cell_identity() if shared_judge is not None else None
        self._embeddings = embeddings
        self._identities: dict[str, bytes | None] = {}
        # where the cells of a metric that asks no judge are kept: the cache of the run's judge
        # (the one that extracts the shared statements)
        self._run_cache = shared_judge.cache if shared_judge is not None else None

    def lookup(self, sample: Sample, metrics: Sequence[Metric]) -> KeptCells:
        """The kept cells of `metrics` on `sample` (nothing is booked: see :meth:`book`)."""
        keys = self._keys(sample, metrics)
        by_cache: dict[int, tuple[RequestCache, list[str]]] = {}
        for name, key in keys.items():
            cache = self._cache_of(name)
            assert cache is not None  # a metric without a cache has no key
            by_cache.setdefault(id(cache), (cache, []))[1].append(key)
        stored: dict[str, str] = {}
        for cache, wanted in by_cache.values():
            stored.update(cache.get_records(wanted))
        found = KeptCells()
        statements: set[str] = set()
        for name, key in keys.items():
            if key not in stored:
                continue
            try:
                kept = _ReadKeptCell.model_validate_json(stored[key])
            except ValueError:  # written by another version of the result model: compute again
                continue
            found.results[name] = kept.result
            found.calls[name] = kept.calls
            statements.update(kept.statements)
        return dataclasses.replace(found, statements=frozenset(statements))

    def book(self, sample: Sample, kept: KeptCells, extracted: Collection[str]) -> None:
        """Book what the `kept` cells of `sample` saved as cache hits: each cell's judge calls
        under its metric, and the statement lists they stand for that this run did not
        extract again (`extracted`: those it did) under the shared statements' tag."""
        sid = _id(sample)
        for name, calls in kept.calls.items():
            judge = self._judge_of.get(name)
            if judge is not None and calls:
                judge.book(Usage(cache_hits=calls), {"metric": name, "sample": sid})
        saved = len(kept.statements - set(extracted))
        if saved and self._shared_judge is not None:
            self._shared_judge.book(Usage(cache_hits=saved), {"metric": SHARED_TAG, "sample": sid})

    def keep(
        self,
        sample: Sample,
        metrics: Sequence[Metric],
        results: Mapping[str, MetricResult],
        calls: Mapping[str, int],
        extracted: Collection[str],
    ) -> None:
        """Keep the ``ok`` results among `results` (of `metrics` on `sample`), with the judge
        calls each took (`calls`, by metric) and the statement lists of the row it reads (of
        `extracted`, those the row extracted)."""
        done = {m.name: m for m in metrics if (r := results.get(m.name)) is not None and r.measured}
        for name, key in self._keys(sample, list(done.values())).items():
            cache = self._cache_of(name)
            assert cache is not None  # a metric without a cache has no key
            kept = _KeptCell(
                result=results[name],
                calls=calls.get(name, 0),
                statements=read_by(done[name].statement_needs, extracted),
            )
            cache.put_record(key, kept.model_dump_json())

    def _cache_of(self, name: str) -> RequestCache | None:
        """Where a metric's cells are kept: its judge's cache, or (a metric that asks no
        judge) the run's; None: nowhere."""
        judge = self._judge_of.get(name)
        return judge.cache if judge is not None else self._run_cache

    def _keys(self, sample: Sample, metrics: Sequence[Metric]) -> dict[str, str]:
        """The cell key of each metric that has a caching judge and a known source."""
        identities: list[tuple[str, bytes]] = []
        for metric in metrics:
            identity = self._identity(metric)
            if identity is not None:
                identities.append((metric.name, identity))
        if not identities:
            return {}
        sample_json = sample.model_dump_json().encode()
        keys = {}
        for name, ident in identities:
            digest = hashlib.sha256(ident)
            digest.update(b"\0")
            digest.update(sample_json)
            keys[name] = f"cell:{digest.hexdigest()}"
        return keys

    def _identity(self, metric: Metric) -> bytes | None:
        """Everything but the sample that a cell's value depends on (made once per metric);
        None when the metric's cells are not kept."""
        if metric.name in self._identities:
            return self._identities[metric.name]
        judge = self._judge_of.get(metric.name)
        source = source_digest(type(metric))
        config = metric.config_identity()
        identity = None
        if self._cache_of(metric.name) is not None and source is not None and config:
            embeddings = (
                (metric.embeddings or self._embeddings) if metric.needs_embeddings else None
            )
            identity = json.dumps(
                {
                    "format": _FORMAT,
                    "code": _code_digest(),
                    "metric": [type(metric).__module__, type(metric).__qualname__, metric.name],
                    "metric_source": source,
                    "config": config,
                    "judge": judge.spec.cell_identity() if judge is not None else None,
                    "statements": self._shared if metric.statement_needs else None,
                    "embeddings": _embeddings_identity(embeddings),
                },
                sort_keys=True,
                default=repr,
            ).encode()
        self._identities[metric.name] = identity
        return identity


def _id(sample: Sample) -> str:
    return sample.id or "-"


def _embeddings_identity(embeddings: Embeddings | None) -> list[Any] | None:
    if embeddings is None:
        return None
    # not `dim`: a remote model's is only known after its first reply
    return [type(embeddings).__qualname__, embeddings.name,
            getattr(embeddings, "dimensions", None), getattr(embeddings, "base_url", None)]  # fmt: skip


@functools.cache
def _code_digest() -> str:
    """rageval's version and source: any change to a prompt or a metric's math, even in an
    editable install that keeps its version number, makes every kept cell a miss."""
    return f"{__version__}:{_source_digest(Path(__file__).resolve().parent.parent)}"


def _source_digest(root: Path) -> str:
    """sha256 over the names and contents of the Python files under `root`."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()
