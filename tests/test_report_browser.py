"""The HTML report in a real headless Chromium (Debian's, driven by Playwright; the
``browser`` fixture is tests/conftest.py's, see browser_helpers)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

import test_metric_claim_checks as claim_checks
import test_metric_knowledge_retention as retention
import test_metric_topic_adherence as topics
from browser_helpers import Opened
from helpers import (
    ATTACK_QUESTION,
    ATTACK_REASON,
    NOT_MEASURED_CAUSE,
    make_judge,
    rows,
    synthetic_run,
    write_run,
)
from rageval.metrics import Faithfulness
from rageval.report import write_report
from rageval.runner import evaluate
from rageval.testing import FakeOpenAI, RecordedRequest, Reply
from test_metric_turn_faithfulness import TURNS, scripted

N = 24


@pytest.fixture(scope="module")
def run() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    return synthetic_run(N)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, run: Any) -> Path:
    return write_report(write_run(tmp_path_factory.mktemp("run"), *run))


@pytest.fixture
def opened(browser: Browser, report: Path) -> Iterator[Opened]:
    view = Opened(browser, report)
    yield view
    view.close()


def sort_by(view: Opened, key: str) -> None:
    view.page.locator(f'#samples-table th[data-key="{key}"] button').click()


def test_loads_offline_without_errors(opened: Opened, report: Path) -> None:
    page = opened.page
    assert page.locator("h1").inner_text() == "Evaluation report"
    assert len(opened.row_ids()) == N
    assert page.locator("table.summary tbody tr").count() == 3
    shared = page.locator("table.summary tfoot tr.shared")
    assert shared.locator("th").inner_text() == "shared:statements"
    assert shared.locator("td.num").all_inner_texts()[:2] == [str(N), f"{250 * N:,}"]
    assert page.locator("figure.dist svg.hist").count() == 3
    assert all(url.startswith(("file:", "data:")) for url in opened.requests), opened.requests
    assert opened.problems == []


def test_injected_markup_is_shown_as_text(opened: Opened) -> None:
    page = opened.page
    question = page.locator('#samples-table tr[data-i="1"] td.question')
    assert question.inner_text() == ATTACK_QUESTION
    page.locator('#samples-table tr[data-i="1"] td[data-m="0"]').click()
    detail = page.locator("dialog#detail")
    assert detail.locator('[data-field="user_input"] .text').inner_text() == ATTACK_QUESTION
    reason = detail.locator('[data-metric="faithfulness"] .reason .text')
    assert reason.evaluate("e => e.textContent") == ATTACK_REASON
    # Nothing was parsed out of the data: no image, no extra script, no handler ran.
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("document.scripts.length") == 2


def test_sorting_a_metric_is_numeric_with_unmeasured_last(opened: Opened, run: Any) -> None:
    _, results, _ = run

    def expected(name: str, descending: bool) -> list[str]:
        measured = [r for r in results if r["metrics"][name]["status"] == "ok"]
        measured.sort(
            key=lambda r: (
                -r["metrics"][name]["value"] if descending else r["metrics"][name]["value"],
                r["row"],
            )
        )
        rest = [r for r in results if r["metrics"][name]["status"] != "ok"]
        return [r["id"] for r in measured + rest]

    sort_by(opened, "m:answer_relevancy")
    assert opened.row_ids() == expected("answer_relevancy", descending=True)
    sort_by(opened, "m:answer_relevancy")
    ascending = expected("answer_relevancy", descending=False)
    assert opened.row_ids() == ascending
    # The data has negative cosines, where numeric and text order disagree.
    values = [r["metrics"]["answer_relevancy"]["value"] for r in results]
    assert sorted(values) != sorted(values, key=lambda v: f"{v:.3f}")

    sort_by(opened, "m:faithfulness")
    ids = opened.row_ids()
    assert ids == expected("faithfulness", descending=True)
    assert ids[-2:] == ["q-002", "q-003"]
    sort_by(opened, "m:faithfulness")
    assert opened.row_ids()[-2:] == ["q-002", "q-003"]
    header = opened.page.locator('#samples-table th[data-key="m:faithfulness"]')
    assert header.get_attribute("aria-sort") == "ascending"


def test_text_filter_reduces_rows(opened: Opened, run: Any) -> None:
    _, results, _ = run
    opened.page.locator("#filter-text").fill("TOPIC 3")
    want = [r["id"] for r in results if "topic 3" in r["inputs"]["user_input"].lower()]
    assert 0 < len(want) < N
    assert opened.row_ids() == want
    assert f"of {len(want)} matching samples" in opened.page.locator("#table-status").inner_text()

    opened.page.locator("#filter-text").fill("context b for 7.")
    assert opened.row_ids() == ["q-007"]
    opened.page.locator("#filter-text").fill("no sample says this")
    assert opened.row_ids() == []
    opened.page.get_by_role("button", name="Clear filters").click()
    assert len(opened.row_ids()) == N


def test_not_measured_filter_and_summary_link(opened: Opened) -> None:
    page = opened.page
    page.locator("#filter-metric").select_option("faithfulness")
    page.locator("#filter-cond").select_option("not_measured")
    assert opened.row_ids() == ["q-002", "q-003"]
    page.get_by_role("button", name="Clear filters").click()
    page.locator("table.summary button.pill").click()
    assert opened.row_ids() == ["q-002", "q-003"]
    page.get_by_role("button", name="Clear filters").click()
    causes = page.locator("table.causes-table tbody tr")
    assert causes.count() == 1
    assert NOT_MEASURED_CAUSE in causes.inner_text()
    causes.locator("button").click()
    assert opened.row_ids() == ["q-002", "q-003"]


def test_value_range_filter(opened: Opened, run: Any) -> None:
    _, results, _ = run
    page = opened.page
    page.locator("#filter-metric").select_option("answer_relevancy")
    page.locator("#filter-cond").select_option("range")
    page.locator("#filter-lo").fill("-1")
    page.locator("#filter-hi").fill("0")
    want = [r["id"] for r in results if r["metrics"]["answer_relevancy"]["value"] <= 0]
    assert opened.row_ids() == want


def test_histogram_bar_lists_its_samples(opened: Opened, run: Any) -> None:
    _, results, _ = run
    values = {
        r["id"]: r["metrics"]["faithfulness"]["value"]
        for r in results
        if r["metrics"]["faithfulness"]["status"] == "ok"
    }
    bins = [min(9, math.floor(v * 10 + 1e-9)) for v in values.values()]
    fullest = max(range(10), key=bins.count)
    figure = opened.page.locator('figure.dist[data-metric="faithfulness"]')
    heights = [
        float(h)
        for h in figure.locator("g.bin rect.bar").evaluate_all(
            "bars => bars.map(b => b.getAttribute('height'))"
        )
    ]
    assert [h > 0 for h in heights] == [bins.count(i) > 0 for i in range(10)]
    figure.locator(f'g.bin[data-bin="{fullest}"]').click()
    want = [i for i, v in values.items() if min(9, math.floor(v * 10 + 1e-9)) == fullest]
    assert opened.row_ids() == want
    figure.locator("rect.bar.nm").click()
    assert opened.row_ids() == ["q-002", "q-003"]


def test_clicking_a_score_shows_its_evidence(opened: Opened) -> None:
    page = opened.page
    detail = page.locator("dialog#detail")
    assert not detail.is_visible()
    page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
    assert detail.is_visible()
    focused = detail.locator(".metric-detail.focus")
    assert focused.get_attribute("data-metric") == "faithfulness"
    statements = focused.locator("li.item")
    assert statements.locator(".item-text").all_inner_texts() == [
        "Fact 0 holds.",
        "Fact 0 also implies more.",
    ]
    assert statements.locator(".verdict").all_inner_texts() == ["✓", "✗"]
    assert "not in the contexts" in statements.nth(1).inner_text()

    ratings = detail.locator('[data-metric="answer_accuracy"] table.kv')
    assert ratings.locator("th").all_inner_texts() == ["template 1", "template 2"]
    assert ratings.locator("td").all_inner_texts() == ["4", "2"]
    questions = detail.locator('[data-metric="answer_relevancy"] li.item')
    assert "cosine: 0.8123" in questions.first.inner_text()

    page.keyboard.press("ArrowRight")
    assert detail.locator("#detail-title").inner_text().startswith("Row 1")
    page.keyboard.press("Escape")
    assert not detail.is_visible()

    page.locator('#samples-table tr[data-i="2"] td[data-m="0"]').click()
    cause = detail.locator('[data-metric="faithfulness"] .cause')
    assert NOT_MEASURED_CAUSE in cause.inner_text()


def test_pages_of_a_large_run(browser: Browser, tmp_path: Path) -> None:
    report = write_report(write_run(tmp_path / "big", *synthetic_run(250)))
    view = Opened(browser, report)
    try:
        assert len(view.row_ids()) == 100
        view.page.get_by_role("button", name="Next →").click()
        view.page.get_by_role("button", name="Next →").click()
        assert view.row_ids() == [f"q-{i:03d}" for i in range(200, 250)]
        assert "Page 3 of 3" in view.page.locator("nav.pager").inner_text()
    finally:
        view.close()


def test_narrow_screen_does_not_overflow(browser: Browser, report: Path) -> None:
    view = Opened(browser, report, width=390)
    try:
        assert view.page.evaluate("document.documentElement.scrollWidth") <= 390
        view.page.locator('#samples-table tr[data-i="0"] td.question').click()
        assert view.page.locator("dialog#detail").is_visible()
    finally:
        view.close()


def _wide_summary_run(folder: Path) -> Path:
    """Long parameters and six- to eight-figure counts and cost in every summary column."""
    man, results, summary = synthetic_run(6)
    params = (
        {"prompt": None, "response_model": "rageval.metrics.answer_relevance:RelevanceScore"},
        {"weights": [0.75, 0.25], "beta": 1.0, "threshold": None},
        {"max_retries": 5},
    )
    names = ("answer_relevance", "answer_correctness", "response_groundedness")
    man["metrics"] = [{"name": n, "params": p} for n, p in zip(names, params, strict=True)]
    big = {
        "requests": 123_456,
        "prompt_tokens": 98_765_432,
        "completion_tokens": 1_234_567,
        "cache_hits": 54_321,
        "cost_usd": 1234.5678,
    }
    summary["metrics"] = {
        n: {**s, "usage": big, "n_measured": 123_456, "n_not_measured": 12_345, "n_skipped": 12_345}
        for n, s in zip(names, summary["metrics"].values(), strict=True)
    }
    summary["usage"] = {**big, "retries": 2, "reasks": 3}
    for r in results:
        r["metrics"] = dict(zip(names, r["metrics"].values(), strict=True))
    return write_report(write_run(folder, man, results, summary))


@pytest.mark.parametrize("width", [1280, 1440, 1920])
def test_the_summary_fits_common_screens(browser: Browser, tmp_path: Path, width: int) -> None:
    view = Opened(browser, _wide_summary_run(tmp_path / "wide"), width=width)
    try:
        wrap = view.page.locator("#summary .table-wrap", has=view.page.locator("table.summary"))
        scroll, client = wrap.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert scroll <= client, f"the summary scrolls sideways at {width} px ({scroll} > {client})"
        cost = view.page.locator("#summary thead th", has_text="Cost").bounding_box()
        assert cost is not None and cost["x"] + cost["width"] <= width
        params = view.page.locator("#summary .params").first
        assert "RelevanceScore" in (params.get_attribute("title") or "")  # cut, not lost
        note = view.page.locator("#summary .footnote").inner_text()
        assert "2 retries in total" in note and "3 re-asks in total" in note
    finally:
        view.close()


def test_empty_run(browser: Browser, tmp_path: Path) -> None:
    man, _, _ = synthetic_run(4)
    man["data"]["n_rows"] = 0
    report = write_report(write_run(tmp_path / "empty", man, [], None))
    view = Opened(browser, report)
    try:
        assert "No finished samples" in view.page.locator("body").inner_text()
        assert view.row_ids() == []
    finally:
        view.close()


def test_hundreds_of_failures_take_a_few_lines_and_filter_by_kind(
    browser: Browser, tmp_path: Path
) -> None:
    """300 cells not measured for one reason (each cause worded for its sample), 5 for
    another: two lines with a few example causes, and the samples table right below them."""
    man, results, _ = synthetic_run(320)
    for row, record in enumerate(results):
        faith = record["metrics"]["faithfulness"]
        if row < 300 or row >= 315:
            kind, cause = "invalid_reply", f"no valid reply after 2 re-asks (sample {row})"
        else:
            kind, cause = "transport", "endpoint failed 7 times; last error: 503"
        if row < 305 or row >= 315:
            faith.update(status="not_measured", value=None, reason=None, evidence={})
            faith.update(cause=cause, cause_kind=kind)
        if row < 10:  # two metrics skipped the same way share one line
            for name in ("answer_relevancy", "answer_accuracy"):
                record["metrics"][name].update(
                    status="skipped", value=None, reason=None, evidence={},
                    cause="needs an LLM judge and none is configured", cause_kind="no_judge",
                )  # fmt: skip
    view = Opened(browser, write_report(write_run(tmp_path / "run", man, results, None)))
    try:
        page = view.page
        # the cells' prices are unknown: so is the total, never the sum of the known parts
        assert page.locator("table.summary tfoot tr").last.locator("td").last.inner_text() == (
            "unknown"
        )
        groups = page.locator("table.causes-table tbody tr")
        assert groups.count() == 3
        first = groups.nth(0)
        assert first.get_attribute("data-kind") == "invalid_reply"
        assert first.locator("td.num button").inner_text() == "305"
        assert first.locator("ul.examples li").count() == 3
        # the samples table is a screen away at most, not hundreds of lines further down
        causes_box = page.locator("div.causes").bounding_box()
        assert causes_box is not None and causes_box["height"] < 400
        transport = groups.nth(1)
        assert "transport" in transport.inner_text()
        transport.locator("td.num button").click()
        assert view.row_ids() == [f"q-{row:03d}" for row in range(300, 305)]
        page.get_by_role("button", name="Clear filters").click()
        shared = groups.nth(2)
        assert shared.get_attribute("data-metric") == "answer_relevancy answer_accuracy"
        assert shared.locator("td.num button").inner_text() == "20"
        shared.locator("td.num button").click()
        assert view.row_ids() == [f"q-{row:03d}" for row in range(10)]
        page.get_by_role("button", name="Clear filters").click()
        # an example's sample id opens that sample
        first.locator("button.sample-link").first.click()
        assert page.locator("dialog#detail").is_visible()
        assert "invalid reply" in page.locator("dialog#detail .cause").first.inner_text()
    finally:
        view.close()


# ---- text from the data is shown as stored: no bidi control applied, its own direction ----

#: the classic right-to-left override spoof: with U+202E applied, "invoice<U+202E>fdp.exe"
#: displays as "invoiceexe.pdf"
SPOOF = "invoice\u202efdp.exe"
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
ARABIC = "مرحبا بالعالم، هذا هو الجواب"


def _visible(text: str) -> str:
    """`text` as the report shows it: each bidi control as a marker."""
    return "".join(f"⟨U+{ord(c):04X}⟩" if c in BIDI_CONTROLS else c for c in text)


def _spoofed_run(folder: Path) -> Path:
    """A run whose every kind of text from the data carries bidi controls."""
    man, results, summary = synthetic_run(4)
    renamed = f"accuracy {SPOOF}"  # a metric's name is the user's too
    man["data"]["source"] = f"source {SPOOF}"
    man["judge"]["model"] = f"model {SPOOF}"
    man["metrics"][1]["params"]["label"] = f"param {SPOOF}"
    man["metrics"][2]["name"] = renamed
    summary["metrics"][renamed] = summary["metrics"].pop("answer_accuracy")
    for record in results:
        record["metrics"][renamed] = record["metrics"].pop("answer_accuracy")
    first = results[0]
    first["id"] = f"id {SPOOF}"
    first["inputs"].update(
        user_input=f"question {SPOOF}",
        response=ARABIC,
        retrieved_contexts=[f"context {SPOOF}"],
        reference=f"reference {SPOOF}",
        note=BIDI_CONTROLS,
    )
    faith = first["metrics"]["faithfulness"]
    faith["reason"] = f"reason {SPOOF}"
    faith["evidence"]["statements"][0]["text"] = f"statement {SPOOF}"
    faith["evidence"]["statements"][1]["reason"] = f"why {SPOOF}"
    results[2]["metrics"]["faithfulness"]["cause"] = f"cause {SPOOF}"
    return write_report(write_run(folder, man, results, summary))


#: every text node of the page (the dialog's too) that shows a marker, with the direction
#: attribute of its nearest element that has one; text or tooltips holding a raw bidi control
_SHOWN_TEXT = """() => {
  const raw = /[\\u061C\\u200E\\u200F\\u202A-\\u202E\\u2066-\\u2069]/;
  const marked = [];
  const applied = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest("script")) continue;  // the run's JSON, never shown
    if (raw.test(n.data)) applied.push(n.data);
    if (n.data.includes("⟨U+")) {
      const holder = n.parentElement.closest("[dir]");
      marked.push([n.data, holder ? holder.getAttribute("dir") : null]);
    }
  }
  for (const el of document.querySelectorAll("[title], [aria-label], [placeholder]"))
    for (const name of ["title", "aria-label", "placeholder"])
      if (raw.test(el.getAttribute(name) || "")) applied.push(`${name}: ${el.getAttribute(name)}`);
  if (raw.test(document.title)) applied.push(`document.title: ${document.title}`);
  return { marked, applied };
}"""

#: the left edge of each character of an element's text, in the order stored
_CHARACTER_EDGES = """(el) => {
  const node = el.firstChild;
  const edges = [];
  for (let i = 0; i < node.length; i++) {
    const range = document.createRange();
    range.setStart(node, i);
    range.setEnd(node, i + 1);
    edges.push(range.getBoundingClientRect().left);
  }
  return edges;
}"""


def test_bidi_controls_are_shown_never_applied_and_data_text_has_dir_auto(
    browser: Browser, tmp_path: Path
) -> None:
    view = Opened(browser, _spoofed_run(tmp_path / "run"))
    try:
        page = view.page
        detail = page.locator("dialog#detail")
        marked: list[tuple[str, str | None]] = []
        for row in (2, 0):  # row 2's detail holds the cause; row 0's the rest
            page.locator(f'#samples-table tr[data-i="{row}"] td.question').click()
            assert detail.is_visible()
            found = page.evaluate(_SHOWN_TEXT)
            assert found["applied"] == []
            marked += found["marked"]
            if row:
                page.keyboard.press("Escape")
        shown = "\n".join(text for text, _ in marked)
        for field in ("source", "model", "param", "accuracy", "id", "question", "context",
                      "reference", "reason", "statement", "why", "cause"):  # fmt: skip
            assert _visible(f"{field} {SPOOF}") in shown, field
        assert _visible(BIDI_CONTROLS) in shown  # all twelve, each as its marker
        # every element showing text from the data takes the text's own direction
        assert [text for text, direction in marked if direction != "auto"] == []

        # the stored characters are displayed in their stored order, left to right
        reference = detail.locator('[data-field="reference"] .text')
        assert reference.get_attribute("dir") == "auto"
        assert reference.evaluate("e => e.textContent") == _visible(f"reference {SPOOF}")
        edges = reference.evaluate(_CHARACTER_EDGES)
        assert edges == sorted(edges) and len(set(edges)) == len(edges), edges

        # right-to-left text is laid out right to left; the rest of the page is not
        response = detail.locator('[data-field="response"] .text')
        assert response.inner_text() == ARABIC
        assert response.evaluate("e => getComputedStyle(e).direction") == "rtl"
        question = detail.locator('[data-field="user_input"] .text')
        assert question.evaluate("e => getComputedStyle(e).direction") == "ltr"
        assert page.evaluate("getComputedStyle(document.body).direction") == "ltr"
    finally:
        view.close()


def test_an_interval_one_value_cannot_give_is_shown_as_undefined(
    browser: Browser, tmp_path: Path
) -> None:
    from rageval import evaluate

    evaluate(
        [{"id": "a", "response": "blue sky", "reference": "blue sea"}],
        ["token_f1"],
        run_dir=tmp_path / "one",
        progress=False,
    )
    view = Opened(browser, tmp_path / "one" / "report.html")
    try:
        row = view.page.locator("table.summary tbody tr").first.inner_text()
        assert "undefined (one measured value)" in row and "0.500 – 0.500" not in row
        caption = view.page.locator("figure.dist .dist-stats").first.inner_text()
        assert caption == "mean 0.500 (95% CI undefined: one measured value)"
    finally:
        view.close()


# ------------------------------------------------------------------ evidence by kind


def test_typed_evidence_is_drawn_by_its_kind(
    browser: Browser, server: FakeOpenAI, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    metrics = ["faithfulness", "answer_accuracy", "token_f1"]
    evaluate(rows(2), metrics, llm=make_judge(server), run_dir=run, progress=False)
    view = Opened(browser, run / "report.html")
    view.page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
    detail = view.page.locator("dialog#detail")
    # faithfulness: a table of the statements, the verdict column headed by what it means
    verdicts = detail.locator('[data-metric="faithfulness"] .evidence[data-kind="verdicts"]')
    assert verdicts.locator("thead th").all_inner_texts() == [
        "item",
        "supported by the retrieved contexts",
        "reason",
    ]
    assert verdicts.locator("tbody tr").count() == 2
    assert verdicts.locator(".ev-summary").inner_text() == (
        "1 of 2 statements supported by the retrieved contexts"
    )
    # answer_accuracy: one rating per template on its scale
    ratings = detail.locator('[data-metric="answer_accuracy"] .evidence[data-kind="ratings"]')
    assert ratings.locator("li.rating").count() == 2
    assert all(" / 4" in t for t in ratings.locator(".rating-value").all_inner_texts())
    # token_f1: the overlap, named by what it counts
    overlap = detail.locator('[data-metric="token_f1"] .evidence[data-kind="overlap"]')
    assert "shared tokens" in overlap.inner_text()
    view.close()  # no console error


def test_the_conversation_judges_evidence_is_drawn_by_its_kind(
    browser: Browser, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    # knowledge_retention: the facts stated, then each judged turn's verdicts on them
    retention.scripted(fake_openai)
    data = [{"id": "c0", "turns": retention.TURNS}]
    evaluate(data, ["knowledge_retention"], llm=make_judge(fake_openai), run_dir=tmp_path / "kr")
    view = Opened(browser, tmp_path / "kr" / "report.html")
    view.page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
    kept = view.page.locator('dialog#detail .evidence[data-kind="retention"]')
    assert (
        kept.locator("ol.facts li").all_inner_texts()[2] == "turn 6: The user is allergic to nuts."
    )
    assert kept.locator("table.verdicts").count() == 3  # one per judged turn
    beef = kept.locator(".ev-block").filter(has_text="Turn 5: 0.000, loses 1 fact(s)")
    assert beef.locator(".ev-summary").inner_text() == "1 of 2 facts stated before kept"
    view.close()  # no console error
    # topic_adherence: the scores, then each question's topic and answer
    topics.scripted(fake_openai)
    evaluate(
        [topics.conversation()],
        ["topic_adherence"],
        llm=make_judge(fake_openai),
        run_dir=tmp_path / "ta",
    )
    view = Opened(browser, tmp_path / "ta" / "report.html")
    view.page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
    read = view.page.locator('dialog#detail .evidence[data-kind="topics"]')
    assert read.locator(".ev-summary").all_inner_texts() == [
        "3 of 5 questions on the reference topics",
        "4 of 5 questions answered",
    ]
    refused = read.locator('table.verdicts tbody tr[data-verdict="false"]')
    assert "Can I return shoes after 40 days?" in refused.all_inner_texts()[-1]
    view.close()


def test_claim_checks_show_each_claim_its_probability_and_context(
    browser: Browser, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler = claim_checks.checker
    evaluate(
        [claim_checks.SAMPLE.model_dump()],
        [Faithfulness(mode="checker", per_context=True)],
        llm=make_judge(fake_openai),
        run_dir=tmp_path / "checks",
    )
    view = Opened(browser, tmp_path / "checks" / "report.html")
    view.page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
    checks = view.page.locator('dialog#detail .evidence[data-kind="claims"]')
    assert checks.locator(".ev-summary").inner_text() == (
        "2 of 3 claims supported by the contexts, checked by test-model"
    )
    rows = checks.locator("table.claims tbody tr")
    assert rows.locator(".item-text").all_inner_texts() == claim_checks.SENTENCES
    assert rows.locator(".claim-probability").all_inner_texts() == ["1", "0", "1"]
    first = rows.nth(0).locator(".claim-context")
    assert first.inner_text() == "c1"
    assert first.get_attribute("title") == claim_checks.CONTEXTS[0]
    assert rows.nth(1).locator("td").last.inner_text() == "no context on its own"
    supporting = checks.locator(".ev-block").filter(has_text="Supporting contexts")
    assert supporting.locator("li").all_inner_texts() == [
        f"#c1\n{claim_checks.CONTEXTS[0]}",  # the id, then the context's text as a block
        f"#c2\n{claim_checks.CONTEXTS[1]}",
    ]
    view.close()  # no console error


def test_old_free_form_evidence_keeps_the_generic_view(opened: Opened) -> None:
    opened.page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
    evidence = opened.page.locator('dialog#detail [data-metric="faithfulness"] .evidence')
    # a log from before evidence had kinds: its dict is free-form, shown by its keys
    assert evidence.get_attribute("data-kind") == "free"
    assert evidence.locator(".ev-key").all_inner_texts() == ["statements"]
    assert evidence.locator("ol.items li.item").count() == 2


def conversation_run(server: FakeOpenAI, folder: Path) -> Path:
    """A conversation scored by turn_faithfulness (turn 1: 1 of 2 statements supported; turn
    5: 2 of 3; turns 3 and 7 not scored) and turn_context_relevance (each context rated 2/2)."""
    server.handler = both_per_turn
    data = [{"id": "c0", "turns": TURNS}]
    metrics = ["turn_faithfulness", "turn_context_relevance"]
    evaluate(data, metrics, llm=make_judge(server), run_dir=folder, progress=False)
    return folder / "report.html"


def both_per_turn(req: RecordedRequest) -> Reply:
    """The scripted replies of turn_faithfulness, and a top rating for every context."""
    if req.schema is not None and "rating" in req.schema.get("properties", {}):
        return Reply.json({"rating": 2})
    return scripted(req)


def test_a_conversation_opens_as_a_thread_with_each_turns_cells(
    browser: Browser, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    view = Opened(browser, conversation_run(fake_openai, tmp_path / "run"))
    view.page.locator('#samples-table tr[data-i="0"] td[data-m="0"]').click()
    detail = view.page.locator("dialog#detail")
    turns = detail.locator("ol.turns > li.turn")
    assert turns.count() == len(TURNS)
    assert turns.nth(0).locator(".turn-main h4").first.text_content() == "Turn 0 · user"
    assert turns.nth(0).locator(".turn-cells").count() == 0  # a user turn has no cells
    # an assistant turn: its text, its contexts, and beside it each per-turn metric's cell
    first = turns.nth(1)
    assert "Dune is a novel by Frank Herbert." in first.locator(".turn-main").inner_text()
    faithful = first.locator('.turn-cell[data-metric="turn_faithfulness"]')
    assert faithful.locator(".turn-value").inner_text() == "0.500"
    relevant = first.locator('.turn-cell[data-metric="turn_context_relevance"]')
    assert relevant.locator(".turn-value").inner_text() == "1.000"
    # the turn's own evidence, folded: its statements' verdicts
    faithful.locator("summary").click()
    table = faithful.locator('details[data-kind="verdicts"] table.verdicts tbody tr')
    assert table.all_inner_texts()[0].startswith("#s1 Frank Herbert wrote Dune.")
    assert [r.get_attribute("data-verdict") for r in table.all()] == ["true", "false"]
    # a turn that only calls a tool: its call shown, both metrics say why it is not scored
    tool_turn = turns.nth(3)
    assert 'search({"q":"Dune 1965"})' in tool_turn.locator(".turn-main").inner_text()
    assert tool_turn.locator(".turn-cell.not-scored").count() == 2
    assert "only calls tools" in tool_turn.locator(".turn-cells").inner_text()
    fifth = turns.nth(5).locator('.turn-cell[data-metric="turn_faithfulness"] .turn-value')
    assert fifth.inner_text() == "0.667"
    # the conversation's cell lists each turn's value
    per_turn = detail.locator('[data-metric="turn_faithfulness"] .evidence[data-kind="per_turn"]')
    assert per_turn.locator("table.per-turn tbody tr").count() == 2
    assert per_turn.locator("ul.not-scored li").count() == 2
    view.close()  # no console error
