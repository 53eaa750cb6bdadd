"""What a worker process needs to score rows exactly as this process would, in picklable form.

Judges and embeddings hold locks, threads, HTTP pools and a process-wide limiter, so they are
not sent as objects: each becomes a spec of the arguments that make it again (the API key
travels with it, so a worker on another machine needs no environment of its own; it is kept
out of every repr). Metrics are sent as copies without their judge and embeddings, which the
worker attaches again from the specs. Objects used by several metrics are sent once and stay
shared in the worker.

A worker gets its share of each endpoint's concurrency (the limit is for the whole job, split
over the workers), a request cache shard of its own, and no rate limits of its own: requests
and tokens per minute are paced for all workers together (:mod:`._ray_worker`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rageval._client._cache import RequestCache
from rageval.errors import RagevalError

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge, JudgeSpec, PriceTable
    from rageval.metrics.base import Metric


class ShipError(RagevalError, ValueError):
    """A judge, embeddings model or metric that cannot be sent to other processes."""


@dataclasses.dataclass(frozen=True)
class EndpointSpec:
    """An endpoint's client settings and limits (per process: concurrency; per job: rates)."""

    base_url: str
    api_key: str | None = dataclasses.field(repr=False)  # never printed
    api_key_env: str
    timeout: float
    max_retries: int
    max_concurrency: int
    requests_per_minute: float | None
    tokens_per_minute: float | None

    def client_kwargs(self, max_concurrency: int) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "api_key": self.api_key,
            "api_key_env": self.api_key_env,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "max_concurrency": max_concurrency,
        }


def _endpoint_spec(owner: Any, what: str) -> EndpointSpec:
    endpoint = owner._endpoint  # Judge and OpenAIEmbeddings keep their endpoint here
    try:
        settings = endpoint.portable_settings()
    except ValueError as e:
        raise ShipError(f"{what}: {e}") from None
    limiter = endpoint.limiter
    return EndpointSpec(
        base_url=settings["base_url"],
        api_key=settings["api_key"],
        api_key_env=settings["api_key_env"],
        timeout=settings["timeout"],
        max_retries=settings["max_retries"],
        max_concurrency=limiter.max_concurrency,
        requests_per_minute=limiter.requests_per_minute,
        tokens_per_minute=limiter.tokens_per_minute,
    )


@dataclasses.dataclass(frozen=True)
class ShippedJudge:
    """A judge as its :class:`~rageval.judge.JudgeSpec`, with what the spec leaves out: the
    key and limits of its endpoint (shared out over the workers), its prices and cache."""

    cls: type[Judge]
    spec: JudgeSpec
    endpoint: EndpointSpec
    prices: PriceTable
    cache_dir: str | None

    @classmethod
    def of(cls, judge: Judge) -> ShippedJudge:
        return cls(
            cls=type(judge),
            spec=judge.spec,
            endpoint=_endpoint_spec(judge, f"judge {judge.model!r}"),
            prices=judge.prices,
            cache_dir=str(judge.cache.directory) if judge.cache is not None else None,
        )

    def build(self, max_concurrency: int, cache: RequestCache | None) -> Judge:
        # this worker's share of the concurrency; the rates are paced for all workers at once
        share = {"max_concurrency": max_concurrency, "requests_per_minute": None,
                 "tokens_per_minute": None}  # fmt: skip
        return self.cls.from_spec(
            self.spec.model_copy(update=share),
            api_key=self.endpoint.api_key,
            prices=self.prices,
            cache=cache if cache is not None else False,
        )


