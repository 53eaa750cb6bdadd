"""faithfulness: the share of the response's claims that the retrieved contexts support.

score = supported / total over the response's atomic statements (extracted once per sample and
shared with answer_correctness). One request shows the (non-blank) contexts and the statements
``[s1] …`` and gets one verdict per statement id. A response with no statements is not
measured (0/0); with no non-blank context nothing can be supported, so the score is 0 without
a verdict request. People's guidance (`instructions`, `examples`, `reasons`, `threshold`:
:class:`GuidedMetric`) goes into the verdict request: an example shows its contexts and its
response as one statement, with people's verdict on it.
Judge requests: 1 for the verdicts (+ the shared statement extraction).

``mode="checker"`` checks the response's own sentences one by one instead, each request a
short yes/no answer read as the probability that the contexts support the sentence; the score
is the mean probability (:mod:`rageval.metrics.claim_checks`; `checker` sends the checks to
another endpoint and model; guidelines and examples do not apply there).
Judge requests in that mode: sentences x contexts (sentences with ``per_context=False``).
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
from rageval.metrics.claim_checks import ClaimCheckMetric
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
        statements = await ctx.statements.get("response")
        if not statements:
            return MetricResult.not_measured("the response makes no factual statement to check")
        contexts = nonblank(sample.retrieved_contexts)
        if contexts:
            verdicts, _ = await self.question(contexts).ask(ctx, statements)
            supported = sum(v.verdict for v in verdicts)
            reason = f"{supported} of {len(verdicts)} statements are supported by the contexts"
        else:
            verdicts = unjudged(statements, "s")
            reason = "no context was retrieved, so none of the statements is supported"
        return self.share_result(verdicts, reason)


#: names this module lacks are read from its default metric: ``faithfulness.score(...)``
__getattr__ = forward_to_metric(__name__)
