"""Building blocks for writing a metric: prompts, response models whose JSON schema *is* the
contract, and the per-item verdict request every item-by-item metric uses.

The judge contract lives in the schema. Every rule a reply must obey is expressed in the JSON
schema sent with the request, within the subset that every structured-output implementation
enforces (required keys, enums, ``additionalProperties: false``; never ``minItems``,
``maxItems``, ``minimum``...), so that a judge that obeys only the schema — constrained
decoding, a small local model — still gives a usable reply:

* a verdict per item is an object with one required key per item (``"s1"``, ``"s2"``, … for
  statements, ``"c1"``, … for contexts, ``"r1"``, … for reference sentences), each holding the
  judge's ``reason`` *before* its boolean verdict, so the judge reasons first
  (:func:`verdict_model`);
* a rating is an enum of exactly the allowed values (:func:`rating_model`), never a bare number;
  a JSON ``true`` is not a rating of 1;
* a score from 0 to 1 (:data:`UnitScore`) is sent as an enum of tenths (0.0, 0.1, …, 1.0).

The reply is still validated against the pydantic model on our side — that is the authority
when the schema only travels in the prompt (``json`` mode) or the server ignores it. A
:data:`UnitScore` is the one place where the check is wider than the schema: any number from
0 to 1 is accepted from a judge that does not decode within the schema.

Untrusted text (question, answer, contexts, reference) always travels inside named tags
(:func:`tagged`), and the system message tells the judge that tagged text is material to
assess, never instructions. Items the judge rules on are listed one per line as ``[id] text``
(:func:`numbered`), so a context cannot start a line that looks like another item.

Layout, for prompt caching (a provider's, llama.cpp's or vLLM's: a prompt's beginning is
served from cache when an earlier request began the same way). Which text comes first depends
on what can be shared:

* a request that shows the retrieved contexts begins with them (:func:`contexts_block`), then
  the rest of its data, then how to reply and its instructions, last
  (:func:`data_first_messages`, with the system message alone): every such request of a
  sample, whatever the metric, begins with the same text, and the contexts are most of a
  sample's text; templates that rate the same data are laid out the same way;
* any other request holds the evaluator's role and how to reply in the system message (in
  ``json`` mode the judge appends the schema there too) and its instructions, then its data,
  in the user message (:func:`messages`): every request of the metric begins with the same
  text whatever the sample.

What a metric author needs, by task (docs/writing-metrics.md puts them to work):

* prompts: :func:`messages` (the system message above + your text), :func:`tagged` (fence
  untrusted text), :func:`contexts_block` and :func:`data_first_messages` (the retrieved
  contexts first), :func:`numbered` / :func:`item_ids` (items under ids), :func:`nonblank`
  (the one rule for blank contexts), :func:`split_sentences`, :data:`STATEMENT_RULES`;
* verdicts per item: :func:`judge_items` (ask, in chunks, with budgets) → :class:`Verdict`
  list, or the same question stated once as a :class:`VerdictQuestion` (``ask`` and
  ``plan``); :func:`verdict_evidence`, :func:`unjudged`; lower level :func:`verdict_model`,
  :func:`verdict_request`; :class:`VerdictMetric`, the base of a metric scored from them;
* ratings on a fixed scale: :class:`RatingMetric` and :func:`rate_with_templates` (several
  templates, the valid ratings combined by `value`: :func:`mean_rating` under sampled
  scoring, each template's expected rating or the pass probability where the judge scores
  by probabilities: ``metrics._rating_value``); :func:`rating_prompts`,
  :func:`rating_model`;
* a reply schema of your own: a :class:`ReplyModel` subclass (strict, no extra keys);
* scores from 0 to 1: :data:`UnitScore`; judged numbers: :func:`number_only`;
* reply budgets: :func:`reply_budget`, :func:`text_tokens`;
* embeddings: ``ctx.embed`` and, for a text the model cut, ``ctx.truncated`` with
  :func:`note_truncation`;
* the requests a metric will make, for the dry run and the budget (``planned_requests``):
  :class:`PlannedRequest`, :func:`planned_statements`, :meth:`VerdictQuestion.plan`,
  :func:`planned_ratings`, :func:`predicted_statements`;
* blank inputs: :class:`BlankRule` (:func:`zero_if_blank`, :func:`not_measured_if_blank`,
  :data:`NO_REFERENCE`) in a metric's ``blank_rules``;
* people's guidance, as ``rageval align`` chooses it: :class:`GuidedMetric` (the parameters
  ``instructions``, ``examples``, ``reasons``, ``threshold``), :class:`Guidance` (the
  guidelines and labelled examples between a request's task and its sample), with
  :func:`rated_verdict` / :func:`item_verdict` (how people's label reads in an example) and
  :func:`verdict_data` (a verdict request's data, also an example's).

The judge itself is reached through the :class:`~rageval.metrics.base.ScoringContext` a
metric's ``measure`` gets: ``ctx.ask`` (one validated reply), ``ctx.ask_n`` (n independent
ones), ``ctx.embed`` (vectors), ``ctx.statements`` (the sample's atomic statements, extracted
once per sample).
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    WithJsonSchema,
    create_model,
)

from rageval.metrics._guidance import (
    Guidance,
    GuidedMetric,
    LabelledExample,
    item_verdict,
    labelled_examples,
    rated_verdict,
)
from rageval.metrics._prompting import (
    ABBREVIATIONS,
    EXPECTED_ITEM_TOKENS,
    EXPECTED_RATING_TOKENS,
    EXPECTED_REASON_TOKENS,
    EXPECTED_VERDICT_TOKENS,
    ITEM_REPLY_TOKENS,
    MAX_ITEMS_PER_REQUEST,
    MAX_REPLY_TOKENS,
    STATEMENT_RULES,
    SYSTEM,
    PlannedRequest,
    ReplyModel,
    contexts_block,
    data_first_messages,
    in_language,
    item_ids,
    messages,
    nonblank,
    number_only,
    numbered,
    predicted_statements,
    reference_text,
    reply_budget,
    split_sentences,
    tagged,
    text_tokens,
)
from rageval.metrics._rating_value import (
    RatingValue,
    as_rating_value,
    mean_rating,
    rate_with_templates,
    rating_model,
)
from rageval.metrics.base import (
    BlankRule,
    Metric,
    MetricResult,
    ScoringContext,
    not_measured_if_blank,
    note_truncation,
    zero_if_blank,
)
from rageval.metrics.evidence import JudgedItem, VerdictEvidence
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.judge import JudgeReply

__all__ = [
    "ABBREVIATIONS",
    "EXPECTED_ITEM_TOKENS",
    "EXPECTED_RATING_TOKENS",
    "EXPECTED_REASON_TOKENS",
    "EXPECTED_VERDICT_TOKENS",
    "ITEM_REPLY_TOKENS",
    "MAX_ITEMS_PER_REQUEST",
    "MAX_REPLY_TOKENS",
    "NO_REFERENCE",
    "STATEMENT_RULES",
    "SYSTEM",
    "UNIT_SCORES",
    "BlankRule",
    "DataFirstVerdictText",
    "Guidance",
    "GuidedMetric",
    "LabelledExample",
    "PlannedRequest",
    "RatingMetric",
    "RatingValue",
    "ReplyModel",
    "UnitScore",
    "Verdict",
    "VerdictMetric",
    "VerdictQuestion",
    "VerdictRequest",
    "contexts_block",
    "data_first_messages",
    "in_language",
    "item_ids",
    "item_verdict",
    "judge_items",
    "judged_items",
    "labelled_examples",
    "mean_rating",
    "messages",
    "nonblank",
    "not_measured_if_blank",
    "note_truncation",
    "number_only",
    "numbered",
    "planned_ratings",
    "planned_statements",
    "predicted_statements",
    "rate_with_templates",
    "rated_verdict",
    "rating_model",
    "rating_prompts",
    "reference_text",
    "reply_budget",
    "share_true",
    "split_sentences",
    "tagged",
    "text_tokens",
    "unjudged",
    "verdict_data",
    "verdict_evidence",
    "verdict_format",
    "verdict_model",
    "verdict_prompt",
    "verdict_request",
    "zero_if_blank",
]


def rating_prompts(
    scale: tuple[int, ...], *bodies: str, reasons: bool = False, data: str | None = None
) -> list[list[dict[str, str]]]:
    """The chat messages of rating templates: each body (instructions, then the tagged data)
    with the reply format of `scale` (``Reply as {"rating": 0|1|2}.``) in the system message;
    with `reasons`, the reasoning asked for before the rating (:func:`rating_model`).

    Templates that rate the same `data` take it here, and their bodies are instructions only:
    each request is then the data, the reply format and its instructions
    (:func:`data_first_messages`). The two requests of a sample begin
    with the same text, so a server's prompt cache (llama.cpp, vLLM) serves the second one the
    data the first one read (a local model reads a prompt token at a few dozen a second); a
    sample's data is far longer than a template's instructions, which are all that requests of
    different samples could share."""
    values = "|".join(map(str, scale))
    reply = 'Reply as {"rating": ' + values + "}."
    if reasons:
        reply = (
            'Reply as {"reason": "your reasoning", "rating": ' + values + "}: reason first, "
            "then rate."
        )
    if data is not None:
        return [data_first_messages(data, instructions, reply) for instructions in bodies]
    return [messages(body, reply) for body in bodies]


#: the values of a :data:`UnitScore` in the schema sent to the judge
UNIT_SCORES: tuple[float, ...] = tuple(round(i / 10, 1) for i in range(11))


def _unit_interval(value: float) -> float:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError("must be a number from 0 to 1")
    return value


#: a judged score from 0 to 1: an enum of tenths in the schema (constrained decoders cannot be
#: held to a range otherwise), any finite number in [0, 1] when checked on our side
UnitScore = Annotated[
    float,
    BeforeValidator(number_only),
    AfterValidator(_unit_interval),
    WithJsonSchema({"type": "number", "enum": list(UNIT_SCORES)}),
]


@functools.cache
def _item_model(verdict: str, meaning: str, reasons: bool) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    if reasons:  # the reason first, so that the judge reasons before it rules
        fields["reason"] = (str, Field(description="one short sentence"))
    fields[verdict] = (StrictBool, Field(description=meaning))
    return create_model(
        f"{verdict.title().replace('_', '')}{'' if reasons else 'Bare'}Verdict",
        __base__=ReplyModel,
        **fields,
    )


@functools.lru_cache(maxsize=2048)
def verdict_model(
    prefix: str,
    first: int,
    count: int,
    verdict: str,
    meaning: str,
    base: type[BaseModel] | None = None,
    reasons: bool = True,
) -> type[BaseModel]:
    """A response model with one required key per item, ``{prefix}{first}`` … (and
    ``additionalProperties: false``), each ``{"reason": str, verdict: bool}`` (``{verdict:
    bool}`` without `reasons`), after the fields of `base` if given. Made once per (shape,
    count): its schema is encoded once."""
    item = _item_model(verdict, meaning, reasons)
    fields: dict[str, Any] = {key: (item, ...) for key in item_ids(prefix, count, first)}
    name = f"{item.__name__}s"
    return create_model(name, __base__=base or ReplyModel, **fields)


# ------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Verdict:
    """The judge's ruling on one item."""

    id: str
    text: str
    verdict: bool
    reason: str
    #: the probability that the verdict is true, where the judge's scoring read it from the
    #: token log-probabilities (docs/judge-probabilities.md); None: the verdict as written
    probability: float | None = None

    @property
    def weight(self) -> float:
        """What the verdict counts for in a share or a precision: its probability of being
        true where there is one, else 1.0 or 0.0."""
        return float(self.verdict) if self.probability is None else self.probability


