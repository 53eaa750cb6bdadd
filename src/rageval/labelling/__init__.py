"""The labelling page (``rageval label``): a person labels rows one at a time in a local web
page, the rows chosen where a label helps most, and every label is appended to a labels file
that ``calibrate``, ``align`` and ``evaluate --human-labels`` read beside the data
(``--labels-file``).

* :mod:`~rageval.labelling._file`: the labels file (append-only JSONL, one writer, a killed
  writer loses nothing written);
* :mod:`~rageval.labelling._rows`: the rows of a data file or a run directory, as shown;
* :mod:`~rageval.labelling._session`: the plan (which row next, with what probability), the
  labels, skips and undos, and the statistics (:mod:`rageval.stats`' active PPI mean, κ);
* :mod:`~rageval.labelling._merge`: a data file's rows with a labels file's columns put in;
* :mod:`~rageval.labelling._server`: the web server (127.0.0.1, a token) and the page.
"""

from rageval.labelling._file import (
    LabelRecord,
    LabelsFile,
    LabelsFileError,
    LabelsFileInUseError,
    PlanRecord,
    read_label_values,
    read_records,
)
from rageval.labelling._merge import LabelledRows, rows_with_labels, weighted_statistics
from rageval.labelling._rows import LabellingRows, RowView, read_rows
from rageval.labelling._server import HOST, TOKEN_HEADER, LabellingServer
from rageval.labelling._session import ORDERS, Order, Scale, Session, make_plan

__all__ = [
    "HOST",
    "ORDERS",
    "TOKEN_HEADER",
    "LabelRecord",
    "LabelledRows",
    "LabellingRows",
    "LabellingServer",
    "LabelsFile",
    "LabelsFileError",
    "LabelsFileInUseError",
    "Order",
    "PlanRecord",
    "RowView",
    "Scale",
    "Session",
    "make_plan",
    "read_label_values",
    "read_records",
    "read_rows",
    "rows_with_labels",
    "weighted_statistics",
]
