"""The language a row is judged in (docs/languages.md): detected from its texts by the small
detector, or stated by a ``language`` column; every judge prompt of a non-English row says
it (statements, generated questions and reasons in that language), English rows' prompts are
as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import embeddings_for, judge_for, keyed, route
from rageval import aevaluate
from rageval.metrics import AnswerRelevancy, Faithfulness
from rageval.metrics.authoring import in_language
from rageval.runner._stored import read_stored_run
from rageval.samples import (
    Sample,
    detect_language,
    language_name,
    language_problem,
    load_samples,
    sample_language,
)
from rageval.testing import FakeOpenAI, RecordedRequest, Reply


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("The cat sat on the mat and it was happy.", "en"),
        ("Der Hund ist nicht in dem Haus, und die Katze auch nicht.", "de"),
        ("El perro está en la casa y los gatos son del vecino.", "es"),
        ("Le chat est dans la maison et les chiens sont au jardin.", "fr"),
        ("Il gatto è nella casa e non con il cane della vicina.", "it"),
        ("O gato está na casa e não com o cão da vizinha.", "pt"),
        ("De kat is niet in het huis en de hond ook niet.", "nl"),
        ("东京是日本的首都。", "zh"),
        ("東京は日本の首都です。", "ja"),
        ("서울은 한국의 수도입니다", "ko"),
        ("กรุงเทพเป็นเมืองหลวงของประเทศไทย", "th"),
        ("مرحبا بالعالم", "ar"),
        ("שלום עולם", "he"),
        ("Москва — столица России", "ru"),
        ("Who won?", None),  # too few words to tell
        ("12 345", None),
    ],
)
def test_the_detector(text: str, language: str | None) -> None:
    assert detect_language(text) == language


def test_a_language_column_overrides_the_detector() -> None:
    rows = [
        {
            "user_input": "Wer schrieb Dune und wann war das?",
            "response": "Herbert.",
            "language": "de",
        },
        {"user_input": "Wer schrieb Dune und wann war das nicht?", "language": "Swiss German"},
        {"user_input": "Der Hund ist nicht in dem Haus, und die Katze auch nicht."},
    ]
    samples = load_samples(rows).samples
    assert [sample_language(s) for s in samples if s is not None] == ["de", "Swiss German", "de"]


def test_the_system_message_states_a_language_other_than_english() -> None:
    chat = [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "x"}]
    assert in_language(chat, None) == chat
    assert in_language(chat, "en") == chat  # English prompts are as they always were
    german = in_language(chat, "de")
    assert german[0]["content"].startswith("SYSTEM\n")
    assert "The material is in German" in german[0]["content"]
    assert german[1:] == chat[1:]
    assert "in Swiss German" in in_language(chat, "Swiss German")[0]["content"]


GERMAN = Sample(
    user_input="Wer hat Dune geschrieben und wann ist das Buch erschienen?",
    response="Frank Herbert hat Dune geschrieben. Das Buch ist 1965 erschienen.",
    retrieved_contexts=["Der Wüstenplanet ist ein Roman von Frank Herbert aus dem Jahr 1965."],
)


def _systems(server: FakeOpenAI) -> list[str]:
    return [str(r.messages[0]["content"]) for r in server.requests if r.messages]


async def test_faithfulness_asks_every_request_in_the_rows_language(
    fake_openai: FakeOpenAI,
) -> None:
    statements = ["Frank Herbert hat Dune geschrieben.", "Dune ist 1965 erschienen."]
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": statements})),
        (("contexts", "statements"), keyed("s", "supported", True, True)),
    )
    result = await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(GERMAN)
    assert result.value == 1.0
    systems = _systems(fake_openai)
    assert len(systems) == 2  # the statements, then their verdicts
    assert all("The material is in German" in s for s in systems)


async def test_answer_relevancys_questions_are_asked_in_the_rows_language(
    fake_openai: FakeOpenAI,
) -> None:
    question = GERMAN.user_input or ""
    fake_openai.embedder = lambda text: (1.0, 0.0)

    def generated(req: RecordedRequest) -> Reply:
        return Reply.choices(*[Reply.json({"question": question, "noncommittal": 0})] * 3)

    fake_openai.handler = generated
    metric = AnswerRelevancy(llm=judge_for(fake_openai), embeddings=embeddings_for(fake_openai))
    result = await metric.single_turn_ascore(GERMAN)
    assert result.value == pytest.approx(1.0)
    assert _systems(fake_openai) and all("in German" in s for s in _systems(fake_openai))


async def test_an_english_rows_prompts_do_not_change(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": ["Dune is by Frank Herbert."]})),
        (("contexts", "statements"), keyed("s", "supported", True)),
    )
    english = Sample(
        user_input="Who wrote the novel Dune, and when was it first published?",
        response="Dune was written by Frank Herbert and it was published in 1965.",
        retrieved_contexts=["Dune is a 1965 novel by Frank Herbert."],
    )
    await Faithfulness(llm=judge_for(fake_openai)).single_turn_ascore(english)
    assert _systems(fake_openai) and not any("material is in" in s for s in _systems(fake_openai))


async def test_a_run_wide_language_for_rows_without_their_own(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler = route(
        (("text",), Reply.json({"statements": ["Dune is by Frank Herbert."]})),
        (("contexts", "statements"), keyed("s", "supported", True)),
    )
    rows = [
        {"id": "a", "user_input": "Qui a écrit Dune ?", "response": "Frank Herbert.",
         "retrieved_contexts": ["Dune est un roman de Frank Herbert."]},
        {"id": "b", "user_input": "Wer schrieb Dune?", "response": "Frank Herbert.",
         "retrieved_contexts": ["Dune ist ein Roman von Frank Herbert."], "language": "de"},
    ]  # fmt: skip
    result = await aevaluate(
        rows, metrics=["faithfulness"], llm=judge_for(fake_openai), language="fr",
        run_dir=tmp_path / "run",
    )  # fmt: skip
    assert result["faithfulness"] == [1.0, 1.0]
    systems: dict[str, set[str]] = {"a": set(), "b": set()}
    for request in fake_openai.requests:
        text = " ".join(str(m["content"]) for m in request.messages)
        row = "a" if "Qui a" in text or "Dune est" in text else "b"
        systems[row].add(str(request.messages[0]["content"]))
    assert len(systems["a"]) == len(systems["b"]) == 2  # each row: extraction and verdicts
    assert all("in French" in s for s in systems["a"])
    assert all("in German" in s for s in systems["b"])  # a row's own column wins
    # recorded, so that --resume DIR alone asks as the run did
    assert read_stored_run(tmp_path / "run").language == "fr"


def test_the_dry_runs_plan_states_the_language_as_the_run_does() -> None:
    planned = Faithfulness().plan(GERMAN)
    assert planned  # statement extraction, then the verdicts
    assert all("The material is in German" in r.messages[0]["content"] for r in planned)
    english = Sample(user_input="Who wrote Dune?", response="Frank Herbert wrote it in 1965.")
    assert not any(
        "material is in" in r.messages[0]["content"] for r in Faithfulness().plan(english) or []
    )


def test_a_stated_language_is_an_iso_code_or_a_name() -> None:
    assert language_name("pt-BR") == "Portuguese"  # a region tag names its language
    assert language_name("sv") == "Swedish"  # every ISO 639-1 code, not only the detector's
    assert language_name("Deutsch") == "Deutsch"  # a name as the user gave it
    assert language_problem("Swiss German") is None
    assert language_problem("zh_Hant") is None
    assert "unknown language code 'xx'" in (language_problem("xx") or "")
    assert "is not a language" in (language_problem("42") or "")
    chat = [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "x"}]
    assert in_language(chat, "en-GB") == chat  # English under any tag: prompts as always


def test_an_unknown_language_is_refused_before_any_judge_call(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    rows = [
        {"id": "a", "user_input": "Wer schrieb Dune?", "response": "Herbert.", "language": "de"},
        {"id": "b", "user_input": "Who wrote Dune?", "response": "Herbert.", "language": "xx"},
    ]
    loaded = load_samples(rows)
    [problem] = loaded.problems
    assert (problem.row, problem.field) == (1, "language")
    assert "unknown language code 'xx'" in problem.message
    with pytest.raises(ValueError, match="language: unknown language code 'zz'"):
        load_samples(rows[:1], language="zz")
    # a language that is no text: an error naming the row (was silently detected instead),
    # and language= (was an AttributeError)
    for wrong in (5, ["de"], True):
        [problem] = load_samples([{**rows[0], "language": wrong}]).problems
        assert (problem.row, problem.field) == (0, "language")
        assert f"{wrong!r} is not a language" in problem.message
    with pytest.raises(ValueError, match="language: 5 is not a language"):
        load_samples(rows[:1], language=5)  # type: ignore[arg-type]
    assert not load_samples([{**rows[0], "language": None}], language="").problems
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(rows[0]) + "\n")
    cli = subprocess.run(
        [sys.executable, "-m", "rageval", "evaluate", str(data), "-m", "faithfulness",
         "--llm", "m", "--base-url", fake_openai.base_url, "--language", "xx"],
        capture_output=True, text=True, check=False, env={**os.environ, "OPENAI_API_KEY": "k"},
    )  # fmt: skip
    assert cli.returncode == 2, cli.stderr
    assert "unknown language code 'xx'" in cli.stderr
    assert not fake_openai.requests
