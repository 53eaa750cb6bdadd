"""A run as OpenTelemetry spans (``rageval[otel]``): one span for the run, one child span per
judge call with the GenAI semantic conventions' attributes, and each metric's mean as a
``gen_ai.evaluation.result`` event on the run's span.

One observer may trace several runs at once: each run's span is kept by the run's id, which
every event carries, and a judge call's span is a child of its own run's.

Spans go to the tracer provider given, else the global one (set up by your application or
``opentelemetry-instrument``); rageval configures no exporter. A call's span covers the call:
its retries and re-asks, or its answer from the request cache (``rageval.cached``, no tokens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rageval._extras import require
from rageval._version import __version__
from rageval.observers import JudgeCall, RunEnd, RunObserver, RunStart

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["OpenTelemetryObserver"]

RUN_SPAN = "rageval.evaluate"
EVALUATION_EVENT = "gen_ai.evaluation.result"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class OpenTelemetryObserver(RunObserver):
    """Trace each run (see the module docstring)."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        require("otel", "the OpenTelemetry observer")
        from opentelemetry import trace

        self._tracer = trace.get_tracer("rageval", __version__, tracer_provider=tracer_provider)
        #: the span of each run under way, by the run's id
        self._runs: dict[str, Span] = {}

    def on_start(self, start: RunStart) -> None:
        manifest = start.manifest
        attributes: dict[str, Any] = {
            "rageval.version": __version__,
            "rageval.metrics": [m.name for m in manifest.metrics],
            "rageval.rows": start.n_rows,
            "rageval.rows_already_finished": start.n_finished,
        }
        if manifest.judge is not None:
            attributes["gen_ai.request.model"] = manifest.judge.model
        if start.run_dir is not None:
            attributes["rageval.run_dir"] = str(start.run_dir)
        self._runs[start.run_id] = self._tracer.start_span(RUN_SPAN, attributes=attributes)

    def on_judge_call(self, call: JudgeCall) -> None:
        from opentelemetry import trace

        usage = call.usage
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": call.backend,  # the API: any OpenAI-compatible server too
            "gen_ai.request.model": call.model,
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
            "rageval.requests": usage.requests,
            "rageval.retries": usage.retries,
            "rageval.reasks": usage.reasks,
            "rageval.cached": usage.cache_hits > 0,
            **{f"rageval.{key}": value for key, value in call.tags.items()},
        }
        if call.base_url:
            where = urlsplit(call.base_url)
            attributes["server.address"] = where.hostname or ""
            if where.port is not None:
                attributes["server.port"] = where.port
        run = self._runs.get(call.run_id)
        span = self._tracer.start_span(
            f"chat {call.model}",
            context=trace.set_span_in_context(run) if run is not None else None,
            kind=trace.SpanKind.CLIENT,
            attributes=attributes,
            start_time=_ns(call.started),
        )
        if call.error is not None:
            span.set_attribute("error.type", call.error.split(":", 1)[0])
            span.set_status(trace.StatusCode.ERROR, call.error)
        span.end(end_time=_ns(call.ended))

    def on_end(self, end: RunEnd) -> None:
        from opentelemetry import trace

        run = self._runs.pop(end.run_id, None)
        if run is None:
            return
        for name, stats in end.summary.metrics.items():
            event: dict[str, Any] = {"gen_ai.evaluation.name": name}
            if stats.mean is not None:
                event["gen_ai.evaluation.score.value"] = stats.mean
            event["rageval.n_measured"] = stats.n_measured
            event["rageval.n_not_measured"] = stats.n_not_measured
            run.add_event(EVALUATION_EVENT, event)
        run.set_attribute("rageval.rows_finished", end.result.n_finished)
        if end.error is not None:
            run.record_exception(end.error)
            run.set_status(trace.StatusCode.ERROR, type(end.error).__name__)
        run.end()
