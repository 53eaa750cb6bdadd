"""semantic_similarity: cosine similarity of the response's and the reference's embeddings.

score = cos(E_response, E_reference) = E_r·E_g / (‖E_r‖‖E_g‖), not clipped (range −1..1; with
sentence embeddings it is almost always 0..1). With `threshold` set the score is binary:
1.0 if cos ≥ threshold, else 0.0. Both texts are embedded in one call. No judge requests.
With several acceptable references (``Sample.references``), the cosine is the largest over
them (all embedded in the same call); the evidence then lists each one's cosine
(``reference_cosines``) and which was closest (``best_reference``, 0-based).

The local embedding model reads the first 256 tokens of a text (its [CLS] and [SEP] included);
when a text is longer, the evidence says so: ``truncated`` maps it to its whole length in
tokens, and the reason notes it.

Empty input (blank after stripping whitespace): an empty reference leaves nothing to compare
with, so the sample is not measured; an empty response carries none of the reference's meaning
and scores 0.0 without embedding anything (OpenAI-compatible endpoints reject empty input, and
an embedding of "" would give an arbitrary, usually non-zero, cosine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rageval.metrics.authoring import NO_REFERENCE, note_truncation, zero_if_blank
from rageval.metrics.base import Metric, MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import SimilarityEvidence
from rageval.samples import Sample


def semantic_similarity_score(cosine: float, threshold: float | None = None) -> float:
    """The cosine itself, or 1.0/0.0 for cosine ≥ / < `threshold` when a threshold is set."""
    if threshold is None:
        return cosine
    return 1.0 if cosine >= threshold else 0.0


async def semantic_similarity_value(ctx: ScoringContext, a: str, b: str) -> float:
    """Cosine of the embeddings of `a` and `b` (one embedding call, not clipped).

    A blank text has no meaning to share: the result is 0.0 and nothing is embedded."""
    return (await semantic_similarity_values(ctx, a, [b]))[0]


async def semantic_similarity_values(
    ctx: ScoringContext, a: str, others: Sequence[str]
) -> list[float]:
    """The cosine of `a` with each of `others`, all embedded in one call (a blank text
    shares no meaning: 0.0, and it is not embedded)."""
    shown = [t for t in others if t.strip()] if a.strip() else []
    if not shown:
        return [0.0] * len(others)
    from rageval.embeddings import cosine

    vectors = await ctx.embed([a, *shown])
    by_text = {t: cosine(vectors[0], v) for t, v in zip(shown, vectors[1:], strict=True)}
    return [by_text.get(t, 0.0) for t in others]


@register
class SemanticSimilarity(Metric):
    name = "semantic_similarity"
    required_fields = ("response", "reference")
    needs_embeddings = True
    value_range = (-1.0, 1.0)  # a cosine, not clipped
    summary = "cosine similarity of response and reference embeddings (no LLM)"
    blank_rules = (
        NO_REFERENCE,
        zero_if_blank("response", "the response is empty: it shares no meaning with the reference"),
    )

    def __init__(self, *, threshold: float | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        if threshold is not None and not -1.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a cosine in [-1, 1] or None, got {threshold!r}")
        self.threshold = threshold

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        response, references = sample.text("response"), sample.references
        # several acceptable references: the one the response is closest to counts
        cosines = await semantic_similarity_values(ctx, response, references)
        best = max(range(len(references)), key=cosines.__getitem__)
        cos, reference = cosines[best], references[best]
        value = semantic_similarity_score(cos, self.threshold)
        if self.threshold is None:
            reason = f"cosine similarity {cos:.4f}"
        else:
            relation = "≥" if value == 1.0 else "<"
            reason = f"cosine similarity {cos:.4f} {relation} threshold {self.threshold}"
        several = len(references) > 1
        result = MetricResult.ok(value, reason=reason).with_evidence(
            SimilarityEvidence(
                cosine=cos,
                threshold=self.threshold,
                reference_cosines=cosines if several else None,
                best_reference=best if several else None,
            )
        )
        cut = ctx.truncated({"response": response, "reference": reference})
        return note_truncation(result, cut, ctx.embeddings.max_tokens if ctx.embeddings else None)


#: names this module lacks are read from its default metric: ``semantic_similarity.score(...)``
__getattr__ = forward_to_metric(__name__)
