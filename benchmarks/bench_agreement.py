"""Agreement with people: rageval beside ragas 0.4.3 and the lexical baselines, on the same
judge, rows and run (issue 41 item 5).

For each public human-labelled dataset (``rageval.calibration.datasets``; MEMERAG's German,
Spanish and French files as ``memerag-de`` / ``-es`` / ``-fr``) a seeded sample of one
**split** is scored by every *setup* and compared with the people's labels: Cohen's κ and
balanced accuracy with the score cut at 0.5, AUROC of the score, each with its bootstrap 95%
CI, and the paired differences the bars name (``rageval.stats.agreement_difference``).

    python benchmarks/bench_agreement.py --data-root /work/shared/data \\
        --base-url "$(cat /tmp/coord/QWEN_URL)" --model qwen1.5b --split heldout \\
        --rows evouna-nq=40 evouna-tq=40 memerag=40 --json benchmarks/.work/agreement.json
    python benchmarks/bench_agreement.py --from-json benchmarks/.work/agreement.json  # tables
    python benchmarks/bench_agreement.py --data-root /work/shared/data --fake --rows nq301=5
    python benchmarks/bench_agreement.py --data-root /work/shared/data --list-ids --split tune

**Splits.** Every dataset's rows are split in two halves by question (so the answers of one
question, or the sentences of one answer, stay on one side): ``tune`` where the sha256 of the
question is even, ``heldout`` where it is odd. Prompts and settings are chosen on ``tune``
rows, the reported figures are ``heldout`` rows; ``--exclude-ids FILE`` drops rows anyone
tuned on besides (one id a line).

**Setups** (``--setups``): ``rageval`` (the defaults: answer_accuracy on the correctness sets,
faithfulness and response_groundedness on the grounding sets), ``rageval-sampled`` (the same
with the judge's ``scoring="sampled"``), ``rageval-checker`` (faithfulness with
``mode="checker"``), ``rageval-language`` and ``rageval-no-language`` (faithfulness with
``language=`` the dataset's own, ``de`` for ``memerag-de``..., or ``en``: no language line in
any prompt; issue 44), ``ragas`` (AnswerAccuracy, or Faithfulness and ResponseGroundedness, in
the ragas venv: ``ragas_driver.py --rows-out``) and ``lexical`` (token_f1 and rouge_l against
the reference; on the grounding sets the share of the response's SQuAD tokens found in the
contexts, the "unigram coverage" floor MEMERAG and BEGIN publish). Every judge setup talks to
the judge through ``metered_proxy.py``, which adds up the server's own report of each
completion (requests, tokens, ``timings`` milliseconds), so each setup's cost is its own even
on a server others use. Results are kept per (dataset, setup) in ``--json`` as they finish; a
second run with the same file skips what is there.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import random
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import WORK, MeteredProxy, child_env, ensure_ragas_venv, markdown_table

#: the datasets, each with the reader's name and the file it reads (None: the data root's)
_LANGUAGES = {"memerag-de": "de", "memerag-es": "es", "memerag-fr": "fr"}
CORRECTNESS = ("nq301", "evouna-nq", "evouna-tq")
GROUNDING = ("memerag", *_LANGUAGES, "begin")
DATASETS = (*CORRECTNESS, *GROUNDING)
#: ragas' column of each metric in its result frame
RAGAS_COLUMNS = {
    "answer_accuracy": "nv_accuracy",
    "faithfulness": "faithfulness",
    "response_groundedness": "nv_response_groundedness",
}
CUT = 0.5


@dataclass(frozen=True)
class Setup:
    """One way of scoring a dataset's rows."""

    name: str
    tool: str  # rageval, ragas or lexical
    metrics: tuple[str, ...]
    scoring: str | None = None  # the judge's scoring setting (None: its default)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the run's language: True the dataset's own, False "en" (no language line), None detected
    language: bool | None = None


def setups(kind: str) -> dict[str, Setup]:
    """The setups of a dataset kind ("correctness" or "grounding"), by name."""
    if kind == "correctness":
        judged: tuple[str, ...] = ("answer_accuracy",)
        lexical: tuple[str, ...] = ("token_f1", "rouge_l")
    else:
        judged, lexical = ("faithfulness", "response_groundedness"), ("unigram_coverage",)
    found = [
        Setup("rageval", "rageval", judged),
        Setup("rageval-sampled", "rageval", judged, scoring="sampled"),
        Setup("ragas", "ragas", judged),
        Setup("lexical", "lexical", lexical),
    ]
    if kind == "grounding":
        checker = {"faithfulness": {"mode": "checker"}}
        found.append(Setup("rageval-checker", "rageval", ("faithfulness",), params=checker))
        found.append(Setup("rageval-language", "rageval", ("faithfulness",), language=True))
        found.append(Setup("rageval-no-language", "rageval", ("faithfulness",), language=False))
    return {s.name: s for s in found}


