"""The judge: structured, validated calls to a chat model (modes, schemas, re-asks), through
a backend (:class:`JudgeBackend`: OpenAI-compatible endpoints, Anthropic's Messages API), with
its settings stated by one :class:`JudgeSpec`.

Requests go through the endpoint client in :mod:`rageval._client` (limiter, retries, request
cache, usage), whose public names are re-exported here. Importing this package does not import
``openai`` (about 0.7 s); the SDK is loaded when a judge first sends a request, or when an
``openai`` client object is handed in.
"""

from rageval._client._batch import BatchSettings
from rageval._client._cache import RequestCache, default_cache_dir
from rageval._client._limiter import EndpointLimiter, endpoint_limiter
from rageval._client._settings import Limits, RetryPolicy
from rageval._client._usage import DEFAULT_PRICES, ModelPrice, PriceTable, Usage, UsageLedger
from rageval.errors import FatalJudgeError, JudgeCallFailed, JudgeError
from rageval.judge._backend import (
    Completion,
    CompletionRequest,
    Exchange,
    Grant,
    JudgeBackend,
    TokenLogprob,
)
from rageval.judge._judge import Judge, JudgeReply, llm_factory
from rageval.judge._probabilities import ChoiceScore, ReplyScoring, Scoring, ScoringUsed
from rageval.judge._registry import (
    BackendTraits,
    backend_kinds,
    backend_traits,
    register_backend,
    split_backend,
)
from rageval.judge._spec import BACKENDS, JudgeSpec

__all__ = [
    "BACKENDS",
    "DEFAULT_PRICES",
    "BackendTraits",
    "BatchSettings",
    "ChoiceScore",
    "Completion",
    "CompletionRequest",
    "EndpointLimiter",
    "Exchange",
    "FatalJudgeError",
    "Grant",
    "Judge",
    "JudgeBackend",
    "JudgeCallFailed",
    "JudgeError",
    "JudgeReply",
    "JudgeSpec",
    "Limits",
    "ModelPrice",
    "PriceTable",
    "ReplyScoring",
    "RequestCache",
    "RetryPolicy",
    "Scoring",
    "ScoringUsed",
    "TokenLogprob",
    "Usage",
    "UsageLedger",
    "backend_kinds",
    "backend_traits",
    "default_cache_dir",
    "endpoint_limiter",
    "llm_factory",
    "register_backend",
    "split_backend",
]
