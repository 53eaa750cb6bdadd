"""rageval: trustworthy, cheap, fast evaluation of retrieval-augmented generation.

The public names are loaded on first use (PEP 562) so that `import rageval` and the CLI stay
fast: the openai SDK, numpy and pydantic are imported only when something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rageval._version import __version__

_EXPORTS: dict[str, str] = {
    # running an evaluation
    "evaluate": "rageval.runner",
    "aevaluate": "rageval.runner",
    "calibrate": "rageval.runner",
    "acalibrate": "rageval.runner",
    "align": "rageval.runner",
    "aalign": "rageval.runner",
    "AlignReport": "rageval.calibration",
    "pairwise": "rageval.runner",
    "apairwise": "rageval.runner",
    "PairwiseReport": "rageval.log",
    "estimate": "rageval.runner",
    "CostEstimate": "rageval.runner",
    "Panel": "rageval.runner",
    "CalibrationReport": "rageval.calibration",
    "EvaluationResult": "rageval.results",
    # test sets from documents
    "generate": "rageval.generation",
    "agenerate": "rageval.generation",
    # data
    "Sample": "rageval.samples",
    "SingleTurnSample": "rageval.samples",
    "Conversation": "rageval.samples",
    "Turn": "rageval.samples",
    "ToolCall": "rageval.samples",
    "load_samples": "rageval.samples",
    "InvalidDataError": "rageval.samples",
    # errors: one root for every error rageval raises
    "RagevalError": "rageval.errors",
    # judges and embeddings
    "Judge": "rageval.judge",
    "llm_factory": "rageval.judge",
    "PriceTable": "rageval.judge",
    "RequestCache": "rageval.judge",
    "JudgeError": "rageval.judge",
    "FatalJudgeError": "rageval.judge",
    "JudgeCallFailed": "rageval.judge",
    "Embeddings": "rageval.embeddings",
    "embedding_factory": "rageval.embeddings",
    # metrics
    "Metric": "rageval.metrics",
    "MetricResult": "rageval.metrics",
    "AnswerAccuracy": "rageval.metrics",
    "AnswerCorrectness": "rageval.metrics",
    "AnswerRelevance": "rageval.metrics",
    "AnswerRelevancy": "rageval.metrics",
    "ContextEvaluation": "rageval.metrics",
    "ContextPrecision": "rageval.metrics",
    "ContextRecall": "rageval.metrics",
    "ContextRelevance": "rageval.metrics",
    "Faithfulness": "rageval.metrics",
    "RelevanceScore": "rageval.metrics",
    "ResponseGroundedness": "rageval.metrics",
    "ResponseRelevancy": "rageval.metrics",
    "RougeL": "rageval.metrics",
    "RubricScore": "rageval.metrics",
    "SemanticSimilarity": "rageval.metrics",
    "TokenF1": "rageval.metrics",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rageval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from rageval.calibration import (
        AlignReport as AlignReport,
        CalibrationReport as CalibrationReport,
    )
    from rageval.embeddings import (
        Embeddings as Embeddings,
        embedding_factory as embedding_factory,
    )
    from rageval.errors import RagevalError as RagevalError
    from rageval.generation import (
        agenerate as agenerate,
        generate as generate,
    )
    from rageval.judge import (
        FatalJudgeError as FatalJudgeError,
        Judge as Judge,
        JudgeCallFailed as JudgeCallFailed,
        JudgeError as JudgeError,
        PriceTable as PriceTable,
        RequestCache as RequestCache,
        llm_factory as llm_factory,
    )
    from rageval.log import PairwiseReport as PairwiseReport
    from rageval.metrics import (
        AnswerAccuracy as AnswerAccuracy,
        AnswerCorrectness as AnswerCorrectness,
        AnswerRelevance as AnswerRelevance,
        AnswerRelevancy as AnswerRelevancy,
        ContextEvaluation as ContextEvaluation,
        ContextPrecision as ContextPrecision,
        ContextRecall as ContextRecall,
        ContextRelevance as ContextRelevance,
        Faithfulness as Faithfulness,
        Metric as Metric,
        MetricResult as MetricResult,
        RelevanceScore as RelevanceScore,
        ResponseGroundedness as ResponseGroundedness,
        ResponseRelevancy as ResponseRelevancy,
        RougeL as RougeL,
        RubricScore as RubricScore,
        SemanticSimilarity as SemanticSimilarity,
        TokenF1 as TokenF1,
    )
    from rageval.results import (
        EvaluationResult as EvaluationResult,
    )
    from rageval.runner import (
        CostEstimate as CostEstimate,
        Panel as Panel,
        aalign as aalign,
        acalibrate as acalibrate,
        aevaluate as aevaluate,
        align as align,
        apairwise as apairwise,
        calibrate as calibrate,
        estimate as estimate,
        evaluate as evaluate,
        pairwise as pairwise,
    )
    from rageval.samples import (
        Conversation as Conversation,
        InvalidDataError as InvalidDataError,
        Sample as Sample,
        SingleTurnSample as SingleTurnSample,
        ToolCall as ToolCall,
        Turn as Turn,
        load_samples as load_samples,
    )
