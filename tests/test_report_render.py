"""The HTML report as text: self-contained, data escaped, tolerant of unfinished runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import (
    ATTACK_QUESTION,
    ATTACK_REASON,
    NOT_MEASURED_CAUSE,
    RUN_METRICS,
    embedded_payload,
    rows,
    run_manifest,
    synthetic_run,
    write_run,
)
from rageval.log import model_json, read_lines
from rageval.report import REPORT_FILE, render_report, write_report
from rageval.report._model import RunData
from rageval.runner import evaluate


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", *synthetic_run(6))


def test_report_is_self_contained(run_dir: Path) -> None:
    html = write_report(run_dir).read_text(encoding="utf-8")
    assert (run_dir / REPORT_FILE).exists()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(?:https?:)?//", html, re.I)
    assert "default-src 'none'" in html
    # The only scripts are the data block and the inline program; nothing is loaded.
    assert re.findall(r"<script\b[^>]*>", html) == [
        '<script type="application/json" id="run-data">',
        "<script>",
    ]


def test_csp_hash_matches_the_inline_script(run_dir: Path) -> None:
    import base64
    import hashlib

    html = render_report(RunData.load(run_dir))
    script = html.rsplit("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html


def test_payload_cannot_close_its_script_block(run_dir: Path) -> None:
    html = render_report(RunData.load(run_dir))
    block = html.split('id="run-data">', 1)[1].split("</script>", 1)[0]
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in block
    assert "\\u003c/script\\u003e" in block
    payload = embedded_payload(html)
    assert payload["samples"][1]["inputs"]["user_input"] == ATTACK_QUESTION
    assert payload["samples"][1]["metrics"]["faithfulness"]["reason"] == ATTACK_REASON
    # Exactly the template's two script elements close: the data added none.
    assert html.count("</script>") == 2


def test_placeholders_in_the_data_are_not_substituted(tmp_path: Path) -> None:
    man, results, summary = synthetic_run(4)
    results[0]["inputs"]["user_input"] = "{{SCRIPT}} {{RUN_DATA}} {{STYLE}}"
    html = render_report(RunData.load(write_run(tmp_path / "run", man, results, summary)))
    assert embedded_payload(html)["samples"][0]["inputs"]["user_input"] == (
        "{{SCRIPT}} {{RUN_DATA}} {{STYLE}}"
    )
    assert html.count("function") > 10 and html.count("{{") == 3


def test_not_measured_cells_are_kept_and_counted(run_dir: Path) -> None:
    payload = embedded_payload(render_report(RunData.load(run_dir)))
    faith = next(m for m in payload["metrics"] if m["name"] == "faithfulness")
    assert (faith["n_measured"], faith["n_not_measured"]) == (4, 2)
    cell = payload["samples"][2]["metrics"]["faithfulness"]
    assert cell["status"] == "not_measured" and cell["value"] is None
    assert cell["cause"].startswith("judge call failed")
    assert [m["name"] for m in payload["metrics"]] == list(RUN_METRICS)
    assert payload["metrics"][1]["params"] == {"strictness": 3}


def test_empty_run_renders(tmp_path: Path) -> None:
    man = run_manifest(0)
    man["metrics"] = []
    man["judge"] = None
    man["embeddings"] = None
    html = render_report(RunData.load(write_run(tmp_path / "run", man, [], None)))
    payload = embedded_payload(html)
    assert payload["samples"] == [] and payload["metrics"] == []
    assert payload["has_summary"] is False


def test_unfinished_run_without_summary(tmp_path: Path) -> None:
    man, results, _ = synthetic_run(6)
    run = write_run(tmp_path / "run", man, results[:5], None)
    # The process died while appending the sixth record.
    with (run / "results.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(results[5])[:40])
    payload = embedded_payload(render_report(RunData.load(run)))
    assert [s["row"] for s in payload["samples"]] == [0, 1, 2, 3, 4]
    assert payload["has_summary"] is False
    faith = payload["metrics"][0]
    assert faith["ci_low"] is None
    assert (faith["n_measured"], faith["n_not_measured"], faith["n_cells"]) == (3, 2, 5)
    measured = [
        r["metrics"]["faithfulness"]["value"]
        for r in results[:5]
        if r["metrics"]["faithfulness"]["status"] == "ok"
    ]
    assert faith["mean"] == pytest.approx(sum(measured) / 3)
    # a log of format 1 records no kind: its causes are grouped as "unknown"
    assert faith["failures"] == [
        {
            "status": "not_measured",
            "kind": "unknown",
            "count": 2,
            "examples": [
                {"cause": NOT_MEASURED_CAUSE, "count": 2, "sample_ids": ["q-002", "q-003"]}
            ],
        }
    ]
    assert payload["shared_usage"]["shared:statements"]["requests"] == 5
    assert payload["usage"]["requests"] == 5 + sum(
        c["usage"]["requests"] for r in results[:5] for c in r["metrics"].values()
    )


def test_a_broken_line_inside_the_log_is_an_error(tmp_path: Path) -> None:
    man, results, summary = synthetic_run(4)
    run = write_run(tmp_path / "run", man, results, summary)
    lines = (run / "results.jsonl").read_text().splitlines()
    lines[1] = lines[1][:30]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:2"):
        RunData.load(run)


def test_resumed_row_keeps_its_last_record(tmp_path: Path) -> None:
    man, results, summary = synthetic_run(4)
    again = json.loads(json.dumps(results[0]))
    again["metrics"]["faithfulness"]["value"] = 0.25
    run = write_run(tmp_path / "run", man, [*results, again], summary)
    loaded = RunData.load(run)
    assert loaded.rows == [0, 1, 2, 3]
    assert json.loads(loaded.results_json[0])["metrics"]["faithfulness"]["value"] == 0.25


def test_nan_score_is_rejected_but_nan_evidence_is_shown(tmp_path: Path) -> None:
    man, results, summary = synthetic_run(4)
    results[0]["metrics"]["answer_relevancy"]["evidence"]["questions"][0]["cosine"] = float("nan")
    run = write_run(tmp_path / "run", man, results, summary)
    payload = embedded_payload(render_report(RunData.load(run)))
    # an old log's evidence dict: free-form, its keys kept under data
    evidence = payload["samples"][0]["metrics"]["answer_relevancy"]["evidence"]
    assert evidence["kind"] == "free"
    cosine = evidence["data"]["questions"][0]
    assert cosine["cosine"] == "NaN"

    results[0]["metrics"]["answer_relevancy"]["value"] = float("nan")
    write_run(run, man, results, summary)
    with pytest.raises(ValueError, match=r"results.jsonl:1: (.|\n)*finite"):
        RunData.load(run)


def test_status_and_value_must_agree(tmp_path: Path) -> None:
    man, results, summary = synthetic_run(4)
    results[2]["metrics"]["faithfulness"]["value"] = 0.0
    with pytest.raises(ValueError, match=r"results.jsonl:3: (.|\n)*has no value"):
        RunData.load(write_run(tmp_path / "run", man, results, summary))


def test_extra_keys_are_tolerated_and_kept(tmp_path: Path) -> None:
    man, results, summary = synthetic_run(4)
    man["judge"]["mode"] = "json_schema"
    results[0]["metadata"] = {"source": "prod"}
    summary["metrics"]["faithfulness"]["std"] = 0.1
    payload = embedded_payload(
        render_report(RunData.load(write_run(tmp_path / "run", man, results, summary)))
    )
    assert payload["manifest"]["judge"]["mode"] == "json_schema"
    assert payload["samples"][0]["metadata"] == {"source": "prod"}
    assert payload["metrics"][0]["std"] == 0.1


def test_assets_cannot_end_their_own_elements() -> None:
    from importlib.resources import files

    assets = files("rageval.report")
    assert "</script" not in assets.joinpath("report.js").read_text().lower()
    assert "</style" not in assets.joinpath("report.css").read_text().lower()


def test_a_large_run_embeds_the_first_rows_and_counts_the_rest(tmp_path: Path) -> None:
    manifest, results, summary = synthetic_run(12)
    run_dir = write_run(tmp_path / "run", manifest, results[::-1], summary)  # order on disk varies
    data = embedded_payload(write_report(run_dir, max_samples=5).read_text(encoding="utf-8"))
    assert [s["row"] for s in data["samples"]] == [0, 1, 2, 3, 4]
    assert data["samples_left_out"] == 7
    full = embedded_payload(write_report(run_dir).read_text(encoding="utf-8"))
    assert len(full["samples"]) == 12 and full["samples_left_out"] == 0


def test_lines_of_this_format_are_embedded_as_the_log_holds_them(tmp_path: Path) -> None:
    run = tmp_path / "run"
    evaluate(rows(5), ["token_f1", "rouge_l"], run_dir=run, progress=False)
    logged = {}  # row -> its line's text in the file (rows finish in any order)
    for text in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        logged[json.loads(text)["row"]] = text
    data = RunData.load(run)
    assert data.results_json == [logged[row] for row in range(5)]
    # the file's text is the very JSON the current format writes (what makes reusing it right)
    lines = sorted((entry.line for entry in read_lines(run / "results.jsonl")), key=lambda x: x.row)
    assert data.results_json == [model_json(line) for line in lines]
    payload = embedded_payload(render_report(data))
    assert payload["samples"] == [json.loads(logged[row]) for row in range(5)]
