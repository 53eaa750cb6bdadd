"""What a cell's evidence is: one pydantic model per kind, told apart by its ``kind`` field.

rageval's metrics say why they gave a value with typed evidence: the judge's verdicts on
statements, sentences or contexts (:class:`VerdictEvidence`), claims checked one by one with their probabilities
(:class:`ClaimsEvidence`), ratings per template
(:class:`RatingEvidence`), generated questions with their cosines (:class:`QuestionsEvidence`),
each turn's value in a conversation (:class:`PerTurnEvidence`), tool calls matched against the
reference (:class:`ToolCallEvidence`), the facts a user stated and each turn's verdicts on them
(:class:`RetentionEvidence`), each question's topic and answer (:class:`TopicEvidence`), the
winner of two answers asked in both orders (:class:`PairwiseEvidence`), ...
The run log writes the ``kind`` with them and the report draws each kind in its own way (a
verdict table, a rating, questions, per-turn values).

A metric of the user's own keeps free-form evidence: ``MetricResult.ok(value, **evidence)``
makes a :class:`FreeformEvidence`, which holds the keyword arguments as they are (``data``);
so does an evidence dict of a run log written before evidence had kinds (format 7 and
earlier). The report shows free-form evidence by its keys.

Every kind reads like the dict it once was, ``evidence["verdicts"]``, ``evidence.get("score")``
(``in`` and ``get`` take a field that is None for absent), and carries the notes any metric's evidence may gain after
scoring: ``truncated`` (texts the embedding model cut), ``score`` (the score behind a verdict
at a threshold) and, with several references, ``reference_values`` / ``best_reference``;
:meth:`EvidenceBase.noted` adds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

if TYPE_CHECKING:
    from typing_extensions import Self

    from rageval.judge import ReplyScoring


def _note() -> Any:
    """A field written only when it says something (not None)."""
    return Field(default=None, exclude_if=lambda v: v is None)


class EvidencePart(BaseModel):
    """A part of some evidence (a verdict, a generated question...), read like a dict too."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="strings")

    #: the names of the fields, as a plain set: read for every cell of a run log read back
    #: (pydantic's model_fields is a property that costs several calls each time)
    _field_names: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._field_names = frozenset(cls.model_fields)

    def __getitem__(self, key: str) -> Any:
        if key not in self._field_names:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """The field `key`, or `default` when there is no such field or it is None."""
        found = getattr(self, key) if key in self._field_names else None
        return default if found is None else found

    def __contains__(self, key: object) -> bool:
        """Whether the field `key` says something (exists and is not None)."""
        return key in self._field_names and getattr(self, str(key)) is not None


class EvidenceBase(EvidencePart):
    """What every kind of evidence has: its `kind`, and the notes added after scoring."""

    kind: str
    #: texts the embedding model read only the start of, each with its whole length in tokens
    truncated: dict[str, int] | None = _note()
    #: the score behind a value turned into a verdict at the metric's threshold
    score: float | None = _note()
    #: with several acceptable references: each one's value, and which one counted
    reference_values: list[float | None] | None = _note()
    best_reference: int | None = _note()
    #: how the judge's verdicts and ratings behind the value were scored: "probabilities" (of
    #: their options, from the token log-probabilities), "sampled" or "sampled-fallback"
    #: (asked for and not readable: `scoring_why`); docs/judge-probabilities.md
    scoring: Literal["probabilities", "sampled", "sampled-fallback"] | None = _note()
    scoring_why: str | None = _note()

    def noted(self, **notes: Any) -> Self:
        """This evidence with `notes` added (``truncated``, ``score``, ...), validated."""
        return self.model_validate({**self.model_dump(exclude_none=True), **notes})


def scoring_notes(scorings: Sequence[ReplyScoring]) -> dict[str, Any]:
    """The notes ``scoring`` and ``scoring_why`` of a cell whose value read the verdicts and
    ratings of these replies: "probabilities" when every one was read from the token
    log-probabilities, "sampled-fallback" (and why) when some were asked for and could not be,
    "sampled" otherwise (why: how many were not, when the others were)."""
    fallback = next((s for s in scorings if s.used == "sampled-fallback"), None)
    sampled = sum(s.used == "sampled" for s in scorings)
    if fallback is not None:
        used, why = "sampled-fallback", fallback.why
    elif 0 < sampled < len(scorings):
        used, why = "sampled", f"{sampled} of {len(scorings)} replies by sampled values"
    elif sampled:
        used, why = "sampled", scorings[0].why
    else:
        used, why = "probabilities", None
    return {"scoring": used} | ({"scoring_why": why} if why else {})