@dataclasses.dataclass(frozen=True)
class EmbeddingsSpec:
    """The local model (``endpoint`` None) or an OpenAI-compatible embeddings endpoint."""

    model: str | None
    batch_size: int
    endpoint: EndpointSpec | None = None
    dimensions: int | None = None
    model_dir: str | None = None
    prices: PriceTable | None = None
    cache_dir: str | None = None

    @classmethod
    def of(cls, embeddings: Embeddings) -> EmbeddingsSpec:
        from rageval.embeddings import LocalEmbeddings
        from rageval.embeddings.openai import OpenAIEmbeddings

        if type(embeddings) is LocalEmbeddings:
            model_dir = embeddings._model_dir  # None: the installed model package, on each node
            return cls(
                model=None,
                batch_size=embeddings.batch_size,
                model_dir=None if model_dir is None else str(model_dir),
            )
        if type(embeddings) is OpenAIEmbeddings:
            return cls(
                model=embeddings.model,
                batch_size=embeddings.batch_size,
                endpoint=_endpoint_spec(embeddings, f"embeddings {embeddings.name!r}"),
                dimensions=embeddings.dimensions,
                prices=embeddings.prices,
                cache_dir=str(embeddings.cache.directory) if embeddings.cache is not None else None,
            )
        raise ShipError(
            f"embeddings {embeddings!r} cannot be sent to Ray workers: the ray engine takes the "
            "local model or OpenAIEmbeddings (or 'local' / 'openai:MODEL')"
        )

    @property
    def runs_locally(self) -> bool:
        """The model runs in the worker itself (CPU work), not behind an endpoint."""
        return self.endpoint is None

    def build(self, max_concurrency: int, cache: RequestCache | None, threads: int) -> Embeddings:
        if self.endpoint is None:
            from rageval.embeddings import LocalEmbeddings

            return LocalEmbeddings(
                model_dir=self.model_dir, batch_size=self.batch_size, threads=threads
            )
        from rageval.embeddings.openai import OpenAIEmbeddings

        return OpenAIEmbeddings(
            self.model,
            **self.endpoint.client_kwargs(max_concurrency),
            dimensions=self.dimensions,
            batch_size=self.batch_size,
            prices=self.prices,
            cache=cache if cache is not None else False,
        )


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """A metric without its judge and embeddings, and which of the job's specs they are."""

    metric: Metric
    judge: int | None
    embeddings: int | None


