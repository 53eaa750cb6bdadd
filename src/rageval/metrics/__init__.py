"""Metric classes, their registry and ragas-style default instances.

Each metric lives in its own module (fields, prompts, response model, pure scoring function).
Importing this package registers them all by name.
"""

from rageval.metrics.answer_accuracy import AnswerAccuracy
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
from rageval.metrics.faithfulness import Faithfulness

# Default instances, as ragas users import them (`from ragas.metrics import faithfulness`).
# They carry no judge or embeddings of their own; evaluate() supplies the run's.
answer_accuracy = AnswerAccuracy()
faithfulness = Faithfulness()

__all__ = [
    "AnswerAccuracy",
    "Faithfulness",
    "Metric",
    "MetricResult",
    "NoJudgeError",
    "ScoringContext",
    "answer_accuracy",
    "create_metric",
    "faithfulness",
    "metric_class",
    "register",
    "registered_metrics",
]
