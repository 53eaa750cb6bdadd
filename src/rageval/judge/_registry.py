"""Which judge backends there are, and what each is like: :class:`BackendTraits`.

A backend registers itself once with its traits -- how to make it, where its API is by
default, which variable holds its key, how a request is authorised, which structured-output
modes it takes, whether it can return log-probabilities or send through OpenAI's Batch API,
how the run checks its endpoint before spending, and the default prices of its models -- and
everything else reads the traits instead of its name: the judge builds its endpoint from them,
the config file and ``--llm KIND:MODEL`` accept its kind, the run's endpoint check and key
check use its URL, headers and check path, batch mode asks whether it has a Batch API. No code
outside a backend's own module branches on a backend's name.

The two built-in backends are registered here. A package outside rageval adds one through the
``rageval.judge_backends`` entry point group: the entry point's name is the backend's kind and
its object a :class:`BackendTraits` (docs/backends.md has a worked example). Entry points are
read only when a kind is not already known, so a run of the built-in backends never scans them.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rageval import _env
from rageval.judge._anthropic import AnthropicBackend, anthropic_headers
from rageval.judge._modes import MODES
from rageval.judge._openai import OpenAIBackend

if TYPE_CHECKING:
    from rageval._client._cache import RequestCache
    from rageval._client._endpoint import Endpoint
    from rageval._client._usage import PriceSpec
    from rageval.judge._backend import JudgeBackend

__all__ = [
    "ENTRY_POINT_GROUP",
    "BackendTraits",
    "backend_kinds",
    "backend_traits",
    "bearer_headers",
    "find_backend",
    "register_backend",
    "split_backend",
]

#: the entry point group a third-party backend registers in (name: its kind)
ENTRY_POINT_GROUP = "rageval.judge_backends"

#: how a backend is made: (its endpoint, the model, the judge's request cache or None)
MakeBackend = Callable[["Endpoint", str, "RequestCache | None"], "JudgeBackend"]


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """The headers of an OpenAI-compatible API: the key as a bearer token."""
    return {
        "Authorization": f"Bearer {api_key or 'no-key-set'}",
        "content-type": "application/json",
        "accept": "application/json",
    }


@dataclass(frozen=True)
class BackendTraits:
    """What a judge backend is like (see the module docstring).

    Args:
        kind: its name, as ``Judge(backend=...)``, ``--llm KIND:MODEL`` and the config file's
            ``[judge] backend`` take it; letters, digits, ``-`` and ``_``.
        make: makes the backend for a judge: ``make(endpoint, model, cache)``.
        default_base_url: its API's address when the user gives none. None: an
            OpenAI-compatible endpoint found the OpenAI way (``RAGEVAL_BASE_URL``,
            ``OPENAI_BASE_URL``, else OpenAI's), sent through the openai SDK's client;
            otherwise requests are sent by rageval's HTTP client with :attr:`headers`.
        api_key_env: the environment variable its key is read from by default.
        headers: the headers of every request, made from the key (used with a
            ``default_base_url``, and by the endpoint check); None: a bearer token.
        structured_modes: the modes ``Judge(mode=...)`` may name beside ``"auto"``.
        logprobs: its API can return the log-probabilities of the reply's tokens.
        batch_api: it can send through OpenAI's Batch API (``--batch``).
        endpoint_check: the path the run GETs before spending to see the endpoint is there and
            takes the key (a model list); None: the endpoint is not checked.
        prices: default prices of its models (USD per million tokens, as ``PriceTable``
            takes them), beside the built-in table.
    """

    kind: str
    make: MakeBackend
    default_base_url: str | None = None
    api_key_env: str = _env.DEFAULT_API_KEY_ENV
    headers: Callable[[str | None], Mapping[str, str]] | None = None
    structured_modes: tuple[str, ...] = MODES
    logprobs: bool = False
    batch_api: bool = False
    endpoint_check: str | None = "/models"
    prices: Mapping[str, PriceSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.kind or not self.kind.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"a backend's kind is letters, digits, '-' and '_', got {self.kind!r}")
        unknown = set(self.structured_modes) - set(MODES)
        if unknown or not self.structured_modes:
            raise ValueError(
                f"backend {self.kind!r}: structured_modes must be some of {MODES}, "
                f"got {self.structured_modes!r}"
            )

    def auth_headers(self, api_key: str | None) -> Mapping[str, str]:
        """The headers a request of this backend carries with `api_key`."""
        return (self.headers or bearer_headers)(api_key)

    def home_url(self) -> str:
        """The address requests go to when no base URL is configured anywhere (the
        OpenAI-compatible chain's last resort, OpenAI, for a backend without its own)."""
        return self.default_base_url or _env.DEFAULT_BASE_URL


_OPENAI = BackendTraits(
    kind="openai",
    make=lambda endpoint, model, cache: OpenAIBackend(endpoint, model, modes=cache),
    logprobs=True,
    batch_api=True,
)
_ANTHROPIC = BackendTraits(
    kind="anthropic",
    make=lambda endpoint, model, cache: AnthropicBackend(endpoint, model),
    default_base_url=_env.ANTHROPIC_BASE_URL,
    api_key_env=_env.ANTHROPIC_API_KEY_ENV,
    headers=anthropic_headers,
    structured_modes=("tools",),
)

_lock = threading.Lock()
_REGISTRY: dict[str, BackendTraits] = {t.kind: t for t in (_OPENAI, _ANTHROPIC)}
# the entry points' names, read once per sys.path (a package put on the path later is seen)
_plugged: tuple[tuple[str, ...], dict[str, importlib.metadata.EntryPoint]] | None = None


def register_backend(traits: BackendTraits, *, replace: bool = False) -> BackendTraits:
    """Make `traits`' backend known to this process under its kind (a kind already known is
    an error unless `replace`). Returns `traits`, so it can be a module's last statement.

    Args:
        traits: the backend's traits.
        replace: register over a backend of the same kind.
    """
    if not isinstance(traits, BackendTraits):
        raise TypeError(f"register_backend takes a BackendTraits, got {type(traits).__name__}")
    with _lock:
        if traits.kind in _REGISTRY and not replace and _REGISTRY[traits.kind] is not traits:
            raise ValueError(f"a judge backend {traits.kind!r} is already registered")
        _REGISTRY[traits.kind] = traits
    return traits


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    global _plugged
    path = tuple(sys.path)
    with _lock:
        if _plugged is None or _plugged[0] != path:
            found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
            _plugged = (path, {ep.name: ep for ep in found})
        return _plugged[1]


def backend_kinds() -> tuple[str, ...]:
    """Every backend kind this process can use: registered, then installed as entry points."""
    with _lock:
        known = tuple(_REGISTRY)
    return known + tuple(sorted(set(_entry_points()) - set(known)))


def find_backend(kind: str) -> BackendTraits | None:
    """The traits of backend `kind`, loading its entry point the first time; None when there
    is no such backend."""
    with _lock:
        found = _REGISTRY.get(kind)
    if found is not None:
        return found
    entry = _entry_points().get(kind)
    if entry is None:
        return None
    loaded = entry.load()
    traits = loaded() if callable(loaded) and not isinstance(loaded, BackendTraits) else loaded
    if not isinstance(traits, BackendTraits) or traits.kind != kind:
        raise TypeError(
            f"the {ENTRY_POINT_GROUP} entry point {kind!r} ({entry.value}) must give the "
            f"BackendTraits of kind {kind!r}, got {traits!r}"
        )
    return register_backend(traits, replace=True)


def backend_traits(kind: str) -> BackendTraits:
    """The traits of backend `kind`; ValueError naming the known kinds when there is none.

    Args:
        kind: a backend's name ("openai", "anthropic", or an installed plug-in's).
    """
    found = find_backend(kind)
    if found is None:
        raise ValueError(
            f"no judge backend {kind!r}: the known ones are {', '.join(backend_kinds())} "
            f"(a backend from another package registers in the {ENTRY_POINT_GROUP!r} entry "
            "point group; docs/backends.md)"
        )
    return found


def split_backend(llm: str) -> tuple[str | None, str]:
    """``"anthropic:claude-..."`` -> ("anthropic", "claude-..."); a name without a known
    backend's prefix (``"gpt-4o-mini"``, Ollama's ``"llama3:8b"``) is a model: (None, llm).

    Args:
        llm: a model name, perhaps prefixed with a backend's kind and a colon.
    """
    prefix, sep, model = llm.partition(":")
    if sep and model and find_backend(prefix) is not None:
        return prefix, model
    return None, llm
