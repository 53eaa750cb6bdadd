"""`rageval generate` / rageval.generate: chunking with stable ids, the seeded plan, each check
with a scripted judge, the run directory (resume after kill -9 without a repeated request),
the dry run's estimate against the run, and the set read back by `evaluate`."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import signal
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import (
    cli_child_command,
    embeddings_for,
    handle,
    make_judge,
    resume_env,
    user_text,
    wait_for_child,
)
from rageval._sync import run_sync
from rageval.generation import (
    TYPES,
    Chunk,
    CorpusError,
    GenerateError,
    estimate_generation,
    expected_attempts,
    generate,
    load_corpus,
)
from rageval.generation._asks import REFUSAL, answerable, leaks, quote_found, subject_of
from rageval.generation._corpus import chunk_document
from rageval.generation._plan import link_pairs, plan_attempt, slot_types
from rageval.judge._probabilities import forget_logprobs
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply
from rageval.testing.records import ScriptedToken

CORPUS = Path(__file__).parent / "data" / "generate_corpus"


class Scripted:
    """A judge that writes items from the FACT-n marks of the passages and answers the checks
    as told: `same_question` writes one question for every item; `answerable` and `supported`
    are the checks' answers ("unanswerable" questions are found answerable from nothing
    unless `answerable_unanswerable`)."""

    def __init__(
        self,
        *,
        same_question: bool = False,
        answerable: bool = True,
        supported: bool = True,
        answerable_unanswerable: bool = False,
        leak: bool = False,
        made_up_quote: bool = False,
    ) -> None:
        self.same_question, self.answerable, self.supported = same_question, answerable, supported
        self.answerable_unanswerable, self.leak = answerable_unanswerable, leak
        self.made_up_quote = made_up_quote
        self.answered: list[str] = []

    def __call__(self, req: RecordedRequest) -> Reply:
        text = user_text(req)
        self.answered.append(json.dumps(req.messages, sort_keys=True))
        if "<passages>" in text or "<subject>" in text:
            return Reply.json(self.write(text))
        if "Does a sentence of the contexts give the answer" in text:
            unanswerable = "cannot-be-known" in text
            yes = self.answerable_unanswerable if unanswerable else self.answerable
            if self.made_up_quote:
                return Reply.json({"answered": "yes", "quote": "The moon is made of green cheese."})
            first = re.search(r"\[c1\] (.*?\.)", text)
            assert first is not None
            return Reply.json(
                {"answered": "yes" if yes else "no", "quote": first.group(1) if yes else ""}
            )
        if "Is the claim supported" in text:
            return Reply.json({"supported": "yes" if self.supported else "no"})
        raise AssertionError(f"unexpected request: {text[:200]}")

    def write(self, text: str) -> dict[str, str]:
        facts = "+".join(re.findall(r"FACT-\d+", text.split("</passages>")[0]))
        mark = str(zlib.crc32(text.encode()) % 100_000)
        answer = f"The record {facts} holds the value {mark}."
        question = f"What value does record {facts} hold, case {mark}?"
        if self.same_question:
            question = "What value does the record hold?"
        if self.leak:
            question = f"{question} {answer}"
        if "you cannot see its text" in text:
            return {
                "missing_detail": "what cannot be known",
                "question": f"What is cannot-be-known about {facts}, case {mark}?",
            }
        if "summary" in text:
            answer = f"{answer} It is described. It is kept."
        if "Write a short conversation" in text:
            return {
                "question": f"What is {facts}?",
                "answer": f"It is a record, case {mark}.",
                "follow_up": question,
                "follow_up_answer": answer,
            }
        return {"question": question, "fact": f"value {mark}", "answer": answer}


def _run(server: FakeOpenAI, n: int, tmp_path: Path, **kw: Any) -> Any:
    kw.setdefault("progress", False)
    return generate(CORPUS, n, llm=make_judge(server), embeddings=embeddings_for(server), **kw)


# ---------------------------------------------------------------------- chunks
def test_markdown_is_cut_at_headings_with_ids_of_file_and_heading() -> None:
    text = (
        "Intro line.\n\n# Guide\n\n## Setup\n\nFirst para.\n\n```\n# not a heading\n```\n\n"
        "## Setup\n\nAgain.\n\n## Long\n\n" + "\n\n".join(["x" * 50] * 3)
    )
    chunks = chunk_document(text, "a/b.md", max_chars=110)
    assert [c.id for c in chunks] == [
        "a/b.md#top",
        "a/b.md#setup",
        "a/b.md#setup-2",
        "a/b.md#long",
        "a/b.md#long-2",
    ]
    assert "# not a heading" in chunks[1].text  # a fenced line is no heading
    assert chunks[1].heading == "Guide > Setup"
    assert chunks[3].text == "Long\n\n" + "x" * 50 + "\n\n" + "x" * 50
    assert [c.id for c in chunk_document(text, "a/b.md", max_chars=110)] == [c.id for c in chunks]


def test_a_folder_gives_the_same_ids_each_time_and_reads_html_headings() -> None:
    first, again = load_corpus(CORPUS), load_corpus(CORPUS)
    assert [c.id for c in first] == [c.id for c in again]
    ids = [c.id for c in first]
    assert "notes.html#history" in ids and "pumps.md#care" in ids and len(ids) == 6
    history = next(c for c in first if c.id == "notes.html#history")
    assert "river Sallen" in history.text and "<p>" not in history.text


def test_a_jsonl_of_chunks_keeps_its_ids_and_bad_lines_are_named(tmp_path: Path) -> None:
    good = tmp_path / "chunks.jsonl"
    good.write_text('{"id": "doc-7", "text": "Seven."}\n{"id": 8, "text": "Eight."}\n')
    assert [(c.id, c.text) for c in load_corpus(good)] == [("doc-7", "Seven."), ("8", "Eight.")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "A."}\n{"id": "b"}\n')
    with pytest.raises(CorpusError, match=r"bad.jsonl line 2: field 'text'"):
        load_corpus(bad)
    bad.write_text('{"id": "a", "text": "A."}\n{"id": "a", "text": "B."}\n')
    with pytest.raises(CorpusError, match=r"line 2: field 'id': 'a' is given twice"):
        load_corpus(bad)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.pdf").write_bytes(b"%PDF")
    with pytest.raises(CorpusError, match="PDF"):
        load_corpus(tmp_path / "docs")


# ---------------------------------------------------------------------- plan
def test_the_mix_is_met_every_type_present_and_the_seed_fixes_the_order() -> None:
    types = slot_types(12, dict.fromkeys(TYPES, 1.0), seed=3)
    assert sorted(types) == sorted(TYPES * 2)
    assert types == slot_types(12, dict.fromkeys(TYPES, 1.0), seed=3)
    assert types != slot_types(12, dict.fromkeys(TYPES, 1.0), seed=4)
    # a weight of 10 against 1s: still one of each small type
    skewed = slot_types(8, {"single_hop": 10, "summary": 1, "multi_hop": 1}, seed=0)
    assert {t: skewed.count(t) for t in set(skewed)} == {
        "single_hop": 6,
        "summary": 1,
        "multi_hop": 1,
    }
    with pytest.raises(ValueError, match="unknown question type 'trivia'"):
        slot_types(3, {"trivia": 1}, seed=0)


def test_an_attempt_is_planned_from_the_seed_slot_and_attempt_alone() -> None:
    pairs = [(0, 1), (2, 3)]
    kw: dict[str, Any] = {"corpus_size": 5, "pairs": pairs, "styles": ("plain", "terse"), "seed": 9}
    plans = [plan_attempt(s, a, "multi_hop", **kw) for s in range(6) for a in range(3)]
    assert plans == [plan_attempt(s, a, "multi_hop", **kw) for s in range(6) for a in range(3)]
    assert all(p.chunks in pairs for p in plans)
    assert len({(p.chunks, p.style) for p in plans}) > 1
    single = plan_attempt(0, 0, "single_hop", **kw)
    assert len(single.chunks) == 1 and 0 <= single.chunks[0] < 5


def test_a_slot_never_repeats_an_attempts_style_and_chunks_while_others_are_untried() -> None:
    # 3 chunks x 2 styles = 6 combinations: a slot's first 6 attempts are 6 different ones (a
    # repeat would send the same request and the cache would give back the same dropped item);
    # drawing (seed, slot, attempt) alone repeated one in most of these 40 slots
    kw: dict[str, Any] = {"corpus_size": 3, "pairs": [], "styles": ("plain", "terse")}
    for seed in range(4):
        for slot in range(10):
            plans = [plan_attempt(slot, a, "single_hop", seed=seed, **kw) for a in range(7)]
            assert len({(p.style, p.chunks) for p in plans[:6]}) == 6
            assert plans == [plan_attempt(slot, a, "single_hop", seed=seed, **kw) for a in range(7)]
    # two-chunk types draw among the pairs: 2 pairs x 1 style, then the space is used up
    pairs = [(0, 1), (1, 2)]
    two = [
        plan_attempt(0, a, "comparison", corpus_size=3, pairs=pairs, styles=("plain",), seed=1)
        for a in range(3)
    ]
    assert {p.chunks for p in two[:2]} == set(pairs) and two[2].chunks in pairs
    # a first draw that repeats nothing is the draw of (seed, slot, attempt), as before
    rng = random.Random("5:0:0")
    style, chunk = kw["styles"][rng.randrange(2)], rng.randrange(3)
    first = plan_attempt(0, 0, "single_hop", seed=5, **kw)
    assert (first.style, first.chunks) == (style, (chunk,))


def test_chunks_are_linked_by_a_shared_name_and_by_their_nearest_neighbour() -> None:
    chunks = [
        Chunk("a", "Lorvik makes pumps.", "x"),
        Chunk("b", "the pumps hum. The valves too.", "x"),
        Chunk("c", "Made in Lorvik.", "x"),
        Chunk("d", "Nothing shared.", "x"),
    ]
    vectors = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 1]], dtype=np.float32)
    # a and c share "Lorvik"; "The" is not a name (the corpus writes "the"); neighbours:
    # a-b, b-a, c-d, d-c
    assert link_pairs(chunks, vectors) == [(0, 1), (0, 2), (2, 3)]


# ---------------------------------------------------------------------- checks
def test_the_leak_check_finds_the_answer_inside_the_question() -> None:
    assert not leaks("Is Mira Kessel the designer?", "Mira Kessel.").passed
    assert leaks("Who designed the pump?", "Mira Kessel.").passed
    assert leaks("Who is Kesselring?", "Kessel").passed  # a word, not a part of one


def test_a_run_keeps_checked_items_of_every_type_with_real_corpus_ids(tmp_path: Path) -> None:
    judge = Scripted()
    with FakeOpenAI(judge) as server:
        result = _run(server, 6, tmp_path, run_dir=tmp_path / "run", seed=1)
    assert len(result.items) == 6 and not result.dropped
    ids = {c.id for c in load_corpus(CORPUS)}
    assert {i["metadata"]["type"] for i in result.items} == set(TYPES)
    for item in result.items:
        assert set(item["reference_context_ids"]) <= ids
        assert set(item["metadata"]["source_chunk_ids"]) <= ids
        names = [c["name"] for c in item["metadata"]["checks"]]
        if item["metadata"]["type"] == "unanswerable":
            assert item["reference"] == REFUSAL and item["reference_context_ids"] == []
            assert names == ["not_duplicate", "unanswerable"]
        elif item["metadata"]["type"] == "summary":
            assert names == ["not_duplicate", "answerable", "supported"]
        else:
            assert names == ["no_leak", "not_duplicate", "answerable", "supported"]
        assert all(c["passed"] for c in item["metadata"]["checks"])
    multi = [i for i in result.items if i["metadata"]["type"] in ("multi_hop", "comparison")]
    assert all(len(i["reference_context_ids"]) == 2 for i in multi)
    follow = next(i for i in result.items if i["metadata"]["type"] == "follow_up")
    assert [t["role"] for t in follow["metadata"]["history"]] == ["user", "assistant"]
    run = tmp_path / "run"
    written = [json.loads(x) for x in (run / "testset.jsonl").read_text().splitlines()]
    assert written == result.items
    report = (run / "report.md").read_text()
    assert "6 of 6 items kept; 0 attempt(s) dropped" in report
    assert "| summary | 1 | 0 |" in report


@pytest.mark.parametrize(
    ("script", "check", "reason"),
    [
        ({"leak": True}, "no_leak", "the question contains its answer"),
        ({"answerable": False}, "answerable", "no sentence of the 1 context(s) answers it"),
        ({"made_up_quote": True}, "answerable", "is not in them (0% found): a failed reading"),
        ({"supported": False}, "supported", "faithfulness 0.00 to the reference contexts"),
    ],
)
def test_an_item_failing_a_check_is_dropped_with_its_reason(
    tmp_path: Path, script: dict[str, bool], check: str, reason: str
) -> None:
    with FakeOpenAI(Scripted(**script)) as server:
        result = _run(server, 2, tmp_path, mix={"single_hop": 1}, max_attempts=2)
    assert result.items == [] and result.unfilled == [0, 1]
    # no single_hop item is ever kept: each slot gets twice its 2 attempts
    assert [(r["slot"], r["attempt"]) for r in result.dropped] == [
        (s, a) for s in (0, 1) for a in range(4)
    ]
    for record in result.dropped:
        failed = record["checks"][-1]
        assert failed["name"] == check and not failed["passed"] and reason in failed["reason"]


def test_an_unanswerable_question_is_written_from_its_chunks_subject_not_its_text(
    tmp_path: Path,
) -> None:
    script = Scripted()
    with FakeOpenAI(script) as server:
        result = _run(server, 2, tmp_path, mix={"unanswerable": 1}, max_attempts=1)
        writes = [user_text(r) for r in server.chat_requests if "<subject>" in user_text(r)]
    assert len(result.items) == 2 and len(writes) == 2
    chunks = {c.id: c for c in load_corpus(CORPUS)}
    for item, shown in zip(result.items, writes, strict=True):
        (source,) = item["metadata"]["source_chunk_ids"]
        chunk = chunks[source]
        # the file and the heading path, e.g. "pumps.md > Quanta pumps > Care"; no sentence
        assert f"<subject>\n{chunk.source} > {chunk.heading}\n</subject>" in shown
        assert "FACT-" not in shown and "<passages>" not in shown
        assert item["reference"] == REFUSAL and item["reference_contexts"] == []


def test_a_chunk_without_headings_is_named_by_its_file_and_first_words() -> None:
    short = Chunk("a.txt#top", "Keep the pump cool.", "a.txt")
    assert subject_of(short) == "a.txt: Keep the pump cool."
    long = Chunk("b.txt#top", " ".join(f"w{i}" for i in range(20)), "b.txt")
    assert subject_of(long) == "b.txt: " + " ".join(f"w{i}" for i in range(12)) + " ..."
    titled = Chunk("c.md#care", "Care\n\nOil it.", "c.md", "Pumps > Care")
    assert subject_of(titled) == "c.md > Pumps > Care"


def test_an_unanswerable_question_the_corpus_answers_is_dropped(tmp_path: Path) -> None:
    with FakeOpenAI(Scripted(answerable_unanswerable=True)) as server:
        result = _run(server, 1, tmp_path, mix={"unanswerable": 1}, max_attempts=1)
    first, record = result.dropped  # one attempt, twice while no unanswerable item is kept
    assert first["checks"][-1]["name"] == "unanswerable" and not first["checks"][-1]["passed"]
    assert record["checks"][-1]["name"] == "unanswerable"
    assert "the 3 context(s) answer it (P(yes) 1.00), quoting" in record["checks"][-1]["reason"]
    assert record["checks"][-1]["value"] == 1.0


def test_an_unanswerable_question_with_a_made_up_quote_is_dropped(tmp_path: Path) -> None:
    # a quote that is not in the contexts is a failed reading, not a sign of no answer
    with FakeOpenAI(Scripted(made_up_quote=True)) as server:
        result = _run(server, 1, tmp_path, mix={"unanswerable": 1}, max_attempts=1)
    assert result.items == [] and len(result.dropped) == 2
    for record in result.dropped:
        failed = record["checks"][-1]
        assert failed["name"] == "unanswerable" and not failed["passed"]
        assert "(0% found): a failed reading" in failed["reason"]


def verdict_reply(sampled: str, p_yes: float | None, quote: str) -> Reply:
    """An answerability reply whose verdict `sampled` has P(yes) `p_yes` in its scripted
    log-probabilities (None: a reply without them)."""
    obj = {"answered": sampled, "quote": quote}
    if p_yes is None:
        return Reply.json(obj)
    other = "no" if sampled == "yes" else "yes"
    chosen = p_yes if sampled == "yes" else 1 - p_yes
    rest = json.dumps(obj)[len('{"answered": "') + len(sampled) :]
    tokens: list[ScriptedToken] = [
        ('{"answered": "', 0.0),
        (sampled, math.log(chosen), {other: math.log(1 - chosen)}),
        (rest, 0.0),
    ]
    return Reply.json(obj, logprobs=tokens)


BLUE = "The Blue Line runs every 40 minutes."


@pytest.mark.parametrize(
    ("reply", "expect", "passed", "value", "said"),
    [
        # the verdict decides "not answered", whatever the quote: P(yes) .3 < .5
        (("no", 0.3, ""), False, True, 0.3, "no sentence of the 1 context(s) answers it"),
        (("no", 0.3, ""), True, False, 0.3, "(P(yes) 0.30)"),
        (("no", 0.2, BLUE), False, True, 0.2, "no sentence"),
        # read by probability, not by the word written: a "yes" at P(yes) .4 is a no...
        (("yes", 0.4, BLUE), False, True, 0.4, "(P(yes) 0.40)"),
        # ... and a "no" at P(yes) .6, with its quote found, is a yes
        (("no", 0.6, BLUE), True, True, 0.6, f"answer it (P(yes) 0.60), quoting {BLUE!r}"),
        (("yes", 0.9, BLUE), True, True, 0.9, "quoting"),
        (("yes", 0.9, BLUE), False, False, 0.9, "quoting"),
        # a yes whose quote is not in the contexts: 1 of 5 word pairs found, fails both
        (("yes", 0.9, "The Red Line runs at noon."), True, False, 0.9, "(20% found): a failed"),
        (("yes", 0.9, "The Red Line runs at noon."), False, False, 0.9, "(20% found)"),
        (("yes", 0.9, ""), False, False, 0.9, "(0% found)"),
        # no log-probabilities: the written verdict, P(yes) 1 or 0
        (("yes", None, BLUE), True, True, 1.0, "(P(yes) 1.00)"),
        (("no", None, ""), False, True, 0.0, "(P(yes) 0.00)"),
    ],
)
def test_the_answerability_checks_read_the_verdict_by_probability_and_the_quote_as_evidence(
    reply: tuple[str, float | None, str], expect: bool, passed: bool, value: float, said: str
) -> None:
    contexts = [f"Routes. {BLUE}"]
    forget_logprobs()  # a server that gave none is remembered, per endpoint, for the process
    with FakeOpenAI(lambda req: verdict_reply(*reply)) as server:
        check = run_sync(answerable(make_judge(server), "How often?", contexts, expect=expect))
    assert check.name == ("answerable" if expect else "unanswerable")
    assert check.passed is passed and said in check.reason
    assert check.value == pytest.approx(value)


def test_a_quote_counts_when_its_word_pairs_are_in_one_context() -> None:
    contexts = ["Routes. The Blue Line runs every 40 minutes.", "Tickets cost 3 crowns."]
    assert quote_found("[c1] the blue line RUNS every 40 minutes", contexts) == 1.0
    assert quote_found("<c2>Tickets cost 3 crowns.</c2>", contexts) == 1.0
    # word pairs across two contexts are not one quote
    assert quote_found("every 40 minutes tickets cost", contexts) == pytest.approx(2 / 4)
    assert quote_found("", contexts) == 0.0
    assert quote_found("Blue", contexts) == 1.0 and quote_found("Red", contexts) == 0.0


def test_near_duplicates_are_dropped_against_the_set_and_an_existing_one(tmp_path: Path) -> None:
    with FakeOpenAI(Scripted(same_question=True)) as server:
        result = _run(server, 3, tmp_path, mix={"single_hop": 1}, max_attempts=2)
        # the first item is kept; every later attempt writes the same question; once a
        # single_hop item is in the set, a slot gets its 2 attempts, not twice as many
        assert [i["id"] for i in result.items] == ["g0001"] and result.unfilled == [1, 2]
        assert len(result.dropped) == 4
        for record in result.dropped:
            failed = record["checks"][-1]
            assert failed["name"] == "not_duplicate"
            assert failed["reason"].startswith("cosine 1.000 with item g0001")
        again = _run(
            server,
            1,
            tmp_path,
            mix={"single_hop": 1},
            max_attempts=1,
            existing=[result.items[0]["user_input"]],
        )
    assert again.items == []
    assert "existing question" in again.dropped[0]["checks"][-1]["reason"]


# ---------------------------------------------------------------------- the run
def test_a_resumed_run_refuses_other_settings_and_a_used_directory_is_refused(
    tmp_path: Path,
) -> None:
    with FakeOpenAI(Scripted()) as server:
        _run(server, 2, tmp_path, run_dir=tmp_path / "run")
        with pytest.raises(GenerateError, match="holds a run already"):
            _run(server, 2, tmp_path, run_dir=tmp_path / "run")
        with pytest.raises(GenerateError, match="started with another request"):
            _run(server, 3, tmp_path, run_dir=tmp_path / "run", resume=True)


def test_resume_after_a_cut_line_finishes_the_same_set_without_a_request(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with FakeOpenAI(Scripted()) as server:
        full = generate(
            CORPUS,
            6,
            llm=make_judge(server, cache=cache),
            embeddings=embeddings_for(server),
            run_dir=tmp_path / "run",
            progress=False,
        )
        log = tmp_path / "run" / "attempts.jsonl"
        lines = log.read_text().splitlines(keepends=True)
        log.write_text("".join(lines[:3]) + lines[3][:20])  # a kill in the middle of a line
        sent = len(server.chat_requests)
        again = generate(
            CORPUS,
            6,
            llm=make_judge(server, cache=cache),
            embeddings=embeddings_for(server),
            run_dir=tmp_path / "run",
            resume=True,
            progress=False,
        )
        assert len(server.chat_requests) == sent  # the cache answered every request
    assert again.items == full.items
    assert again.usage.requests == 0 and again.usage.cache_hits > 0
    records = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["slot"] for r in records] == list(range(6))


def test_kill_9_halfway_then_resume_sends_no_answered_request_twice(tmp_path: Path) -> None:
    judge = Scripted()
    state = {"answered": 0, "hold": 9, "killed": 0}

    async def gated(req: RecordedRequest) -> Reply | Fault:
        import asyncio

        if state["answered"] >= state["hold"]:  # held until the child is killed: never answered
            while not state["killed"]:
                await asyncio.sleep(0.01)
            return Fault.status(500, "the client is gone")
        state["answered"] += 1
        return judge(req)

    run = tmp_path / "run"
    env = {**resume_env(tmp_path / "cache"), "RAGEVAL_EMBEDDINGS": "local"}
    with FakeOpenAI(gated) as server:
        args: list[str | Path] = ["generate", CORPUS, "-n", "6", "-o", run, "--llm", "test-model"]
        args += ["--base-url", server.base_url, "--no-probe", "-q"]
        proc = subprocess.Popen(cli_child_command(*args), env=env, stderr=subprocess.PIPE)
        wait_for_child(lambda: len(server.chat_requests) > state["hold"], "held", proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kept_before = sum(1 for x in (run / "attempts.jsonl").read_text().splitlines() if x)
        assert 0 < kept_before < 6
        state["hold"], state["killed"] = 10**6, 1
        done = subprocess.run(
            cli_child_command(*args, "--resume"), env=env, capture_output=True, timeout=300
        )
        assert done.returncode == 0, done.stderr.decode()
    items = [json.loads(x) for x in (run / "testset.jsonl").read_text().splitlines()]
    assert len(items) == 6 and len({i["id"] for i in items}) == 6
    assert len({i["user_input"] for i in items}) == 6
    # every request the server answered, it answered once (the held one was never answered)
    assert len(judge.answered) == len(set(judge.answered))


def test_a_llama_cpp_server_is_sent_no_more_requests_at_once_than_its_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as evaluate: the run reads the slots (GET /props) and follows them; a comparison's
    # support check has two contexts, whose claim checks went out at once before
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI(Scripted(), latency=0.05, llama_cpp_slots=1) as server:
        result = _run(server, 1, tmp_path, mix={"comparison": 1}, cache=False)
        assert [r.path for r in server.requests].count("/props") == 1
        assert server.max_in_flight == 1
    assert len(result.items) == 1
    with FakeOpenAI(_HoldsClaimChecks()) as server:
        _run(server, 1, tmp_path, mix={"comparison": 1}, cache=False)
        assert server.max_in_flight == 2  # no slots to follow: both claim checks at once


class _HoldsClaimChecks:
    """Scripted, holding the first claim check until a second one arrives (10 s at most): two
    checks sent at once are seen in flight together however loaded the machine, and checks
    sent one after another are not (the first is answered alone at the deadline)."""

    def __init__(self) -> None:
        self.scripted = Scripted()
        self.checks = 0

    async def __call__(self, req: RecordedRequest) -> Reply:
        if "Is the claim supported" in user_text(req):
            self.checks += 1
            deadline = time.monotonic() + 10
            while self.checks < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        return self.scripted(req)


def test_the_dry_run_estimate_counts_the_requests_of_a_run_without_drops(
    tmp_path: Path,
) -> None:
    found = estimate_generation(
        CORPUS, 6, model="test-model", seed=5, drop_rates=dict.fromkeys(TYPES, 0.0)
    )
    assert (found.expected_requests, found.expected_prompt_tokens) == (
        found.requests,
        found.prompt_tokens,
    )
    with FakeOpenAI(Scripted()) as server:
        result = _run(server, 6, tmp_path, seed=5)
    assert not result.dropped
    # per item: write + answerable + each claim against each context: one claim (three for
    # the summary, none unanswerable), two contexts for multi-hop and comparison
    assert found.requests == result.usage.requests == 6 * 2 + 1 + 2 + 2 + 3 + 1
    assert found.prompt_tokens > 0


def test_the_expected_attempts_of_a_type_follow_its_drop_rate() -> None:
    # one slot, half its attempts dropped, 1 attempt (2 while the type is missing):
    # 1 + 0.5 attempts, kept with probability 1 - 0.5**2
    assert expected_attempts(0.5, 1, 1) == (0.75, 0.75)
    # a second slot: the type still missing (0.25) gets 2 attempts, else 1
    kept, dropped = expected_attempts(0.5, 2, 1)
    assert kept == dropped == 0.75 + 0.25 * 0.75 + 0.75 * 0.5
    assert expected_attempts(0.0, 3, 2) == (3.0, 0.0)
    # the estimate: a kept single_hop attempt sends 3 requests (write, quote, one claim), a
    # dropped one 2 and the claim 3/4 of the time: 0.75 * 3 + 0.75 * 2.75 = 4.31
    found = estimate_generation(
        CORPUS,
        1,
        model="test-model",
        mix={"single_hop": 1},
        max_attempts=1,
        drop_rates={"single_hop": 0.5},
    )
    assert (found.requests, found.expected_requests) == (3, 4)
    assert found.drop_rates == {"single_hop": 0.5}
    with pytest.raises(GenerateError, match="drop rate"):
        estimate_generation(CORPUS, 1, model="m", mix={"summary": 1}, drop_rates={"summary": 1.0})


def test_the_cli_dry_run_prints_the_estimate_and_sends_nothing(tmp_path: Path) -> None:
    from rageval.cli import main

    with FakeOpenAI(Scripted()) as server:
        code = main(
            [
                "generate",
                str(CORPUS),
                "-n",
                "6",
                "--dry-run",
                "--llm",
                "test-model",
                "--base-url",
                server.base_url,
                "-o",
                str(tmp_path / "run"),
            ]
        )
        assert code == 0 and server.chat_requests == []
    assert not (tmp_path / "run").exists()


def test_the_cli_exits_7_with_a_message_when_no_item_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rageval.cli import main

    monkeypatch.setenv("RAGEVAL_EMBEDDINGS", "local")
    monkeypatch.setenv("RAGEVAL_CACHE_DIR", str(tmp_path / "cache"))
    args = ["generate", str(CORPUS), "-n", "1", "--mix", "single_hop=1", "--max-attempts", "1"]
    args += ["--llm", "test-model", "--no-probe", "-q", "-o", str(tmp_path / "run")]
    with FakeOpenAI(Scripted(supported=False)) as server:
        code = main([*args, "--base-url", server.base_url])
    assert code == 7
    said = capsys.readouterr()
    assert "0 of 1 items kept, 2 attempt(s) dropped" in said.out
    assert "exit 7: no item kept: every attempt was dropped by a check" in said.err
    assert (tmp_path / "run" / "testset.jsonl").read_text() == ""


def test_the_set_evaluates_with_a_response_column_and_no_column_map(tmp_path: Path) -> None:
    from rageval import evaluate

    with FakeOpenAI(Scripted()) as server:
        result = _run(server, 6, tmp_path, seed=1)
    rows = [{**item, "response": item["reference"]} for item in result.items]
    path = tmp_path / "with_responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeOpenAI(handle) as server:
        scored = evaluate(
            str(path),
            metrics=["token_f1", "answer_correctness"],
            llm=make_judge(server),
            progress=False,
            probe=False,
        )
    frame = scored.to_pandas()
    assert len(frame) == 6
    assert list(frame["token_f1"]) == [1.0] * 6  # the response is the reference
    assert scored.statuses("answer_correctness") == ["ok"] * 6


def test_max_cost_stops_the_run_and_a_resume_finishes_it(tmp_path: Path) -> None:
    from rageval.errors import BudgetReached
    from rageval.judge import PriceTable

    cache = tmp_path / "cache"
    prices = PriceTable({"test-model": (100.0, 100.0)})  # USD per million tokens

    def judge(server: FakeOpenAI) -> Any:
        return make_judge(server, cache=cache, prices=prices)

    with FakeOpenAI(Scripted()) as server:
        with pytest.raises(BudgetReached):
            generate(
                CORPUS,
                6,
                llm=judge(server),
                embeddings=embeddings_for(server),
                run_dir=tmp_path / "run",
                max_cost=0.2,
                progress=False,
            )
        stopped = [
            json.loads(x) for x in (tmp_path / "run" / "attempts.jsonl").read_text().splitlines()
        ]
        assert 0 < len(stopped) < 6
        done = generate(
            CORPUS,
            6,
            llm=judge(server),
            embeddings=embeddings_for(server),
            run_dir=tmp_path / "run",
            resume=True,
            progress=False,
        )
    assert len(done.items) == 6
    assert [i["id"] for i in done.items[: len(stopped)]] == [r["item"]["id"] for r in stopped]


def test_rageval_generate_is_the_function_even_after_its_package_is_imported() -> None:
    import rageval
    import rageval.generation

    assert callable(rageval.generation.generate)
    assert rageval.generate is rageval.generation.generate
    assert rageval.agenerate is rageval.generation.agenerate
