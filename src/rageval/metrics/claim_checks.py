"""Claim checks in the checker style, the ``mode="checker"`` of faithfulness and
response_groundedness: each claim of the response checked on its own against the retrieved
contexts, one short yes/no answer per request read as the probability that the claim is
supported.

* The claims are the response's own sentences (:func:`~rageval.metrics._prompting.
  split_sentences`), never reworded: a judge asked to extract statements may restate one
  (issue 41: "Newton and Leibniz are both credited with independently developing the basics
  of calculus" came back from a 1.5B judge as "Isaac Newton is the father of calculus", which
  the contexts then did not support), a split cannot.
* The answer is read as P(supported): P("yes") from the token log-probabilities of the same
  request where the judge scores by probability (its ``scoring``; the endpoint returns them:
  vLLM, llama.cpp, OpenAI), else 1 for yes and 0 for no.
* A request shows the contexts first, then the question the response answers (where the
  sample has one), then the claim (:func:`check_messages`): the claims of a sample checked
  against the same contexts begin with the same text, which a server's prompt cache
  (llama.cpp, vLLM, a provider's) serves to every claim after the first. The question gives
  a sentence its referents ("It is ...", "Yes, ..."); on MEMERAG's tuning rows with
  Qwen2.5-Coder-1.5B it read people's labels a little better than the claim alone (AUROC
  0.737 against 0.709, docs/metrics.md "Claim checks").
* By default a claim is checked against all the contexts in one request (claims requests; no
  context is named as its support). `per_context` checks it against each context on its own
  and takes the largest probability, as MiniCheck scores a long document by its chunks: the
  context that gave it is the one that supports the claim, and a checker model with a short
  window (HHEM, MiniCheck) reads one passage at a time; it costs claims x contexts requests,
  and a claim that only two contexts together support is not supported. On MEMERAG's tuning
  rows with Qwen2.5-Coder-1.5B the two read people's labels alike, per context for five
  times the requests (docs/metrics.md, "Claim checks").
* The checker is a :class:`~rageval.judge.Judge`: the run's judge, or the ``checker`` given
  (a Judge, a :class:`~rageval.judge.JudgeSpec`, or its settings as a mapping, as a config
  file or ``-p METRIC.checker.model=...`` gives them), which becomes the metric's own judge:
  its requests are cached, limited and accounted as any judge's (:func:`checker_judge`).

The value is the mean of the claims' probabilities: the expected share of supported claims
(with yes/no answers alone, the share of claims answered yes; with the answer's
log-probabilities, P("yes") renormalised over yes and no).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationError

from rageval.metrics._prompting import (
    PlannedRequest,
    ReplyModel,
    data_first_messages,
    item_ids,
    nonblank,
    numbered,
    split_sentences,
    tagged,
)
from rageval.metrics.base import Metric, MetricResult, ScoringContext
from rageval.metrics.evidence import CheckedClaim, ClaimsEvidence
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.judge import Judge, JudgeReply, JudgeSpec

#: how a claim check is answered
CHECK_REPLY = 'Reply as {"supported": "yes"} or {"supported": "no"}.'
#: what the checker is asked, after the claim (tried on 20 MEMERAG tuning rows with both
#: layouts of the contexts; the line on claims about what the contexts say, which MEMERAG's
#: annotators call supported when true ("The passages do not mention X"), chosen on 60 tuning
#: rows: docs/metrics.md, "Claim checks")
CHECK_TASK = (
    "Is the claim supported by the {noun}: stated in {them}, or following directly from {them}? "
    "Anything the {noun} {do} not give is unsupported, even if it is true. "
    "A claim about what the {noun} {say} is checked against {them}: "
    '"the {noun} {do} not mention X" is supported when X is not in {them}. '
    'Answer "yes" or "no".'
)
#: a claim's probability at or above which it counts as supported in the evidence
SUPPORTED_AT = 0.5
#: reply tokens expected for a check ({"supported": "yes"})
EXPECTED_CHECK_TOKENS = 8


class CheckReply(ReplyModel):
    """A checker's answer on one claim."""

    supported: Literal["yes", "no"] = Field(
        description="yes if the contexts support the claim, else no"
    )


