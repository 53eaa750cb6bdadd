"""The settings of a connection to one endpoint, shared by the judge and remote embeddings.

Two small public objects say how hard an endpoint may be driven and how a request is retried:
:class:`Limits` and :class:`RetryPolicy` (``Judge(..., limits=Limits(max_concurrency=8))``,
the same object can be handed to an embeddings client on the same server).
:class:`EndpointSettings` gathers them with where the endpoint is and which key to use; it is
what :class:`rageval._client._endpoint.Endpoint` is built from. The flat keyword arguments of
``Judge`` and ``OpenAIEmbeddings`` (``max_concurrency=``, ``max_retries=``, ``timeout=``...)
are shorthands for these objects, turned into them by :func:`endpoint_settings` alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypedDict

from rageval._env import DEFAULT_API_KEY_ENV

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "LOCAL_SERVER_TIMEOUT",
    "EndpointOptions",
    "EndpointSettings",
    "Limits",
    "RetryPolicy",
    "endpoint_settings",
]

DEFAULT_MAX_CONCURRENCY = 16
DEFAULT_MAX_RETRIES = 6
DEFAULT_TIMEOUT = 60.0
#: the timeout of one attempt at a llama.cpp server whose slots a run follows
#: (rageval._client._run.ServerSlots), unless the user chose one: a small model on a CPU writes
#: tens of tokens a second, and an attempt given up on is its work thrown away
LOCAL_SERVER_TIMEOUT = 600.0


def _positive(name: str, value: float | None) -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value is not None and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")


@dataclass(frozen=True)
class Limits:
    """Admission limits of one endpoint. There is one limiter per endpoint and process, shared
    by every client of it; when clients ask for different limits the tightest of each wins, and
    None expresses no opinion (concurrency then defaults to 16)."""

    max_concurrency: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        if self.max_concurrency is not None and (
            not isinstance(self.max_concurrency, int) or self.max_concurrency < 1
        ):
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency!r}")
        _positive("requests_per_minute", self.requests_per_minute)
        _positive("tokens_per_minute", self.tokens_per_minute)


@dataclass(frozen=True)
class RetryPolicy:
    """How one request is attempted: each attempt may take `timeout` seconds; a transient
    failure (429, 5xx, timeout, dropped connection, malformed body) is retried up to
    `max_retries` times with exponential backoff and jitter, or after the delay the server
    asked for."""

    max_retries: int = DEFAULT_MAX_RETRIES
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries!r}")
        _positive("timeout", self.timeout)


@dataclass(frozen=True)
class EndpointSettings:
    """Where one endpoint is, which key to use and how to drive it. ``base_url`` None means
    the environment's (see :mod:`rageval._env`); ``client`` is an openai client to use instead
    of a base URL and key."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str = DEFAULT_API_KEY_ENV
    client: Any = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    limits: Limits = field(default_factory=Limits)
    #: the user chose the timeout (`retry=` or `timeout=` given), else it is the default
    timeout_given: bool = False

    def __post_init__(self) -> None:
        if self.client is not None and (self.base_url is not None or self.api_key is not None):
            raise ValueError("pass either client or base_url/api_key, not both")
        # a blank URL is a mistake (a variable left unset), not a request for the default:
        # read as None it would send the data to OpenAI
        if self.base_url is not None and not self.base_url.strip():
            raise ValueError("base_url is empty: pass the endpoint's URL, or None for the default")


class EndpointOptions(TypedDict, total=False):
    """The keyword arguments ``Judge`` and ``OpenAIEmbeddings`` both take for their endpoint:
    where it is (`base_url`: None means RAGEVAL_BASE_URL, then OPENAI_BASE_URL, then OpenAI),
    the key (`api_key`, else the variable `api_key_env` names, default OPENAI_API_KEY) or an
    openai `client` of your own, and how hard it is driven: `limits` and `retry`, or their
    shorthands `max_concurrency`, `requests_per_minute`, `tokens_per_minute` and
    `max_retries`, `timeout` (not both for one setting)."""

    base_url: str | None
    api_key: str | None
    api_key_env: str
    client: Any
    limits: Limits | None
    retry: RetryPolicy | None
    timeout: float | None
    max_retries: int | None
    max_concurrency: int | None
    requests_per_minute: float | None
    tokens_per_minute: float | None


def endpoint_settings(
    *,
    default_limits: Limits,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str = DEFAULT_API_KEY_ENV,
    client: Any = None,
    limits: Limits | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    max_concurrency: int | None = None,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
) -> EndpointSettings:
    """The settings :class:`EndpointOptions` describe: a settings object, or the flat
    shorthands for it (giving both for the same setting is an error), else the defaults."""
    flat_limits = {
        "max_concurrency": max_concurrency,
        "requests_per_minute": requests_per_minute,
        "tokens_per_minute": tokens_per_minute,
    }
    flat_retry = {"max_retries": max_retries, "timeout": timeout}
    return EndpointSettings(
        base_url=base_url,
        api_key=api_key,
        api_key_env=api_key_env,
        client=client,
        retry=_merge("retry", retry, flat_retry, RetryPolicy()),
        limits=_merge("limits", limits, flat_limits, default_limits),
        timeout_given=retry is not None or timeout is not None,
    )


def _merge(name: str, given: Any, flat: dict[str, Any], default: Any) -> Any:
    shorthands = {k: v for k, v in flat.items() if v is not None}
    if given is None:
        return type(default)(**{**vars(default), **shorthands})
    if shorthands:
        raise ValueError(f"pass {name}= or {', '.join(shorthands)}=, not both")
    if not isinstance(given, type(default)):
        raise TypeError(f"{name} must be a {type(default).__name__}, got {type(given).__name__}")
    return given
