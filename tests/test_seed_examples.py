"""The examples of the seed documents (/work/shared/seeds/000..004), run as the seeds show them.

Each example is kept in its original shape; the only adaptations are the imports
(`ragas` → `rageval`) and where the judge lives: a FakeOpenAI test server whose handler answers
every prompt validly (the synthetic judge, with ratings at the top of their scale so that the
seed-004 outputs `1.0` are what a top-rating judge gives). Each test then checks the example's
output against values recomputed independently (cosines from the embeddings themselves, F1 from
the counts, means from the ratings), and what reached the server.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import openai
import pytest

from helpers import handle, prompts_with, user_text
from rageval.testing import (
    FAKE_API_KEY,
    FakeOpenAI,
    RecordedRequest,
    Reply,
    hash_embedding,
)

_RATING_SCALE = re.compile(r'\{"rating": (\d+(?:\|\d+)+)\}')


def top_rating_judge(req: RecordedRequest) -> Reply:
    """The synthetic judge, except that a rating request gets the top of the scale it states
    (in its system message, with the reply format)."""
    scale = _RATING_SCALE.search(" ".join(str(m["content"]) for m in req.messages))
    if scale is not None:
        return Reply.json({"rating": max(int(v) for v in scale.group(1).split("|"))})
    return handle(req)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(top_rating_judge) as s:
        yield s


@pytest.fixture
def judge_env(monkeypatch: pytest.MonkeyPatch, server: FakeOpenAI) -> FakeOpenAI:
    """The judge configured the way a seed-000/003 user configures it: the environment."""
    monkeypatch.setenv("RAGEVAL_LLM", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    return server


def cos(a: Sequence[float], b: Sequence[float]) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def local_cosines(anchor: str, texts: Sequence[str]) -> list[float]:
    """Cosines computed here, from the local model's vectors, not by the metric."""
    from rageval.embeddings import embedding_factory

    vectors = embedding_factory("local").embed_texts([anchor, *texts])
    return [cos(vectors[0], v) for v in vectors[1:]]


def hash_cosines(server: FakeOpenAI, anchor: str, texts: Sequence[str]) -> list[float]:
    """Cosines of the vectors the test server's /embeddings returns."""
    return [
        cos(hash_embedding(anchor, server.embed_dim), hash_embedding(t, server.embed_dim))
        for t in texts
    ]


def f1(tp: int, fp: int, fn: int) -> float:
    return 1.0 if tp + fp + fn == 0 else tp / (tp + 0.5 * (fp + fn))


# ------------------------------------------------------------------------------ public API

METRIC_MODULES = {
    "answer_relevancy": "AnswerRelevancy",
    "answer_relevance": "AnswerRelevance",
    "answer_correctness": "AnswerCorrectness",
    "answer_accuracy": "AnswerAccuracy",
    "faithfulness": "Faithfulness",
    "context_precision": "ContextPrecision",
    "context_recall": "ContextRecall",
    "context_relevance": "ContextRelevance",
    "response_groundedness": "ResponseGroundedness",
    "semantic_similarity": "SemanticSimilarity",
    "rubric_score": "RubricScore",
    "token_f1": "TokenF1",
    "rouge_l": "RougeL",
}
SEED_NAMES = {
    "evaluate", "aevaluate", "EvaluationResult", "Sample", "SingleTurnSample", "llm_factory",
    "embedding_factory", "Judge", "AnswerRelevancy", "ResponseRelevancy", "AnswerRelevance",
    "RelevanceScore", "ContextEvaluation", "AnswerCorrectness", "AnswerAccuracy",
    "ContextRelevance", "ResponseGroundedness", "MetricResult",
}  # fmt: skip


def test_every_public_name_is_importable_from_the_top_level() -> None:
    rageval = importlib.import_module("rageval")
    assert set(rageval.__all__) >= SEED_NAMES
    for name in rageval.__all__:
        assert getattr(rageval, name) is not None, name
    assert isinstance(rageval.__version__, str)