def unjudged(items: Sequence[str], prefix: str) -> list[Verdict]:
    """The verdicts on `items` when they are known without asking: all false, no reason (e.g.
    statements when no context was retrieved to support them)."""
    return [
        Verdict(key, t, False, "")
        for key, t in zip(item_ids(prefix, len(items)), items, strict=True)
    ]


def judged_items(verdicts: Sequence[Verdict]) -> list[JudgedItem]:
    """A metric's verdicts as typed evidence (the rows of a :class:`VerdictEvidence`)."""
    return [
        JudgedItem(
            id=v.id,
            text=v.text,
            verdict=v.verdict,
            reason=v.reason or None,
            probability=v.probability,
        )
        for v in verdicts
    ]


class VerdictMetric(Metric):
    """Base of a metric whose value comes from the judge's verdict on each item of a list
    (faithfulness: the response's statements; context_recall: the reference's sentences;
    context_precision: the retrieved contexts): a subclass says what the items are
    (`verdict_items`) and what a true verdict says of one (`verdict_means`), the heading of
    the verdict table its evidence is (:meth:`verdict_table`)."""

    needs_llm = True  # every verdict is the judge's
    value_range = (0.0, 1.0)
    #: what the items are: "statements", "reference sentences", "contexts"
    verdict_items: ClassVar[str]
    #: what a true verdict says of an item: "supported by the retrieved contexts", ...
    verdict_means: ClassVar[str]
    #: whether the judge writes a reason before each verdict when `reasons` is not given
    reasons_by_default: ClassVar[bool] = True

    def __init__(self, *, reasons: bool | None = None, **kw: Any) -> None:
        """`reasons`: whether the judge writes a short reason before each verdict (None: the
        metric's default, :attr:`reasons_by_default`); without them a small local model
        answers in a fraction of the time, and the evidence has verdicts only. A metric that
        is also a :class:`GuidedMetric` takes `reasons` there, which sets it after this."""
        super().__init__(**kw)
        if reasons is not None and not isinstance(reasons, bool):
            raise ValueError(f"reasons must be true, false or None, got {reasons!r}")
        self.reasons = self.reasons_by_default if reasons is None else reasons
        self.record_config("reasons", self.reasons)

    def verdict_table(self, rows: list[JudgedItem]) -> VerdictEvidence:
        """The verdicts `rows` under this metric's heading: its typed evidence."""
        return VerdictEvidence(items=self.verdict_items, means=self.verdict_means, verdicts=rows)

    def share_result(self, verdicts: Sequence[Verdict], reason: str) -> MetricResult:
        """The share of true `verdicts` (there is at least one; each counts its probability of
        being true where the judge scored by probabilities) as the value, with `reason` and the
        verdicts as the evidence."""
        value = share_true([v.weight for v in verdicts])
        assert value is not None  # the caller has a verdict
        return MetricResult.ok(value, reason=reason).with_evidence(
            self.verdict_table(judged_items(verdicts))
        )


