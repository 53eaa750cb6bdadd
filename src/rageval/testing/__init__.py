"""Test support: an OpenAI-compatible fake server, a fake of Anthropic's Messages API and a
network guard.

Modules: ``records`` (what the server records and answers: requests, replies, faults),
``_wire`` (HTTP framing and error bodies), ``server`` (``FakeOpenAI``), ``batch_api`` (its
Batch API), ``anthropic`` (``FakeAnthropic``: the same server speaking Anthropic's Messages
API, scripted by the same handlers), ``random_judge`` (judges that answer within the schema
at random, or garbage), ``serve`` (the server as a process: ``python -m
rageval.testing.serve``), ``schema``, ``prompt_cache``, ``netguard``; none imports one above
it.

Used by rageval's own tests and benchmarks, and usable in your CI (``RandomJudge``: random
replies valid under each request's schema; ``GarbageJudge``: never JSON)::

    from rageval.testing import FakeOpenAI, Reply, Fault

    with FakeOpenAI() as server:
        server.script(Reply.json({"verdict": 1}), Fault.rate_limit(0.1))
        client = openai.OpenAI(base_url=server.base_url, api_key="x")

Names are imported on first use so that ``import rageval.testing`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rageval.testing._wire import FAKE_API_KEY
    from rageval.testing.anthropic import FakeAnthropic
    from rageval.testing.netguard import (
        NetworkBlockedError,
        install_network_guard,
        is_local_address,
    )
    from rageval.testing.random_judge import GarbageJudge, RandomJudge, random_instance
    from rageval.testing.records import Fault, FaultPlan, Handler, RecordedRequest, Reply
    from rageval.testing.schema import schema_instance, strict_schema_problem
    from rageval.testing.server import FakeOpenAI, default_handler, hash_embedding

__all__ = [
    "FAKE_API_KEY",
    "FakeAnthropic",
    "FakeOpenAI",
    "Fault",
    "FaultPlan",
    "GarbageJudge",
    "Handler",
    "NetworkBlockedError",
    "RandomJudge",
    "RecordedRequest",
    "Reply",
    "default_handler",
    "hash_embedding",
    "install_network_guard",
    "is_local_address",
    "random_instance",
    "schema_instance",
    "strict_schema_problem",
]

_HOMES = {
    "FAKE_API_KEY": "_wire",
    "FakeAnthropic": "anthropic",
    "Fault": "records",
    "FaultPlan": "records",
    "Handler": "records",
    "RecordedRequest": "records",
    "Reply": "records",
    "GarbageJudge": "random_judge",
    "RandomJudge": "random_judge",
    "random_instance": "random_judge",
    "NetworkBlockedError": "netguard",
    "install_network_guard": "netguard",
    "is_local_address": "netguard",
    "schema_instance": "schema",
    "strict_schema_problem": "schema",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_HOMES.get(name, 'server')}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
