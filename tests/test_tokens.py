"""How the dry run counts tokens (rageval.runner._tokens): the judge model's tokenizer when its
vocabulary is already in tiktoken's cache, else the approximation -- and never a download.

The tokenizer here is a tiny hand-made one (every byte, plus the merges "he", "ll" and
"hell"), written into tiktoken's cache as OpenAI's vocabulary files are, and registered with
tiktoken under the name of the encoding the model maps to; so the counts are computed by hand.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry

from helpers import handle, rows
from rageval import estimate, evaluate
from rageval.cli import main
from rageval.judge import Judge
from rageval.runner import _tokens
from rageval.runner._tokens import (
    APPROXIMATION,
    ENCODING_FILES,
    EncodingFile,
    counter_for,
    encoding_of,
)
from rageval.testing import FAKE_API_KEY, FakeOpenAI

TINY_URL = "https://example.invalid/encodings/tiny.tiktoken"
MERGES = [b"he", b"ll", b"hell"]


def tiny_file() -> bytes:
    """A vocabulary in tiktoken's file format: every byte, then the merges."""
    tokens = [bytes([b]) for b in range(256)] + MERGES
    return b"".join(base64.b64encode(t) + b" %d\n" % rank for rank, t in enumerate(tokens))


def cache_dir() -> Path:
    return Path(os.environ["TIKTOKEN_CACHE_DIR"])


def cached_path(url: str) -> Path:
    return cache_dir() / hashlib.sha1(url.encode()).hexdigest()


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The tiny vocabulary stands for o200k_base: its file in tiktoken's cache (returned),
    its hash in rageval's table, and tiktoken builds it from that file, as it builds OpenAI's."""
    data = tiny_file()
    monkeypatch.setitem(
        ENCODING_FILES, "o200k_base", EncodingFile(TINY_URL, hashlib.sha256(data).hexdigest())
    )

    def construct() -> dict[str, Any]:
        ranks = tiktoken.load.load_tiktoken_bpe(TINY_URL, hashlib.sha256(data).hexdigest())
        return {
            "name": "tiny",
            "pat_str": r"[a-z]+|[^a-z]+",
            "mergeable_ranks": ranks,
            "special_tokens": {},
        }

    tiktoken.list_encoding_names()  # tiktoken finds its constructors
    assert tiktoken.registry.ENCODING_CONSTRUCTORS is not None
    monkeypatch.setitem(tiktoken.registry.ENCODING_CONSTRUCTORS, "o200k_base", construct)
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "o200k_base", raising=False)
    path = cached_path(TINY_URL)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    yield path
    tiktoken.registry.ENCODINGS.pop("o200k_base", None)  # not the real one: forget it


@pytest.fixture
def no_download(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every fetch tiktoken makes (it downloads a vocabulary through read_file): recorded and
    refused (the tests' network guard would refuse the connection as well)."""
    fetched: list[str] = []

    def refuse(blobpath: str) -> bytes:
        fetched.append(blobpath)
        raise AssertionError(f"tiktoken asked to download {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    return fetched


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("llama-3.1-8b", None),
        ("gpt-4o2", None),
        ("o10", None),
        ("my-gpt-4o", None),
    ],
)
def test_the_encoding_of_a_model(model: str, encoding: str | None) -> None:
    assert encoding_of(model) == encoding


def test_an_unknown_model_is_approximated(tiny: Path, no_download: list[str]) -> None:
    assert counter_for("llama-3.1-8b") is APPROXIMATION
    assert APPROXIMATION.prompt_tokens([{"role": "user", "content": "x" * 9}], "abc") == 3


def test_the_tokenizer_counts_a_chat_request_as_openai_bills_it(
    tiny: Path, no_download: list[str]
) -> None:
    counter = counter_for("gpt-4o-mini")
    assert counter.label == "tiny (tiktoken)"
    messages = [
        {"role": "system", "content": "hello"},  # "hell" "o"
        {"role": "user", "content": "hello hello"},  # "hell" "o" " " "hell" "o"
    ]
    # 3 (reply) + schema 7 ('{"' 'a' '":1}', byte by byte) + 3 + 6 ("system") + 2
    # + 3 + 4 ("user") + 5
    assert counter.prompt_tokens(messages, '{"a":1}') == 3 + 7 + (3 + 6 + 2) + (3 + 4 + 5)
    assert counter.prompt_tokens([], "") == 3
    assert no_download == []


