"""The report page of a generated test set (``report.md`` in the run directory): what was
asked and kept by type and style, the lengths, the documents covered, and every dropped
attempt with the check that dropped it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rageval.generation._corpus import Chunk


def _words(text: str) -> int:
    return len(text.split())


def _lengths(values: Sequence[int]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{min(ordered)} / {ordered[len(ordered) // 2]} / {max(ordered)}"


def failed_check(record: dict[str, Any]) -> tuple[str, str]:
    """The name and reason of the check that dropped the attempt `record`."""
    check = next(c for c in record["checks"] if not c["passed"])
    return check["name"], check["reason"]


def report_markdown(
    requested: int,
    items: Sequence[dict[str, Any]],
    dropped: Sequence[dict[str, Any]],
    unfilled: int,
    chunks: Sequence[Chunk],
    *,
    notes: Sequence[str] = (),
) -> str:
    """The report of a run, as Markdown.

    Args:
        requested: the items asked for.
        items: the kept items.
        dropped: the dropped attempts' records.
        unfilled: the slots that used up their attempts.
        chunks: the corpus.
        notes: what the plan left out and why.
    """
    lines = [
        "# Generated test set",
        "",
        f"{len(items)} of {requested} items kept; {len(dropped)} attempt(s) "
        f"dropped; {unfilled} slot(s) left without an item.",
        "",
        *(f"Note: {note}.\n" for note in notes),
        "| type | kept | dropped |",
        "| --- | --- | --- |",
    ]
    kept_types = Counter(i["metadata"]["type"] for i in items)
    dropped_types = Counter(a["type"] for a in dropped)
    for name in sorted(set(kept_types) | set(dropped_types)):
        lines.append(f"| {name} | {kept_types[name]} | {dropped_types[name]} |")
    styles = Counter(i["metadata"]["style"] for i in items)
    lines += ["", "Styles: " + ", ".join(f"{s} {n}" for s, n in sorted(styles.items()))]
    lines += [
        "",
        "Lengths in words (min / median / max): questions "
        + _lengths([_words(i["user_input"]) for i in items])
        + "; reference answers "
        + _lengths([_words(i["reference"]) for i in items]),
    ]
    used = {cid for i in items for cid in i["metadata"]["source_chunk_ids"]}
    by_source = {c.id: c.source for c in chunks}
    sources = Counter(by_source[c] for c in used if c in by_source)
    every = sorted({c.source for c in chunks})
    lines += [
        "",
        f"Topics covered: {len(used)} of {len(chunks)} chunks, {len(sources)} of {len(every)} "
        "documents.",
        "",
        "| document | items drawn from it |",
        "| --- | --- |",
        *[f"| {s} | {sources[s]} |" for s in every],
    ]
    reasons = Counter(failed_check(a)[0] for a in dropped)
    lines += ["", "## Dropped", ""]
    if not dropped:
        lines.append("None.")
    else:
        lines.append("By check: " + ", ".join(f"{k} {n}" for k, n in sorted(reasons.items())))
        lines += [
            "",
            "| slot | attempt | type | check | reason |",
            "| --- | --- | --- | --- | --- |",
        ]
        for a in dropped:
            name, reason = failed_check(a)
            reason = reason.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {a['slot']} | {a['attempt']} | {a['type']} | {name} | {reason} |")
    return "\n".join(lines) + "\n"