def verdict_evidence(verdicts: Sequence[Verdict], field: str) -> list[dict[str, Any]]:
    """The evidence list of a metric's verdicts: id, text, the verdict under `field`, reason."""
    return [
        {"id": v.id, "text": v.text, field: v.verdict, "reason": v.reason or None} for v in verdicts
    ]


def verdict_prompt(
    task: str,
    items_tag: str,
    /,
    *,
    contexts_first: Sequence[str] | None = None,
    items_first: bool = False,
    **data: str,
) -> Callable[[str], str]:
    """The text of a verdict request, as :class:`VerdictQuestion` and :func:`judge_items`
    take it: `task` first, then each of `data` inside its own tag (in the order given), then
    the numbered items inside `items_tag` (:func:`verdict_data`): fixed text first and sample
    text last, so that a prompt cache serves the task to every sample's request.

    A request that judges against the retrieved contexts gives them as `contexts_first`; one
    whose items are the contexts (numbered ``c1``, ``c2``, …) says `items_first`. It begins with
    the contexts (:func:`contexts_block`), then `data` (and the items), and `task` comes last
    (:class:`DataFirstVerdictText`), so that a prompt cache serves one sample's contexts to
    every metric that shows them (a sample's contexts are far longer than a task)."""
    if contexts_first is not None and items_first:
        raise ValueError("contexts_first and items_first: the contexts are shown once")
    if contexts_first is not None or items_first:
        contexts = None if contexts_first is None else tuple(contexts_first)
        return DataFirstVerdictText(task, items_tag, tuple(data.items()), contexts)
    return lambda numbered_items: f"{task}\n\n" + verdict_data(items_tag, numbered_items, **data)


