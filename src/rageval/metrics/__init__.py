"""Metric classes, their modules, and the registry.

Each metric lives in a module named like it (its fields, prompt(s), response model and pure
scoring function): ``import rageval.metrics.faithfulness`` is that module. Importing this
package registers every metric by name.

A metric module also stands for its metric with default settings, as ragas users write it:
``evaluate(rows, metrics=[faithfulness, answer_correctness])`` after ``from rageval.metrics
import faithfulness, answer_correctness`` runs ``Faithfulness()`` and ``AnswerCorrectness()``
(with the run's judge), and a name the module lacks is read from that default metric
(``faithfulness.score(...)``, ``faithfulness.name``). Configure a metric with its class:
``AnswerCorrectness(weights=(1, 0))``. Writing your own: docs/writing-metrics.md.
"""

from rageval.errors import NoJudgeError
from rageval.metrics import (
    agent_goal_accuracy,
    agent_goal_accuracy_without_reference,
    answer_accuracy,
    answer_correctness,
    answer_relevance,
    answer_relevancy,
    context_precision,
    context_recall,
    context_relevance,
    conversation_completeness,
    f1,
    faithfulness,
    hit_rate,
    knowledge_retention,
    map,
    mrr,
    ndcg,
    pairwise,
    precision,
    r_precision,
    recall,
    response_groundedness,
    rouge_l,
    rubric_score,
    semantic_similarity,
    token_f1,
    tool_call_accuracy,
    tool_call_f1,
    topic_adherence,
    turn_answer_relevancy,
    turn_context_relevance,
    turn_faithfulness,
)
from rageval.metrics.agent_goal_accuracy import AgentGoalAccuracy
from rageval.metrics.agent_goal_accuracy_without_reference import AgentGoalAccuracyWithoutReference
from rageval.metrics.answer_accuracy import AnswerAccuracy
from rageval.metrics.answer_correctness import AnswerCorrectness
from rageval.metrics.answer_relevance import AnswerRelevance, ContextEvaluation, RelevanceScore
from rageval.metrics.answer_relevancy import AnswerRelevancy, ResponseRelevancy
from rageval.metrics.base import (
    Metric,
    MetricLike,
    MetricResult,
    ScoringContext,
    as_metric,
    create_metric,
    metric_class,
    module_metric,
    register,
    registered_metrics,
)
from rageval.metrics.context_precision import ContextPrecision
from rageval.metrics.context_recall import ContextRecall
from rageval.metrics.context_relevance import ContextRelevance
from rageval.metrics.conversation_completeness import ConversationCompleteness
from rageval.metrics.f1 import F1
from rageval.metrics.faithfulness import Faithfulness
from rageval.metrics.hit_rate import HitRate
from rageval.metrics.knowledge_retention import KnowledgeRetention
from rageval.metrics.map import MAP
from rageval.metrics.mrr import MRR
from rageval.metrics.ndcg import NDCG
from rageval.metrics.pairwise import Pairwise
from rageval.metrics.precision import Precision
from rageval.metrics.r_precision import RPrecision
from rageval.metrics.recall import Recall
from rageval.metrics.response_groundedness import ResponseGroundedness
from rageval.metrics.rouge_l import RougeL
from rageval.metrics.rubric_score import RubricScore
from rageval.metrics.semantic_similarity import SemanticSimilarity
from rageval.metrics.token_f1 import TokenF1
from rageval.metrics.tool_call_accuracy import ToolCallAccuracy
from rageval.metrics.tool_call_f1 import ToolCallF1
from rageval.metrics.topic_adherence import TopicAdherence
from rageval.metrics.turn_answer_relevancy import TurnAnswerRelevancy
from rageval.metrics.turn_context_relevance import TurnContextRelevance
from rageval.metrics.turn_faithfulness import TurnFaithfulness

__all__ = [
    "F1",
    "MAP",
    "MRR",
    "NDCG",
    "AgentGoalAccuracy",
    "AgentGoalAccuracyWithoutReference",
    "AnswerAccuracy",
    "AnswerCorrectness",
    "AnswerRelevance",
    "AnswerRelevancy",
    "ContextEvaluation",
    "ContextPrecision",
    "ContextRecall",
    "ContextRelevance",
    "ConversationCompleteness",
    "Faithfulness",
    "HitRate",
    "KnowledgeRetention",
    "Metric",
    "MetricLike",
    "MetricResult",
    "NoJudgeError",
    "Pairwise",
    "Precision",
    "RPrecision",
    "Recall",
    "RelevanceScore",
    "ResponseGroundedness",
    "ResponseRelevancy",
    "RougeL",
    "RubricScore",
    "ScoringContext",
    "SemanticSimilarity",
    "TokenF1",
    "ToolCallAccuracy",
    "ToolCallF1",
    "TopicAdherence",
    "TurnAnswerRelevancy",
    "TurnContextRelevance",
    "TurnFaithfulness",
    "agent_goal_accuracy",
    "agent_goal_accuracy_without_reference",
    "answer_accuracy",
    "answer_correctness",
    "answer_relevance",
    "answer_relevancy",
    "as_metric",
    "context_precision",
    "context_recall",
    "context_relevance",
    "conversation_completeness",
    "create_metric",
    "f1",
    "faithfulness",
    "hit_rate",
    "knowledge_retention",
    "map",
    "metric_class",
    "module_metric",
    "mrr",
    "ndcg",
    "pairwise",
    "precision",
    "r_precision",
    "recall",
    "register",
    "registered_metrics",
    "response_groundedness",
    "rouge_l",
    "rubric_score",
    "semantic_similarity",
    "token_f1",
    "tool_call_accuracy",
    "tool_call_f1",
    "topic_adherence",
    "turn_answer_relevancy",
    "turn_context_relevance",
    "turn_faithfulness",
]