def test_metric_classes_and_the_modules_that_stand_for_them() -> None:
    metrics = importlib.import_module("rageval.metrics")
    rageval = importlib.import_module("rageval")
    for module_name, class_name in METRIC_MODULES.items():
        cls = getattr(metrics, class_name)
        assert getattr(rageval, class_name) is cls
        # `from rageval.metrics import faithfulness` is the module (issue 13), which stands for
        # its metric with default settings: evaluate() runs it, and reads its name from it
        module = getattr(metrics, module_name)
        assert module is importlib.import_module(f"rageval.metrics.{module_name}")
        assert metrics.module_metric(module) is cls, module_name
        assert module.name == module_name
        # the metric it stands for brings no judge of its own: evaluate() supplies the run's
        assert module.llm is None
    assert set(METRIC_MODULES) <= set(metrics.registered_metrics())
    assert metrics.ResponseRelevancy is metrics.AnswerRelevancy
    assert metrics.ContextEvaluation is metrics.AnswerRelevance


# ------------------------------------------------------------------------------ seed 000


def seed_000_data_samples() -> dict[str, list[Any]]:
    # seed 000, verbatim (the en dash is written as an escape so the file stays ASCII)
    return {
        'question': ['When was the first super bowl?', 'Who won the most super bowls?'],
        'answer': ['The first superbowl was held on Jan 15, 1967', 'The most super bowls have been won by The New England Patriots'],
        'contexts' : [['The First AFL\u2013NFL World Championship Game was an American football game played on January 15, 1967, at the Los Angeles Memorial Coliseum in Los Angeles,'],
        ['The Green Bay Packers...Green Bay, Wisconsin.','The Packers compete...Football Conference']],
    }  # fmt: skip


def run_seed_000(as_dataset: bool) -> Any:
    from datasets import Dataset

    from rageval import evaluate
    from rageval.metrics import answer_relevancy

    data_samples = seed_000_data_samples()
    dataset = Dataset.from_dict(data_samples) if as_dataset else data_samples
    score = evaluate(dataset,metrics=[answer_relevancy])  # fmt: skip
    return score, score.to_pandas()


def check_seed_000(server: FakeOpenAI, score: Any, df: Any) -> None:
    data = seed_000_data_samples()
    assert list(df["user_input"]) == data["question"]
    assert list(df["response"]) == data["answer"]
    assert list(df["answer_relevancy_status"]) == ["ok", "ok"]
    # one judge request per sample; it shows the answer and never the question it could copy
    prompts = prompts_with(server, "answer")
    assert len(prompts) == 2 == len(server.chat_requests)
    for question, answer in zip(data["question"], data["answer"], strict=True):
        (prompt,) = [p for p in prompts if answer in p]
        assert question not in prompt
    cells = score.cells("answer_relevancy")
    for row, question in enumerate(data["question"]):
        generated = [q["question"] for q in cells[row].evidence["questions"]]
        assert len(generated) == 3  # N = strictness = 3 by default
        expected = sum(local_cosines(question, generated)) / 3
        assert df["answer_relevancy"][row] == pytest.approx(expected, abs=1e-5)
        # questions about the answer's own claim are close to the original question
        assert expected > 0.5


@pytest.mark.parametrize("as_dataset", [True, False], ids=["hf_dataset", "dict_of_lists"])
def test_seed_000_answer_relevancy_evaluate(judge_env: FakeOpenAI, as_dataset: bool) -> None:
    score, df = run_seed_000(as_dataset)
    check_seed_000(judge_env, score, df)


async def test_seed_000_inside_a_running_event_loop(judge_env: FakeOpenAI) -> None:
    # a notebook cell runs inside an event loop: the synchronous evaluate() must still work
    score, df = run_seed_000(as_dataset=True)
    check_seed_000(judge_env, score, df)


# ------------------------------------------------------------------------------ seed 001

SUPER_BOWL_Q = "When was the first super bowl?"
SUPER_BOWL_A = "The first superbowl was held on Jan 15, 1967"


def seed_001_scorer(server: FakeOpenAI) -> Any:
    from openai import AsyncOpenAI

    from rageval.embeddings import embedding_factory
    from rageval.judge import llm_factory
    from rageval.metrics import AnswerRelevancy

    # Setup LLM and embeddings
    client = AsyncOpenAI(base_url=server.base_url, api_key=FAKE_API_KEY)
    llm = llm_factory("gpt-4o-mini", client=client)
    embeddings = embedding_factory("openai", model="text-embedding-3-small", client=client)
    # Create metric
    scorer = AnswerRelevancy(llm=llm, embeddings=embeddings)
    return scorer


