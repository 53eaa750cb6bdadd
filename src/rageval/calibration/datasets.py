"""Readers for public human-labelled datasets, each turned into rows rageval can calibrate on.

None of this data ships with rageval: the licences are for research use (some non-commercial),
so each reader takes the path of a copy you obtained from its origin repository (the upstream
file layout, or the file itself). Each dataset validates the metrics it names:

* ``nq301`` — ehsk/OpenQA-eval, NQ301 (MIT): answers judged correct or not →
  answer_accuracy, answer_correctness;
* ``evouna-nq``, ``evouna-tq`` — wangcunxiang/QA-Eval, EVOUNA (Apache-2.0): the same;
* ``memerag`` — amazon-science/MEMERAG, English (CC BY-NC 4.0): answer sentences judged
  supported by the passages or not → faithfulness, response_groundedness; ``memerag-ext``:
  the five annotators' majority vote;
* ``begin`` — google/BEGIN-dataset, Wizard-of-Wikipedia test (CC BY 4.0): responses judged
  attributable to a knowledge sentence or not → response_groundedness, faithfulness;
* ``stsb`` — STS Benchmark test (scores CC BY-SA 4.0): similarity rated 0–5 →
  semantic_similarity;
* ``sick`` — SICK relatedness test (CC BY-NC-SA 3.0): relatedness rated 1–5 →
  semantic_similarity.

Each reader returns a :class:`LabelledSet`: rows in rageval's field names plus the label column,
ready for ``rageval.calibrate(ds.rows, labels=ds.labels())``, or written as JSONL with
:meth:`LabelledSet.write_jsonl` (to a path of your choosing, never inside the package).
"""

from __future__ import annotations

import ast
import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.errors import RagevalError

if TYPE_CHECKING:
    from rageval.labels import LabelKind

__all__ = [
    "DATASETS",
    "DATA_FOLDERS",
    "DatasetError",
    "LabelledSet",
    "begin",
    "evouna",
    "load_dataset",
    "memerag",
    "nq301",
    "sick",
    "stsb",
]


class DatasetError(RagevalError, ValueError):
    """A dataset file that is missing or not in the expected layout."""


