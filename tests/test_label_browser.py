"""The labelling page in a real browser (headless Chromium, as the report's browser tests): rows
labelled by keyboard, a skip taken back, the page reloaded, and the labels still there; text
from the data shown as text (markup and bidi controls included), right-to-left text right to
left."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from rageval.labelling import (
    LabellingServer,
    LabelsFile,
    Scale,
    Session,
    make_plan,
    read_label_values,
    read_rows,
)

ROWS = [
    {"id": "a", "user_input": "ما هي عاصمة مصر؟", "response": "القاهرة", "reference": "القاهرة",
     "retrieved_contexts": ["القاهرة هي عاصمة مصر."]},
    {"id": "b", "user_input": "<img src=x onerror=alert(1)> and \u202etxt.exe",
     "response": "</script><b>bold?</b>", "retrieved_contexts": ["c"]},
    {"id": "c", "user_input": "third", "response": "three", "retrieved_contexts": ["c3"]},
]  # fmt: skip


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LabellingServer, Path]]:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    rows = read_rows(data)
    path = tmp_path / "labels.jsonl"
    with LabelsFile.open(path) as labels:
        plan = make_plan(rows, order="file", column="human", metric=None, budget=3, seed=0)
        labels.append(plan)
        session = Session(rows, labels, plan, annotator="ann", scale=Scale((0.0, 1.0)))
        server = LabellingServer(session)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server, path
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


def _row_id(page: Page) -> str:
    return page.locator("#row-id").inner_text()


def _press(page: Page, key: str, then_row: str | None) -> None:
    page.keyboard.press(key)
    if then_row is None:
        page.locator("#finished").wait_for()
    else:
        page.wait_for_function(
            "id => document.getElementById('row-id')?.textContent === id", arg=then_row
        )


def test_labels_by_keyboard_survive_a_reload(
    browser: Browser, served: tuple[LabellingServer, Path]
) -> None:
    server, path = served
    page = browser.new_page()
    page.set_default_timeout(10_000)
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("dialog", lambda d: problems.append(f"dialog {d.message}"))
    page.goto(server.url)
    page.locator("#row-id").wait_for()
    assert _row_id(page) == "a"
    shortcuts = page.locator(".actions button").evaluate_all(
        "buttons => buttons.map(b => b.getAttribute('aria-keyshortcuts'))"
    )
    assert shortcuts == ["0 n", "1 y", "s", "u"]  # one button a value, each naming its keys
    # right to left: the Arabic question takes its own direction
    direction = page.locator("#question").evaluate("e => getComputedStyle(e).direction")
    assert direction == "rtl"
    _press(page, "y", "b")
    # markup in the data is text; the bidi override is shown, not applied
    question = page.locator("#question").inner_text()
    assert question.startswith("<img src=x onerror=alert(1)>") and "⟨U+202E⟩" in question
    assert page.locator("#answer").inner_text() == "</script><b>bold?</b>"
    page.keyboard.press("t")  # a note, then back to the keys
    page.keyboard.type("unsure")
    page.keyboard.press("Escape")
    _press(page, "n", "c")
    _press(page, "s", None)  # skip the last row: done
    _press(page, "u", "c")  # the skip taken back
    page.reload()
    page.locator("#row-id").wait_for()
    assert _row_id(page) == "c"
    assert "2 done by ann" in page.locator("h1").inner_text()
    status = page.locator("#status")
    assert status.get_attribute("aria-live") == "polite"
    page.close()
    assert problems == []
    assert read_label_values(path) == {"human": {"a": (1.0, 1.0), "b": (0.0, 1.0)}}
    notes = [json.loads(line).get("note") for line in path.read_text().splitlines()]
    assert "unsure" in notes


def test_the_page_without_its_token_is_refused(
    browser: Browser, served: tuple[LabellingServer, Path]
) -> None:
    server, _ = served
    page = browser.new_page()
    response = page.goto(server.url.split("?")[0])
    assert response is not None and response.status == 403
    page.close()
