"""What the test modules share; a test module never imports another test module.

- judges and embeddings on a ``FakeOpenAI``, through the real openai SDK (``judge_for``,
  ``make_judge``, ``embeddings_for``); ``handle`` is the synthetic judge
  (benchmarks/synthetic_judge.py), which answers every prompt of rageval's metrics plausibly;
- what a request asked (``user_text``, ``attempt``, ``sample_id_of``, ``tags_of``) and request
  routing for scripted replies (``route``, ``keyed``, ``chat_count``, ``prompts_with``);
- rows: ``rows`` (every prompt about a row names its id ``sNNN``, in the question and the first
  context), ``tagged_rows`` (every row carries a tag ``TNNN`` in each of its texts, and the
  judge's verdicts on them differ), ``labelled_rows`` (a human label column and a grade the
  ``grader`` judge reads back); ``write_jsonl``;
- the CLI in a child process under the network guard (``run_cli_in_child``,
  ``cli_child_command``); the test server's command line in a child (``server_in_child``);
- a hand-written run directory for the report's tests (``write_run``, ``synthetic_run``,
  ``embedded_payload``);
- what a piece of code imports in a fresh interpreter (``modules_after``,
  ``assert_ray_not_imported``);
- the code blocks of the project's Markdown pages, run as written (``markdown_blocks``,
  ``run_block``).

Topic helpers live next to it: browser_helpers.py (the report's Chromium), calibration_helpers.py
(stand-ins for the public labelled datasets), reliability/reliability_helpers.py (the
reliability suite's accounting and invariants).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from _harness import EIGHT as EIGHT  # the eight judge metrics the bars are measured on
from judge_server import FAULTS as FAULTS  # the transient faults a fault rate draws from
from rageval.cli import main
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, RecordedRequest, Reply
from synthetic_judge import handle as handle  # the tests' judge, re-exported

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


# ---------------------------------------------------------------------- judges on a FakeOpenAI
def judge_for(server: FakeOpenAI, **kw: Any) -> Judge:
    """A judge on `server` through an ``AsyncOpenAI`` client the test made (the user's way)."""
    import openai

    from rageval.judge import llm_factory

    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    return llm_factory("test-model", client=client, **kw)


def make_judge(server: FakeOpenAI, model: str = "test-model", **kw: Any) -> Judge:
    """A judge on `server` with a client of rageval's own; without the request cache unless
    `cache=` says otherwise, so the requests a test counts all reach the server."""
    from rageval.judge import Judge

    kw.setdefault("cache", False)
    return Judge(model, base_url=server.base_url, api_key=FAKE_API_KEY, **kw)


def embeddings_for(server: FakeOpenAI) -> Embeddings:
    import openai

    from rageval.embeddings import embedding_factory

    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    return embedding_factory("openai", model="e", client=client)


# ---------------------------------------------------------------------- what a request asked
_SAMPLE_ID = re.compile(r"sample (s\d{3})", re.IGNORECASE)
_TAG = re.compile(r"\bT(\d{3})\b")


def user_text(req: RecordedRequest) -> str:
    """The first user message: the prompt of the logical ask (re-asks are appended after it)."""
    return next((str(m.get("content")) for m in req.messages if m.get("role") == "user"), "")


def attempt(req: RecordedRequest) -> int:
    """1 for a first ask, 2 for the first re-ask, ..."""
    return sum(1 for m in req.messages if m.get("role") == "user")


def sample_id_of(req: RecordedRequest) -> str | None:
    """The id of the `rows` sample a prompt is about."""
    found = _SAMPLE_ID.search(user_text(req))
    return found.group(1) if found else None


def tags_of(req: RecordedRequest) -> set[str]:
    """The tags of the `tagged_rows` a prompt names."""
    return {f"T{d}" for d in _TAG.findall(user_text(req))}


Answer: TypeAlias = Reply | Callable[[RecordedRequest], Reply]


def _has_all(text: str, marks: Sequence[str]) -> bool:
    """Whether every mark is in `text`: a word is a tag (``question``: ``<question>``), a
    phrase with a space is itself (the words of one template's instructions)."""
    return all((m if " " in m else f"<{m}>") in text for m in marks)


def route(*rules: tuple[Sequence[str], Answer]) -> Callable[[RecordedRequest], Reply | Fault]:
    """A handler answering with the first rule whose marks (tags, or phrases: `_has_all`) all
    appear in the prompt; a request no rule expects gets a 400, which the judge treats as
    fatal, so the test fails loudly.

    Metric templates run concurrently, so a handler must not rely on arrival order: the reply
    is picked by what the request's first user message holds."""

    def handler(req: RecordedRequest) -> Reply | Fault:
        text = user_text(req)
        for marks, answer in rules:
            if _has_all(text, marks):
                return answer(req) if callable(answer) else answer
        return Fault.status(400, f"unexpected request: {text[:300]}")

    return handler


def keyed(prefix: str, field: str, *flags: bool, first: int = 1, **extra: object) -> Reply:
    """A verdict reply with one key per item, ``{prefix}1`` …: ``{"reason", field}``."""
    body: dict[str, object] = dict(extra)
    for i, flag in enumerate(flags, start=first):
        body[f"{prefix}{i}"] = {"reason": f"because {i}", field: flag}
    return Reply.json(body)


def chat_count(server: FakeOpenAI) -> int:
    return len(server.chat_requests)


def prompts_with(server: FakeOpenAI, *marks: str) -> list[str]:
    """The user messages of the chat requests that hold every mark (tags or phrases)."""
    return [t for t in (user_text(r) for r in server.chat_requests) if _has_all(t, marks)]


# ---------------------------------------------------------------------- rows
def rows(n: int) -> list[dict[str, Any]]:
    """`n` distinct samples; a response sentence the contexts support and one they do not."""
    return [
        {
            "id": f"s{i:03d}",
            "user_input": f"What does sample s{i:03d} say about the sky?",
            "response": f"Sample s{i:03d} says the sky is blue. The moon is made of cheese {i}.",
            "retrieved_contexts": [
                f"Sample s{i:03d} says the sky is blue on clear days.",
                "Water boils at one hundred degrees.",
            ],
            "reference": f"Sample s{i:03d} says the sky is blue.",
        }
        for i in range(n)
    ]


_TOPICS = ("harbour", "bridge", "library", "railway", "museum", "tower", "canal")


def tag(i: int) -> str:
    return f"T{i:03d}"


def tagged_rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    """`n` distinct samples whose judge verdicts differ (some claims are unsupported); row i
    names its tag ``T{i:03d}`` in every text, so each prompt can be traced back to its row."""
    out = []
    for i in range(start, start + n):
        t, topic, year = tag(i), _TOPICS[i % len(_TOPICS)], 1900 + i
        out.append(
            {
                "id": f"s-{t}",
                "user_input": f"When did the {topic} of {t} open?",
                "response": " ".join(
                    [
                        f"The {topic} of {t} opened in {year}.",
                        f"The {topic} of {t} has {i % 5 + 2} entrances.",
                        f"Its architect was named {topic.title()}son.",
                    ][: 1 + i % 3]
                ),
                "retrieved_contexts": [
                    f"Records of {t}: the {topic} opened in {year}.",
                    f"The {topic} of {t} has {i % 5 + 2} entrances.",
                    f"Weather in {t} is usually mild." if i % 3 else "",
                ][: 2 + i % 2],
                "reference": f"The {topic} of {t} opened in {year}.",
            }
        )
    return out


def write_jsonl(path: Path, data: Iterable[Mapping[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")


# ---------------------------------------------------------------------- human labels
_GRADE = re.compile(r"GRADE([024])")


def grader(req: RecordedRequest) -> Reply:
    """answer_accuracy's two templates both rate the grade written in the response; a
    response marked BROKEN gets a rating off the scale every time (so: not measured)."""
    text = user_text(req)
    if "BROKEN" in text:
        return Reply.json({"rating": 3})
    found = _GRADE.search(text)
    assert found is not None, text
    return Reply.json({"rating": int(found.group(1))})


def labelled_rows(
    grades: Sequence[int | str], labels: Sequence[Any], column: str = "human"
) -> list[dict[str, Any]]:
    """Row i's response carries GRADE<grades[i]> (or the word grades[i]) for `grader`, and its
    `column` the human label labels[i]."""
    return [
        {
            "id": f"r{i}",
            "user_input": f"question {i}?",
            "response": f"answer {i} GRADE{g}" if isinstance(g, int) else f"answer {i} {g}",
            "reference": f"reference {i}",
            column: label,
        }
        for i, (g, label) in enumerate(zip(grades, labels, strict=True))
    ]


# the binary case worked by hand: rows 0-5 people say correct, 6-9 wrong; the judge rates 4
# (score 1) on rows 0-3 and 6, 0 (score 0) on the others. Table (rows human 0/1, columns
# judge 0/1) = [[3, 1], [2, 4]]: observed agreement .7, chance .4·.5 + .6·.5 = .5 → κ .4;
# balanced accuracy (3/4 + 4/6)/2; AUROC: 24 (positive, negative) pairs, 12 won, 2 + 3 tied
# → 17/24.
BINARY_GRADES: list[int | str] = [4, 4, 4, 4, 0, 0, 4, 0, 0, 0]
BINARY_LABELS = ["yes"] * 6 + ["no"] * 4

# Judge values (grade / 4): labelled rows (y, f) = (1, 1), (0, .5), (1, .5), (0, 0);
# unlabelled f = 1, 1, .5, 0. s²_L(y) = 1/3, s²_L(f) = 1/6, s_L(y, f) = 1/6,
# s²_U(f) = (3·(1/4)² ... ) = 0.229166..., n/N = 1: λ = (1/6) / (1/6 + 0.2291667) = 0.42105.
# θ̂ = λ·mean_U(f) + mean_L(y − λ·f) = λ·0.625 + (0.5 − λ·0.5) = 0.5 + 0.125·λ.
PPI_GRADES = [4, 2, 2, 0, 4, 4, 2, 0]
PPI_LABELS: list[Any] = [1, 0, "yes", "no", None, "", None, None]


# ---------------------------------------------------------------------- the CLI in a child
# The CLI in a child process, under the same network guard as this test session.
_GUARDED_CLI = (
    "import sys\n"
    "from rageval.testing import install_network_guard\n"
    "install_network_guard()\n"
    "from rageval.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


#: how long a test waits for a child process to reach a state it must reach
CHILD_DEADLINE_S = 300


class Gate:
    """A handler answering as the synthetic judge while open; closed, it holds every request
    that arrives, unanswered, until it opens again. It counts the requests it answered and
    holds (the server leaves a request in flight until its handler returns: once
    ``in_flight == held``, ``answered`` counts every answer given and can only grow again when
    the gate opens).

    ``close_after=K`` closes it as it gives its K-th answer, on the server's own thread: the run
    is held at a point fixed in advance. A test that closes it itself, once it has seen some
    rows finished, reacts after the run went on: on a loaded machine the run may have sent its
    last requests by then, or ended."""

    def __init__(self, close_after: int | None = None) -> None:
        self.closed = False
        self.held = 0
        self.answered = 0
        self.close_after = close_after

    async def __call__(self, req: RecordedRequest) -> Reply:
        if self.closed:
            self.held += 1
            while self.closed:
                await asyncio.sleep(0.01)
        else:
            self.answered += 1
            if self.answered == self.close_after:  # once: reopened, it stays open
                self.closed = True
        return handle(req)


def wait_for_child(condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    """Poll `condition` until it holds; fails if the child `proc` ends first, or after
    :data:`CHILD_DEADLINE_S` (a bound for a stuck child, not a timing assumption)."""
    deadline = time.monotonic() + CHILD_DEADLINE_S
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


def lines_in(path: Path) -> int:
    """Lines written to `path` so far (0 before it exists)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def requests_of_a_run(data: list[dict[str, Any]], metrics: Sequence[str], cache: Path) -> int:
    """The chat requests an uninterrupted run of `metrics` on `data` sends (with an empty
    request cache at `cache`)."""
    from rageval.runner import evaluate

    with FakeOpenAI(handle) as srv:
        evaluate(data, list(metrics), llm=make_judge(srv, cache=cache), progress=False)
        return len(srv.chat_requests)


def resume_env(cache: Path) -> dict[str, str]:
    """The environment of a CLI child whose judge has the test key and the request cache at
    `cache`."""
    return {**os.environ, "OPENAI_API_KEY": FAKE_API_KEY, "RAGEVAL_CACHE_DIR": str(cache)}


def run_cli(*args: str | Path) -> int:
    """``rageval *args`` in this process; its exit code."""
    return main([str(a) for a in args])


def cli_child_command(*args: str | Path) -> list[str]:
    """The command line that runs ``rageval *args`` in a child under the network guard."""
    return [sys.executable, "-c", _GUARDED_CLI, *map(str, args)]


def run_cli_in_child(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``rageval *args`` in a child under the network guard; its output decoded."""
    done = subprocess.run(
        cli_child_command(*args),
        env=None if env is None else dict(env),
        input=stdin,
        capture_output=True,
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


@contextmanager
def server_in_child(*args: str, path: Sequence[Path] = ()) -> Iterator[str]:
    """``python -m rageval.testing.serve *args`` in a child process (`path` on its
    PYTHONPATH, for a handler module): yields the base URL it prints, then stops it and checks
    that it exited cleanly, with no warning or traceback."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*path, SRC]))}
    process = subprocess.Popen(
        [sys.executable, "-m", "rageval.testing.serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1"), base_url
        yield base_url
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr
    assert "Warning" not in stderr and "Traceback" not in stderr, stderr


# ---------------------------------------------------------------------- a written run directory
ATTACK_QUESTION = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
ATTACK_REASON = "the context says </script><script>window.__pwned=3</script> & more \u2028 end"
RUN_METRICS = ("faithfulness", "answer_relevancy", "answer_accuracy")
NOT_MEASURED_CAUSE = "judge call failed: 3 replies did not cover every statement id"


def write_run(
    run_dir: Path,
    manifest: dict[str, Any],
    results: list[dict[str, Any]],
    summary: dict[str, Any] | None,
) -> Path:
    """A run directory written by hand (what a run of an older rageval, or a killed one, left)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    write_jsonl(run_dir / "results.jsonl", results)
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run_dir


def usage(requests: int = 1, prompt: int = 100, completion: int = 20) -> dict[str, Any]:
    return {
        "requests": requests,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cache_hits": 0,
        "cost_usd": None,
    }


def ok_cell(value: float, reason: str, evidence: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": "ok",
        "value": value,
        "cause": None,
        "reason": reason,
        "evidence": evidence,
        "usage": usage(),
    }


def not_measured(cause: str) -> dict[str, Any]:
    return {
        "status": "not_measured",
        "value": None,
        "cause": cause,
        "reason": None,
        "evidence": {},
        "usage": usage(requests=3),
    }


def run_manifest(n_rows: int) -> dict[str, Any]:
    return {
        "rageval_version": "0.1.0",
        "created_at": "2025-03-04T10:20:30.123456+00:00",
        "metrics": [
            {"name": "faithfulness", "params": {}},
            {"name": "answer_relevancy", "params": {"strictness": 3}},
            {"name": "answer_accuracy", "params": {"max_retries": 5}},
        ],
        "judge": {
            "model": "gpt-4o-mini",
            "base_url": "http://127.0.0.1:9/v1",
            "temperature": 0.0,
            "max_tokens": 1024,
        },
        "embeddings": {"name": "local:all-MiniLM-L6-v2"},
        "data": {"source": "fixtures/qa.jsonl", "fingerprint": "sha256:0123abcd", "n_rows": n_rows},
    }


def synthetic_run(n: int) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """`n` samples (n >= 4) with deterministic values. Row 1 carries the script injection in its
    question and faithfulness reason; faithfulness is not measured on rows 2 and 3."""
    results: list[dict[str, Any]] = []
    for row in range(n):
        question = (
            ATTACK_QUESTION if row == 1 else f"What is fact number {row} about topic {row % 7}?"
        )
        faith_value = round(((row * 37) % 101) / 100, 2)
        faith: dict[str, Any]
        if row in (2, 3):
            faith = not_measured(NOT_MEASURED_CAUSE)
        else:
            faith = ok_cell(
                faith_value,
                ATTACK_REASON
                if row == 1
                else f"{faith_value:.2f} of the statements are supported.",
                {
                    "statements": [
                        {"id": 1, "text": f"Fact {row} holds.", "verdict": True},
                        {
                            "id": 2,
                            "text": f"Fact {row} also implies more.",
                            "verdict": False,
                            "reason": "not in the contexts",
                        },
                    ]
                },
            )
        # Cosines may be negative: -0.5 < -0.1 numerically but not as text.
        relevancy = ok_cell(
            round(((row * 29) % 130 - 30) / 100, 2),
            "mean cosine of generated questions",
            {
                "questions": [
                    {"text": f"Which fact is {row}?", "cosine": 0.8123},
                    {"text": "What holds?", "cosine": 0.61},
                ],
                "noncommittal": False,
            },
        )
        accuracy = ok_cell(
            [0.0, 0.5, 0.75, 1.0][row % 4],
            "two templates averaged",
            {"ratings": {"template_1": 4, "template_2": None if row % 2 else 2}},
        )
        results.append(
            {
                "row": row,
                "id": f"q-{row:03d}",
                "inputs": {
                    "user_input": question,
                    "response": f"Answer {row}: fact {row} holds, and it implies more.",
                    "retrieved_contexts": [f"Context A for {row}.", f"Context B for {row}."],
                    "reference": f"Fact {row} holds.",
                    "reference_contexts": None,
                },
                "metrics": {
                    "faithfulness": faith,
                    "answer_relevancy": relevancy,
                    "answer_accuracy": accuracy,
                },
                "shared_usage": usage(requests=1, prompt=200, completion=50),
            }
        )
    summary: dict[str, Any] = {
        "metrics": {},
        "duration_s": 12.5,
        "usage": {**usage(requests=10 * n), "retries": 2},
        "shared_usage": {"shared:statements": usage(requests=n, prompt=200 * n, completion=50 * n)},
    }
    for name in RUN_METRICS:
        values = [
            r["metrics"][name]["value"] for r in results if r["metrics"][name]["status"] == "ok"
        ]
        mean = sum(values) / len(values)
        summary["metrics"][name] = {
            "mean": mean,
            "ci_low": mean - 0.05,
            "ci_high": mean + 0.05,
            "ci_method": "bootstrap 95% percentile, 2000 resamples, seed 0",
            "n_measured": len(values),
            "n_not_measured": n - len(values),
            "n_skipped": 0,
            "n_cells": n,
            "usage": usage(requests=3 * n),
            "causes": {f"not measured: {NOT_MEASURED_CAUSE}": n - len(values)}
            if len(values) < n
            else {},
        }
    return run_manifest(n), results, summary


def embedded_payload(html: str) -> Any:
    """The run data a report embeds, parsed."""
    match = re.search(
        r'<script type="application/json" id="run-data">(.*?)</script>', html, re.DOTALL
    )
    assert match is not None
    return json.loads(match.group(1))


# ---------------------------------------------------------------------- import cost
def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (this checkout's src)."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}, check=True,
        timeout=120,
    )  # fmt: skip
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def assert_ray_not_imported() -> None:
    """Neither ``import rageval``, nor the engines package, nor the CLI's help imports Ray."""
    cli_help = (
        "import contextlib, io\n"
        "from rageval.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['evaluate', '--help'])"
    )
    for code in ("import rageval", "import rageval.runner.engines", cli_help):
        loaded = modules_after(code)
        assert "ray" not in loaded, f"{code!r} imports ray"


# ---------------------------------------------------------------------- docs run as written
#: a fenced block, with or without a language (a block without one is still found: the docs
#: tests refuse it rather than skip it)
_FENCE = re.compile(r"^```([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
#: the mark on the line before a fence: `<!-- run -->`, `<!-- run: exit N, REASON -->` (a
#: command meant to fail, such as a gate) or `<!-- not run: REASON -->`
_MARK = re.compile(r"<!-- (run(?:: exit \d+, .{10,}?)?|not run: .{10,}?) -->[ \t]*\n\Z")


class Block(NamedTuple):
    """A fenced block of a Markdown page: the ``## `` section it is in, its language ("" for
    none), its code, the page's line number of its first line of code, and the mark on the
    line before its fence ("run", "not run: REASON" or None)."""

    section: str
    language: str
    code: str
    line: int
    mark: str | None = None


def markdown_blocks(page: Path) -> list[Block]:
    """Every fenced block of the Markdown `page`, in order."""
    text = page.read_text(encoding="utf-8")
    headings = [(m.start(), m.group(1)) for m in re.finditer(r"^## (.+)$", text, re.M)]
    found = []
    for m in _FENCE.finditer(text):
        section = next((h for at, h in reversed(headings) if at < m.start()), "")
        before = text[text.rfind("\n", 0, max(m.start() - 1, 0)) + 1 : m.start()]
        mark = _MARK.search(before)
        line = text.count("\n", 0, m.start(2)) + 1
        found.append(Block(section, m.group(1), m.group(2), line, mark and mark.group(1)))
    return found


def run_shell(code: str, *, where: str, exit: int = 0) -> str:
    """A shell block as a reader runs it: bash, in the current directory and environment,
    with this interpreter's `rageval` first on PATH; it must exit with `exit`. Its output,
    stdout then stderr."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == exit, f"{where} exited {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


#: the user's RAG system the pytest plugin's examples import (their one line not rageval's)
MY_RAG = """
DOCS = {
    "When was the first Super Bowl?": "Super Bowl I was played on January 15, 1967.",
    "Where was the first Super Bowl played?": "Super Bowl I was played in Los Angeles.",
}
QUESTIONS = list(DOCS)


def retrieve(question):
    return [DOCS[question]]


def answer(question):
    return DOCS[question]
"""


def run_as_pytest_file(code: str, project: Path, *, env: Mapping[str, str] = {}) -> None:
    """`code` as the test file of a new project beside its RAG system (``my_rag``), run by
    pytest in a child process: this environment without pytest's and rageval's variables,
    plus `env`. One test must pass."""
    project.mkdir()
    (project / "my_rag.py").write_text(MY_RAG, encoding="utf-8")
    (project / "test_rag.py").write_text(code, encoding="utf-8")
    child = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "RAGEVAL_")) and k != "COV_CORE_SOURCE"
    }
    child.update(env, RAGEVAL_CACHE_DIR=str(project / "cache"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
        cwd=project,
        env=child,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def run_block(code: str, *, page: Path, line: int, scope: dict[str, Any]) -> None:
    """A Python block as a notebook cell runs it, in `scope`: top-level ``await`` allowed (in
    a fresh event loop), and a traceback names the page's own line numbers."""
    import ast
    import asyncio
    import inspect

    compiled = compile(
        "\n" * (line - 1) + code, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    if compiled.co_flags & inspect.CO_COROUTINE:  # the block awaits
        asyncio.run(eval(compiled, scope))
    else:
        exec(compiled, scope)