class JudgedItem(EvidencePart):
    """The judge's ruling on one item: true when the item is what the table's `means` says."""

    id: str
    text: str
    verdict: bool
    reason: str | None = None
    #: the item's rank among the retrieved contexts (context precision)
    rank: int | None = _note()
    #: the probability that the verdict is true, where the judge's scoring read it from the
    #: token log-probabilities (the value counts it in place of the verdict)
    probability: float | None = _note()


class VerdictTable(EvidencePart):
    """The judge's verdicts on a list of items."""

    #: what the items are: "statements", "reference sentences", "contexts", ...
    items: str
    #: what a true verdict says of an item: "supported by the retrieved contexts", ...
    means: str
    verdicts: list[JudgedItem]


class VerdictEvidence(VerdictTable, EvidenceBase):
    """Verdicts on statements, sentences or contexts (faithfulness, context recall and
    precision)."""

    kind: Literal["verdicts"] = "verdicts"
    #: why the items are not the ones the metric usually judges (faithfulness: its response's
    #: own sentences, verified when the statement extraction answered with none)
    fallback: str | None = _note()


class CheckedClaim(EvidencePart):
    """A claim of the response (one of its sentences, unchanged) as a checker judged it: the
    probability that the contexts support it, whether that reaches the metric's cut (0.5),
    and the id of the context that supports it (None: none does on its own, or the claim
    was checked against all the contexts at once)."""

    id: str
    text: str
    probability: float
    supported: bool
    context: str | None = None


class ClaimsEvidence(EvidenceBase):
    """Claim checks (faithfulness, response_groundedness with ``mode="checker"``): each claim
    with its probability and supporting context; `contexts` holds the text of the contexts
    named, by id; `checker` is the model that checked."""

    kind: Literal["claims"] = "claims"
    checker: str | None = None
    per_context: bool
    claims: list[CheckedClaim]
    contexts: dict[str, str] = Field(default_factory=dict)


class FactualityEvidence(EvidenceBase):
    """answer_correctness: the factuality F-score of the response's statements against the
    reference's (true / false positives, false negatives) and the semantic similarity; a part
    whose weight is 0 is None."""

    kind: Literal["factuality"] = "factuality"
    similarity: float | None = None
    factuality: float | None = None
    tp: int | None = _note()
    fp: int | None = _note()
    fn: int | None = _note()
    #: the expected counts ("tp", "fp", "fn") where the judge's scoring read the verdicts'
    #: probabilities (factuality is their F-beta; the counts above are the verdicts written)
    expected: dict[str, float] | None = _note()
    tp_ids: list[str] | None = _note()
    fp_ids: list[str] | None = _note()
    fn_ids: list[str] | None = _note()
    response_statements: VerdictTable | None = _note()
    reference_statements: VerdictTable | None = _note()


class RatingEvidence(EvidenceBase):
    """Ratings on a scale, one per prompt template (``template_1``, ...; None: the template gave
    no valid rating, its cause in `failures`), with the judge's reasons when it gave them."""

    kind: Literal["ratings"] = "ratings"
    ratings: dict[str, int | None]
    scale: list[int]
    #: each template's expected rating over the scale, where the judge's scoring read the
    #: probabilities of the ratings (the value averages these in place of the ratings)
    expected: dict[str, float | None] | None = _note()
    #: each template's probability of each rating on the scale (summing to 1), where the
    #: judge's scoring read them: its expected rating follows from it, and a run's values can
    #: be read again from it without asking the judge again
    distributions: dict[str, dict[int, float] | None] | None = _note()
    reasons: dict[str, str | None] | None = _note()
    failures: dict[str, str] | None = _note()


