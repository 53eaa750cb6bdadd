"""The calibration section of the HTML report: statistics with intervals and the confusion
matrix, drawn in a real headless Chromium from a run made by rageval.calibrate()."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from browser_helpers import Opened
from helpers import BINARY_GRADES, BINARY_LABELS, grader, judge_for, labelled_rows
from rageval import calibrate
from rageval.calibration import CALIBRATION_FILE
from rageval.log import RunLogError
from rageval.report import write_report
from rageval.testing import FakeOpenAI
from test_ppi_and_repeats import ppi_run

#: a label column named like markup: the page must show it as text
ATTACK_COLUMN = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("calibration") / "run"
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    for row in rows:
        row[ATTACK_COLUMN] = row.pop("human")
    with FakeOpenAI(grader) as server:
        calibrate(
            rows,
            {ATTACK_COLUMN: "answer_accuracy"},
            judge_for(server),
            run_dir=run,
            progress=False,
            min_kappa=0.6,
        )
    return run


@pytest.fixture
def opened(browser: Browser, calibrated: Path) -> Iterator[Opened]:
    view = Opened(browser, calibrated / "report.html")
    yield view
    view.close()


def test_calibration_section_shows_statistics_and_the_confusion_matrix(opened: Opened) -> None:
    page = opened.page
    section = page.locator("#calibration")
    assert section.locator("h2").inner_text() == "Agreement with human labels"
    card = section.locator("figure.agreement")
    assert card.count() == 1
    assert card.locator(".metric-name").inner_text() == "answer_accuracy"
    kappa = card.locator('tr[data-statistic="cohen_kappa"]')
    assert kappa.locator(".value").inner_text() == "0.400"
    low, high = kappa.locator(".ci").inner_text().split(" – ")
    assert float(low) <= 0.4 <= float(high)
    assert card.locator('tr[data-statistic="auroc"] .value').inner_text() == f"{17 / 24:.3f}"
    cells = card.locator("svg.confusion g.cm-cell")
    counts = {
        (int(c.get_attribute("data-row") or -1), int(c.get_attribute("data-col") or -1)): int(
            c.locator("text").text_content() or ""
        )
        for c in cells.all()
    }
    assert counts == {(0, 0): 3, (0, 1): 1, (1, 0): 2, (1, 1): 4}
    assert card.locator("svg.confusion g.cm-cell.agree").count() == 2
    # the failed gate is stated, and the data's markup stays text
    assert "κ gate 0.6 failed" in section.locator(".gate").inner_text()
    assert card.locator(".label-name").inner_text() == ATTACK_COLUMN
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.images.length") == 0


def test_a_calibration_file_of_another_version_is_refused_by_name(
    calibrated: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("manifest.json", "results.jsonl", "summary.json"):
        (copy / name).write_bytes((calibrated / name).read_bytes())
    data = json.loads((calibrated / CALIBRATION_FILE).read_text(encoding="utf-8"))
    data["format_version"] = 99
    (copy / CALIBRATION_FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RunLogError, match=r"calibration.json: .*newer rageval \(run log format 99"):
        write_report(copy)


def test_the_summary_shows_the_ppi_mean_under_its_metric_and_the_judge_noise(
    browser: Browser,
    tmp_path: Path,
) -> None:
    result = ppi_run(tmp_path / "run", repeats=2)
    ppi = result.summary()["answer_accuracy"].ppi["human"]
    assert ppi.mean is not None
    view = Opened(browser, tmp_path / "run" / "report.html")
    try:
        row = view.page.locator('table.summary tr.ppi[data-metric="answer_accuracy"]')
        assert row.count() == 1
        assert row.locator(".label-name").inner_text() == "human"
        assert f"{ppi.mean:.3f}" in row.inner_text() and "4 labelled" in row.inner_text()
        footnote = view.page.locator("#summary .footnote").inner_text()
        assert "answer_accuracy: 2 scores per cell" in footnote
        # a sample's cell shows the scores its value is the mean of
        repeats = result.sample(0).cells["answer_accuracy"].repeats
        assert repeats is not None
        view.page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
        shown = view.page.locator("dialog#detail .metric-detail.focus .repeats")
        assert shown.locator("h4").text_content() == "Repeated scores"
        assert shown.locator(".chip").all_inner_texts() == [f"{v:.3f}" for v in repeats.values]
        assert "the value is their mean" in shown.inner_text()
    finally:
        view.close()