@dataclass(frozen=True)
class DataFirstVerdictText:
    """The text of a verdict request that shows the retrieved contexts (made by
    :func:`verdict_prompt`): the contexts, the other data and the items, then the task. Called
    with the numbered items it is the whole text; :func:`verdict_request` lays it out with
    :func:`data_first_messages` (how to reply between the data and the task)."""

    task: str
    items_tag: str
    data: tuple[tuple[str, str], ...]
    #: the contexts shown before the data; None: the items are the contexts, shown first
    contexts: tuple[str, ...] | None

    def data_text(self, numbered_items: str) -> str:
        """Everything but the task: the contexts first, then the data and the items."""
        if self.contexts is None:
            rest = "".join(f"\n{tagged(tag, text)}" for tag, text in self.data)
            return tagged(self.items_tag, numbered_items) + rest
        items = verdict_data(self.items_tag, numbered_items, **dict(self.data))
        return f"{contexts_block(self.contexts)}\n{items}"

    def __call__(self, numbered_items: str) -> str:
        return f"{self.data_text(numbered_items)}\n\n{self.task}"


def verdict_data(items_tag: str, numbered_items: str, /, **data: str) -> str:
    """The data of a verdict request: each of `data` inside its own tag (in the order given),
    then the numbered items inside `items_tag` -- also how a labelled example of a verdict
    metric is shown (:meth:`Guidance.head`)."""
    return "".join(f"{tagged(tag, text)}\n" for tag, text in data.items()) + tagged(
        items_tag, numbered_items
    )