class RubricEvidence(EvidenceBase):
    """A level of a rubric (rubric_score: 1..5), the judge's feedback and the level's text."""

    kind: Literal["rubric"] = "rubric"
    raw_score: int
    #: the expected level over the rubric's levels, where the judge's scoring read their
    #: probabilities (the value counts it in place of `raw_score`)
    expected: float | None = _note()
    feedback: str
    level_description: str


class ScoredQuestion(EvidencePart):
    """A question the judge wrote for the response, its cosine to the user input (None when
    not embedded) and whether the judge found the response noncommittal."""

    question: str
    noncommittal: bool
    cosine: float | None = None


class QuestionsEvidence(EvidenceBase):
    """answer_relevancy: the generated questions and the noncommittal votes."""

    kind: Literal["questions"] = "questions"
    noncommittal: bool
    noncommittal_votes: int
    questions: list[ScoredQuestion]


class SimilarityEvidence(EvidenceBase):
    """An embedding cosine (semantic_similarity), with the threshold that turns it into 0/1;
    with several references, each one's cosine."""

    kind: Literal["similarity"] = "similarity"
    cosine: float
    threshold: float | None = None
    reference_cosines: list[float] | None = _note()


class OverlapEvidence(EvidenceBase):
    """A lexical baseline's token overlap (token_f1, rouge_l): the count, what it counts
    (``shared_tokens``, ``lcs_tokens``) and both texts' lengths in tokens."""

    kind: Literal["overlap"] = "overlap"
    overlap: int
    counted: str
    response_tokens: int
    reference_tokens: int


class ToolCallPair(EvidencePart):
    """A call made paired with a reference call, and what they share (tool_call_f1)."""

    call: str
    reference: str
    shared: float


class ToolCallEvidence(EvidenceBase):
    """The tool calls made and the reference calls, as text, and how they match: the calls
    missing and unexpected (tool_call_accuracy), or precision, recall and the pairs
    (tool_call_f1)."""

    kind: Literal["tool_calls"] = "tool_calls"
    calls: list[str]
    reference_calls: list[str]
    ordered: bool
    missing: list[str] | None = _note()
    unexpected: list[str] | None = _note()
    level: str | None = _note()
    precision: float | None = _note()
    recall: float | None = _note()
    pairs: list[ToolCallPair] | None = _note()


class GoalEvidence(EvidenceBase):
    """agent goal accuracy: the user's goal as the judge read it, the conversation's end
    state, the outcome it was held to and whether it was achieved."""

    kind: Literal["goal"] = "goal"
    user_goal: str
    end_state: str
    desired_outcome: str
    achieved: bool


class StatedFact(EvidencePart):
    """A fact a user message stated about the user: the message's index in ``turns``."""

    turn: int
    fact: str


class RetentionTurn(EvidencePart):
    """One judged assistant turn of knowledge retention: its index in ``turns``, its value (1
    if it keeps every fact stated before it), why, and the verdict on each of those facts."""

    turn: int
    value: float
    reason: str
    facts: VerdictTable


class RetentionEvidence(EvidenceBase):
    """knowledge retention: the facts the user stated, and each judged assistant turn."""

    kind: Literal["retention"] = "retention"
    facts: list[StatedFact]
    turns: list[RetentionTurn]


class TopicEvidence(EvidenceBase):
    """topic adherence: the score `mode` names, the three scores, and two verdict tables on the
    user's questions: on the reference topics, and answered (not refused); `turns` holds each
    question's index in ``turns``."""

    kind: Literal["topics"] = "topics"
    mode: str
    precision: float
    recall: float
    f1: float
    turns: list[int]
    on_topic: VerdictTable
    answered: VerdictTable


class PairwiseReading(EvidencePart):
    """One order of a pairwise comparison, read back as a verdict on A and B: the winner the
    judge wrote, and the probabilities of A, B and a tie (from its log-probabilities; the
    written verdict's is 1 where there were none); with a verdict on each answer, also each
    answer's probability of being right."""

    winner: Literal["a", "b", "tie"]
    p_a: float
    p_b: float
    p_tie: float
    #: with a verdict on each answer (ask "each"): the probability that A, and B, is right
    right_a: float | None = None
    right_b: float | None = None


