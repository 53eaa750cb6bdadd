"""The only code that talks to an LLM: structured calls, limiter, retries, cache, usage.

Importing this package does not import ``openai`` (about 0.7 s); the SDK is loaded when a judge
first sends a request, or when an ``openai`` client object is handed in.
"""

from rageval._client._cache import RequestCache, default_cache_dir
from rageval._client._limiter import EndpointLimiter, endpoint_limiter
from rageval._client._usage import DEFAULT_PRICES, PriceTable, Usage, UsageLedger
from rageval.errors import FatalJudgeError, JudgeCallFailed, JudgeError
from rageval.judge._judge import Judge, JudgeReply, llm_factory

__all__ = [
    "DEFAULT_PRICES",
    "EndpointLimiter",
    "FatalJudgeError",
    "Judge",
    "JudgeCallFailed",
    "JudgeError",
    "JudgeReply",
    "PriceTable",
    "RequestCache",
    "Usage",
    "UsageLedger",
    "default_cache_dir",
    "endpoint_limiter",
    "llm_factory",
]
