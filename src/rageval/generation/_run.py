"""A generation run: the plan's attempts written and checked one after another, each recorded
in the run directory as it finishes, so that a run stopped in any way (Ctrl-C, ``kill -9``, the
budget) resumes where it stopped.

The run directory holds ``manifest.json`` (what was asked, the corpus's fingerprint, the judge,
the run's configuration), ``attempts.jsonl`` (one line per finished attempt, kept or dropped,
with its checks; appended and flushed as each finishes), and, when the run ends,
``testset.jsonl`` (the kept items in slot order) and ``report.md``. Resuming reads the
attempts back, skips the slots already filled and the attempts already made, and re-plans the
rest from the seed exactly as before; the request cache answers the requests of the attempt
that was cut short.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rageval._client._run import run_scope
from rageval._progress import ProgressLine, display
from rageval._rundir_lock import hold_run_dir
from rageval._version import __version__
from rageval.embeddings import Embeddings, LocalEmbeddings
from rageval.errors import JudgeCallFailed, RunConfigError
from rageval.generation._asks import (
    Check,
    Written,
    answerable,
    leaks,
    question_text,
    supported,
    write_item,
)
from rageval.generation._corpus import Chunk
from rageval.generation._plan import (
    TWO_CHUNKS,
    Attempt,
    ItemType,
    Style,
    link_pairs,
    plan_attempt,
)
from rageval.generation._report import failed_check, report_markdown
from rageval.judge import Judge, Usage
from rageval.metrics.claim_checks import SUPPORTED_AT
from rageval.runner._cost import limit_spending
from rageval.runner._probe import (
    follow_server_slots,
    known_server_slots,
    probe_endpoints,
    run_gates,
)
from rageval.runner._runconfig import RunConfig
from rageval.runner._schedule import usage_since

__all__ = ["GenerateError", "GenerateRequest", "GenerateResult", "run_generation"]

MANIFEST, ATTEMPTS, TESTSET, REPORT = (
    "manifest.json",
    "attempts.jsonl",
    "testset.jsonl",
    "report.md",
)
#: chunks shown to the unanswerable check: the ones nearest the question
NEAREST = 3
#: the least faithfulness of a kept answer: the bar at which a claim check counts a claim as
#: supported. (0.8 dropped a correct answer of Qwen2.5-1.5B, whose checker gave its one claim
#: P(yes) 0.63, on the example corpus: docs/generate.md)
MIN_SUPPORT = SUPPORTED_AT
#: a new question this close (embedding cosine) to one kept, or to an existing one, is dropped
MAX_DUPLICATE_COSINE = 0.9
#: how many times `max_attempts` a slot gets while the set holds no item of its type yet (so
#: that every requested type is present: comparison and unanswerable items are dropped far
#: more often than the others by a small judge, docs/generate.md)
MISSING_TYPE_FACTOR = 2


class GenerateError(RunConfigError):
    """A generation run that cannot start: bad settings, or a run directory that holds another
    run."""


@dataclass(frozen=True)
class GenerateRequest:
    """What a run generates: the settings the plan and the checks follow (the manifest's
    ``request``; a resumed run must ask the same)."""

    n: int
    types: tuple[ItemType, ...]
    styles: tuple[Style, ...]
    seed: int
    language: str | None
    min_support: float
    max_duplicate_cosine: float
    max_attempts: int
    existing: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The request as the manifest records it (the existing questions by count)."""
        out = {k: v for k, v in self.__dict__.items() if k != "existing"}
        out["types"], out["styles"] = list(self.types), list(self.styles)
        out["existing_questions"] = len(self.existing)
        return out


@dataclass
class GenerateResult:
    """A finished (or budget-stopped) run: the kept items in slot order, every attempt made
    (this session's and those read back), and the judge's usage in this session."""

    requested: int
    items: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    usage: Usage
    run_dir: Path | None = None
    #: the slots that used up their attempts without an item
    unfilled: list[int] = field(default_factory=list)
    #: what the plan left out and why (the types a one-chunk corpus cannot give)
    notes: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> list[dict[str, Any]]:
        """The attempts dropped, each with the check that failed."""
        return [a for a in self.attempts if not a["kept"]]

    def __str__(self) -> str:
        """A short summary: kept of requested, the dropped attempts by the check that dropped
        them, the notes and the run directory (the items and attempts are the fields)."""
        checks = Counter(failed_check(a)[0] for a in self.dropped)
        by_check = ", ".join(f"{name} {count}" for name, count in sorted(checks.items()))
        lines = [
            f"{len(self.items)} of {self.requested} items kept, {len(self.dropped)} attempt(s) "
            f"dropped{f' ({by_check})' if by_check else ''}; {len(self.unfilled)} slot(s) left "
            "without an item",
            *(f"note: {n}" for n in self.notes),
            f"run directory: {self.run_dir}" if self.run_dir else "no run directory",
        ]
        return "\n".join(lines)