def claims_of(text: str) -> list[str]:
    """The claims a response makes, as the checker is shown them: its sentences, unchanged."""
    return split_sentences(text)


def check_messages(
    contexts: Sequence[str], claim: str, first: int = 1, question: str = ""
) -> list[dict[str, str]]:
    """The request that checks `claim` against `contexts` (numbered from ``c{first}``): the
    contexts, the `question` the response answers (left out when blank), the claim, how to
    reply, and what is asked, last."""
    one = len(contexts) == 1
    shown = [tagged("context" if one else "contexts", numbered(contexts, "c", first))]
    if question.strip():
        shown.append(tagged("question", question))
    shown.append(tagged("claim", claim))
    noun, them, do, say = (
        ("context", "it", "does", "says or leaves out")
        if one
        else ("contexts", "them", "do", "say or leave out")
    )
    task = CHECK_TASK.format(noun=noun, them=them, do=do, say=say)
    return data_first_messages("\n".join(shown), task, CHECK_REPLY)


def probability_of(reply: JudgeReply[CheckReply]) -> float:
    """The probability a checker's reply gives that its claim is supported: P("yes") read from
    the token log-probabilities of the answer where the judge scores by probability and the
    endpoint gave them, else 1.0 for yes and 0.0 for no (docs/judge-probabilities.md)."""
    return reply.scoring.probability("supported", option="yes")


@dataclass(frozen=True)
class _Group:
    """Contexts checked together, numbered from `first` (one context, or all of them)."""

    first: int
    texts: list[str]


def _groups(contexts: Sequence[str], per_context: bool) -> list[_Group]:
    if per_context:
        return [_Group(i, [c]) for i, c in enumerate(contexts, start=1)]
    return [_Group(1, list(contexts))]


async def check_claims(
    ctx: ScoringContext,
    claims: Sequence[str],
    contexts: Sequence[str],
    *,
    per_context: bool,
    question: str = "",
) -> list[CheckedClaim]:
    """Each of `claims` (of an answer to `question`) checked against `contexts` (each on its
    own when `per_context`, the largest probability kept; else all together), in order, ids
    ``s1``, ``s2``, …. The requests are sent context by context, so that one context's
    requests follow each other (a prompt cache with few slots keeps its text)."""
    groups = _groups(contexts, per_context)
    asks = [
        ctx.ask_scored(check_messages(g.texts, claim, g.first, question), CheckReply)
        for g in groups
        for claim in claims
    ]
    replies = await asyncio.gather(*asks)
    out = []
    for index, (key, claim) in enumerate(zip(item_ids("s", len(claims)), claims, strict=True)):
        probabilities = [
            probability_of(replies[g * len(claims) + index]) for g in range(len(groups))
        ]
        best = max(range(len(groups)), key=lambda g: probabilities[g])  # the first of equals
        p = probabilities[best]
        # the context that supports it: named when one context on its own does
        context = f"c{groups[best].first}" if per_context and p >= SUPPORTED_AT else None
        out.append(
            CheckedClaim(
                id=key, text=claim, probability=p, supported=p >= SUPPORTED_AT, context=context
            )
        )
    return out


def claims_score(probabilities: Sequence[float]) -> float | None:
    """The mean of the claims' probabilities of being supported; None when there is no
    claim (0/0 is not a score)."""
    return sum(probabilities) / len(probabilities) if probabilities else None


def checker_judge(checker: Judge | JudgeSpec | Mapping[str, Any]) -> Judge:
    """The checker a metric's ``checker`` argument names: a Judge as it is; a JudgeSpec, or
    the mapping of its settings (``{"model": ..., "base_url": ...}``), made into a Judge with
    its key from the spec's variable. ValueError naming what is wrong."""
    from rageval.judge import Judge, JudgeSpec

    if isinstance(checker, Judge):
        return checker
    if isinstance(checker, Mapping):
        try:
            checker = JudgeSpec.model_validate(dict(checker))
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc'])) or 'checker'}: {err['msg']}" for err in e.errors()
            )
            raise ValueError(f"checker: not a judge's settings ({problems})") from None
    if not isinstance(checker, JudgeSpec):
        raise ValueError(
            "checker must be a Judge, a JudgeSpec or a mapping of its settings "
            f"({{'model': ..., 'base_url': ...}}), got a {type(checker).__name__}"
        )
    return Judge.from_spec(checker)