def check_relevancy(server: FakeOpenAI, result: Any, user_input: str, response: str) -> None:
    assert result.status == "ok"
    generated = [q["question"] for q in result.evidence["questions"]]
    assert len(generated) == 3
    # the value is the mean cosine of the server's own vectors: recomputed here from them
    expected = sum(hash_cosines(server, user_input, generated)) / 3
    assert result.value == pytest.approx(expected, abs=1e-6)
    asked = [r for r in server.chat_requests if response in user_text(r)]
    assert asked and all(r.model == "gpt-4o-mini" for r in asked)
    embedded = [r for r in server.embedding_requests if user_input in str(r.body.get("input"))]
    assert embedded and all(r.model == "text-embedding-3-small" for r in embedded)


async def test_seed_001_ascore(server: FakeOpenAI) -> None:
    scorer = seed_001_scorer(server)
    # Evaluate
    result = await scorer.ascore(
    user_input="When was the first super bowl?",
    response="The first superbowl was held on Jan 15, 1967"
    )  # fmt: skip
    print(f"Answer Relevancy Score: {result.value}")
    check_relevancy(server, result, SUPER_BOWL_Q, SUPER_BOWL_A)


def test_seed_001_sync_score_called_twice(server: FakeOpenAI) -> None:
    # "If you prefer synchronous code, you can use the .score() method instead of .ascore()";
    # a script calls it more than once, each call on its own event loop
    scorer = seed_001_scorer(server)
    first = scorer.score(user_input=SUPER_BOWL_Q, response=SUPER_BOWL_A)
    check_relevancy(server, first, SUPER_BOWL_Q, SUPER_BOWL_A)
    other = "The Packers won the first Super Bowl, played in January 1967."
    second = scorer.score(user_input=SUPER_BOWL_Q, response=other)
    check_relevancy(server, second, SUPER_BOWL_Q, other)


async def test_seed_001_sync_score_inside_a_running_event_loop(server: FakeOpenAI) -> None:
    # Jupyter: the same scorer used with await, then with the synchronous .score()
    scorer = seed_001_scorer(server)
    result = await scorer.ascore(user_input=SUPER_BOWL_Q, response=SUPER_BOWL_A)
    check_relevancy(server, result, SUPER_BOWL_Q, SUPER_BOWL_A)
    other = "The first Super Bowl took place in Los Angeles in 1967."
    result = scorer.score(user_input=SUPER_BOWL_Q, response=other)
    check_relevancy(server, result, SUPER_BOWL_Q, other)


async def test_seed_001_legacy_response_relevancy(server: FakeOpenAI) -> None:
    from rageval import SingleTurnSample
    from rageval.metrics import ResponseRelevancy

    base = seed_001_scorer(server)
    evaluator_llm, evaluator_embeddings = base.llm, base.embeddings
    sample = SingleTurnSample(
    user_input="When was the first super bowl?",
    response="The first superbowl was held on Jan 15, 1967",
    retrieved_contexts=[
    "The First AFL\u2013NFL World Championship Game was an American football game played on January 15, 1967, at the Los Angeles Memorial Coliseum in Los Angeles."
    ]
    )  # fmt: skip
    scorer = ResponseRelevancy(llm=evaluator_llm, embeddings=evaluator_embeddings)
    result = await scorer.single_turn_ascore(sample)
    check_relevancy(server, result, SUPER_BOWL_Q, SUPER_BOWL_A)


# ------------------------------------------------------------------------------ seed 002

MEDITATION_Q = "What are the benefits of meditation?"
MEDITATION_A = "Meditation reduces stress and improves focus."
MEDITATION_C = "Studies link regular meditation to lower cortisol and better attention."
DIMENSIONS = {"topical_match": 0.9, "completeness": 0.6, "conciseness": 0.75}
REASONING = "On topic and focused; it leaves out sleep and mood."


def relevance_judge(req: RecordedRequest) -> Reply:
    """Ratings with different values on the three dimensions, so their mean is informative."""
    text = user_text(req)
    if "<question>" in text and "<answer>" in text:
        return Reply.json({**DIMENSIONS, "reasoning": REASONING})
    return Reply.text("unexpected request")


def seed_002_client(kind: str, server: FakeOpenAI) -> Any:
    if kind == "judge":
        from rageval import llm_factory

        return llm_factory("gpt-4o-mini", client=openai.AsyncOpenAI(
            base_url=server.base_url, api_key=FAKE_API_KEY
        ))  # fmt: skip
    cls = openai.OpenAI if kind == "openai" else openai.AsyncOpenAI
    return cls(base_url=server.base_url, api_key=FAKE_API_KEY)


