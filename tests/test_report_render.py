"""The HTML report as text: self-contained, data escaped, tolerant of unfinished runs.

`write_run` and `synthetic_run` are shared with test_report_browser.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rageval.report import REPORT_FILE, render_report, write_report
from rageval.report._model import RunData

ATTACK_QUESTION = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
ATTACK_REASON = "the context says </script><script>window.__pwned=3</script> & more \u2028 end"
METRICS = ("faithfulness", "answer_relevancy", "answer_accuracy")
NOT_MEASURED_CAUSE = "judge call failed: 3 replies did not cover every statement id"


def write_run(
    run_dir: Path,
    manifest: dict[str, Any],
    results: list[dict[str, Any]],
    summary: dict[str, Any] | None,
) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    lines = "".join(json.dumps(r) + "\n" for r in results)
    (run_dir / "results.jsonl").write_text(lines, encoding="utf-8")
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run_dir


def usage(requests: int = 1, prompt: int = 100, completion: int = 20) -> dict[str, Any]:
    return {
        "requests": requests,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cache_hits": 0,
        "cost_usd": None,
    }


def ok_cell(value: float, reason: str, evidence: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": "ok",
        "value": value,
        "cause": None,
        "reason": reason,
        "evidence": evidence,
        "usage": usage(),
    }


def not_measured(cause: str) -> dict[str, Any]:
    return {
        "status": "not_measured",
        "value": None,
        "cause": cause,
        "reason": None,
        "evidence": {},
        "usage": usage(requests=3),
    }


def manifest(n_rows: int) -> dict[str, Any]:
    return {
        "rageval_version": "0.1.0",
        "created_at": "2025-03-04T10:20:30.123456+00:00",
        "metrics": [
            {"name": "faithfulness", "params": {}},
            {"name": "answer_relevancy", "params": {"strictness": 3}},
            {"name": "answer_accuracy", "params": {"max_retries": 5}},
        ],
        "judge": {
            "model": "gpt-4o-mini",
            "base_url": "http://127.0.0.1:9/v1",
            "temperature": 0.0,
            "max_tokens": 1024,
        },
        "embeddings": {"name": "local:all-MiniLM-L6-v2"},
        "data": {"source": "fixtures/qa.jsonl", "fingerprint": "sha256:0123abcd", "n_rows": n_rows},
    }


def synthetic_run(n: int) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """`n` samples (n >= 4) with deterministic values. Row 1 carries the script injection in its
    question and faithfulness reason; faithfulness is not measured on rows 2 and 3."""
    results: list[dict[str, Any]] = []
    for row in range(n):
        question = (
            ATTACK_QUESTION if row == 1 else f"What is fact number {row} about topic {row % 7}?"
        )
        faith_value = round(((row * 37) % 101) / 100, 2)
        faith: dict[str, Any]
        if row in (2, 3):
            faith = not_measured(NOT_MEASURED_CAUSE)
        else:
            faith = ok_cell(
                faith_value,
                ATTACK_REASON
                if row == 1
                else f"{faith_value:.2f} of the statements are supported.",
                {
                    "statements": [
                        {"id": 1, "text": f"Fact {row} holds.", "verdict": True},
                        {
                            "id": 2,
                            "text": f"Fact {row} also implies more.",
                            "verdict": False,
                            "reason": "not in the contexts",
                        },
                    ]
                },
            )
        # Cosines may be negative: -0.5 < -0.1 numerically but not as text.
        relevancy = ok_cell(
            round(((row * 29) % 130 - 30) / 100, 2),
            "mean cosine of generated questions",
            {
                "questions": [
                    {"text": f"Which fact is {row}?", "cosine": 0.8123},
                    {"text": "What holds?", "cosine": 0.61},
                ],
                "noncommittal": False,
            },
        )
        accuracy = ok_cell(
            [0.0, 0.5, 0.75, 1.0][row % 4],
            "two templates averaged",
            {"ratings": {"template_1": 4, "template_2": None if row % 2 else 2}},
        )
        results.append(
            {
                "row": row,
                "id": f"q-{row:03d}",
                "inputs": {
                    "user_input": question,
                    "response": f"Answer {row}: fact {row} holds, and it implies more.",
                    "retrieved_contexts": [f"Context A for {row}.", f"Context B for {row}."],
                    "reference": f"Fact {row} holds.",
                    "reference_contexts": None,
                },
                "metrics": {
                    "faithfulness": faith,
                    "answer_relevancy": relevancy,
                    "answer_accuracy": accuracy,
                },
                "shared_usage": usage(requests=1, prompt=200, completion=50),
            }
        )
    summary: dict[str, Any] = {
        "metrics": {},
        "duration_s": 12.5,
        "usage": {**usage(requests=10 * n), "retries": 2},
        "shared_usage": {"shared:statements": usage(requests=n, prompt=200 * n, completion=50 * n)},
    }
    for name in METRICS:
        values = [
            r["metrics"][name]["value"] for r in results if r["metrics"][name]["status"] == "ok"
        ]
        mean = sum(values) / len(values)
        summary["metrics"][name] = {
            "mean": mean,
            "ci_low": mean - 0.05,
            "ci_high": mean + 0.05,
            "ci_method": "bootstrap 95% percentile, 2000 resamples, seed 0",
            "n_measured": len(values),
            "n_not_measured": n - len(values),
            "n_skipped": 0,
            "n_cells": n,
            "usage": usage(requests=3 * n),
            "causes": {f"not measured: {NOT_MEASURED_CAUSE}": n - len(values)}
            if len(values) < n
            else {},
        }
    return manifest(n), results, summary


def embedded_payload(html: str) -> Any:
    match = re.search(
        r'<script type="application/json" id="run-data">(.*?)</script>', html, re.DOTALL
    )
    assert match is not None
    return json.loads(match.group(1))


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
    assert [m["name"] for m in payload["metrics"]] == list(METRICS)
    assert payload["metrics"][1]["params"] == {"strictness": 3}


def test_empty_run_renders(tmp_path: Path) -> None:
    man = manifest(0)
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
    assert [r.row for r in loaded.results] == [0, 1, 2, 3]
    assert loaded.results[0].cells["faithfulness"].value == 0.25


def test_nan_score_is_rejected_but_nan_evidence_is_shown(tmp_path: Path) -> None:
    man, results, summary = synthetic_run(4)
    results[0]["metrics"]["answer_relevancy"]["evidence"]["questions"][0]["cosine"] = float("nan")
    run = write_run(tmp_path / "run", man, results, summary)
    payload = embedded_payload(render_report(RunData.load(run)))
    cosine = payload["samples"][0]["metrics"]["answer_relevancy"]["evidence"]["questions"][0]
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
