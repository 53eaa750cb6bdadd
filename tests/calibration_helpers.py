"""Small stand-ins for the public human-labelled datasets, in their upstream file layouts.

The real files (research licences) are never copied into the repository. Tests read them from
PUBLIC_DATA when this machine has them, and otherwise from these synthetic files, written in
the same layout (folders, names, columns, quirks: quotes inside TSV fields, extra trailing
columns, labels to leave out) so that the same code paths run either way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rageval.calibration.datasets import DATA_FOLDERS

PUBLIC_DATA = Path(os.environ.get("RAGEVAL_PUBLIC_DATA", "/work/shared/data"))

#: folder of each dataset under a data root, as in PUBLIC_DATA
FOLDERS = DATA_FOLDERS

#: (rows, rows labelled 1) of the real files, as their SOURCE.md counts them (None: continuous)
REAL_COUNTS: dict[str, tuple[int, int | None]] = {
    "nq301": (1490, 816),
    "evouna-nq": (15099, None),
    "evouna-tq": (9690, None),
    "memerag": (387, 261),
    "memerag-ext": (226, None),
    "begin": (3601, 1392),
    "stsb": (1379, None),
    "sick": (4927, None),
}

_TOPICS = [
    ("the Eiffel Tower", "Paris", "Rome"),
    ("the Colosseum", "Rome", "Madrid"),
    ("the Prado museum", "Madrid", "Lisbon"),
    ("Belem Tower", "Lisbon", "Vienna"),
    ("Schonbrunn Palace", "Vienna", "Prague"),
    ("Charles Bridge", "Prague", "Berlin"),
]


def _tsv(path: Path, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


def _topic(i: int) -> tuple[str, str, str]:
    return _TOPICS[i % len(_TOPICS)]


def write_public_sets(root: Path, n: int = 36) -> dict[str, tuple[int, int | None]]:
    """Synthetic files for every dataset under `root`; (rows kept, rows labelled 1) each."""
    counts: dict[str, tuple[int, int | None]] = {}

    # NQ301: human verdicts + gold answers in a second file; a question has a '"' in it; as in
    # the real file, a gold answers field holding a comma or a quote is CSV-quoted.
    human = [["id", "Question", "Model answer", "Acceptable?", "a1", "a2", "a3"]]
    bem = [["id", "Question", "Gold answers", "Model answer", "Acceptable?", "BEM probs"]]
    for i in range(n):
        thing, city, wrong = _topic(i)
        question = f'where is "{thing}" (item {i})'
        right = i % 3 != 0
        human.append(
            [str(i), question, city if right else wrong, "Yes" if right else "No", "Yes", "No", ""]
        )
        gold = f'"{city} | {city}, Europe"' if i % 2 == 0 else f'"{city} | The ""{city}"""'
        bem.append([str(i), question, gold, city, "Yes", "[]"])
    human.append(["x", "a question without gold answers", "x", "Yes", "", "", ""])
    _tsv(root / "nq301-openqa-eval" / "NQ301_human.tsv", human)
    _tsv(root / "nq301-openqa-eval" / "NQ301_BEM.tsv", bem)
    counts["nq301"] = (n, sum(i % 3 != 0 for i in range(n)))

    # EVOUNA: five systems per question; improper questions, unjudged and null answers.
    for subset in ("NQ", "TQ"):
        items = []
        kept = positives = 0
        for q in range(n // 3):
            thing, city, wrong = _topic(q)
            item: dict[str, object] = {
                "question": f"where is {thing} ({subset} {q})",
                "golden_answer": f"{city}/{city}, Europe",
                "improper": q == 1,
            }
            for s, system in enumerate(("fid", "gpt35", "chatgpt", "gpt4", "newbing")):
                right = (q + s) % 2 == 0
                answer: str | None = f"It is in {city if right else wrong}."
                verdict: bool | None = right
                if system == "newbing" and q == 2:
                    verdict = None  # not judged
                if system == "fid" and q == 3:
                    answer, verdict = None, False  # no answer, judged incorrect
                item[f"answer_{system}"], item[f"judge_{system}"] = answer, verdict
                if q != 1 and verdict is not None:
                    kept += 1
                    positives += bool(verdict)
            items.append(item)
        folder = root / "evouna"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{subset}.json").write_text(json.dumps(items), encoding="utf-8")
        counts[f"evouna-{subset.lower()}"] = (kept, positives)

    # MEMERAG: sentences of answers; "Challenging to determine" is left out; the majority
    # file keeps one label, the raw files would hold a list (as a Python repr) per annotator.
    for variant, folder_name in (
        ("memerag", "memerag"),
        ("memerag-ext", "memerag_ext_w_majority_vote"),
    ):
        lines = []
        kept = positives = 0
        for q in range(n // 2):
            thing, city, wrong = _topic(q)
            sentences = []
            for k, (text, label) in enumerate(
                [
                    (f"{thing} stands in {city}.", "Supported"),
                    (f"{thing} was moved to {wrong} in 1999.", "Not Supported"),
                ]
            ):
                if q == 0 and k == 1:
                    label = "Challenging to determine"
                elif variant == "memerag-ext" and q == 1:
                    label = str([label] * 5)  # the annotators' votes as a Python list repr
                sentences.append(
                    {"sentence_id": k, "sentence": text, "factuality": label,
                     "fine_grained_factuality": "", "relevance": "", "comments": ""}
                )  # fmt: skip
                if "Challenging" not in label:
                    kept += 1
                    positives += "Not" not in label
            lines.append(
                json.dumps(
                    {
                        "query_id": q,
                        "query": f"Where is {thing}?",
                        "context": [
                            {"text": f"{thing} is a landmark in {city}. {thing} stands in {city}."}
                        ],
                        "answer": sentences,
                    }
                )
            )
        path = root / "memerag" / folder_name / "en.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        counts[variant] = (kept, positives)

    # BEGIN: 'Generic' responses are left out.
    begin = [["model_name", "data_source", "knowledge", "message", "response", "begin_label"]]
    kept = positives = 0
    for i in range(n):
        thing, city, wrong = _topic(i)
        label = ["Fully attributable", "Not fully attributable", "Generic"][
            i % 3 if i < 6 else i % 2
        ]
        response = f"{thing} is in {city}." if label == "Fully attributable" else f"I love {wrong}!"
        begin.append(
            [
                "t5",
                "wow",
                f"{thing} is a landmark in {city}.",
                f"Tell me about {thing}",
                response,
                label,
            ]
        )
        kept += label != "Generic"
        positives += label == "Fully attributable"
    _tsv(root / "begin" / "wow" / "begin_test_wow.tsv", begin)
    counts["begin"] = (kept, positives)

    # STS-B: no header; some rows carry two extra licence columns; '"' inside sentences.
    sts = []
    for i in range(n):
        thing, city, wrong = _topic(i)
        score = f"{(i * 7) % 26 / 5:.3f}"
        row = [
            "main-news",
            "headlines",
            "2015",
            f"{i:04d}",
            score,
            f'A "{thing}" photo.',
            f"A picture of {city if i % 2 else wrong}.",
        ]
        sts.append(row + (["licence", "attribution"] if i % 4 == 0 else []))
    _tsv(root / "stsbenchmark" / "sts-test.csv", sts)
    counts["stsb"] = (n, None)

    # SICK: header, relatedness 1-5.
    sick = [["pair_ID", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"]]
    for i in range(n):
        thing, city, wrong = _topic(i)
        sick.append(
            [
                str(i + 1),
                f"A man visits {thing}.",
                f"A man is in {city if i % 2 else wrong}.",
                f"{1 + (i * 3) % 41 / 10:.1f}",
                "NEUTRAL",
            ]
        )
    _tsv(root / "sick" / "SICK_test_annotated.txt", sick)
    counts["sick"] = (n, None)
    return counts