def check_relevance_score(relevance_result: Any) -> None:
    from rageval.metrics import RelevanceScore

    assert isinstance(relevance_result, RelevanceScore)
    assert relevance_result.topical_match == DIMENSIONS["topical_match"]
    assert relevance_result.completeness == DIMENSIONS["completeness"]
    assert relevance_result.conciseness == DIMENSIONS["conciseness"]
    assert relevance_result.reasoning == REASONING
    # "The overall score is calculated as the average of these three dimensions": by us
    assert relevance_result.overall_score == pytest.approx((0.9 + 0.6 + 0.75) / 3)


@pytest.mark.parametrize("kind", ["judge", "openai", "async_openai"])
def test_seed_002_grade(kind: str) -> None:
    from rageval.metrics import AnswerRelevance

    question, answer, context = MEDITATION_Q, MEDITATION_A, MEDITATION_C
    with FakeOpenAI(relevance_judge) as server:
        client = seed_002_client(kind, server)
        relevance_result = AnswerRelevance.grade(
            question=question,
            answer=answer,
            context=context,  # Note: context is not used in this evaluation
            client=client
        )  # fmt: skip
        (req,) = server.chat_requests
    check_relevance_score(relevance_result)
    assert req.model == "gpt-4o-mini"
    prompt = user_text(req)
    assert MEDITATION_Q in prompt and MEDITATION_A in prompt
    assert MEDITATION_C not in prompt  # the default evaluation ignores the context
    # the judge is never asked for the overall score
    assert req.schema is None or "overall_score" not in req.schema.get("properties", {})
    assert "overall_score" not in prompt


async def test_seed_002_grade_inside_a_running_event_loop() -> None:
    from rageval.metrics import AnswerRelevance

    with FakeOpenAI(relevance_judge) as server:
        client = seed_002_client("openai", server)
        relevance_result = AnswerRelevance.grade(
            question=MEDITATION_Q, answer=MEDITATION_A, context=MEDITATION_C, client=client
        )
    check_relevance_score(relevance_result)


def test_seed_002_custom_prompt() -> None:
    from rageval import metrics as base
    from rageval.metrics import RelevanceScore
    from rageval.metrics.answer_relevance import DEFAULT_PROMPT

    # Create a customized evaluator with a modified prompt
    CustomRelevance = base.ContextEvaluation(
        prompt="Your custom prompt here with specific evaluation criteria...",
        response_model=RelevanceScore
    )  # fmt: skip
    with FakeOpenAI(relevance_judge) as server:
        client = seed_002_client("openai", server)
        relevance_result = CustomRelevance.grade(
            question=MEDITATION_Q, answer=MEDITATION_A, context=MEDITATION_C, client=client
        )
        (req,) = server.chat_requests
    check_relevance_score(relevance_result)
    prompt = user_text(req)
    assert "Your custom prompt here with specific evaluation criteria..." in prompt
    assert DEFAULT_PROMPT not in prompt  # the custom prompt replaces our instructions
    # the custom evaluation is shown the context, in its own tag
    assert f"<context>\n{MEDITATION_C}\n</context>" in prompt


# ------------------------------------------------------------------------------ seed 003


def seed_003_data_samples() -> dict[str, list[str]]:
    # seed 003, verbatim: question / answer / ground_truth, and no contexts
    return {
        'question': ['When was the first super bowl?', 'Who won the most super bowls?'],
        'answer': ['The first superbowl was held on Jan 15, 1967', 'The most super bowls have been won by The New England Patriots'],
        'ground_truth': ['The first superbowl was held on January 15, 1967', 'The New England Patriots have won the Super Bowl a record six times']
    }  # fmt: skip


def run_seed_003(metric: Any = None) -> tuple[Any, Any]:
    from datasets import Dataset

    from rageval import evaluate
    from rageval.metrics import answer_correctness, faithfulness  # noqa: F401  (the seed's import)

    answer_correctness = metric or answer_correctness
    data_samples = seed_003_data_samples()
    dataset = Dataset.from_dict(data_samples)
    score = evaluate(dataset,metrics=[answer_correctness])  # fmt: skip
    return score, score.to_pandas()


def expected_correctness(
    score: Any, weights: tuple[float, float]
) -> list[tuple[float, float, float]]:
    """(factuality, similarity, weighted score) per sample, from the counts and cosines."""
    data = seed_003_data_samples()
    out = []
    for row, cell in enumerate(score.cells("answer_correctness")):
        ev = cell.evidence
        factuality = f1(ev["tp"], ev["fp"], ev["fn"])
        (similarity,) = local_cosines(data["ground_truth"][row], [data["answer"][row]])
        combined = (weights[0] * factuality + weights[1] * similarity) / sum(weights)
        out.append((factuality, similarity, combined))
    return out