class PairwiseEvidence(EvidenceBase):
    """pairwise: the winner of two answers (A: response, B: response_b) and both orders'
    readings (A shown first, B shown first); a `flip` when their verdicts differ (read from
    the verdicts, the winner is then a tie; see :func:`rageval.metrics.pairwise.combine`)."""

    kind: Literal["pairwise"] = "pairwise"
    winner: Literal["a", "b", "tie"]
    a_first: PairwiseReading
    b_first: PairwiseReading
    flip: bool
    criterion: str
    #: how the winner was read: from the written verdicts, or the mean probabilities
    winner_from: Literal["verdicts", "probabilities"] = "verdicts"
    #: what each request asked: a verdict on each answer, or which answer is better (the only
    #: request before "each" came, hence the default of a run log without it)
    ask: Literal["each", "which"] = "which"


class TurnScore(EvidencePart):
    """One scored assistant turn of a conversation: its index in ``turns``, its value, the
    single-turn metric's reason and evidence."""

    turn: int
    value: float
    reason: str | None = None
    evidence: Evidence = Field(default_factory=lambda: FreeformEvidence())


class TurnNotScored(EvidencePart):
    """An assistant turn a per-turn metric did not score, with why."""

    turn: int
    why: str


class PerTurnEvidence(EvidenceBase):
    """A per-turn metric on a conversation (turn_faithfulness, ...): each scored turn and the
    assistant turns not scored."""

    kind: Literal["per_turn"] = "per_turn"
    turns: list[TurnScore] = Field(default_factory=list)
    not_scored: list[TurnNotScored] = Field(default_factory=list)


class FreeformEvidence(EvidenceBase):
    """Evidence of no declared kind: a user's metric's ``MetricResult.ok(value, **evidence)``,
    the judged fields of a user's response model (answer_relevance), or the evidence dict of a
    run log from before kinds (format 7 and earlier). Read by key like the others."""

    kind: Literal["free"] = "free"
    data: dict[str, Any] = Field(default_factory=dict, exclude_if=lambda v: not v)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> FreeformEvidence:
        return cls(data=dict(data))

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def __bool__(self) -> bool:
        return bool(self.data)

    def noted(self, **notes: Any) -> Self:
        return self.model_copy(update={"data": {**self.data, **notes}})


#: the typed kinds by their ``kind``
KINDS: dict[str, type[EvidenceBase]] = {
    c.model_fields["kind"].default: c
    for c in (
        VerdictEvidence,
        ClaimsEvidence,
        FactualityEvidence,
        RatingEvidence,
        RubricEvidence,
        QuestionsEvidence,
        SimilarityEvidence,
        OverlapEvidence,
        ToolCallEvidence,
        GoalEvidence,
        RetentionEvidence,
        TopicEvidence,
        PerTurnEvidence,
        PairwiseEvidence,
        FreeformEvidence,
    )
}


def as_freeform(value: Any) -> Any:
    """`value` as the free-form evidence it stands for when it is a mapping of no known kind
    (a plain evidence dict): ``{"kind": "free", "data": value}``; anything else as it is."""
    if isinstance(value, Mapping) and value.get("kind") not in KINDS:
        return {"kind": "free", "data": dict(value)}
    return value


_Kinds: TypeAlias = (
    VerdictEvidence
    | ClaimsEvidence
    | FactualityEvidence
    | RatingEvidence
    | RubricEvidence
    | QuestionsEvidence
    | SimilarityEvidence
    | OverlapEvidence
    | ToolCallEvidence
    | GoalEvidence
    | RetentionEvidence
    | TopicEvidence
    | PerTurnEvidence
    | PairwiseEvidence
    | FreeformEvidence
)

#: a cell's evidence as the run log stores it (format 8 on): always with its ``kind``, so the
#: kinds are told apart by that field alone, without a Python callback per cell (a callable
#: discriminator and a before-validator doubled the time to read a log)
StoredEvidence: TypeAlias = Annotated[_Kinds, Field(discriminator="kind")]

#: a cell's evidence: one of the typed kinds by its ``kind``; a mapping of no known kind (a
#: user's metric's, an old run log's) is free-form
Evidence: TypeAlias = Annotated[_Kinds, Field(discriminator="kind"), BeforeValidator(as_freeform)]

TurnScore.model_rebuild()