@dataclass
class LabelledSet:
    """Rows with a human label, and what the label validates."""

    name: str
    #: rows in rageval's field names (user_input, response, retrieved_contexts, reference),
    #: with `id`, the label column and descriptive columns (they travel as sample metadata)
    rows: list[dict[str, Any]]
    label_column: str
    kind: LabelKind
    #: the rageval metrics this label measures, the closest first
    metrics: tuple[str, ...]
    source: str
    licence: str
    #: rows of the files that were left out, by reason
    left_out: dict[str, int] = field(default_factory=dict)
    #: the label scale, for binary and ordinal labels
    levels: list[float] | None = None

    def labels(self, metrics: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """(label column, metric) pairs for `calibrate(labels=...)`: the label against each of
        `metrics` (default: the closest metric only)."""
        return [(self.label_column, m) for m in (metrics or self.metrics[:1])]

    def sample(self, n: int, *, seed: int = 0) -> LabelledSet:
        """A random subset of `n` rows (all of them if there are fewer), the same for the
        same seed, in the original order."""
        if n >= len(self.rows):
            return self
        keep = sorted(random.Random(seed).sample(range(len(self.rows)), n))
        return LabelledSet(
            self.name,
            [self.rows[i] for i in keep],
            self.label_column,
            self.kind,
            self.metrics,
            self.source,
            self.licence,
            dict(self.left_out),
            self.levels,
        )

    def write_jsonl(self, path: str | Path) -> Path:
        """The rows as JSON lines at `path` (for `rageval calibrate FILE --labels ...`)."""
        target = Path(path)
        with target.open("w", encoding="utf-8") as fh:
            for row in self.rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        return target


# ---------------------------------------------------------------------- file helpers


def _find(path: str | Path, candidates: Sequence[str], what: str) -> Path:
    """`path` itself when it is a file, else the first of `candidates` under it."""
    p = Path(path)
    if p.is_file():
        return p
    if not p.exists():
        raise DatasetError(f"{what}: {p} does not exist")
    for rel in candidates:
        if (p / rel).is_file():
            return p / rel
    raise DatasetError(f"{what}: none of {', '.join(candidates)} under {p}")


def _tsv(path: Path, *, header: bool = True) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a tab-separated file read as plain text: these files put
    quote characters inside fields, which a CSV reader would take for quoting."""
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if header and number == 1:
                continue
            if line.strip():
                yield number, line.rstrip("\n").rstrip("\r").split("\t")


def _csv_unquoted(field: str) -> str:
    """`field` without CSV quoting where a writer applied it: NQ301_BEM.tsv quotes a gold
    answers field holding a comma or a quote (``"April 21, 2017"``, ``"Ethel ""Edy""
    Proctor"``); a field with a quote character inside but not quoted so is kept as it is."""
    inner = field[1:-1]
    if len(field) >= 2 and field[0] == field[-1] == '"' and '"' not in inner.replace('""', ""):
        return inner.replace('""', '"')
    return field


def _fields(path: Path, number: int, fields: list[str], at_least: int) -> list[str]:
    if len(fields) < at_least:
        raise DatasetError(
            f"{path}:{number}: expected at least {at_least} tab-separated fields, got {len(fields)}"
        )
    return fields


def _count(left_out: dict[str, int], reason: str) -> None:
    left_out[reason] = left_out.get(reason, 0) + 1


def _binary(
    label: str | None, yes: str, no: str, left_out: dict[str, int], field: str
) -> int | None:
    """1 for the label `yes`, 0 for `no`; any other value is counted as a reason to leave the
    row out (as "`field` 'value'") and gives None."""
    if label in (yes, no):
        return int(label == yes)
    _count(left_out, f"{field} {label!r}")
    return None


def _gold(answers: Sequence[str]) -> str | list[str]:
    """The acceptable gold answers: one reference, or several (``Sample.references``)."""
    kept = [a.strip() for a in answers if a.strip()]
    return kept[0] if len(kept) == 1 else kept


# ---------------------------------------------------------------------- answer correctness

_CORRECTNESS_METRICS = ("answer_accuracy", "answer_correctness")


def nq301(path: str | Path) -> LabelledSet:
    """NQ-open 301 (Kamalloo et al., ACL 2023): 1,490 answers of 12 QA systems, judged
    acceptable or not by people. `path`: the repository's `data/` folder (or `NQ301_human.tsv`
    in it); the gold answers come from `NQ301_BEM.tsv` beside it (separated there by " | "),
    each sample's reference the list of them."""
    human = _find(path, ["NQ301_human.tsv", "data/NQ301_human.tsv"], "nq301")
    bem = human.with_name("NQ301_BEM.tsv")
    if not bem.is_file():
        raise DatasetError(f"nq301: the gold answers file {bem} is missing")
    gold: dict[str, str | list[str]] = {}
    for number, fields in _tsv(bem):
        _, question, answers, *_ = _fields(bem, number, fields, 4)
        gold[question] = _gold(_csv_unquoted(answers).split(" | "))
    rows: list[dict[str, Any]] = []
    left_out: dict[str, int] = {}
    for number, fields in _tsv(human):
        qid, question, answer, acceptable, *votes = _fields(human, number, fields, 4)
        if question not in gold:
            _count(left_out, "question without gold answers")
            continue
        correct = _binary(acceptable, "Yes", "No", left_out, "label")
        if correct is None:
            continue
        rows.append(
            {
                "id": f"nq301-{number - 1}",
                "user_input": question,
                "response": answer,
                "reference": gold[question],
                "human_correct": correct,
                "question_id": qid,
                "annotators": [v for v in votes if v],
            }
        )
    return LabelledSet(
        "nq301", rows, "human_correct", "binary", _CORRECTNESS_METRICS, str(human),
        "MIT (questions and gold answers: NQ-open, CC BY-SA 3.0)", left_out, [0.0, 1.0],
    )  # fmt: skip


_EVOUNA_SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")


def evouna(path: str | Path, subset: str = "NQ") -> LabelledSet:
    """EVOUNA (Wang et al., NeurIPS 2023): answers of five QA systems to Natural Questions
    ("NQ") or TriviaQA ("TQ") questions, judged correct or not by people. Questions marked
    improper and answers not judged are left out. `path`: the repository's `EVOUNA/` folder
    (or `NQ.json` / `TQ.json`)."""
    if subset not in ("NQ", "TQ"):
        raise DatasetError(f"evouna: subset is 'NQ' or 'TQ', got {subset!r}")
    file = _find(path, [f"{subset}.json", f"EVOUNA/{subset}.json"], f"evouna-{subset.lower()}")
    try:
        items = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DatasetError(f"{file}: not valid JSON ({e})") from e
    if not isinstance(items, list):
        raise DatasetError(f"{file}: expected a JSON list of questions")
    rows: list[dict[str, Any]] = []
    left_out: dict[str, int] = {}
    for qi, item in enumerate(items):
        if not isinstance(item, Mapping) or "question" not in item:
            raise DatasetError(f"{file}: item {qi} is not a question object")
        if item.get("improper"):
            _count(left_out, "improper question")
            continue
        reference = _gold(str(item.get("golden_answer") or "").split("/"))
        for system in _EVOUNA_SYSTEMS:
            verdict = item.get(f"judge_{system}")
            # a system that gave no answer (null) and was judged for it answered ""
            answer = item.get(f"answer_{system}") or ""
            if not isinstance(verdict, bool) or not isinstance(answer, str):
                _count(left_out, "answer not judged")
                continue
            rows.append(
                {
                    "id": f"evouna-{subset.lower()}-{qi}-{system}",
                    "user_input": item["question"],
                    "response": answer,
                    "reference": reference,
                    "human_correct": int(verdict),
                    "answering_system": system,
                }
            )
    return LabelledSet(
        f"evouna-{subset.lower()}", rows, "human_correct", "binary", _CORRECTNESS_METRICS,
        str(file), "Apache-2.0 (questions: Natural Questions CC BY-SA 3.0 / TriviaQA Apache-2.0)",
        left_out, [0.0, 1.0],
    )  # fmt: skip


# ---------------------------------------------------------------------- faithfulness

_FAITHFULNESS_METRICS = ("faithfulness", "response_groundedness")
_MEMERAG_FILES = {
    "original": ["en.jsonl", "memerag/en.jsonl", "data/memerag/en.jsonl"],
    "majority": [
        "en.jsonl",
        "memerag_ext_w_majority_vote/en.jsonl",
        "data/memerag_ext_w_majority_vote/en.jsonl",
    ],
}


def memerag(path: str | Path, variant: str = "original") -> LabelledSet:
    """MEMERAG, English (Cruz Blandón et al., 2025): sentences of RAG answers by five LLMs,
    each judged supported by the retrieved passages or not. One row per sentence: the
    question, the sentence as the response, the passages as contexts. Sentences judged
    "Challenging to determine" are left out. `variant` "original" (250 answers, one expert
    label) or "majority" (150 answers, the majority of five annotators). `path`: the
    repository root (or the `en.jsonl` file)."""
    if variant not in _MEMERAG_FILES:
        raise DatasetError(f"memerag: variant is 'original' or 'majority', got {variant!r}")
    file = _find(path, _MEMERAG_FILES[variant], f"memerag ({variant})")
    rows: list[dict[str, Any]] = []
    left_out: dict[str, int] = {}
    with file.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                contexts = [str(c["text"]) for c in item["context"]]
                sentences = item["answer"]
                query = str(item["query"])
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise DatasetError(f"{file}:{number}: not a MEMERAG record ({e})") from e
            for sentence in sentences:
                verdict = _one_label(sentence.get("factuality"))
                supported = _binary(verdict, "Supported", "Not Supported", left_out, "factuality")
                if supported is None:
                    continue
                sid = f"{item.get('query_id', number)}-{sentence.get('sentence_id')}"
                rows.append(
                    {
                        "id": f"memerag-{sid}",
                        "user_input": query,
                        "response": str(sentence["sentence"]),
                        "retrieved_contexts": contexts,
                        "human_supported": supported,
                        "error_type": _one_label(sentence.get("fine_grained_factuality")),
                    }
                )
    name = "memerag" if variant == "original" else "memerag-ext"
    return LabelledSet(
        name, rows, "human_supported", "binary", _FAITHFULNESS_METRICS, str(file),
        "CC BY-NC 4.0 (research, non-commercial; passages from MIRACL, Apache-2.0)",
        left_out, [0.0, 1.0],
    )  # fmt: skip


def _one_label(value: Any) -> str | None:
    """A label field: a string, or (in some MEMERAG files) a list or its Python repr holding
    one label per annotator, read without eval: the label when they all agree."""
    if isinstance(value, str) and value.startswith("["):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return str(value)
    if isinstance(value, list):
        distinct = set(map(str, value))
        return distinct.pop() if len(distinct) == 1 else None
    return None if value is None else str(value)


def begin(path: str | Path, split: str = "test") -> LabelledSet:
    """BEGIN, Wizard-of-Wikipedia part (Dziri et al., TACL 2022): dialogue responses of four
    models, judged fully attributable to a knowledge sentence or not. The previous turn is the
    question, the knowledge sentence the one context. "Generic" responses are left out.
    `split` "test" or "dev"; `path`: the repository root (or the .tsv file)."""
    if split not in ("test", "dev"):
        raise DatasetError(f"begin: split is 'test' or 'dev', got {split!r}")
    name = f"begin_{split}_wow.tsv"
    file = _find(path, [name, f"wow/{name}"], "begin")
    rows: list[dict[str, Any]] = []
    left_out: dict[str, int] = {}
    for number, fields in _tsv(file):
        model, _, knowledge, message, response, label = _fields(file, number, fields, 6)[:6]
        attributable = _binary(
            label, "Fully attributable", "Not fully attributable", left_out, "label"
        )
        if attributable is None:
            continue
        rows.append(
            {
                "id": f"begin-{split}-{number - 1}",
                "user_input": message,
                "response": response,
                "retrieved_contexts": [knowledge],
                "human_attributable": attributable,
                "response_model": model,
            }
        )
    return LabelledSet(
        "begin" if split == "test" else "begin-dev", rows, "human_attributable", "binary",
        ("response_groundedness", "faithfulness"), str(file), "CC BY 4.0", left_out, [0.0, 1.0],
    )  # fmt: skip


# ---------------------------------------------------------------------- similarity


def stsb(path: str | Path, split: str = "test") -> LabelledSet:
    """STS Benchmark (Cer et al., SemEval-2017): sentence pairs rated 0 (unrelated) to 5
    (equivalent), the mean of crowd ratings. The pair goes in as response and reference.
    `split` "test", "dev" or "train"; `path`: the folder of the official files (or one)."""
    if split not in ("test", "dev", "train"):
        raise DatasetError(f"stsb: split is 'test', 'dev' or 'train', got {split!r}")
    file = _find(path, [f"sts-{split}.csv", f"stsbenchmark/sts-{split}.csv"], "stsb")
    rows: list[dict[str, Any]] = []
    for number, fields in _tsv(file, header=False):
        genre, _, _, _, score, first, second = _fields(file, number, fields, 7)[:7]
        rows.append(
            {
                "id": f"stsb-{split}-{number}",
                "response": first,
                "reference": second,
                "human_similarity": _number(file, number, score),
                "genre": genre,
            }
        )
    return LabelledSet(
        "stsb", rows, "human_similarity", "continuous", ("semantic_similarity",), str(file),
        "scores CC BY-SA 4.0; sentences under their sources' licences (see LICENSE.txt)",
    )  # fmt: skip


_SICK_FILES = {
    "test": ["SICK_test_annotated.txt"],
    "train": ["SICK_train.txt"],
    "trial": ["SICK_trial.txt"],
}


def sick(path: str | Path, split: str = "test") -> LabelledSet:
    """SICK relatedness (Marelli et al., SemEval-2014): sentence pairs rated 1–5, the mean of
    ten ratings. `split` "test", "train", "trial" or "all" (the three together, as MTEB's
    SICK-R); `path`: the folder of the files (or one of them)."""
    splits = ["train", "trial", "test"] if split == "all" else [split]
    if any(s not in _SICK_FILES for s in splits):
        raise DatasetError(f"sick: split is 'test', 'train', 'trial' or 'all', got {split!r}")
    rows: list[dict[str, Any]] = []
    files = []
    for s in splits:
        file = _find(path, _SICK_FILES[s], f"sick ({s})")
        files.append(str(file))
        for number, fields in _tsv(file):
            pair_id, first, second, score, entailment = _fields(file, number, fields, 5)[:5]
            rows.append(
                {
                    "id": f"sick-{pair_id}",
                    "response": first,
                    "reference": second,
                    "human_relatedness": _number(file, number, score),
                    "entailment": entailment,
                }
            )
    return LabelledSet(
        "sick", rows, "human_relatedness", "continuous", ("semantic_similarity",),
        ", ".join(files), "CC BY-NC-SA 3.0 (research, non-commercial)",
    )  # fmt: skip


def _number(path: Path, number: int, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise DatasetError(f"{path}:{number}: the score {text!r} is not a number") from None


#: the command line's names for the readers (`rageval calibrate PATH --dataset NAME`)
DATASETS: dict[str, Callable[[str | Path], LabelledSet]] = {
    "nq301": nq301,
    "evouna-nq": lambda p: evouna(p, "NQ"),
    "evouna-tq": lambda p: evouna(p, "TQ"),
    "memerag": memerag,
    "memerag-ext": lambda p: memerag(p, "majority"),
    "begin": begin,
    "stsb": stsb,
    "sick": sick,
}


#: the folder of each dataset in a directory that holds them all, one folder per origin
DATA_FOLDERS: dict[str, str] = {
    "nq301": "nq301-openqa-eval",
    "evouna-nq": "evouna",
    "evouna-tq": "evouna",
    "memerag": "memerag",
    "memerag-ext": "memerag",
    "begin": "begin",
    "stsb": "stsbenchmark",
    "sick": "sick",
}


def load_dataset(name: str, path: str | Path) -> LabelledSet:
    """The reader called `name` in :data:`DATASETS`, on `path`: the dataset's folder or file,
    or a directory holding every dataset in its :data:`DATA_FOLDERS` folder."""
    reader = DATASETS.get(name)
    if reader is None:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    folder = DATA_FOLDERS[name]
    inside = Path(path) / folder
    # a directory of all the datasets; not the dataset's own folder (MEMERAG's holds a
    # memerag/ folder of its own)
    return reader(inside if Path(path).name != folder and inside.is_dir() else path)
