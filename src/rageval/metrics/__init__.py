"""Metric classes, their registry and ragas-style default instances.

Each metric lives in its own module (fields, prompts, response model, pure scoring function).
Importing this package registers them all by name.
"""

from rageval.metrics.answer_accuracy import AnswerAccuracy
from rageval.metrics.answer_correctness import AnswerCorrectness
from rageval.metrics.answer_relevance import AnswerRelevance, ContextEvaluation, RelevanceScore
from rageval.metrics.answer_relevancy import AnswerRelevancy, ResponseRelevancy
from rageval.metrics.base import (
    Metric,
    MetricResult,
    NoJudgeError,
    ScoringContext,
    create_metric,
    metric_class,
    register,
    registered_metrics,
)
from rageval.metrics.context_precision import ContextPrecision
from rageval.metrics.context_recall import ContextRecall
from rageval.metrics.context_relevance import ContextRelevance
from rageval.metrics.faithfulness import Faithfulness
from rageval.metrics.lexical import RougeL, TokenF1
from rageval.metrics.response_groundedness import ResponseGroundedness
from rageval.metrics.rubric_score import RubricScore
from rageval.metrics.semantic_similarity import SemanticSimilarity

# Default instances, as ragas users import them (`from ragas.metrics import faithfulness`).
# They carry no judge or embeddings of their own; evaluate() supplies the run's.
answer_accuracy = AnswerAccuracy()
answer_correctness = AnswerCorrectness()
context_precision = ContextPrecision()
context_recall = ContextRecall()
context_relevance = ContextRelevance()
response_groundedness = ResponseGroundedness()
faithfulness = Faithfulness()
answer_relevance = AnswerRelevance()
answer_relevancy = AnswerRelevancy()
rubric_score = RubricScore()
semantic_similarity = SemanticSimilarity()
token_f1 = TokenF1()
rouge_l = RougeL()

__all__ = [
    "AnswerAccuracy",
    "AnswerCorrectness",
    "AnswerRelevance",
    "AnswerRelevancy",
    "ContextEvaluation",
    "ContextPrecision",
    "ContextRecall",
    "ContextRelevance",
    "Faithfulness",
    "Metric",
    "MetricResult",
    "NoJudgeError",
    "RelevanceScore",
    "ResponseGroundedness",
    "ResponseRelevancy",
    "RougeL",
    "RubricScore",
    "ScoringContext",
    "SemanticSimilarity",
    "TokenF1",
    "answer_accuracy",
    "answer_correctness",
    "answer_relevance",
    "answer_relevancy",
    "context_precision",
    "context_recall",
    "context_relevance",
    "create_metric",
    "faithfulness",
    "metric_class",
    "register",
    "registered_metrics",
    "response_groundedness",
    "rouge_l",
    "rubric_score",
    "semantic_similarity",
    "token_f1",
]
