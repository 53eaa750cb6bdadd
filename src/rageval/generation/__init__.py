"""Test sets generated from documents (``rageval generate``; docs/generate.md).

A corpus (a folder of documents chunked at their headings, or the user's own chunks with their
ids) becomes a set of items -- a question, its reference answer, the reference contexts with
their ids, its type and style, and the checks it passed -- written and checked by the judge in
a resumable run (:mod:`rageval.generation._run`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rageval._sync import run_sync
from rageval.embeddings import Embeddings
from rageval.generation._asks import (
    EXPECTED_QUOTE_TOKENS,
    EXPECTED_WRITE_TOKENS,
    Written,
    answerable_messages,
    support_metric,
    support_sample,
    write_messages,
)
from rageval.generation._corpus import DEFAULT_MAX_CHARS, Chunk, CorpusError, load_corpus
from rageval.generation._plan import (
    STYLES,
    TWO_CHUNKS,
    TYPES,
    ItemType,
    Style,
    as_styles,
    slot_types,
)
from rageval.generation._run import (
    MAX_DUPLICATE_COSINE,
    MIN_SUPPORT,
    GenerateError,
    GenerateRequest,
    GenerateResult,
    read_questions,
    run_generation,
)
from rageval.judge import Judge
from rageval.runner._runconfig import RunConfig, RunKeywords, refuse_unknown_keywords, run_config
from rageval.samples import language_problem

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DROP_RATES",
    "STYLES",
    "TYPES",
    "Chunk",
    "CorpusError",
    "GenerateError",
    "GenerateEstimate",
    "GenerateResult",
    "agenerate",
    "estimate_generation",
    "expected_attempts",
    "generate",
    "load_corpus",
]

#: the claims the support check is expected to find in a reference answer, by type
_EXPECTED_CLAIMS: dict[str, int] = {"summary": 3, "unanswerable": 0}
#: the words of a written question, as the estimate assumes them
_PREDICTED_QUESTION = "What does the documentation say about this particular detail here?"


#: the share of attempts of each type a run is expected to drop, as the dry run assumes: from
#: Qwen2.5-Coder-1.5B on the tune corpus (docs/examples/generate-corpus; docs/generate.md):
#: 7 of 7 comparison attempts dropped, 4 of 5 unanswerable, 0 of 4 of the other types; kept
#: within 0.1-0.9, since a handful of attempts does not show a rate of 0 or 1
DROP_RATES: dict[str, float] = {
    "single_hop": 0.1,
    "multi_hop": 0.1,
    "comparison": 0.9,
    "summary": 0.1,
    "unanswerable": 0.8,
    "follow_up": 0.1,
}
#: the share of dropped attempts that reach the support check (its claim requests sent); the
#: others stop at the answerability check (7 of 9 dropped two-chunk attempts on the tune corpus)
REACHED_SUPPORT = 0.75


@dataclass(frozen=True)
class GenerateEstimate:
    """The requests and tokens of a run: when no attempt is dropped, and expected with each
    type's drop rate (:data:`DROP_RATES`, or the rates given)."""

    requests: int
    prompt_tokens: int
    completion_tokens: int
    expected_requests: int
    expected_prompt_tokens: int
    expected_completion_tokens: int
    drop_rates: dict[str, float]
    #: what the plan left out and why (the types a one-chunk corpus cannot give)
    notes: tuple[str, ...] = ()

    def table(self) -> str:
        """The estimate as the dry run prints it."""
        rates = ", ".join(f"{t} {r:g}" for t, r in self.drop_rates.items())
        return "".join(f"note: {n}\n" for n in self.notes) + (
            f"requests: {self.expected_requests} expected ({self.requests} if no attempt is "
            f"dropped)\nprompt tokens: {self.expected_prompt_tokens} ({self.prompt_tokens})\n"
            f"completion tokens: {self.expected_completion_tokens} ({self.completion_tokens})\n"
            f"(expected: attempts dropped at the rates {rates}; a dropped slot is tried again, up "
            "to --max-attempts, twice that while its type has no item)"
        )