@dataclasses.dataclass(frozen=True)
class WorkerJob:
    """Everything a worker builds once: metrics, judges (the run's: one per endpoint), the
    embeddings, and how many workers share each endpoint."""

    label: str
    rageval_version: str
    judges: tuple[ShippedJudge, ...]
    embeddings: tuple[EmbeddingsSpec, ...]
    metrics: tuple[MetricSpec, ...]
    run_judges: tuple[int, ...]
    run_embeddings: int | None
    workers: int
    #: name of the actor that paces each rate-limited endpoint, or None (no rate limits)
    rates_actor: str | None
    #: scorings of each judge cell (Plan.repeats)
    repeats: int = 1

    @classmethod
    def of(
        cls,
        metrics: Sequence[Metric],
        run_judges: Sequence[Judge],
        run_embeddings: Embeddings | None,
        *,
        label: str,
        workers: int,
        rates_actor: str | None,
        repeats: int = 1,
    ) -> WorkerJob:
        from rageval._version import __version__

        judges: dict[int, tuple[int, ShippedJudge]] = {}
        models = cls.embeddings_order(metrics, run_embeddings)
        embedding_index = {id(model): i for i, model in enumerate(models)}

        def judge_index(judge: Judge | None) -> int | None:
            if judge is None:
                return None
            if id(judge) not in judges:
                judges[id(judge)] = (len(judges), ShippedJudge.of(judge))
            return judges[id(judge)][0]

        def embeddings_index(model: Embeddings | None) -> int | None:
            return None if model is None else embedding_index[id(model)]

        run = tuple(i for i in (judge_index(j) for j in run_judges) if i is not None)
        run_embedder = embeddings_index(run_embeddings)
        specs = []
        for m in metrics:
            bare = copy.copy(m)
            bare.llm = None
            bare.embeddings = None
            specs.append(MetricSpec(bare, judge_index(m.llm), embeddings_index(m.embeddings)))
        return cls(
            label=label,
            rageval_version=__version__,
            judges=tuple(spec for _, spec in sorted(judges.values(), key=lambda x: x[0])),
            embeddings=tuple(EmbeddingsSpec.of(model) for model in models),
            metrics=tuple(specs),
            run_judges=run,
            run_embeddings=run_embedder,
            workers=max(1, workers),
            rates_actor=rates_actor,
            repeats=repeats,
        )

    @staticmethod
    def embeddings_order(
        metrics: Sequence[Metric], run_embeddings: Embeddings | None
    ) -> list[Embeddings]:
        """The job's embeddings models, each once: the run's, then the metrics' own."""
        found: dict[int, Embeddings] = {}
        for model in (run_embeddings, *(m.embeddings for m in metrics)):
            if model is not None:
                found.setdefault(id(model), model)
        return list(found.values())

    def endpoints(self) -> list[EndpointSpec]:
        """Every endpoint the job sends to (judges and embeddings)."""
        found = [j.endpoint for j in self.judges]
        found += [e.endpoint for e in self.embeddings if e.endpoint is not None]
        return found

    def rate_limits(self) -> dict[str, tuple[float | None, float | None]]:
        """(requests, tokens) per minute by endpoint, the tightest of its clients' settings."""
        limits: dict[str, tuple[float | None, float | None]] = {}
        for ep in self.endpoints():
            rpm, tpm = limits.get(ep.base_url, (None, None))
            limits[ep.base_url] = (
                _tightest(rpm, ep.requests_per_minute),
                _tightest(tpm, ep.tokens_per_minute),
            )
        return {url: rates for url, rates in limits.items() if rates != (None, None)}

    def cache_dirs(self) -> list[str]:
        found = [j.cache_dir for j in self.judges] + [e.cache_dir for e in self.embeddings]
        return sorted({d for d in found if d is not None})

    @property
    def runs_local_model(self) -> bool:
        """A worker computes embeddings itself (the local model), not only asks endpoints."""
        return any(e.runs_locally for e in self.embeddings)

    def concurrency_share(self, endpoint: EndpointSpec) -> int:
        """A worker's part of an endpoint's concurrency: the limit holds for the whole job
        (at least one request per worker in flight)."""
        return max(1, endpoint.max_concurrency // self.workers)


def _tightest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclasses.dataclass
class Built:
    """A worker's objects, made from a :class:`WorkerJob`."""

    metrics: list[Metric]
    run_judges: list[Judge]
    run_embeddings: Embeddings | None
    caches: dict[str, RequestCache]
    judges: list[Judge]
    embeddings: list[Embeddings]


def build(job: WorkerJob, *, embed_threads: int) -> Built:
    """Make the job's judges, embeddings and metrics in this process, with request caches that
    write to shards labelled ``job.label``."""
    caches: dict[str, RequestCache] = {
        d: RequestCache.shard(d, job.label) for d in job.cache_dirs()
    }

    def cache(directory: str | None) -> RequestCache | None:
        return caches[directory] if directory is not None else None

    judges = [
        spec.build(job.concurrency_share(spec.endpoint), cache(spec.cache_dir))
        for spec in job.judges
    ]
    embeddings = [
        spec.build(
            job.concurrency_share(spec.endpoint) if spec.endpoint is not None else 1,
            cache(spec.cache_dir),
            embed_threads,
        )
        for spec in job.embeddings
    ]
    metrics = []
    for spec in job.metrics:
        metric = copy.copy(spec.metric)
        metric.llm = judges[spec.judge] if spec.judge is not None else None
        metric.embeddings = embeddings[spec.embeddings] if spec.embeddings is not None else None
        metrics.append(metric)
    return Built(
        metrics=metrics,
        run_judges=[judges[i] for i in job.run_judges],
        run_embeddings=embeddings[job.run_embeddings] if job.run_embeddings is not None else None,
        caches=caches,
        judges=judges,
        embeddings=embeddings,
    )
