"""Client CPU per chat request for different ways of sending the same request.

Finds the floor under the judge layer's cost per request: the same rageval-shaped request
(a faithfulness prompt with its JSON schema in ``response_format``) is sent ``--requests``
times, 16 at a time, against the 0 ms fake judge, by

* ``sdk create``: ``AsyncOpenAI().chat.completions.create(...)`` (what the judge layer does);
* ``sdk create, no schema``: the same without ``response_format`` (what LangChain sends ragas');
* ``sdk post, raw``: ``AsyncOpenAI().post("/chat/completions", body=..., cast_to=httpx.Response)``
  — the SDK's retries, auth and connection pool, but no parameter transform and no response
  model;
* ``httpx``: a bare ``httpx.AsyncClient`` post of the JSON body, ``json.loads`` of the reply;
* ``aiohttp``: the same with ``aiohttp`` (only where it is installed, e.g. the ragas venv:
  ``PYTHONPATH=src benchmarks/.work/ragas-venv/bin/python benchmarks/bench_http_floor.py``).

CPU is ``getrusage`` user+sys of this process over the sending loop.

    python benchmarks/bench_http_floor.py --requests 2000
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import JudgeServer, fmt, markdown_table


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _request_body() -> dict[str, Any]:
    from rageval._client._transport import encode_body
    from rageval.judge._modes import build_request, shape_of

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from synthetic_data import make_sample

    faithfulness = importlib.import_module("rageval.metrics.faithfulness")
    sample = make_sample(0)
    statements = sample["response"].split(". ")
    question = faithfulness.Faithfulness().question(sample["retrieved_contexts"])
    request = question.requests(statements)[0]
    messages, extra = build_request("json_schema", request.messages, shape_of(request.model))
    body = {
        "model": "gpt-4o-mini",
        "messages": messages,
        "temperature": 0.0,
        "max_tokens": 1024,
        **extra,
    }
    # the schema arguments are pre-encoded bytes: decode the body as it goes on the wire
    decoded: dict[str, Any] = json.loads(encode_body(body))
    return decoded


async def _measure(n: int, send: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    slots = asyncio.Semaphore(16)

    async def one() -> None:
        async with slots:
            await send()

    await asyncio.gather(*(one() for _ in range(32)))  # warm-up: connections, lazy imports
    cpu0, wall0 = _cpu(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return (_cpu() - cpu0) / n * 1000, time.perf_counter() - wall0


async def _run(base_url: str, n: int) -> list[list[str]]:
    import openai

    try:  # openai >= 3.x ships on httpx2, older releases on httpx
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]

    body = _request_body()
    no_schema = {k: v for k, v in body.items() if k != "response_format"}
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench")
    raw = httpx.AsyncClient(
        base_url=base_url,
        headers={"authorization": "Bearer sk-bench"},
        limits=httpx.Limits(max_connections=16),
    )

    async def sdk_create() -> None:
        reply = await client.chat.completions.create(**body)
        json.loads(reply.choices[0].message.content or "{}")

    async def sdk_create_plain() -> None:
        reply = await client.chat.completions.create(**no_schema)
        assert reply.choices[0].message.content  # a plain-text reply: nothing to parse

    async def sdk_post_raw() -> None:
        reply = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
        json.loads(json.loads(reply.content)["choices"][0]["message"]["content"])

    async def bare_httpx() -> None:
        reply = await raw.post("/chat/completions", content=json.dumps(body))
        json.loads(json.loads(reply.content)["choices"][0]["message"]["content"])

    senders: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("sdk create", sdk_create),
        ("sdk create, no schema", sdk_create_plain),
        ("sdk post, raw", sdk_post_raw),
        ("httpx", bare_httpx),
    ]
    session = None
    try:
        import aiohttp
    except ImportError:
        pass
    else:
        session = aiohttp.ClientSession(
            base_url=base_url.rstrip("/") + "/",
            headers={"authorization": "Bearer sk-bench", "content-type": "application/json"},
            connector=aiohttp.TCPConnector(limit=16),
        )

        async def bare_aiohttp() -> None:
            assert session is not None
            async with session.post("chat/completions", data=json.dumps(body)) as reply:
                payload = json.loads(await reply.read())
            json.loads(payload["choices"][0]["message"]["content"])

        senders.append(("aiohttp", bare_aiohttp))
        # the SDK's own aiohttp transport (the `openai[aiohttp]` extra), same post() as above
        aio_client = openai.AsyncOpenAI(
            base_url=base_url, api_key="sk-bench", http_client=openai.DefaultAioHttpClient()
        )

        async def sdk_post_aiohttp() -> None:
            reply = await aio_client.post("/chat/completions", body=body, cast_to=httpx.Response)
            json.loads(json.loads(reply.content)["choices"][0]["message"]["content"])

        senders.append(("sdk post, raw, aiohttp transport", sdk_post_aiohttp))
        # the same httpx client the SDK uses, without the SDK's request building
        aio_httpx = openai.DefaultAioHttpClient(
            base_url=base_url, headers={"authorization": "Bearer sk-bench"}
        )

        async def httpx_aiohttp() -> None:
            reply = await aio_httpx.post("chat/completions", content=json.dumps(body))
            json.loads(json.loads(reply.content)["choices"][0]["message"]["content"])

        senders.append(("httpx client, aiohttp transport", httpx_aiohttp))

    rows = []
    for name, send in senders:
        cpu_ms, wall = await _measure(n, send)
        rows.append([name, fmt(cpu_ms, 2), fmt(n / wall, 0)])
        print(f"{name}: {cpu_ms:.2f} ms CPU/request", file=sys.stderr, flush=True)
    await client.close()
    await raw.aclose()
    if session is not None:
        await session.close()
        await aio_client.close()
        await aio_httpx.aclose()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args(argv)
    with JudgeServer(0) as server:
        rows = asyncio.run(_run(server.base_url, args.requests))
    print(markdown_table(["how the request is sent", "client CPU ms/request", "requests/s"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
