"""The dry run's token estimate against OpenAI's real tokenizer (o200k_base, gpt-4o-mini's).

The test server counts prompt tokens as ceil(characters / 4), which is also the estimate's
approximation, so ``bench_cost.py estimate`` checks the request plan, not the tokens. Here the
eight-metric synthetic benchmark runs against the test server as in ``bench_cost.py estimate``
(the CLI, ``--no-cache --no-probe``, judge ``gpt-4o-mini``), every chat request the server
received and every reply it sent are recorded, and their tokens are counted with o200k_base
(tiktoken, its ranks fetched offline by ``tiktoken_ranks.py``), as OpenAI bills a chat request:

- messages: 3 tokens per message (the chat format's delimiters) + the tokens of its role and
  of its content, + 3 for the reply's start (OpenAI's published way of counting chat tokens
  for the gpt-4o / gpt-4 models);
- the structured-output part (``response_format`` with its JSON schema, or ``tools`` and
  ``tool_choice``): OpenAI does not document how it renders it into the prompt. Counted here
  as the tokens of its compact JSON, the text that is sent -- and shown apart, with the
  messages alone as the floor, so the reader sees how much rides on that choice;
- replies: the tokens of each choice's text (the JSON the server sent).

The dry run (``--dry-run --json``) is made twice: with an empty tiktoken cache (the
approximation, as on a machine without the vocabulary) and with the fetched one (rageval
counts with the real tokenizer when its file is in tiktoken's cache)::

    python benchmarks/tiktoken_ranks.py                      # once: the vocabularies
    python benchmarks/bench_tokens.py --samples 200 --judge synthetic
    python benchmarks/bench_tokens.py --samples 200 --judge random
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import load_average  # noqa: E402
from bench_cost import finish, handler, metric_args, rageval, usage, write_data  # noqa: E402
from tiktoken_ranks import fetch  # noqa: E402

if TYPE_CHECKING:
    import tiktoken

    from rageval.testing import RecordedRequest, Reply

#: the metric (or shared work) of a request, by how its last message begins (the metrics'
#: own instructions; an unknown beginning stops the benchmark)
OWNER = {
    "Write the question that the answer below": "answer_relevancy",
    "The numbered sentences come from a reference": "context_recall",
    "Split the text into its atomic": "shared:statements",
    "Compare the candidate answer with the reference": "answer_accuracy",
    "Judge how well the proposed answer": "answer_accuracy",
    "For each numbered context, decide whether it was useful": "context_precision",
    "How relevant are the retrieved passages": "context_relevance",
    "A search system returned these passages": "context_relevance",
    "For each numbered statement, decide whether the contexts sup": "faithfulness",
    "Compare an answer with a reference answer": "answer_correctness",
    "Is every claim in the response stated": "response_groundedness",
    "You are fact-checking a text": "response_groundedness",
}
PER_MESSAGE = 3
REPLY_PRIMER = 3
#: the keys OpenAI's rendering of a response_format schema leaves out, and the tokens it adds,
#: as fitted against the API's reported usage in openai/openai-cookbook#2140
UNBILLED_KEYS = frozenset({"required", "additionalProperties", "$schema"})
SCHEMA_FRAME = 9


def without_unbilled(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_unbilled(v) for k, v in value.items() if k not in UNBILLED_KEYS}
    if isinstance(value, list):
        return [without_unbilled(v) for v in value]
    return value


def fitted_schema_tokens(enc: tiktoken.Encoding, request: RecordedRequest) -> int:
    """The schema as openai/openai-cookbook#2140 found it billed: the compact JSON of the
    schema alone, without the keys of :data:`UNBILLED_KEYS` at any depth, + 9 tokens."""
    assert request.mode == "json_schema", "the fit is for response_format json_schema"
    schema = (request.response_format or {})["json_schema"]["schema"]
    text = json.dumps(without_unbilled(schema), ensure_ascii=False, separators=(",", ":"))
    return len(enc.encode(text)) + SCHEMA_FRAME


def owner(request: RecordedRequest) -> str:
    text = str(request.messages[-1].get("content") or "")
    found = [name for prefix, name in OWNER.items() if text.startswith(prefix)]
    assert len(found) == 1, f"whose request is this? {text[:80]!r}"
    return found[0]


def reply_texts(request: RecordedRequest, reply: Reply) -> list[str]:
    """The text of each choice the server sent for `reply` (as FakeOpenAI renders it)."""
    n = request.body.get("n")
    count = n if isinstance(n, int) and n > 0 else 1
    replies = list(reply.value)[:count] if reply.kind == "choices" else [reply] * count
    return [
        json.dumps(one.value, ensure_ascii=False) if one.kind == "json" else str(one.value)
        for one in replies
    ]


def count(
    enc: tiktoken.Encoding, recorded: list[tuple[RecordedRequest, Reply]]
) -> dict[str, dict[str, int]]:
    """metric -> messages / schema / completion tokens and requests, with a "total"."""
    found: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for request, reply in recorded:
        messages = REPLY_PRIMER + sum(
            PER_MESSAGE
            + len(enc.encode(str(m.get("role") or "")))
            + len(enc.encode(str(m.get("content") or "")))
            for m in request.messages
        )
        schema = len(enc.encode(request.schema_text))
        fitted = fitted_schema_tokens(enc, request)
        completion = sum(len(enc.encode(t)) for t in reply_texts(request, reply))
        for key in (owner(request), "total"):
            part = found[key]
            part["requests"] += 1
            part["messages"] += messages
            part["schema"] += schema
            part["fitted"] += fitted
            part["completion"] += completion
            part["message_chars"] += request.prompt_chars
            part["schema_chars"] += len(request.schema_text)
    return found


def dry_run(data: Path, base_url: str, cache: Path) -> dict[str, Any]:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    code, out, err = finish(rageval([str(data), *metric_args(), "--dry-run", "--json"], base_url))
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    return found


def pct(estimate: float, real: float) -> str:
    return f"{100 * (estimate - real) / real:+.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--judge", choices=("synthetic", "random"), default="synthetic")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    cache = fetch()
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    from rageval.testing import FakeOpenAI

    enc = tiktoken.get_encoding("o200k_base")
    answer = handler(args.judge)
    recorded: list[tuple[RecordedRequest, Reply]] = []

    def recording(request: RecordedRequest) -> Any:
        reply = answer(request)
        recorded.append((request, reply))
        return reply

    with tempfile.TemporaryDirectory(prefix="rageval-tokens-") as tmp:
        work = Path(tmp)
        data = work / "data.jsonl"
        write_data(data, args.samples)
        (empty := work / "empty-tiktoken-cache").mkdir()
        with FakeOpenAI(recording) as server:
            estimates = {
                "approximation": dry_run(data, server.base_url, empty),
                "tokenizer": dry_run(data, server.base_url, cache),
            }
            assert len(server.requests) == 0
            code, _, err = finish(
                rageval([str(data), *metric_args(), "-o", str(work / "run")], server.base_url)
            )
            assert code == 0, err
            assert len(recorded) == len(server.chat_requests)
            server_count = usage(work / "run")
        real = count(enc, recorded)

    total = real["total"]
    billings = {  # the real prompt tokens, by how the schema is billed
        "schema as sent (JSON)": lambda part: part["messages"] + part["schema"],
        "schema as fitted (#2140)": lambda part: part["messages"] + part["fitted"],
        "schema free": lambda part: part["messages"],
    }
    print(
        f"judge {args.judge}, {args.samples} samples x 8 metrics, {total['requests']} chat "
        f"requests, load {load_average():.2f}"
    )
    print(
        f"- real o200k_base prompt tokens: messages {total['messages']} (chat format's "
        f"overhead included) + schema {total['schema']} as sent (compact JSON of "
        f"response_format) or {total['fitted']} as fitted; test server's chars/4 count: "
        f"{server_count['prompt_tokens']}"
    )
    print(
        f"- characters per token: message texts "
        f"{total['message_chars'] / (total['messages'] - REPLY_PRIMER * total['requests']):.2f}"
        f" (overhead included), schema JSON {total['schema_chars'] / total['schema']:.2f}"
    )
    print(f"- real o200k_base completion tokens: {total['completion']}")
    for label, est in estimates.items():
        p, c = est["prompt_tokens"], est["completion_tokens"]
        print(f"- estimate by {est.get('tokenizer')} ({label}):")
        for billing, billed in billings.items():
            actual = billed(total)
            inside = p["low"] <= actual <= p["high"]
            print(
                f"  - prompt {p['estimate']:.0f} [{p['low']:.0f}-{p['high']:.0f}] vs {actual} "
                f"({billing}) -> {pct(p['estimate'], actual)} "
                f"({'inside' if inside else 'OUTSIDE'} the range)"
            )
        print(
            f"  - completion {c['estimate']:.0f} [{c['low']:.0f}-{c['high']:.0f}] vs "
            f"{total['completion']} -> {pct(c['estimate'], total['completion'])}"
        )
        for name in sorted(k for k in real if k != "total"):
            part = real[name]
            mine = (est["shared"] if name.startswith("shared:") else est["metrics"])[name]
            prompt = mine["prompt_tokens"]["estimate"]
            versus = ", ".join(
                f"{billed(part)} ({pct(prompt, billed(part))})" for billed in billings.values()
            )
            print(
                f"    - {name}: requests {mine['requests']['estimate']:.0f}/{part['requests']}, "
                f"prompt {prompt:.0f} vs {versus}; completion "
                f"{mine['completion_tokens']['estimate']:.0f}/{part['completion']} "
                f"({pct(mine['completion_tokens']['estimate'], part['completion'])})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
