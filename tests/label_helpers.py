"""Rows that carry a human label column, and a judge that grades them as the rows say, so
that every agreement statistic and PPI++ mean of the tests can be worked by hand."""

from __future__ import annotations

import re
from typing import Any

from metric_helpers import user_text
from rageval.testing import RecordedRequest, Reply

_GRADE = re.compile(r"GRADE([024])")


def grader(req: RecordedRequest) -> Reply:
    """answer_accuracy's two templates both rate the grade written in the response; a
    response marked BROKEN gets a rating off the scale every time (so: not measured)."""
    text = user_text(req)
    if "BROKEN" in text:
        return Reply.json({"rating": 3})
    found = _GRADE.search(text)
    assert found is not None, text
    return Reply.json({"rating": int(found.group(1))})


def labelled_rows(
    grades: list[int] | list[int | str], labels: list[Any], column: str = "human"
) -> list[dict[str, Any]]:
    """Row i's response carries GRADE<grades[i]> (or the word grades[i]) and its `column`
    the label labels[i]."""
    return [
        {
            "id": f"r{i}",
            "user_input": f"question {i}?",
            "response": f"answer {i} GRADE{g}" if isinstance(g, int) else f"answer {i} {g}",
            "reference": f"reference {i}",
            column: label,
        }
        for i, (g, label) in enumerate(zip(grades, labels, strict=True))
    ]


# the binary case worked by hand: rows 0-5 people say correct, 6-9 wrong; the judge rates 4
# (score 1) on rows 0-3 and 6, 0 (score 0) on the others. Table (rows human 0/1, columns
# judge 0/1) = [[3, 1], [2, 4]]: observed agreement .7, chance .4·.5 + .6·.5 = .5 → κ .4;
# balanced accuracy (3/4 + 4/6)/2; AUROC: 24 (positive, negative) pairs, 12 won, 2 + 3 tied
# → 17/24.
BINARY_GRADES: list[int | str] = [4, 4, 4, 4, 0, 0, 4, 0, 0, 0]
BINARY_LABELS = ["yes"] * 6 + ["no"] * 4

# Judge values (grade / 4): labelled rows (y, f) = (1, 1), (0, .5), (1, .5), (0, 0);
# unlabelled f = 1, 1, .5, 0. s²_L(y) = 1/3, s²_L(f) = 1/6, s_L(y, f) = 1/6,
# s²_U(f) = (3·(1/4)² ... ) = 0.229166..., n/N = 1: λ = (1/6) / (1/6 + 0.2291667) = 0.42105.
# θ̂ = λ·mean_U(f) + mean_L(y − λ·f) = λ·0.625 + (0.5 − λ·0.5) = 0.5 + 0.125·λ.
PPI_GRADES = [4, 2, 2, 0, 4, 4, 2, 0]
PPI_LABELS: list[Any] = [1, 0, "yes", "no", None, "", None, None]