def verdict_format(prefix: str, verdict: str, reasons: bool = True) -> str:
    """How to reply with one verdict per item: the same words for every request of a metric
    (the schema sent names the exact ids); without `reasons`, the verdicts alone."""
    item = f'{{"reason": "one short sentence", "{verdict}": true or false}}'
    if not reasons:
        item = f'{{"{verdict}": true or false}}'
    return f'Reply with one key per numbered id ("{prefix}1", "{prefix}2", ...), each as {item}.'


def verdict_request(
    items: Sequence[str],
    prompt: Callable[[str], str],
    *,
    prefix: str,
    verdict: str,
    meaning: str,
    first: int = 1,
    base: type[BaseModel] | None = None,
    base_tokens: int = 0,
    reasons: bool = True,
) -> tuple[list[dict[str, str]], type[BaseModel], int]:
    """One verdict request of :func:`judge_items`: its messages, its response model and its
    reply budget, for `items` numbered from `first`. The reply format (:func:`verdict_format`)
    goes in the system message and `prompt`'s text in the user message, or, for a
    :class:`DataFirstVerdictText`, between its data and its task (:func:`data_first_messages`).
    Without `reasons` the judge rules on each item without writing a reason first."""
    model = verdict_model(prefix, first, len(items), verdict, meaning, base, reasons)
    shown = numbered(items, prefix, first)
    budget = min(reply_budget(len(items)) + base_tokens, MAX_REPLY_TOKENS)
    reply = verdict_format(prefix, verdict, reasons) if items else None
    if isinstance(prompt, DataFirstVerdictText):
        return data_first_messages(prompt.data_text(shown), prompt.task, reply), model, budget
    return messages(prompt(shown), reply), model, budget


@dataclass(frozen=True)
class VerdictRequest:
    """One request of :func:`judge_items`: the items it asks about, numbered from
    ``first``, its messages, its response model and its reply budget."""

    first: int
    items: list[str]
    messages: list[dict[str, str]]
    model: type[BaseModel]
    budget: int