# ---------------------------------------------------------------------- rows


def half_of(question: str) -> str:
    """The split a question's rows belong to (see the module docstring)."""
    return "tune" if int(hashlib.sha256(question.encode()).hexdigest(), 16) % 2 == 0 else "heldout"


def load_rows(name: str, data_root: Path) -> tuple[list[dict[str, Any]], str]:
    """(rows, label column) of dataset `name` as its reader gives them; MEMERAG's other
    languages keep the language in the row id (their query ids are not unique across files)."""
    from rageval.calibration.datasets import load_dataset, memerag

    if name in _LANGUAGES:
        lang = _LANGUAGES[name]
        labelled = memerag(data_root / "memerag" / "memerag" / f"{lang}.jsonl")
        for row in labelled.rows:
            row["id"] = row["id"].replace("memerag-", f"memerag-{lang}-", 1)
    else:
        labelled = load_dataset(name, data_root)
    return labelled.rows, labelled.label_column


def pick(
    rows: list[dict[str, Any]], split: str, n: int, excluded: set[str], seed: int = 0
) -> list[dict[str, Any]]:
    """A seeded sample of `n` rows of `split`, in the file's order, without `excluded` ids."""
    pool = [r for r in rows if half_of(r["user_input"]) == split and r["id"] not in excluded]
    if n >= len(pool):
        return pool
    keep = sorted(random.Random(seed).sample(range(len(pool)), n))
    return [pool[i] for i in keep]