def test_seed_003_answer_correctness(judge_env: FakeOpenAI) -> None:
    score, df = run_seed_003()
    assert list(df["answer_correctness_status"]) == ["ok", "ok"]
    assert list(df["reference"]) == seed_003_data_samples()["ground_truth"]
    cells = score.cells("answer_correctness")
    # the judge's verdicts (synthetic rule: ≥80% of content words shared): sample 1 says the
    # same thing as its reference; sample 2 shares only 5 of 7 content words with it
    assert [(c.evidence["tp"], c.evidence["fp"], c.evidence["fn"]) for c in cells] == [
        (1, 0, 0),
        (0, 1, 1),
    ]
    for row, (factuality, similarity, combined) in enumerate(
        expected_correctness(score, (0.75, 0.25))
    ):
        assert cells[row].evidence["factuality"] == pytest.approx(factuality)
        assert cells[row].evidence["similarity"] == pytest.approx(similarity, abs=1e-5)
        assert df["answer_correctness"][row] == pytest.approx(combined, abs=1e-5)
    # per sample: the response's statements, then one request that classifies them and the
    # reference's statements
    assert len(prompts_with(judge_env, "text")) == 2
    assert len(prompts_with(judge_env, "reference", "answer_statements")) == 2
    assert len(judge_env.chat_requests) == 4


def test_seed_003_custom_weights_and_threshold(judge_env: FakeOpenAI) -> None:
    from rageval.metrics import AnswerCorrectness

    answer_correctness = AnswerCorrectness(weights=[0.4, 0.6], threshold=0.5)
    score, df = run_seed_003(answer_correctness)
    cells = score.cells("answer_correctness")
    expected = expected_correctness(score, (0.4, 0.6))
    for row, (_, _, combined) in enumerate(expected):
        assert cells[row].evidence["score"] == pytest.approx(combined, abs=1e-5)
        assert df["answer_correctness"][row] == (1.0 if combined >= 0.5 else 0.0)
    assert score.to_pandas()["answer_correctness"].isin([0.0, 1.0]).all()


def test_seed_003_faithfulness_needs_the_contexts_this_data_lacks(judge_env: FakeOpenAI) -> None:
    from datasets import Dataset

    from rageval import InvalidDataError, evaluate
    from rageval.metrics import faithfulness

    with pytest.raises(InvalidDataError, match="retrieved_contexts"):
        evaluate(Dataset.from_dict(seed_003_data_samples()), metrics=[faithfulness])
    assert judge_env.chat_requests == []  # validation happens before any model call


# ------------------------------------------------------------------------------ seed 004


def evaluator_llm_for(server: FakeOpenAI) -> Any:
    from rageval import llm_factory

    return llm_factory(
        "gpt-4o-mini", client=openai.AsyncOpenAI(base_url=server.base_url, api_key=FAKE_API_KEY)
    )