def test_without_the_cached_file_the_estimate_approximates_and_downloads_nothing(
    no_download: list[str],
) -> None:
    counter = counter_for("gpt-4o-mini")
    assert counter.label.startswith(APPROXIMATION.label)
    assert "o200k_base is not in tiktoken's cache" in counter.label
    assert counter.prompt_tokens([{"role": "user", "content": "x" * 8}], "") == 2
    assert no_download == []
    assert not cached_path(ENCODING_FILES["o200k_base"].url).exists()


def test_a_damaged_cached_file_is_left_alone(tiny: Path, no_download: list[str]) -> None:
    """tiktoken would delete a file that fails its hash and download it again: rageval checks
    the hash first and approximates."""
    tiny.write_bytes(tiny_file()[:-5])
    assert "not in tiktoken's cache" in counter_for("gpt-4o-mini").label
    assert tiny.exists() and no_download == []


def test_caching_switched_off_or_tiktoken_missing_means_the_approximation(
    tiny: Path, no_download: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken: "" caches nothing
    assert "which is off" in counter_for("gpt-4o-mini").label
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tiny.parent))  # tiktoken's other name
    assert counter_for("gpt-4o-mini").label == "tiny (tiktoken)"
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # not installed
    assert "pip install 'rageval[tokens]'" in counter_for("gpt-4o-mini").label
    assert no_download == []


def count_sent(request_body: dict[str, Any], schema_text: str) -> int:
    """The tiny tokenizer's count of a request as the server received it, made here."""
    enc = tiktoken.get_encoding("o200k_base")
    found = 3 + len(enc.encode(schema_text))
    for m in request_body["messages"]:
        found += 3 + len(enc.encode(m["role"])) + len(enc.encode(m["content"]))
    return found


def test_the_estimate_counts_with_the_tokenizer_what_a_run_sends(
    tiny: Path, no_download: list[str]
) -> None:
    data = rows(3)
    metrics = ["faithfulness", "answer_accuracy", "context_precision"]
    with FakeOpenAI(handle) as server:
        judge = Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)
        planned = estimate(data, metrics, llm=judge)
        assert server.requests == []
        evaluate(data, metrics, llm=judge, progress=False)
        sent = server.chat_requests
    assert planned.tokenizer == "tiny (tiktoken)"
    real = sum(count_sent(r.body, r.schema_text) for r in sent)
    # the synthetic judge's statements are the sentences the estimate predicts
    assert planned.prompt_tokens.estimate == real
    assert no_download == []


def test_the_dry_run_says_how_it_counted(
    tiny: Path, no_download: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(2)))
    # a dry run sends nothing: the endpoint need not exist
    args = ["evaluate", str(data), "-m", "faithfulness", "--base-url", "http://127.0.0.1:9/v1"]
    assert main([*args, "--llm", "gpt-4o-mini", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokenizer"] == "tiny (tiktoken)"
    assert main([*args, "--llm", "gpt-4o-mini", "--dry-run"]) == 0
    assert "tokens by tiny (tiktoken)." in capsys.readouterr().out
    assert main([*args, "--llm", "my-local-model", "--dry-run"]) == 0
    assert "tokens by approximation: 4 characters per token." in capsys.readouterr().out
    assert no_download == []


def test_import_and_cli_start_do_not_import_tiktoken() -> None:
    code = (
        "import sys, rageval, rageval.cli, rageval.runner._estimate\n"
        "print('tiktoken' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_table_of_files_is_tiktokens_own() -> None:
    """The URLs and hashes rageval checks are the ones tiktoken downloads and verifies (read
    from tiktoken's own source, not called: calling would download)."""
    import inspect

    import tiktoken_ext.openai_public as openai_public

    for name, wanted in _tokens.ENCODING_FILES.items():
        source = inspect.getsource(getattr(openai_public, name))
        assert f'"{wanted.url}"' in source and f'"{wanted.sha256}"' in source, name
