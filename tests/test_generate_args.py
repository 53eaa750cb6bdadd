"""`rageval generate` / rageval.generate given what it cannot use: a one-chunk corpus (the
two-chunk types left out of the default mix, a usage error when the mix asks for them), a bad
language, a misspelled keyword, a corpus of the wrong kind, a missing --existing file; and the
short summary a result prints as."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import embeddings_for, make_judge
from rageval.generation import (
    Chunk,
    GenerateError,
    GenerateResult,
    estimate_generation,
    generate,
)
from rageval.judge import Usage
from rageval.testing import FakeOpenAI, Reply
from test_generate import Scripted

ONE = [Chunk("a.md#island", "The lighthouse was lit in 1871.", "a.md", "Island")]
TWO = [*ONE, Chunk("a.md#harbour", "The harbour froze in 1902.", "a.md", "Harbour")]


def _one_chunk_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "a.md").write_text("# Island\n\nThe lighthouse was lit in 1871.\n")
    return folder


def test_a_one_chunk_corpus_leaves_the_two_chunk_types_out_of_the_default_mix(
    tmp_path: Path,
) -> None:
    found = estimate_generation(_one_chunk_folder(tmp_path), 2, model="gpt-4o-mini")
    left_out = "multi_hop and comparison left out of the mix: they join two chunks"
    assert found.notes == (f"{left_out} and the corpus has one",)
    assert found.table().startswith(f"note: {left_out}")
    assert not {"multi_hop", "comparison"} & set(found.drop_rates)
    with FakeOpenAI(Scripted()) as server:
        result = generate(
            ONE,
            2,
            llm=make_judge(server),
            embeddings=embeddings_for(server),
            progress=False,
            run_dir=tmp_path / "run",
        )
    assert len(result.items) == 2 and result.notes == [f"{left_out} and the corpus has one"]
    # the run directory's report says it too
    assert f"Note: {left_out} and the corpus has one." in (tmp_path / "run/report.md").read_text()
    assert {i["metadata"]["type"] for i in result.items} <= {
        "single_hop",
        "summary",
        "unanswerable",
        "follow_up",
    }


def test_a_mix_asking_for_two_chunks_of_a_one_chunk_corpus_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rageval.cli import main

    folder = _one_chunk_folder(tmp_path)
    with FakeOpenAI(Scripted()) as server:
        for extra in (["--dry-run"], ["-o", str(tmp_path / "run")]):
            code = main(
                [
                    *["generate", str(folder), "-n", "2", "--mix", "multi_hop=1", *extra],
                    *["--llm", "test-model", "--base-url", server.base_url, "--no-probe", "-q"],
                ]
            )
            assert code == 2
            assert "the mix asks for multi_hop items, which join two chunks, and the corpus " in (
                capsys.readouterr().err
            )
        assert server.chat_requests == []


@pytest.mark.parametrize(
    ("corpus", "kw", "error", "message"),
    [
        (TWO, {"language": 5}, GenerateError, "language: 5 is not a language"),
        (TWO, {"language": "xx"}, GenerateError, "language: unknown language code 'xx'"),
        (TWO, {"sed": 3}, TypeError, "argument 'sed' (did you mean 'seed'?)"),
        (["a text"], {}, GenerateError, "non-empty list of rageval.generation.Chunk"),
        (["a text"], {}, GenerateError, "got list of str"),
        (None, {}, GenerateError, "corpus takes a folder of documents"),
        (TWO, {"existing": "nope.jsonl"}, GenerateError, "existing test set not found: nope"),
    ],
)
def test_bad_arguments_are_refused_before_any_request(
    corpus: Any, kw: dict[str, Any], error: type[Exception], message: str
) -> None:
    with FakeOpenAI(lambda req: Reply.json({})) as server:
        with pytest.raises(error) as raised:
            generate(corpus, 1, llm=make_judge(server), progress=False, **kw)
        assert server.chat_requests == []
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        (["-n", "0"], "n must be a positive whole number, got 0"),
        (["-n", "2", "--max-attempts", "0"], "max_attempts must be at least 1, got 0"),
        (["-n", "2", "--existing", "nope.jsonl"], "existing test set not found"),
        (["-n", "2", "--style", "shouty"], "unknown style 'shouty'"),
        (["-n", "2", "--max-duplicate-cosine", "1.5"], "max_duplicate_cosine must be in (0, 1]"),
    ],
)
def test_a_bad_argument_is_said_before_the_corpus_is_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argument: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    # the corpus is missing: the argument's error comes first (reading a large corpus would
    # come before it too)
    from rageval.cli import main

    missing = str(tmp_path / "no-such-folder")
    for extra in (["--dry-run"], ["-o", str(tmp_path / "run")]):
        code = main(["generate", missing, *argument, "--llm", "m", "--base-url",
                     "http://127.0.0.1:9/v1", "--no-probe", "-q", *extra])  # fmt: skip
        assert code == 2
        assert message in capsys.readouterr().err


def test_a_result_prints_as_a_short_summary(tmp_path: Path) -> None:
    with FakeOpenAI(Scripted(supported=False)) as server:
        result = generate(
            ONE,
            1,
            llm=make_judge(server),
            embeddings=embeddings_for(server),
            mix={"single_hop": 1},
            max_attempts=1,
            run_dir=tmp_path / "run",
            progress=False,
        )
    assert str(result) == (
        "0 of 1 items kept, 2 attempt(s) dropped (supported 2); 1 slot(s) left without an "
        f"item\nrun directory: {tmp_path / 'run'}"
    )
    assert len(result.attempts) == 2  # the full records stay in the fields
    empty = GenerateResult(requested=3, items=[], attempts=[], usage=Usage(), notes=["n"])
    assert str(empty) == (
        "0 of 3 items kept, 0 attempt(s) dropped; 0 slot(s) left without an item\nnote: n\n"
        "no run directory"
    )


def test_a_dry_run_plans_with_the_styles_asked_for(tmp_path: Path) -> None:
    # one style: every planned write request is written in it (the estimate counts its words)
    folder = _one_chunk_folder(tmp_path)
    terse = estimate_generation(folder, 3, model="m", styles=["terse"])
    every = estimate_generation(folder, 3, model="m")
    assert terse.requests == every.requests
    assert terse.prompt_tokens != every.prompt_tokens
