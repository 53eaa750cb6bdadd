"""Trust in a judge, with numbers: its agreement with people, and the public data to measure it.

* :func:`rageval.calibrate` (in :mod:`rageval.runner`) scores rows that carry human labels with
  the normal evaluation path and measures how well each metric agrees with the labels;
* :mod:`rageval.calibration.datasets` reads public human-labelled datasets into such rows;
* :class:`CalibrationReport` is what it measured, as written to ``calibration.json`` (one of
  the run log's files: :mod:`rageval.log`, where it is defined);
* :func:`rageval.align` chooses the configuration of a judge metric that agrees best with the
  labels, and :class:`AlignReport` (``align.json``) is what it chose and measured.

Names are imported on first use, so that importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rageval.calibration._agreement import judge_levels, measure_agreement
    from rageval.log import (
        ALIGN_FILE,
        CALIBRATION_FILE,
        STATISTIC_TITLES,
        AlignCandidate,
        Alignment,
        AlignReport,
        CalibrationReport,
        Confusion,
        LabelAgreement,
        StatisticResult,
        read_align,
        read_calibration,
    )

__all__ = [
    "ALIGN_FILE",
    "CALIBRATION_FILE",
    "STATISTIC_TITLES",
    "AlignCandidate",
    "AlignReport",
    "Alignment",
    "CalibrationReport",
    "Confusion",
    "LabelAgreement",
    "StatisticResult",
    "judge_levels",
    "measure_agreement",
    "read_align",
    "read_calibration",
]

_HOMES = {
    "judge_levels": "rageval.calibration._agreement",
    "measure_agreement": "rageval.calibration._agreement",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_HOMES.get(name, "rageval.log"))
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
