"""faithfulness: the share of the response's claims that the retrieved contexts support.

score = supported / total over the response's atomic statements (extracted once per sample and
shared with answer_correctness). One request shows the (non-blank) contexts and the statements
``[s1] …`` and gets one verdict per statement id. When the extraction answers with no
statement for a non-blank response, the response's own sentences
(:func:`~rageval.metrics.claim_checks.claims_of`, never reworded) are verified instead and the
evidence says so and why (``fallback``). So an answer that only says the contexts do not give
something ("the passages do not mention X") is a claim about the contexts, supported when they
indeed do not, rather than a cell without a value (ragas: NaN) that would drop every such
answer from the mean. An extraction that fails (cut, never valid, the endpoint's errors) fails
the cell with its cause, as every failing judge call does: a fault never turns a score into
another one. A blank response is not
measured (0/0); with no non-blank context nothing can be supported, so the score is 0 without
a verdict request. People's guidance (`instructions`, `examples`, `reasons`, `threshold`:
:class:`GuidedMetric`) goes into the verdict request: an example shows its contexts and its
response as one statement, with people's verdict on it.
Judge requests: 1 for the verdicts (+ the shared statement extraction).

``mode="checker"`` checks the response's own sentences one by one instead, each request a
short yes/no answer read as the probability that the contexts support the sentence; the score
is the mean probability (:mod:`rageval.metrics.claim_checks`; `checker` sends the checks to
another endpoint and model; guidelines and examples do not apply there).
Judge requests in that mode: one per sentence (sentences x contexts with ``per_context=True``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rageval.metrics.authoring import (
    Guidance,
    GuidedMetric,
    PlannedRequest,
    VerdictMetric,
    VerdictQuestion,
    item_verdict,
    nonblank,
    numbered,
    planned_statements,
    predicted_statements,
    share_true,
    unjudged,
    verdict_data,
    verdict_prompt,
)
from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.claim_checks import ClaimCheckMetric, claims_of
from rageval.samples import Sample

SUPPORTED = "true only if the contexts state it or it follows directly from them"
TASK = (
    "For each numbered statement, decide whether the contexts support it: it is stated in them "
    "or follows directly from them. Anything the contexts do not give is unsupported, even if "
    "it is true."
)


def prompt(contexts: list[str], guidance: Guidance | None = None) -> Callable[[str], str]:
    """The verdict request's text, around the numbered statements; `guidance` (guidelines,
    labelled examples) after the task.

    The task comes first here, not after the contexts as in the other requests that show them
    (:func:`~rageval.metrics.authoring.contexts_block`): with the task after the contexts,
    Qwen2.5-Coder-1.5B judged MEMERAG's sentences worse than at chance (balanced accuracy
    0.525 → 0.417 on 40 rows; benchmarks/RESULTS.md, "Contexts first"), so this request reads
    the contexts once more than the others in exchange."""
    task = (guidance or Guidance()).head(
        TASK, _example, functools.partial(item_verdict, "supported")
    )
    return verdict_prompt(task, "statements", contexts=numbered(contexts, "c"))


def _example(sample: Sample) -> str:
    """A labelled example as the request shows data: its contexts, its response as one
    statement."""
    contexts = numbered(nonblank(sample.retrieved_contexts), "c")
    return verdict_data("statements", numbered([sample.text("response")], "s"), contexts=contexts)


#: the score from the verdicts: supported / total; None when there is nothing to judge
faithfulness_score = share_true


async def statements_to_verify(sample: Sample, ctx: ScoringContext) -> tuple[list[str], str | None]:
    """The response's statements from the shared extraction, or its own sentences when the
    extraction answered with none, with why (None: the extracted statements). A failed
    extraction raises, so the cell is not measured with its cause. Empty only for a blank
    response."""
    statements = await ctx.statements.get("response")
    if statements:
        return statements, None
    sentences = claims_of(sample.text("response"))
    why = (
        "the response's own sentences are verified: the statement extraction returned no statement"
    )
    return sentences, (why if sentences else None)


@register
class Faithfulness(ClaimCheckMetric, GuidedMetric, VerdictMetric):
    name = "faithfulness"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response", "retrieved_contexts")
    example_fields = ("response", "retrieved_contexts")
    statement_needs = frozenset({"response"})
    summary = "share of the response's claims supported by the retrieved contexts"
    verdict_items = "statements"
    verdict_means = "supported by the retrieved contexts"
    #: "statements": the judge's statements, one verdict request; "checker": claim checks
    modes = ("statements", "checker")
    guideline_variants: ClassVar[Mapping[str, str]] = {
        "lenient": (
            "A statement that says in other words what the contexts say, or that a careful "
            "reader would conclude from them with common sense, is supported."
        ),
        "strict": (
            "A statement is supported only if the contexts state it explicitly; any detail "
            "they do not give makes it unsupported."
        ),
    }

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        if self.checking and (self.guidance.instructions or self.guidance.examples):
            raise ValueError(
                "mode 'checker' asks a checker yes or no on each sentence: instructions and "
                "examples are not shown to it (use mode 'statements' with them)"
            )

    def question(self, contexts: list[str]) -> VerdictQuestion:
        """Is each statement of the response supported by the contexts?"""
        return VerdictQuestion(
            prompt(contexts, self.guidance),
            prefix="s",
            verdict="supported",
            meaning=SUPPORTED,
            reasons=self.reasons,
        )

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        if self.checking:
            return self.planned_checks(sample)
        plan = planned_statements(sample, "response")
        statements = predicted_statements(sample.text("response"))
        contexts = nonblank(sample.retrieved_contexts)
        if statements and contexts:
            plan += self.question(contexts).plan(statements, predicted=True)
        return plan

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        if self.checking:
            return await self.check(sample, ctx)
        statements, fallback = await statements_to_verify(sample, ctx)
        if not statements:
            return MetricResult.not_measured(
                "the response is blank: it makes no factual statement to check"
            )
        items = "statements" if fallback is None else "sentences"
        contexts = nonblank(sample.retrieved_contexts)
        if contexts:
            verdicts, _ = await self.question(contexts).ask(ctx, statements)
            supported = sum(v.verdict for v in verdicts)
            reason = f"{supported} of {len(verdicts)} {items} are supported by the contexts"
        else:
            verdicts = unjudged(statements, "s")
            reason = f"no context was retrieved, so none of the {items} is supported"
        result = self.share_result(verdicts, reason)
        if fallback is None:
            return result
        return result.with_evidence(result.evidence.noted(items=items, fallback=fallback))


#: names this module lacks are read from its default metric: ``faithfulness.score(...)``
__getattr__ = forward_to_metric(__name__)