def fingerprint(chunks: Sequence[Chunk]) -> str:
    """A digest of the corpus's ids and texts: a resumed run must read the same corpus."""
    digest = hashlib.sha256()
    for c in chunks:
        digest.update(f"{c.id}\0{c.text}\0".encode())
    return digest.hexdigest()[:16]


class _Log:
    """``attempts.jsonl``: read back on resume (a line cut short by a kill is dropped), then
    appended to, each line flushed to disk as it is written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        good = 0
        if path.exists():
            data = path.read_bytes()
            for line in data.splitlines(keepends=True):
                try:
                    record = json.loads(line) if line.endswith(b"\n") else None
                except json.JSONDecodeError:
                    record = None
                if not isinstance(record, dict):
                    break
                self.records.append(record)
                good += len(line)
            if good < len(data):
                with path.open("r+b") as f:
                    f.truncate(good)

    def append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records.append(record)


def _open_run(run_dir: Path, config: RunConfig, manifest: dict[str, Any]) -> _Log:
    path = run_dir / MANIFEST
    if config.resume:
        if not path.exists():
            raise GenerateError(f"{run_dir} holds no generation run to resume ({MANIFEST})")
        stored = json.loads(path.read_text(encoding="utf-8"))
        for key in ("request", "corpus"):
            if stored.get(key) != manifest[key]:
                raise GenerateError(
                    f"{run_dir} was started with another {key}: {stored.get(key)}; resuming "
                    "needs the same corpus and settings"
                )
    else:
        if path.exists() and not config.overwrite:
            raise GenerateError(f"{run_dir} holds a run already: resume it or overwrite it")
        for name in (MANIFEST, ATTEMPTS, TESTSET, REPORT):
            (run_dir / name).unlink(missing_ok=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    return _Log(run_dir / ATTEMPTS)


class _Generation:
    """One session of a run: the corpus embedded, the plan, the checks' state."""

    def __init__(
        self,
        chunks: Sequence[Chunk],
        request: GenerateRequest,
        judge: Judge,
        embeddings: Embeddings,
        slot_types: Sequence[ItemType],
    ) -> None:
        self.chunks, self.request, self.judge, self.embeddings = chunks, request, judge, embeddings
        self.slot_types = slot_types
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        self.pairs: list[tuple[int, int]] = []
        self.seen: list[tuple[str, np.ndarray]] = []  # (whose, question vector)

    async def prepare(self, kept: Sequence[dict[str, Any]]) -> None:
        self.vectors = await self.embeddings.aembed_texts([c.text for c in self.chunks])
        if any(t in TWO_CHUNKS for t in self.slot_types):
            self.pairs = link_pairs(self.chunks, self.vectors)
        old = list(self.request.existing)
        known = [(f"item {r['item']['id']}", r["item"]["user_input"]) for r in kept]
        texts = old + [q for _, q in known]
        found: list[Any] = list(await self.embeddings.aembed_texts(texts)) if texts else []
        names = [f"existing question {q!r}" for q in old] + [w for w, _ in known]
        self.seen = list(zip(names, found, strict=True))

    async def saved(self) -> None:
        """Commit the request cache's queued replies: a kill right after a reply came (before
        the cache's writer commits, a tenth of a second later) must not make a resumed run ask
        again what was answered."""
        if self.judge.cache is not None:
            await asyncio.to_thread(self.judge.cache.flush)

    def plan(self, slot: int, attempt: int) -> Attempt:
        return plan_attempt(
            slot,
            attempt,
            self.slot_types[slot],
            corpus_size=len(self.chunks),
            pairs=self.pairs,
            styles=self.request.styles,
            seed=self.request.seed,
        )

    def _duplicate(self, vector: np.ndarray) -> Check:
        limit = self.request.max_duplicate_cosine
        best, whose = -1.0, ""
        for name, other in self.seen:
            sim = float(
                np.dot(vector, other) / max(np.linalg.norm(vector) * np.linalg.norm(other), 1e-12)
            )
            if sim > best:
                best, whose = sim, name
        if best >= limit:
            return Check(
                "not_duplicate", False, f"cosine {best:.3f} with {whose} (>= {limit:g})", best
            )
        reason = (
            "no question kept before" if not self.seen else f"largest cosine {best:.3f} ({whose})"
        )
        return Check("not_duplicate", True, reason, best if self.seen else None)

    def _nearest(self, vector: np.ndarray, own: int) -> list[int]:
        unit = self.vectors / np.maximum(np.linalg.norm(self.vectors, axis=1, keepdims=True), 1e-12)
        order = [int(i) for i in np.argsort(-(unit @ vector))]
        return [own, *[i for i in order if i != own][: NEAREST - 1]]

    async def checks(self, attempt: Attempt, written: Written) -> tuple[list[Check], Any]:
        """The checks of a written item, cheapest first, up to the first that fails; and the
        question's vector."""
        out: list[Check] = []
        if attempt.type not in ("summary", "unanswerable"):
            out.append(leaks(written.question, written.fact or written.answer))
            if not out[-1].passed:
                return out, None
        vector = await self.embeddings.aembed_text(written.question)
        out.append(self._duplicate(vector))
        if not out[-1].passed:
            return out, vector
        texts = [self.chunks[i].text for i in attempt.chunks]
        asked = question_text(written)
        try:
            if attempt.type == "unanswerable":
                near = [self.chunks[i].text for i in self._nearest(vector, attempt.chunks[0])]
                out.append(await answerable(self.judge, asked, near, expect=False))
                await self.saved()
                return out, vector
            out.append(await answerable(self.judge, asked, texts, expect=True))
            await self.saved()
            if out[-1].passed:
                out.append(await supported(self.judge, written, texts, self.request.min_support))
                await self.saved()
        except JudgeCallFailed as e:
            out.append(Check("judge", False, f"judge call failed: {e.cause}"))
        return out, vector

    async def run_attempt(self, attempt: Attempt) -> tuple[dict[str, Any], Any]:
        ids = [self.chunks[i].id for i in attempt.chunks]
        record: dict[str, Any] = {
            "slot": attempt.slot,
            "attempt": attempt.attempt,
            "type": attempt.type,
            "style": attempt.style,
            "chunk_ids": ids,
            "kept": False,
            "checks": [],
            "written": None,
            "item": None,
        }
        texts = [self.chunks[i].text for i in attempt.chunks]
        start = self.judge.usage.total
        try:
            chunks = [self.chunks[i] for i in attempt.chunks]
            written = await write_item(self.judge, attempt, chunks, self.request.language)
            await self.saved()
        except JudgeCallFailed as e:
            record["checks"] = [Check("written", False, f"judge call failed: {e.cause}").record()]
            return record, None
        checks, vector = await self.checks(attempt, written)
        spent = usage_since(self.judge.usage.total, start)
        record["requests"] = {"sent": spent.requests, "cached": spent.cache_hits}
        record["written"] = {"question": written.question, "answer": written.answer}
        record["checks"] = [c.record() for c in checks]
        if all(c.passed for c in checks):
            record["kept"] = True
            record["item"] = _item(attempt, written, ids, texts, record["checks"], self.request)
        return record, vector


