"""A simulation of automatic prompt caching, as OpenAI applies it, for ``FakeOpenAI``.

A prompt of at least :data:`MIN_CACHED_TOKENS` tokens is served partly from cache when its
beginning was seen before (by any earlier request to the same model): the longest such
beginning, counted in steps of :data:`CACHE_STEP_TOKENS` tokens from the minimum, is reported
as ``usage.prompt_tokens_details.cached_tokens``. "Tokens" are the server's estimate, four
characters (bytes of UTF-8) each; what the model reads is the structured-output schema first, then each
message in order (``RecordedRequest.prompt_text``). Nothing expires.
"""

from __future__ import annotations

import hashlib
import threading

__all__ = ["CACHE_STEP_TOKENS", "CHARS_PER_TOKEN", "MIN_CACHED_TOKENS", "PrefixCache"]

#: the shortest prompt (and cached prefix) the cache applies to
MIN_CACHED_TOKENS = 1024
#: cached prefixes grow in steps of this many tokens
CACHE_STEP_TOKENS = 128
CHARS_PER_TOKEN = 4


class PrefixCache:
    """Remembers the cacheable prefixes of every prompt seen, per model."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, bytes]] = set()
        self._lock = threading.Lock()

    def lookup(self, model: str, text: str, prompt_tokens: int) -> int:
        """The cached tokens of a prompt `text` billed as `prompt_tokens`, remembering its
        prefixes for the prompts that follow."""
        step = CACHE_STEP_TOKENS * CHARS_PER_TOKEN
        first = MIN_CACHED_TOKENS * CHARS_PER_TOKEN
        if prompt_tokens < MIN_CACHED_TOKENS or len(text) < first:
            return 0
        data = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data[:first])
        keys = [(first, digest.copy().digest())]
        for end in range(first + step, len(data) + 1, step):
            digest.update(data[end - step : end])
            keys.append((end, digest.copy().digest()))
        with self._lock:
            hit = max((end for end, key in keys if (model, key) in self._seen), default=0)
            self._seen.update((model, key) for _, key in keys)
        return min(hit // CHARS_PER_TOKEN, prompt_tokens)