def ragas_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row in ragas' fields: several acceptable references as one text ("A / B"), the way
    EVOUNA writes them (ragas' reference is one string)."""
    out: dict[str, Any] = {
        k: row[k] for k in ("user_input", "response", "retrieved_contexts") if k in row
    }
    ref = row.get("reference")
    if ref is not None:
        out["reference"] = " / ".join(ref) if isinstance(ref, list) else ref
    return out


# ---------------------------------------------------------------------- scoring


@dataclass
class Scored:
    """One setup's scores of one dataset's rows."""

    dataset: str
    setup: str
    ids: list[str]
    labels: list[int]
    values: dict[str, list[float | None]]
    causes: dict[str, dict[str, int]] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    note: str = ""
    #: faithfulness cells of the run log whose every claim carries a probability
    claims_with_probability: dict[str, int] = field(default_factory=dict)


def unigram_coverage(response: str, contexts: Sequence[str]) -> float | None:
    """The share of the response's SQuAD tokens that occur in the contexts (None: no token)."""
    from rageval.metrics.lexical import squad_tokens

    words = squad_tokens(response)
    if not words:
        return None
    seen = set(squad_tokens(" ".join(contexts)))
    return sum(w in seen for w in words) / len(words)


def score_lexical(rows: list[dict[str, Any]], setup: Setup) -> dict[str, list[float | None]]:
    if setup.metrics == ("unigram_coverage",):
        cover = [unigram_coverage(r["response"], r["retrieved_contexts"]) for r in rows]
        return {"unigram_coverage": cover}
    from rageval import evaluate

    result = evaluate(rows, metrics=list(setup.metrics), progress=False, probe=False)
    return {m: list(result[m]) for m in setup.metrics}


def run_language(dataset: str, setup: Setup) -> str | None:
    """The ``language=`` of `setup`'s run on `dataset` (None: each row's detected)."""
    if setup.language is None:
        return None
    return _LANGUAGES.get(dataset, "en") if setup.language else "en"


def score_rageval(
    rows: list[dict[str, Any]],
    setup: Setup,
    base_url: str,
    model: str,
    slots: int,
    work: Path,
    language: str | None = None,
) -> tuple[dict[str, list[float | None]], dict[str, dict[str, int]], dict[str, int]]:
    """(values, causes of the cells without one by kind, claims with a probability) of a
    rageval run in `language` (None: detected); the run log in `work`/run."""
    from rageval import Judge, evaluate

    extra: dict[str, Any] = {} if setup.scoring is None else {"scoring": setup.scoring}
    judge = Judge(model, base_url=base_url, api_key="local", cache=False, timeout=900,
                  max_concurrency=slots, **extra)  # fmt: skip
    run_dir = work / "run"
    result = evaluate(rows, metrics=list(setup.metrics), llm=judge, run_dir=run_dir,
                      overwrite=True, progress=False, metric_params=setup.params,
                      language=language)  # fmt: skip
    values = {m: list(result[m]) for m in setup.metrics}
    causes: dict[str, dict[str, int]] = {}
    for m in setup.metrics:
        kinds = Counter(
            f"{c.cause_kind}: {(c.cause or '')[:80]}"
            for c in result.cells(m)
            if c is not None and c.value is None
        )
        causes[m] = dict(kinds)
    return values, causes, claims_with_probability(run_dir)


def claims_with_probability(run_dir: Path) -> dict[str, int]:
    """Of the run log's measured faithfulness cells, how many have claims, how many of those
    give every claim a probability (a ``probability`` beside each claim's verdict), and how
    many claims have one strictly between 0 and 1 (read from the judge's token probabilities,
    not a sampled yes or no)."""
    counts = {"measured": 0, "with_claims": 0, "every_claim_has_probability": 0,
              "claims": 0, "claims_strictly_between_0_and_1": 0}  # fmt: skip
    path = run_dir / "results.jsonl"
    if not path.exists():
        return counts
    for line in path.read_text(encoding="utf-8").splitlines():
        cell = (json.loads(line).get("metrics") or {}).get("faithfulness")
        if not cell or cell.get("value") is None:
            continue
        counts["measured"] += 1
        claims = [d for d in _dicts(cell.get("evidence")) if "verdict" in d or "supported" in d]
        counts["claims"] += len(claims)
        counts["claims_strictly_between_0_and_1"] += sum(
            isinstance(p := d.get("probability"), (int, float)) and 0 < p < 1 for d in claims
        )
        if claims:
            counts["with_claims"] += 1
            if all(isinstance(d.get("probability"), (int, float)) for d in claims):
                counts["every_claim_has_probability"] += 1
    return counts


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _dicts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _dicts(v)


def score_ragas(
    rows: list[dict[str, Any]], setup: Setup, base_url: str, model: str, slots: int, work: Path
) -> tuple[dict[str, list[float | None]], dict[str, dict[str, int]]]:
    """ragas' values (its NaN as None) and the exceptions it logged, from its own venv."""
    data, out = work / "ragas.jsonl", work / "ragas-rows.json"
    data.write_text("".join(json.dumps(ragas_row(r)) + "\n" for r in rows), encoding="utf-8")
    python = ensure_ragas_venv()
    cmd = [str(python), str(Path(__file__).parent / "ragas_driver.py"), "--base-url", base_url,
           "--data", str(data), "--metrics", *setup.metrics, "--model", model,
           "--max-workers", str(slots), "--timeout", "900", "--max-tokens", "1024",
           "--rows-out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"ragas driver failed ({proc.returncode}): {proc.stderr[-3000:]}")
    columns: dict[str, list[float | None]] = json.loads(out.read_text(encoding="utf-8"))
    values = {m: columns[RAGAS_COLUMNS[m]] for m in setup.metrics}
    exceptions = Counter(
        line.split("Exception raised in Job")[1].split(": ", 1)[1][:80]
        for line in proc.stderr.splitlines()
        if "Exception raised in Job" in line and ": " in line.split("Exception raised in Job")[1]
    )
    return values, {"all": dict(exceptions)}


@dataclass(frozen=True)
class Endpoint:
    """The judge as the setups reach it: through the metered proxy (None: no judge)."""

    base_url: str | None
    model: str
    proxy: MeteredProxy | None
    slots: int = 1


@contextlib.contextmanager
def judge_endpoint(args: argparse.Namespace) -> Iterator[Endpoint]:
    """The metered proxy in front of `--base-url`, or in front of the project's test server
    with the synthetic judge (`--fake`); no judge without either."""
    if args.base_url is None and not args.fake:
        yield Endpoint(None, "", None)
        return
    with contextlib.ExitStack() as stack:
        if args.fake:
            from rageval.testing import FakeOpenAI
            from synthetic_judge import handle

            upstream = stack.enter_context(FakeOpenAI(handle, keep_records=False)).base_url
            model = "synthetic-judge"
        else:
            upstream, model = args.base_url, args.model
        proxy = stack.enter_context(MeteredProxy(upstream.rstrip("/").removesuffix("/v1")))
        slots = server_slots(upstream)  # a shared server: at most --max-in-flight of them
        yield Endpoint(proxy.base_url, model, proxy, min(slots, args.max_in_flight or slots))


def server_slots(base_url: str) -> int:
    """The llama-server's slots (1 for another server)."""
    try:
        root = base_url.rstrip("/").removesuffix("/v1")
        with urllib.request.urlopen(root + "/props", timeout=10) as response:
            return int(json.loads(response.read()).get("total_slots") or 1)
    except (OSError, ValueError):
        return 1


def run_setup(
    name: str, rows: list[dict[str, Any]], label: str, setup: Setup, out: Path, judge: Endpoint
) -> Scored:
    work = out / name / setup.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    scored = Scored(name, setup.name, [r["id"] for r in rows], [int(r[label]) for r in rows], {})
    base_url, model, slots = judge.base_url, judge.model, judge.slots
    if judge.proxy is not None:
        judge.proxy.reset()
    started = time.perf_counter()
    try:
        if setup.tool == "lexical":
            scored.values = score_lexical(rows, setup)
        elif base_url is None:
            scored.note = "no judge (--base-url or --fake)"
        elif setup.tool == "ragas":
            scored.values, scored.causes = score_ragas(rows, setup, base_url, model, slots, work)
        else:
            scored.values, scored.causes, scored.claims_with_probability = score_rageval(
                rows, setup, base_url, model, slots, work, run_language(name, setup)
            )
    except Exception as error:  # a setup that cannot run (e.g. a setting not built yet)
        scored.note = f"{type(error).__name__}: {str(error)[:300]}"
    scored.wall_s = time.perf_counter() - started
    if judge.proxy is not None and setup.tool != "lexical":
        scored.server = judge.proxy.stats()
    return scored


# ---------------------------------------------------------------------- agreement


def _cut(values: Sequence[float]) -> list[float]:
    return [float(v >= CUT) for v in values]


def statistics(labels: Sequence[int], values: Sequence[float | None]) -> dict[str, Any]:
    """κ and balanced accuracy at the cut, AUROC, with CIs, on the measured rows."""
    from rageval.stats import agreement

    pairs = [(h, v) for h, v in zip(labels, values, strict=True) if _finite(v)]
    human = [float(h) for h, _ in pairs]
    judge = [float(v) for _, v in pairs if v is not None]
    levels = [0.0, 1.0]
    out: dict[str, Any] = {"n": len(pairs), "of": len(labels)}
    for stat, scores in (("cohen_kappa", _cut(judge)), ("balanced_accuracy", _cut(judge))):
        out[stat] = _estimate(agreement(stat, human, scores, levels=levels))
    out["auroc"] = _estimate(agreement("auroc", human, judge))
    return out


def difference(
    stat: str, labels: Sequence[int], before: Sequence[float | None], after: Sequence[float | None]
) -> dict[str, Any]:
    """`stat`(after) − `stat`(before) on the rows both measured, paired bootstrap CI."""
    from rageval.stats import agreement_difference

    keep = [i for i in range(len(labels)) if _finite(before[i]) and _finite(after[i])]
    human = [float(labels[i]) for i in keep]
    old = [float(before[i] or 0.0) for i in keep]
    new = [float(after[i] or 0.0) for i in keep]
    if stat != "auroc":
        old, new = _cut(old), _cut(new)
    levels = None if stat == "auroc" else [0.0, 1.0]
    return _estimate(agreement_difference(stat, human, old, new, levels=levels))


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _estimate(e: Any) -> dict[str, Any]:
    return {"value": e.value, "low": e.low, "high": e.high, "n": e.n, "note": e.note}


def cell(stat: dict[str, Any] | None) -> str:
    if stat is None or stat["value"] is None:
        return "–" + (f" ({stat['note']})" if stat and stat.get("note") else "")
    ci = "" if stat["low"] is None else f" [{stat['low']:.2f}, {stat['high']:.2f}]"
    return f"{stat['value']:+.3f}{ci}" if stat.get("signed") else f"{stat['value']:.3f}{ci}"


# ---------------------------------------------------------------------- report

#: the bars of issue 41 item 5: (dataset kind, statistic, after, before, metric, margin)
BARS: tuple[tuple[str, str, str, str, str, float], ...] = (
    ("correctness", "auroc", "rageval", "rageval-sampled", "answer_accuracy", 0.02),
    ("correctness", "cohen_kappa", "rageval", "ragas", "answer_accuracy", 0.0),
    ("grounding", "auroc", "rageval-checker", "ragas", "faithfulness", 0.0),
    # issue 44: the language line does not cost balanced accuracy
    (
        "grounding",
        "balanced_accuracy",
        "rageval-language",
        "rageval-no-language",
        "faithfulness",
        0.0,
    ),
)


def report(results: list[dict[str, Any]]) -> str:
    by = {(r["dataset"], r["setup"]): r for r in results}
    lines: list[str] = []
    for dataset in dict.fromkeys(r["dataset"] for r in results):
        table = []
        for r in (r for r in results if r["dataset"] == dataset):
            server = r.get("server") or {}
            seconds = (server.get("prompt_ms", 0.0) + server.get("predicted_ms", 0.0)) / 1000
            if r.get("note"):
                table.append([r["setup"], "–", f"not run: {r['note']}", "", "", "", "", ""])
                continue
            for metric, values in r["values"].items():
                s = statistics(r["labels"], values)
                table.append([
                    r["setup"], metric, f"{s['n']} / {s['of']}", cell(s["cohen_kappa"]),
                    cell(s["balanced_accuracy"]), cell(s["auroc"]),
                    f"{server.get('chat_requests', 0):,}" if server else "–",
                    f"{seconds:,.0f}" if server else "–",
                ])  # fmt: skip
        labels = results[[r["dataset"] for r in results].index(dataset)]["labels"]
        lines += [f"\n### {dataset} ({len(labels)} rows, {sum(labels)} labelled 1)\n"]
        header = ["setup", "metric", "measured", f"κ (cut {CUT})", f"bal. acc. (cut {CUT})",
                  "AUROC", "requests", "server s"]  # fmt: skip
        lines.append(markdown_table(header, table))
    rows = []
    for kind, stat, after, before, metric, margin in BARS:
        datasets = CORRECTNESS if kind == "correctness" else GROUNDING
        for dataset in datasets:
            a, b = by.get((dataset, after)), by.get((dataset, before))
            if not a or not b or metric not in a["values"] or metric not in b["values"]:
                continue
            d = difference(stat, a["labels"], b["values"][metric], a["values"][metric])
            d["signed"] = True
            met = "–" if d["value"] is None else ("met" if d["value"] >= margin else "not met")
            rows.append([dataset, metric, stat, f"{after} − {before}", cell(d), f"≥ {margin}", met])
    if rows:
        lines.append("\n### The bars (paired bootstrap 95% CIs, rows both measured)\n")
        lines.append(markdown_table(["dataset", "metric", "statistic", "difference", "value",
                                     "bar", "point estimate"], rows))  # fmt: skip
    cost = []
    for (dataset, setup), r in by.items():
        if setup != "rageval" or (dataset, "rageval-sampled") not in by:
            continue
        s, p = by[(dataset, "rageval-sampled")].get("server") or {}, r.get("server") or {}
        if not s or not p:
            continue
        ps = (p["prompt_ms"] + p["predicted_ms"]) / 1000
        ss = (s["prompt_ms"] + s["predicted_ms"]) / 1000
        read = [x["prompt_tokens"] - x["cached_prompt_tokens"] for x in (p, s)]
        # the server's milliseconds per token move with the machine's load: shown, so that a
        # ratio of seconds on the same tokens can be read for what it is
        rates = [f"{x['prompt_ms'] / max(1, n):.1f} / {x['predicted_ms'] / max(1, x['completion_tokens']):.1f}"
                 for x, n in zip((p, s), read, strict=True)]  # fmt: skip
        cost.append([dataset, f"{p['chat_requests']} / {s['chat_requests']}",
                     f"{read[0]:,} / {read[1]:,}",
                     f"{p['completion_tokens']:,} / {s['completion_tokens']:,}",
                     f"{rates[0]}; {rates[1]}",
                     f"{ps:,.0f} / {ss:,.0f}", f"{ps / ss:.2f}×" if ss else "–"])  # fmt: skip
    if cost:
        lines.append("\n### Cost: probabilities against sampled (same rows)\n")
        lines.append(markdown_table(["dataset", "requests (prob. / sampled)",
                                     "prompt tokens read (not cached)", "generated tokens",
                                     "ms per token read / generated (prob.; sampled)",
                                     "server s", "ratio"], cost))  # fmt: skip
    checks = [
        f"- {r['dataset']} {r['setup']}: {r['claims_with_probability']}"
        for r in results
        if (r.get("claims_with_probability") or {}).get("measured")
    ]
    if checks:
        lines += ["\nRun logs, faithfulness cells whose every claim has a probability:", *checks]
    notes = [
        f"- {r['dataset']} {r['setup']} {m}: not measured {c}"
        for r in results
        for m, c in (r.get("causes") or {}).items()
        if c
    ]
    if notes:
        lines += ["\nCells without a value, by cause:", *notes]
    return "\n".join(lines)


# ---------------------------------------------------------------------- command line


def _counts(items: Sequence[str]) -> dict[str, int]:
    out = {}
    for item in items:
        name, _, n = item.partition("=")
        if name not in DATASETS or not n.isdigit():
            raise SystemExit(f"--rows takes DATASET=N with DATASET one of {', '.join(DATASETS)}")
        out[name] = int(n)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data-root", type=Path)
    parser.add_argument("--base-url", help="the judge's OpenAI-compatible endpoint")
    parser.add_argument("--model", default="qwen1.5b")
    parser.add_argument(
        "--max-in-flight",
        type=int,
        help="at most N requests at once (default: "
        "the server's slots); for a server other jobs share",
    )
    parser.add_argument("--fake", action="store_true", help="the synthetic test judge")
    parser.add_argument("--split", choices=("tune", "heldout"), default="heldout")
    parser.add_argument("--rows", nargs="+", default=["evouna-nq=5", "memerag=5"],
                        metavar="DATASET=N")  # fmt: skip
    parser.add_argument("--setups", nargs="+", default=["rageval", "ragas", "lexical"])
    parser.add_argument(
        "--metrics", nargs="+", help="score only these of each setup's metrics (default: all)"
    )
    parser.add_argument("--exclude-ids", type=Path, help="ids anyone tuned on, one a line")
    parser.add_argument("--out", type=Path, default=WORK / "agreement")
    parser.add_argument("--json", type=Path, help="results, kept as each setup finishes")
    parser.add_argument("--from-json", type=Path, help="print the tables of a saved run")
    parser.add_argument("--list-ids", action="store_true", help="print the split's row ids")
    args = parser.parse_args(argv)
    if args.max_in_flight is not None and args.max_in_flight < 1:
        parser.error(
            f"--max-in-flight takes a number of requests, 1 or more; got {args.max_in_flight}"
        )

    if args.from_json:
        print(report(json.loads(args.from_json.read_text(encoding="utf-8"))))
        return 0
    if args.data_root is None:
        parser.error("--data-root is required")
    counts = _counts(args.rows)
    excluded: set[str] = set()
    if args.exclude_ids:
        excluded = {ln.strip() for ln in args.exclude_ids.read_text().splitlines() if ln.strip()}
    if args.list_ids:
        for name, n in counts.items():
            rows, _ = load_rows(name, args.data_root)
            for row in pick(rows, args.split, n if n else len(rows), excluded):
                print(row["id"])
        return 0
    results: list[dict[str, Any]] = []
    if args.json and args.json.exists():
        results = json.loads(args.json.read_text(encoding="utf-8"))
    done = {(r["dataset"], r["setup"]) for r in results if not r.get("note")}
    results = [r for r in results if (r["dataset"], r["setup"]) in done]
    with judge_endpoint(args) as judge:
        print(f"judge: {judge.model or 'none'}, {judge.slots} slot(s); split {args.split}",
              flush=True)  # fmt: skip
        for name, n in counts.items():
            all_rows, label = load_rows(name, args.data_root)
            rows = pick(all_rows, args.split, n, excluded)
            kind = "correctness" if name in CORRECTNESS else "grounding"
            for setup_name in args.setups:
                setup = setups(kind).get(setup_name)
                if setup is None or (name, setup_name) in done:
                    continue
                if args.metrics:
                    kept = tuple(m for m in setup.metrics if m in args.metrics)
                    if not kept:
                        continue
                    setup = dataclasses.replace(setup, metrics=kept)
                scored = run_setup(name, rows, label, setup, args.out, judge)
                print(f"{name} {setup_name}: {len(rows)} rows, {scored.wall_s:.0f} s "
                      f"{scored.note}", flush=True)  # fmt: skip
                results.append(scored.__dict__)
                if args.json:
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