def _item(
    attempt: Attempt,
    written: Written,
    ids: list[str],
    texts: list[str],
    checks: list[dict[str, Any]],
    request: GenerateRequest,
) -> dict[str, Any]:
    """The test-set row of a kept item: a Sample `rageval evaluate` reads as it is."""
    refuses = attempt.type == "unanswerable"
    metadata: dict[str, Any] = {
        "type": attempt.type,
        "style": attempt.style,
        "source_chunk_ids": ids,
        "checks": checks,
    }
    if request.language:
        metadata["language"] = request.language
    if written.history:
        metadata["history"] = [
            turn
            for q, a in written.history
            for turn in ({"role": "user", "content": q}, {"role": "assistant", "content": a})
        ]
    return {
        "id": f"g{attempt.slot + 1:04d}",
        "user_input": written.question,
        "reference": written.answer,
        "reference_contexts": [] if refuses else texts,
        "reference_context_ids": [] if refuses else ids,
        "metadata": metadata,
    }


async def run_generation(
    chunks: Sequence[Chunk],
    request: GenerateRequest,
    slot_types: Sequence[ItemType],
    *,
    llm: Judge,
    embeddings: Embeddings | None,
    config: RunConfig,
    notes: Sequence[str] = (),
) -> GenerateResult:
    """Run (or resume) the generation `request` over `chunks` (see the module docstring).

    Args:
        chunks: the corpus.
        request: what to generate.
        slot_types: each slot's type (:func:`rageval.generation._plan.slot_types`).
        llm: the judge that writes and checks the items.
        embeddings: the model the duplicates and the links are found with (None: the local
            MiniLM).
        config: how the run executes: its directory, resume or overwrite, budget, progress
            and the request cache.
        notes: what the plan left out and why, for the result and the report.
    """
    judge = llm if config.cache else llm.uncached()
    generation = _Generation(chunks, request, judge, embeddings or LocalEmbeddings(), slot_types)
    manifest = {
        "kind": "rageval-generate",
        "rageval_version": __version__,
        "request": request.record(),
        "corpus": {"chunks": len(chunks), "fingerprint": fingerprint(chunks)},
        "judge": judge.describe(),
        "run_config": config.record(),
    }
    # as evaluate: a llama.cpp server is sent at most as many requests at once as it has
    # slots and each is waited for longer (else, with a queue, its requests time out at 60 s
    # and are sent again: work done twice)
    if config.probe:
        await probe_endpoints([judge], generation.embeddings)
    slots = follow_server_slots([judge], known_server_slots())
    with run_scope(server_slots=slots, gates=run_gates([judge], slots)):
        if config.run_dir is None:
            result = await _session(generation, None, config)
            result.notes = list(notes)
            return result
        with hold_run_dir(config.run_dir):
            log = _open_run(config.run_dir, config, manifest)
            result = await _session(generation, log, config)
            result.notes = list(notes)
            _write_outputs(config.run_dir, result, chunks)
            return result


