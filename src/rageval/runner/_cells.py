"""Finished cells remembered across runs, so re-running an evaluation costs no judge work.

A cell (one metric on one sample) that ended ``ok`` is kept, as a record of the runner's own,
in the file of its judge's request cache (one file, so that clearing the cache forgets kept
cells too), under ``cell:`` and the sha256 of everything its value depends on: the sample, the
metric and its configuration (its constructor's arguments, recorded automatically, and the
code of any class they name), the judges it asks (endpoint, model, sampling settings,
structured-output mode) and the embeddings it uses, and the code (rageval's version and a
digest of its source files; for a metric defined outside rageval, a digest of its source
file), so a changed prompt, argument or metric never reuses an old value. Nothing is kept for
a metric whose configuration cannot be recorded faithfully (an argument that is a function,
a lambda...) or whose source file cannot be read.
Failed and skipped cells are never kept. A judge with ``cache=False`` keeps and reuses nothing.

Without this, a re-run still sends no request (every judge call is answered by the request
cache) but re-does all the per-call work: a cached cell is one lookup instead of a few.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval._version import __version__
from rageval.judge import Usage
from rageval.metrics.base import Metric, MetricResult, source_digest
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge, RequestCache

_FORMAT = 2  # 2: the metric's configuration is captured from its constructor


class CellStore:
    """Looks up and keeps the ``ok`` cells of the metrics that have a caching judge."""

    def __init__(
        self,
        judge_of: Mapping[str, Judge | None],
        shared_judge: Judge | None,
        embeddings: Embeddings | None,
    ) -> None:
        self._judge_of = judge_of
        self._shared = _judge_identity(shared_judge) if shared_judge is not None else None
        self._embeddings = embeddings
        self._identities: dict[str, bytes | None] = {}

    def lookup(self, sample: Sample, metrics: Sequence[Metric]) -> dict[str, MetricResult]:
        """The kept results of `metrics` on `sample`, by metric name; each hit is booked as a
        cache hit in the usage of that metric's judge."""
        keys = self._keys(sample, metrics)
        by_cache: dict[int, tuple[RequestCache, list[str]]] = {}
        for name, key in keys.items():
            cache = self._cache_of(name)
            by_cache.setdefault(id(cache), (cache, []))[1].append(key)
        stored: dict[str, str] = {}
        for cache, wanted in by_cache.values():
            stored.update(cache.get_records(wanted))
        found: dict[str, MetricResult] = {}
        for name, key in keys.items():
            if key not in stored:
                continue
            try:
                result = MetricResult.model_validate_json(stored[key])
            except ValueError:  # written by another version of the result model: compute again
                continue
            found[name] = result
            judge = self._judge_of[name]
            assert judge is not None
            judge.book(Usage(cache_hits=1), {"metric": name, "sample": _id(sample)})
        return found

    def keep(
        self, sample: Sample, metrics: Sequence[Metric], results: Mapping[str, MetricResult]
    ) -> None:
        """Keep the ``ok`` results among `results` (of `metrics` on `sample`)."""
        done = [m for m in metrics if results.get(m.name) is not None and results[m.name].measured]
        for name, key in self._keys(sample, done).items():
            self._cache_of(name).put_record(key, results[name].model_dump_json())

    def _cache_of(self, name: str) -> RequestCache:
        judge = self._judge_of[name]
        assert judge is not None and judge.cache is not None
        return judge.cache

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
        if judge is not None and judge.cache is not None and source is not None and config:
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
                    "judge": _judge_identity(judge),
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


def _judge_identity(judge: Judge) -> list[Any]:
    return [judge.base_url, judge.model, judge.temperature, judge.max_tokens, judge.seed,
            judge.mode]  # fmt: skip


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
