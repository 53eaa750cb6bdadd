"""The real judge's tests: a llama.cpp ``llama-server`` on 127.0.0.1 with a real model
(benchmarks/real_judge/judge.py builds, starts and stops it).

``RAGEVAL_REAL_JUDGE_URL`` names the server's base URL (``judge.py start`` prints it). Without it
these tests are skipped with that reason on a developer's machine; under CI (``.ci/run`` starts
the server with SmolLM2-135M and sets ``RAGEVAL_REQUIRE_REAL_JUDGE=1``) they are required and
fail instead.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

#: set by .ci/run: a missing server is a failure there, not a skip
REQUIRE_REAL_JUDGE = os.environ.get("RAGEVAL_REQUIRE_REAL_JUDGE") == "1"
START_HINT = (
    "start one with `python benchmarks/real_judge/judge.py start --model smollm2` and export "
    "RAGEVAL_REAL_JUDGE_URL=<the URL it prints> (benchmarks/README.md)"
)


@dataclass(frozen=True)
class RealJudge:
    """A running llama-server: its base URL (``…/v1``), the model it serves, its slots."""

    base_url: str
    model: str
    slots: int

    @property
    def root(self) -> str:
        """The server's own endpoints (``/health``, ``/props``) are beside ``/v1``."""
        return self.base_url.removesuffix("/").removesuffix("/v1")


def http_json(url: str, body: Any = None, timeout: float = 120.0) -> tuple[int, Any]:
    """Status and decoded JSON of a GET (or a POST of ``body``); an error status is returned,
    not raised."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            return int(e.code), json.loads(text)
        except ValueError:
            return int(e.code), text


def real_judge() -> RealJudge:
    """The server RAGEVAL_REAL_JUDGE_URL names, checked to be a healthy llama-server on
    127.0.0.1; without the variable the test is skipped, or fails under CI."""
    url = os.environ.get("RAGEVAL_REAL_JUDGE_URL", "")
    if not url:
        missing = f"RAGEVAL_REAL_JUDGE_URL is not set: no real judge to test against; {START_HINT}"
        if REQUIRE_REAL_JUDGE:
            pytest.fail(f"{missing} (required: RAGEVAL_REQUIRE_REAL_JUDGE=1)")
        pytest.skip(missing)
    host = urllib.parse.urlsplit(url).hostname
    if host != "127.0.0.1":
        pytest.fail(f"RAGEVAL_REAL_JUDGE_URL={url}: the real judge must listen on 127.0.0.1")
    root = url.removesuffix("/").removesuffix("/v1")
    try:
        health, _ = http_json(f"{root}/health", timeout=10)
        _, models = http_json(f"{url.removesuffix('/')}/models", timeout=10)
        _, props = http_json(f"{root}/props", timeout=10)
    except OSError as e:
        pytest.fail(f"the real judge at {url} cannot be reached ({e}); {START_HINT}")
    if health != 200 or not isinstance(props, dict) or "total_slots" not in props:
        pytest.fail(f"{url} is not a healthy llama-server (health {health}, props {props!r})")
    return RealJudge(url, str(models["data"][0]["id"]), int(props["total_slots"]))