async def judge_items(
    ctx: ScoringContext,
    items: Sequence[str],
    prompt: Callable[[str], str],
    *,
    prefix: str,
    verdict: str,
    meaning: str,
    base: type[BaseModel] | None = None,
    base_tokens: int = 0,
    reasons: bool = True,
) -> tuple[list[Verdict], BaseModel | None]:
    """The judge's verdict on each of `items`, in order.

    `prompt` gets the numbered items (``[s1] …`` lines) and returns the request's text: the
    instructions first, then the tagged data (the items among them); the reply format of the
    verdicts is added to the system message here. The items go in requests of at most
    :data:`MAX_ITEMS_PER_REQUEST` (asked concurrently, :meth:`VerdictQuestion.requests`), each with a
    reply budget sized from its items. With `base`, the first request's reply also fills the
    fields of `base` (given `base_tokens` more of budget), which is returned with the verdicts.
    Without `reasons` the judge gives the verdicts alone (faster; each Verdict's reason is "").
    """
    question = VerdictQuestion(prompt, prefix, verdict, meaning, base, base_tokens, reasons)
    return await question.ask(ctx, items)


@dataclass(frozen=True)
class VerdictQuestion:
    """What a metric asks the judge about each of its items (see :func:`judge_items` for the
    fields), stated once for scoring (:meth:`ask`) and for the dry run and the budget
    (:meth:`plan`)."""

    prompt: Callable[[str], str]
    prefix: str
    verdict: str
    meaning: str
    base: type[BaseModel] | None = None
    base_tokens: int = 0
    #: whether the judge writes a reason before each verdict
    reasons: bool = True

    def requests(self, items: Sequence[str]) -> list[VerdictRequest]:
        """The requests :meth:`ask` sends for `items`: at most :data:`MAX_ITEMS_PER_REQUEST`
        items each (one request when there are none), the first one also asking for the
        fields of `base` (with `base_tokens` more of budget)."""
        chunks = [
            (start, list(items[start : start + MAX_ITEMS_PER_REQUEST]))
            for start in range(0, len(items), MAX_ITEMS_PER_REQUEST)
        ] or [(0, [])]
        out = []
        for index, (start, chunk) in enumerate(chunks):
            base = self.base if index == 0 else None
            msgs, model, budget = verdict_request(
                chunk,
                self.prompt,
                prefix=self.prefix,
                verdict=self.verdict,
                meaning=self.meaning,
                first=start + 1,
                base=base,
                base_tokens=self.base_tokens if base is not None else 0,
                reasons=self.reasons,
            )
            out.append(VerdictRequest(start + 1, chunk, msgs, model, budget))
        return out

    async def ask(
        self, ctx: ScoringContext, items: Sequence[str]
    ) -> tuple[list[Verdict], BaseModel | None]:
        """The judge's verdict on each of `items`, in order, and the reply's `base` fields."""
        verdicts, first = await self.ask_scored(ctx, items)
        return verdicts, (first.value if self.base is not None else None)

    async def ask_scored(
        self, ctx: ScoringContext, items: Sequence[str]
    ) -> tuple[list[Verdict], JudgeReply[BaseModel]]:
        """:meth:`ask`, with the first reply whole: its `base` fields (``.value``) and how their
        choices were scored (``.scoring.read_probability(...)``). Each verdict carries its
        probability of being true where the judge scored by probabilities
        (:attr:`Verdict.weight`)."""
        requests = self.requests(items)
        replies = await asyncio.gather(
            *(ctx.ask_scored(r.messages, r.model, max_tokens=r.budget) for r in requests)
        )
        out: list[Verdict] = []
        for request, reply in zip(requests, replies, strict=True):
            for key, text in zip(
                item_ids(self.prefix, len(request.items), request.first),
                request.items,
                strict=True,
            ):
                ruling = getattr(reply.value, key)
                reason = ruling.reason if self.reasons else ""
                probability = reply.scoring.read_probability(key, self.verdict)
                verdict = Verdict(key, text, getattr(ruling, self.verdict), reason, probability)
                out.append(verdict)
        return out, replies[0]

    def plan(
        self, items: Sequence[str], *, base_reply_tokens: int = 0, predicted: bool = False
    ) -> list[PlannedRequest]:
        """The requests :meth:`ask` sends for `items`, as planned requests (the first one's
        reply also fills `base`: `base_reply_tokens` more expected)."""
        return [
            PlannedRequest(
                r.messages,
                r.model,
                reply_tokens=4
                + (EXPECTED_ITEM_TOKENS if self.reasons else EXPECTED_VERDICT_TOKENS) * len(r.items)
                + (base_reply_tokens if i == 0 else 0),
                max_tokens=r.budget,
                predicted=predicted,
            )
            for i, r in enumerate(self.requests(items))
        ]