async def _session(generation: _Generation, log: _Log | None, config: RunConfig) -> GenerateResult:
    before = log.records if log is not None else []
    kept = [r for r in before if r["kept"]]
    await generation.prepare(kept)
    request = generation.request
    by_slot: dict[int, list[dict[str, Any]]] = {}
    for r in before:
        by_slot.setdefault(r["slot"], []).append(r)
    attempts = list(before)
    shown = display(config.progress)
    progress = ProgressLine(request.n, done=len(kept), plain_every=60 if shown == "plain" else None)
    start = generation.judge.usage.total
    unfilled: list[int] = []
    try:
        with limit_spending(config.max_cost):
            for slot in range(request.n):
                made = by_slot.get(slot, [])
                if any(r["kept"] for r in made):
                    continue
                limit = attempt_limit(request, generation.slot_types[slot], attempts)
                for number in range(len(made), limit):
                    record, vector = await generation.run_attempt(generation.plan(slot, number))
                    if log is not None:
                        log.append(record)
                    attempts.append(record)
                    if record["kept"]:
                        generation.seen.append((f"item {record['item']['id']}", vector))
                        progress.row_done(slot)
                        break
                else:
                    unfilled.append(slot)
                if shown:
                    progress.update()
    finally:
        if shown:
            progress.close()
    items = sorted((r["item"] for r in attempts if r["kept"]), key=lambda i: str(i["id"]))
    usage = usage_since(generation.judge.usage.total, start)
    return GenerateResult(request.n, items, attempts, usage, config.run_dir, unfilled)


def attempt_limit(
    request: GenerateRequest, item_type: str, attempts: Sequence[Mapping[str, Any]]
) -> int:
    """The attempts a slot of `item_type` gets: `max_attempts`, times
    :data:`MISSING_TYPE_FACTOR` while none of `attempts` (the run's so far, in slot order) kept
    an item of that type. The same on resume: the attempts before a slot are read back."""
    present = any(r["kept"] and r["type"] == item_type for r in attempts)
    return request.max_attempts * (1 if present else MISSING_TYPE_FACTOR)


def _write_outputs(run_dir: Path, result: GenerateResult, chunks: Sequence[Chunk]) -> None:
    with (run_dir / TESTSET).open("w", encoding="utf-8") as f:
        for item in result.items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    (run_dir / REPORT).write_text(
        report_markdown(
            result.requested,
            result.items,
            result.dropped,
            len(result.unfilled),
            chunks,
            notes=result.notes,
        ),
        encoding="utf-8",
    )


def read_questions(path: str | os.PathLike[str]) -> list[str]:
    """The questions of an existing test set (a JSONL file of rows with ``user_input``), for
    the duplicate check.

    Args:
        path: the test set's JSONL file.
    """
    if not Path(path).is_file():
        raise GenerateError(f"existing test set not found: {path}")
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise GenerateError(f"{path} line {number}: not JSON ({e.msg})") from None
        question = row.get("user_input") if isinstance(row, Mapping) else None
        if not isinstance(question, str):
            raise GenerateError(f"{path} line {number}: field 'user_input' must be a string")
        out.append(question)
    return out
