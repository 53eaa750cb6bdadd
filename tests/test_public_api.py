"""The names users import keep resolving after the client layer and the run log moved."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = (
    "rageval",
    "rageval.judge",
    "rageval.judge.errors",
    "rageval.results",
    "rageval.runner",
    "rageval.embeddings",
    "rageval.log",
    "rageval.stats",
    "rageval.calibration",
    "rageval.labels",
)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    module = importlib.import_module(name)
    for exported in module.__all__:
        assert getattr(module, exported) is not None, f"{name}.{exported}"


def test_the_names_of_the_judge_and_results_people_import() -> None:
    judge = importlib.import_module("rageval.judge")
    for name in ("Judge", "llm_factory", "PriceTable", "RequestCache", "Usage", "UsageLedger",
                 "JudgeError", "FatalJudgeError", "JudgeCallFailed", "JudgeReply",
                 "EndpointLimiter", "endpoint_limiter", "default_cache_dir", "DEFAULT_PRICES",
                 "Limits", "RetryPolicy"):  # fmt: skip
        assert hasattr(judge, name), name
    results = importlib.import_module("rageval.results")
    stats = importlib.import_module("rageval.stats")
    log = importlib.import_module("rageval.log")
    assert results.compare is stats.compare
    assert results.MetricComparison is stats.MetricComparison
    assert results.SampleRecord is log.SampleLine
    assert results.Cell is log.Cell and results.MetricSummary is log.MetricSummary
    assert results.PPIComparison is stats.PPIComparison
    calibration = importlib.import_module("rageval.calibration")
    assert calibration.CalibrationReport is log.CalibrationReport
    rageval = importlib.import_module("rageval")
    assert rageval.CalibrationReport is log.CalibrationReport
    assert rageval.calibrate is importlib.import_module("rageval.runner").calibrate