async def test_seed_004_answer_accuracy(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    from rageval import SingleTurnSample
    from rageval.metrics import AnswerAccuracy

    evaluator_llm = evaluator_llm_for(server)
    sample = SingleTurnSample(
        user_input="When was Einstein born?",
        response="Albert Einstein was born in 1879.",
        reference="Albert Einstein was born in 1879."
    )  # fmt: skip

    scorer = AnswerAccuracy(llm=evaluator_llm)  # evaluator_llm wrapped with ragas LLM Wrapper  # fmt: skip
    score = await scorer.single_turn_ascore(sample)
    print(score)
    assert capsys.readouterr().out == "1.0\n"
    assert score.evidence["ratings"] == {"template_1": 4, "template_2": 4}
    assert len(server.chat_requests) == 2  # two templates


async def test_seed_004_context_relevance(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    from rageval import SingleTurnSample
    from rageval.metrics import ContextRelevance

    evaluator_llm = evaluator_llm_for(server)
    sample = SingleTurnSample(
        user_input="When and Where Albert Einstein was born?",
        retrieved_contexts=[
            "Albert Einstein was born March 14, 1879.",
            "Albert Einstein was born at Ulm, in W\u00fcrttemberg, Germany.",
        ]
    )  # fmt: skip

    scorer = ContextRelevance(llm=evaluator_llm)
    score = await scorer.single_turn_ascore(sample)
    print(score)
    assert capsys.readouterr().out == "1.0\n"
    assert score.evidence["ratings"] == {"template_1": 2, "template_2": 2}
    assert len(server.chat_requests) == 2


async def test_seed_004_response_groundedness(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    from rageval import SingleTurnSample
    from rageval.metrics import ResponseGroundedness

    evaluator_llm = evaluator_llm_for(server)
    sample = SingleTurnSample(
        response="Albert Einstein was born in 1879.",
        retrieved_contexts=[
            "Albert Einstein was born March 14, 1879.",
            "Albert Einstein was born at Ulm, in W\u00fcrttemberg, Germany.",
        ]
    )  # fmt: skip

    scorer = ResponseGroundedness(llm=evaluator_llm)
    score = await scorer.single_turn_ascore(sample)
    print(score)
    assert capsys.readouterr().out == "1.0\n"
    assert score.evidence["ratings"] == {"template_1": 2, "template_2": 2}
    assert len(server.chat_requests) == 2


def test_seed_004_mixed_ratings_average_on_the_unit_scale(server: FakeOpenAI) -> None:
    # the seed's arithmetic with two different ratings: (4/4 + 2/4) / 2 = 0.75
    from rageval import SingleTurnSample
    from rageval.metrics import AnswerAccuracy

    def judge(req: RecordedRequest) -> Reply:
        return Reply.json({"rating": 4 if "<candidate>" in user_text(req) else 2})

    server.handler = judge
    scorer = AnswerAccuracy(llm=evaluator_llm_for(server))
    score = scorer.single_turn_score(
        SingleTurnSample(
            user_input="When was Einstein born?",
            response="Albert Einstein was born in 1879.",
            reference="Albert Einstein was born on 14 March 1879 in Ulm.",
        )
    )
    assert score.value == 0.75


# -------------------------------------------------- every seed, against a schema-only judge


def test_every_seed_example_is_finite_and_on_its_scale_with_a_random_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeds' examples, unchanged but for imports and the endpoint, against a judge that
    answers at random within the schema sent and ignores the prose (issue 11): every value is
    measured, finite, and on the scale the seed documents."""
    import math

    from rageval import SingleTurnSample
    from rageval.metrics import (
        AnswerAccuracy,
        AnswerRelevance,
        ContextRelevance,
        RelevanceScore,
        ResponseGroundedness,
    )
    from rageval.testing import RandomJudge

    def on(scale: tuple[float, float], *values: Any) -> None:
        for value in values:
            assert value is not None and math.isfinite(value), value
            assert scale[0] <= value <= scale[1], (value, scale)

    with FakeOpenAI(RandomJudge(seed=11)) as server:
        monkeypatch.setenv("RAGEVAL_LLM", "gpt-4o-mini")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
        _, df = run_seed_000(as_dataset=False)  # seed 000
        assert list(df["answer_relevancy_status"]) == ["ok", "ok"]
        on((-1.0, 1.0), *df["answer_relevancy"])
        scorer = seed_001_scorer(server)  # seed 001
        result = scorer.score(user_input=SUPER_BOWL_Q, response=SUPER_BOWL_A)
        on((-1.0, 1.0), result.value)
        relevance = AnswerRelevance.grade(  # seed 002
            question=MEDITATION_Q, answer=MEDITATION_A, context=MEDITATION_C,
            client=seed_002_client("openai", server),
        )  # fmt: skip
        tenths = {round(i / 10, 1) for i in range(11)}
        assert isinstance(relevance, RelevanceScore)
        assert {relevance.topical_match, relevance.completeness, relevance.conciseness} <= tenths
        on((0.0, 1.0), relevance.overall_score)
        _, df = run_seed_003()  # seed 003
        assert list(df["answer_correctness_status"]) == ["ok", "ok"]
        on((-0.25, 1.0), *df["answer_correctness"])
        llm = evaluator_llm_for(server)  # seed 004
        einstein = SingleTurnSample(
            user_input="When was Einstein born?",
            response="Albert Einstein was born in 1879.",
            reference="Albert Einstein was born in 1879.",
            retrieved_contexts=["Albert Einstein was born March 14, 1879."],
        )
        for metric in (AnswerAccuracy, ContextRelevance, ResponseGroundedness):
            score = metric(llm=llm).single_turn_score(einstein)
            assert score.value in {0.0, 0.25, 0.5, 0.75, 1.0}, (metric, score)
        assert not server.handler_errors