# --------------------------------------------------------------- planned requests


def planned_statements(
    sample: Sample, which: Literal["response", "reference"]
) -> list[PlannedRequest]:
    """The request that extracts `which` text's atomic statements (``ctx.statements``), as a
    metric reading them plans it: made once per sample whichever metrics read it (none for
    a blank text)."""
    from rageval.metrics._statements import planned

    return planned(sample, which)


def planned_ratings(
    prompts: Sequence[list[dict[str, str]]], scale: tuple[int, ...], *, reasons: bool = False
) -> list[PlannedRequest]:
    """One planned request per rating template (with `reasons`: the reasoning before it)."""
    model = rating_model(scale, reasons=reasons)
    expected = EXPECTED_RATING_TOKENS + (EXPECTED_REASON_TOKENS if reasons else 0)
    return [PlannedRequest(p, model, reply_tokens=expected) for p in prompts]


# ------------------------------------------------------------------ ratings


def share_true(verdicts: Sequence[float]) -> float | None:
    """The share of true verdicts (booleans, or their probabilities of being true); None when
    there is none (0/0 is not a score)."""
    return sum(verdicts) / len(verdicts) if verdicts else None


#: the rule of metrics that compare the response with the reference: without a reference
#: they are not defined
NO_REFERENCE = not_measured_if_blank("reference", "the reference is empty: nothing to compare with")


class RatingMetric(Metric):
    """Base of a metric that rates a sample on a fixed `scale` with one or more templates
    (answer_accuracy, context_relevance, response_groundedness): a subclass sets `scale` and
    implements :meth:`templates`; scoring (every template rated, the valid ratings combined
    by `value`) and the planned requests follow from them. `max_retries` is the re-ask budget per
    template; `value` how ratings read by probability become the value, ``"expected"`` or
    ``"pass_probability"`` (None: :attr:`default_value`; :mod:`~rageval.metrics._rating_value`).
    (A subclass may still write its own ``measure`` around :meth:`rate`.)"""

    needs_llm = True  # every rating is the judge's
    value_range = (0.0, 1.0)  # the rating's position on its scale
    scale: ClassVar[tuple[int, ...]]
    #: whether the judge writes its reasoning before each rating (:func:`rating_model`); a
    #: :class:`GuidedMetric` sets it from its `reasons` argument
    reasons: bool = False
    #: the reading of the ratings when `value` is not given
    default_value: ClassVar[RatingValue] = "expected"
    #: what a run recorded before rating metrics took `value` used (a resumed run keeps it)
    earlier_params: ClassVar[Mapping[str, Any]] = {"value": "expected"}

    def __init__(
        self, *, max_retries: int = 5, value: RatingValue | None = None, **kw: Any
    ) -> None:
        super().__init__(**kw)
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.max_retries = max_retries
        self.value = as_rating_value(self.default_value if value is None else value)
        self.record_config("value", self.value)

    def templates(self, sample: Sample) -> list[list[dict[str, str]]]:
        """The chat messages of each rating template for `sample`."""
        raise NotImplementedError(f"{type(self).__name__} must implement templates(sample)")

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        return planned_ratings(self.templates(sample), self.scale, reasons=self.reasons)

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        return await self.rate(ctx, self.templates(sample))

    async def rate(
        self, ctx: ScoringContext, prompts: Sequence[list[dict[str, str]]]
    ) -> MetricResult:
        """:func:`rate_with_templates` on this metric's scale and re-ask budget."""
        return await rate_with_templates(
            ctx, prompts, self.scale, self.max_retries, reasons=self.reasons, value=self.value
        )