def expected_attempts(rate: float, slots: int, max_attempts: int) -> tuple[float, float]:
    """The expected kept and dropped attempts over `slots` slots of one type whose attempts are
    dropped at `rate` each: a slot gets `max_attempts`, twice that while no earlier slot of
    its type kept an item (:func:`rageval.generation._run.attempt_limit`).

    Args:
        rate: the share of attempts dropped.
        slots: the type's slots.
        max_attempts: attempts per slot.
    """
    kept = dropped = 0.0
    missing = 1.0  # the probability that no earlier slot of the type kept an item
    for _ in range(slots):
        for share, limit in ((missing, 2 * max_attempts), (1 - missing, max_attempts)):
            tries = sum(rate**a for a in range(limit))
            filled = 1 - rate**limit
            kept += share * filled
            dropped += share * (tries - filled)
        missing *= rate ** (2 * max_attempts)
    return kept, dropped


def _settings(
    n: int,
    styles: Sequence[str] | None,
    language: str | None,
    min_support: float,
    max_duplicate_cosine: float,
    max_attempts: int,
    existing: str | os.PathLike[str] | Sequence[str] | None,
) -> tuple[tuple[Style, ...], list[str]]:
    """The settings checked before the corpus is read (a bad one fails at once, however large
    the corpus): the styles chosen and the existing questions; a bad one is a GenerateError."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise GenerateError(f"n must be a positive whole number, got {n!r}")
    if max_attempts < 1:
        raise GenerateError(f"max_attempts must be at least 1, got {max_attempts}")
    if not 0 < min_support <= 1 or not 0 < max_duplicate_cosine <= 1:
        raise GenerateError("min_support and max_duplicate_cosine must be in (0, 1]")
    try:
        chosen = as_styles(styles) if styles else STYLES
    except ValueError as e:
        raise GenerateError(str(e)) from None
    if language is not None and (wrong := language_problem(language)):
        raise GenerateError(f"language: {wrong}")
    if existing is None:
        return chosen, []
    if isinstance(existing, (str, os.PathLike)):
        return chosen, read_questions(existing)
    return chosen, list(existing)


def _request(
    n: int,
    mix: Mapping[str, float] | None,
    settings: tuple[tuple[Style, ...], list[str]],
    seed: int,
    language: str | None,
    min_support: float,
    max_duplicate_cosine: float,
    max_attempts: int,
    corpus_size: int,
) -> tuple[GenerateRequest, list[ItemType], list[str]]:
    """The request of a run of checked `settings` (:func:`_settings`), each type's slots and
    the notes on it (the types a one-chunk corpus cannot give, left out of the default mix); a
    bad mix is a GenerateError."""
    chosen, old = settings
    notes: list[str] = []
    weights: dict[str, float] = dict(dict.fromkeys(TYPES, 1.0) if mix is None else mix)
    if corpus_size < 2:
        two = [t for t in TYPES if t in TWO_CHUNKS and weights.get(t, 0) > 0]
        if two and mix is not None:
            raise GenerateError(
                f"the mix asks for {' and '.join(two)} items, which join two chunks, and the "
                "corpus has one chunk: leave them out of the mix or give more text"
            )
        if two:
            weights = {t: w for t, w in weights.items() if t not in TWO_CHUNKS}
            notes.append(
                f"{' and '.join(two)} left out of the mix: they join two chunks and the corpus "
                "has one"
            )
    try:
        types = slot_types(n, weights, seed)
    except ValueError as e:
        raise GenerateError(str(e)) from None
    request = GenerateRequest(
        n=n,
        types=tuple(sorted(set(types), key=TYPES.index)),
        styles=chosen,
        seed=seed,
        language=language,
        min_support=min_support,
        max_duplicate_cosine=max_duplicate_cosine,
        max_attempts=max_attempts,
        existing=tuple(old),
    )
    return request, types, notes


def _chunks(corpus: str | os.PathLike[str] | Sequence[Chunk], max_chars: int) -> list[Chunk]:
    if isinstance(corpus, (str, os.PathLike)):
        return load_corpus(Path(corpus), max_chars=max_chars)
    if isinstance(corpus, Sequence) and corpus and all(isinstance(c, Chunk) for c in corpus):
        return [c for c in corpus if isinstance(c, Chunk)]
    inner = f" of {type(corpus[0]).__name__}" if isinstance(corpus, Sequence) and corpus else ""
    raise GenerateError(
        'corpus takes a folder of documents, a .jsonl file of {"id", "text"} chunks, or a '
        "non-empty list of rageval.generation.Chunk (Chunk(id, text, source)); got "
        f"{type(corpus).__name__}{inner}"
    )


def _planned(
    corpus: str | os.PathLike[str] | Sequence[Chunk],
    n: int,
    mix: Mapping[str, float] | None,
    styles: Sequence[str] | None,
    seed: int,
    language: str | None,
    existing: str | os.PathLike[str] | Sequence[str] | None,
    min_support: float,
    max_duplicate_cosine: float,
    max_attempts: int,
    max_chars: int,
) -> tuple[list[Chunk], GenerateRequest, list[ItemType], list[str]]:
    """The chunks, request, slot types and notes of a run (and of its dry run): the settings
    that need no corpus are checked before it is read."""
    settings = _settings(
        n, styles, language, min_support, max_duplicate_cosine, max_attempts, existing
    )
    chunks = _chunks(corpus, max_chars)
    request, types, notes = _request(
        n, mix, settings, seed, language, min_support, max_duplicate_cosine, max_attempts,
        len(chunks),
    )  # fmt: skip
    return chunks, request, types, notes


async def agenerate(
    corpus: str | os.PathLike[str] | Sequence[Chunk],
    n: int,
    *,
    llm: Judge,
    embeddings: Embeddings | None = None,
    mix: Mapping[str, float] | None = None,
    styles: Sequence[Style] | None = None,
    seed: int = 0,
    language: str | None = None,
    existing: str | os.PathLike[str] | Sequence[str] | None = None,
    min_support: float = MIN_SUPPORT,
    max_duplicate_cosine: float = MAX_DUPLICATE_COSINE,
    max_attempts: int = 3,
    max_chars: int = DEFAULT_MAX_CHARS,
    config: RunConfig | None = None,
    **run: Unpack[RunKeywords],
) -> GenerateResult:
    """Generate a test set of `n` items from `corpus` (see docs/generate.md).

    Args:
        corpus: a folder of documents, a JSONL file of ``{"id", "text"}`` chunks, or chunks.
        n: the items wanted.
        llm: the judge that writes the items and checks them.
        embeddings: the model duplicates and linked chunks are found with (default: the local
            all-MiniLM-L6-v2).
        mix: the weight of each question type (default: every type alike).
        styles: the styles drawn from (default: all).
        seed: the plan's seed: the same seed, corpus and settings plan the same items.
        language: the language the items are written in (None: the corpus's own, as written).
        existing: an existing test set (a JSONL file, or its questions): a new question too
            close to one of them is dropped as a duplicate.
        min_support: the least faithfulness of a reference answer to its contexts (default:
            the claim checks' own bar, P(supported) 0.5).
        max_duplicate_cosine: a question this close (embedding cosine) to one kept is dropped.
        max_attempts: attempts per item before its slot is left empty.
        max_chars: the longest chunk cut from a document.
        config: how the run executes (or its fields as keywords: run_dir, resume, overwrite,
            max_cost, progress, cache); engine, batch, observers and human_labels do not apply.
        **run: the fields of `config`, given one by one.
    """
    refuse_unknown_keywords(agenerate, run)
    config = run_config(config, run)
    if config.engine != "local" or config.batch or config.observers or config.human_labels:
        raise GenerateError(
            "generate runs locally: engine, batch, observers and human_labels do not apply"
        )
    chunks, request, types, notes = _planned(
        corpus, n, mix, styles, seed, language, existing, min_support, max_duplicate_cosine,
        max_attempts, max_chars,
    )  # fmt: skip
    return await run_generation(
        chunks, request, types, llm=llm, embeddings=embeddings, config=config, notes=notes
    )


def generate(
    corpus: str | os.PathLike[str] | Sequence[Chunk],
    n: int,
    *,
    llm: Judge,
    config: RunConfig | None = None,
    **kw: object,
) -> GenerateResult:
    """:func:`agenerate`, run to the end from synchronous code.

    Args:
        corpus: as :func:`agenerate`.
        n: as :func:`agenerate`.
        llm: as :func:`agenerate`.
        config: as :func:`agenerate`.
        **kw: the other keyword arguments of :func:`agenerate`.
    """
    return run_sync(agenerate(corpus, n, llm=llm, config=config, **kw))  # type: ignore[arg-type]


def estimate_generation(
    corpus: str | os.PathLike[str] | Sequence[Chunk],
    n: int,
    *,
    model: str,
    mix: Mapping[str, float] | None = None,
    styles: Sequence[Style] | None = None,
    seed: int = 0,
    language: str | None = None,
    existing: str | os.PathLike[str] | Sequence[str] | None = None,
    min_support: float = MIN_SUPPORT,
    max_duplicate_cosine: float = MAX_DUPLICATE_COSINE,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_attempts: int = 3,
    drop_rates: Mapping[str, float] | None = None,
) -> GenerateEstimate:
    """The requests and tokens of generating `n` items, sending nothing: per attempt, the
    request that writes it, the answerability check and the support check's claims (one, three
    for a summary, none for an unanswerable item) against each context; when no attempt is
    dropped, and expected with each type's drop rate (a dropped attempt sends the first two,
    and the claims :data:`REACHED_SUPPORT` of the time).

    Args:
        corpus: as :func:`agenerate`.
        n: as :func:`agenerate`.
        model: the judge's model (its tokenizer counts the prompts where it is known).
        mix: as :func:`agenerate`.
        styles: as :func:`agenerate` (the plan draws from them).
        seed: as :func:`agenerate`.
        language: as :func:`agenerate`.
        existing: as :func:`agenerate` (read and checked as the run reads it; it changes no
            request: duplicates are found with the embeddings).
        min_support: as :func:`agenerate` (checked as the run checks it).
        max_duplicate_cosine: as :func:`agenerate` (checked as the run checks it).
        max_chars: as :func:`agenerate`.
        max_attempts: as :func:`agenerate`.
        drop_rates: the share of each type's attempts expected dropped (default
            :data:`DROP_RATES`; a type left out takes its default).
    """
    from rageval.generation._plan import plan_attempt
    from rageval.generation._run import NEAREST
    from rageval.runner._tokens import counter_for

    chunks, request, types, notes = _planned(
        corpus, n, mix, styles, seed, language, existing, min_support, max_duplicate_cosine,
        max_attempts, max_chars,
    )  # fmt: skip
    rates = {**DROP_RATES, **(drop_rates or {})}
    if any(not 0 <= rates[t] < 1 for t in types):
        raise GenerateError("a drop rate must be at least 0 and below 1")
    counter = counter_for(model)
    # the linked pairs need the embeddings; for counting, the first two chunks stand in
    pairs = [(0, 1)] if len(chunks) > 1 and any(t in TWO_CHUNKS for t in types) else []
    kept_cost = {t: [0.0, 0.0, 0.0] for t in types}  # requests, prompt, completion per slot
    drop_cost = {t: [0.0, 0.0, 0.0] for t in types}
    for slot, item_type in enumerate(types):
        attempt = plan_attempt(
            slot,
            0,
            item_type,
            corpus_size=len(chunks),
            pairs=pairs,
            styles=request.styles,
            seed=seed,
        )
        texts = [chunks[i].text for i in attempt.chunks]
        shown = [c.text for c in chunks[:NEAREST]] if item_type == "unanswerable" else texts
        first = (
            2,
            counter.prompt_tokens(
                write_messages(attempt, [chunks[i] for i in attempt.chunks], language), ""
            )
            + counter.prompt_tokens(answerable_messages(_PREDICTED_QUESTION, shown), ""),
            EXPECTED_WRITE_TOKENS + EXPECTED_QUOTE_TOKENS,
        )
        claims = [0, 0, 0]
        count = _EXPECTED_CLAIMS.get(item_type, 1)
        if count:
            answer = " ".join(["The documentation states this detail."] * count)
            sample = support_sample(Written(_PREDICTED_QUESTION, answer), texts)
            for planned in support_metric(None).planned_requests(sample):
                claims[0] += 1
                claims[1] += counter.prompt_tokens(planned.messages, "")
                claims[2] += planned.reply_tokens
        for k in range(3):
            kept_cost[item_type][k] += first[k] + claims[k]
            drop_cost[item_type][k] += first[k] + REACHED_SUPPORT * claims[k]
    plain = [0.0, 0.0, 0.0]
    expected = [0.0, 0.0, 0.0]
    for item_type in kept_cost:
        slots = types.count(item_type)
        kept, dropped = expected_attempts(rates[item_type], slots, max_attempts)
        for k in range(3):
            plain[k] += kept_cost[item_type][k]
            # costs summed over the type's slots; the expectation is per slot
            expected[k] += (
                kept * kept_cost[item_type][k] + dropped * drop_cost[item_type][k]
            ) / slots
    return GenerateEstimate(
        requests=round(plain[0]),
        prompt_tokens=round(plain[1]),
        completion_tokens=round(plain[2]),
        expected_requests=round(expected[0]),
        expected_prompt_tokens=round(expected[1]),
        expected_completion_tokens=round(expected[2]),
        drop_rates={t: rates[t] for t in TYPES if t in kept_cost},
        notes=tuple(notes),
    )