class ClaimCheckMetric(Metric):
    """What faithfulness and response_groundedness share for ``mode="checker"``: the `mode`,
    `checker` and `per_context` arguments, the checks (:meth:`check`) and their planned
    requests (:meth:`planned_checks`). A subclass names its own mode first in `modes` (its
    default) and calls these when :attr:`checking`."""

    #: the metric's modes, its default first; "checker" is the claim checks
    modes: ClassVar[tuple[str, ...]]

    def __init__(
        self,
        *,
        mode: str | None = None,
        checker: Judge | JudgeSpec | Mapping[str, Any] | None = None,
        per_context: bool = False,
        **kw: Any,
    ) -> None:
        """`mode`: how the metric judges (None: its default, the first of :attr:`modes`);
        ``"checker"``: each claim on its own. `checker`: the judge the claim checks go to
        (None: the run's judge); `per_context`: each claim checked against each context on
        its own, not against all of them in one request (see
        :mod:`rageval.metrics.claim_checks`)."""
        super().__init__(**kw)
        self.mode = self.modes[0] if mode is None else mode
        if self.mode not in self.modes:
            raise ValueError(f"mode must be one of {', '.join(self.modes)}, got {mode!r}")
        self.record_config("mode", self.mode)
        if not isinstance(per_context, bool):
            raise ValueError(f"per_context must be true or false, got {per_context!r}")
        if checker is not None:
            if self.mode != "checker":
                raise ValueError(f"a checker is used in mode 'checker' only, not {self.mode!r}")
            judge = checker_judge(checker)
            if self.llm is not None and self.llm is not judge:
                raise ValueError("llm and checker name two judges: give one of them")
            # the checker is the metric's own judge: the run asks it for this metric's cells
            self.llm = judge
            self.record_config("checker", judge.spec.model_dump(mode="json", exclude_none=True))
        self.per_context = per_context

    @property
    def checking(self) -> bool:
        """Whether this metric checks claims (``mode="checker"``)."""
        return self.mode == "checker"

    def planned_checks(self, sample: Sample) -> list[PlannedRequest]:
        """The check requests :meth:`check` sends for `sample`."""
        contexts = nonblank(sample.retrieved_contexts)
        claims = claims_of(sample.text("response"))
        question = sample.text("user_input")
        return [
            PlannedRequest(
                check_messages(g.texts, claim, g.first, question),
                CheckReply,
                reply_tokens=EXPECTED_CHECK_TOKENS,
            )
            for g in _groups(contexts, self.per_context)
            for claim in claims
        ]

    async def check(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        """The response's claims checked against the retrieved contexts: the mean of their
        probabilities, each claim in the evidence (kind ``claims``). No claim: not measured;
        no non-blank context: 0, nothing asked."""
        claims = claims_of(sample.text("response"))
        if not claims:
            return MetricResult.not_measured("the response makes no claim to check")
        contexts = nonblank(sample.retrieved_contexts)
        if not contexts:
            checked = [
                CheckedClaim(id=k, text=c, probability=0.0, supported=False)
                for k, c in zip(item_ids("s", len(claims)), claims, strict=True)
            ]
            reason = "no context was retrieved, so none of the claims is supported"
        else:
            checked = await check_claims(
                ctx,
                claims,
                contexts,
                per_context=self.per_context,
                question=sample.text("user_input"),
            )
            supported = sum(c.supported for c in checked)
            reason = (
                f"{supported} of {len(checked)} claims supported by the contexts "
                f"(probability {SUPPORTED_AT:g} or more)"
            )
        value = claims_score([c.probability for c in checked])
        assert value is not None  # there is a claim
        cited = {c.context for c in checked if c.context is not None}
        evidence = ClaimsEvidence(
            checker=ctx.judge.model if ctx.judge is not None else None,
            per_context=self.per_context,
            claims=checked,
            contexts={
                key: text
                for key, text in zip(item_ids("c", len(contexts)), contexts, strict=True)
                if key in cited
            },
        )
        return MetricResult.ok(value, reason=reason).with_evidence(evidence)
