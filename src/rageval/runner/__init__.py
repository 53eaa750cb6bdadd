"""Running an evaluation: scheduling every (sample x metric) cell, the run directory, resume."""

from rageval.errors import RunConfigError, RunDirError, RunDirInUseError
from rageval.runner._align import aalign, align
from rageval.runner._calibrate import acalibrate, calibrate
from rageval.runner._estimate import CostEstimate, Range, UsageEstimate, estimate
from rageval.runner._evaluate import aevaluate, evaluate
from rageval.runner._pairwise import apairwise, pairwise
from rageval.runner._panel import Panel
from rageval.runner._prepare import RunSpec, embeddings_from_spec, judge_from_env, resolve_metrics
from rageval.runner._runconfig import RunConfig
from rageval.runner._schedule import NO_JUDGE_CAUSE

__all__ = [
    "NO_JUDGE_CAUSE",
    "CostEstimate",
    "Panel",
    "Range",
    "RunConfig",
    "RunConfigError",
    "RunDirError",
    "RunDirInUseError",
    "RunSpec",
    "UsageEstimate",
    "aalign",
    "acalibrate",
    "aevaluate",
    "align",
    "apairwise",
    "calibrate",
    "embeddings_from_spec",
    "estimate",
    "evaluate",
    "judge_from_env",
    "pairwise",
    "resolve_metrics",
]
