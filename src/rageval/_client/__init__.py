"""The client of one OpenAI-compatible endpoint, shared by the judge and remote embeddings.

Private: its public names are re-exported by :mod:`rageval.judge` (and used by
:mod:`rageval.embeddings.openai`). Modules, bottom up: ``_usage`` (token, request and cost
accounting), ``_limiter`` (one admission limiter per endpoint), ``_retry`` (the retry loop and
the sorting of errors), ``_transport`` (how a request body reaches the wire), ``_cache`` (the
persistent sqlite request cache), ``_endpoint`` (key, client per event loop, limiter, fatal
error memory: one configured connection).
"""
