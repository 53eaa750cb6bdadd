"""A judge panel's run in the HTML report, in a real headless Chromium (browser_helpers): the
judges' alpha and the flip rate in the summary's notes, each judge's value in a cell's view."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser

from browser_helpers import Opened
from helpers import grader, make_judge
from rageval import evaluate
from rageval.runner import Panel
from rageval.testing import FakeOpenAI
from test_panel import ALPHA, rows, strict_grader
from test_ppi_and_repeats import repeated


def test_the_report_shows_the_panels_alpha_and_each_judges_value(
    browser: Browser, tmp_path: Path
) -> None:
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:
        panel = Panel({"a": make_judge(a, "model-a"), "b": make_judge(b, "model-b")})
        evaluate(rows(), ["answer_accuracy"], panel, run_dir=tmp_path / "run", progress=False)
    view = Opened(browser, tmp_path / "run" / "report.html")
    try:
        page = view.page
        notes = page.locator("#summary").inner_text()
        assert "Judge panel" in notes and "Krippendorff" in notes
        assert f"answer_accuracy: α {ALPHA:.3f}" in notes
        assert "over 4 rows; judges' means a 0.500, b 0.250." in notes
        page.locator('#samples-table tr[data-i="1"] td[data-m="0"]').click()
        votes = page.locator('dialog#detail [data-metric="answer_accuracy"] .panel-votes .chip')
        assert votes.all_inner_texts() == ["a 0.500", "b 0.000"]
    finally:
        view.close()


def test_the_report_shows_the_flip_rate(browser: Browser, tmp_path: Path) -> None:
    repeated(["HIGH", "HIGH", "LOW", "LOW"], run_dir=tmp_path / "run")
    view = Opened(browser, tmp_path / "run" / "report.html")
    try:
        notes = view.page.locator("#summary").inner_text()
        assert "Flip rate" in notes
        assert "answer_accuracy: 0.500 (2 of 4 cells; pass: ≥ 0.5)." in notes
    finally:
        view.close()
