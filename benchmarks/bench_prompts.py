"""The judge-prompt regression set: hand-labelled cases for the conversation judges' requests,
read by a real judge, in one command.

Each file of ``benchmarks/prompts/`` holds the labelled cases of one request (what it asks,
when a reading is right, and which sets chose its wording: ``split`` "tune", and which did
not: "heldout"). Every case is sent exactly as the metric sends it, and each set's score is
the readings that match their labels:

* ``user_facts``: knowledge_retention's facts request; a message about the user gets at least
  one fact, any other message none;
* ``retention_verdicts``: knowledge_retention's verdict; each earlier fact retained or lost;
* ``topic_refusals``: topic_adherence's second request; each question answered or refused;
* ``goal_verdicts``: agent_goal_accuracy's verdict on (desired outcome, end state) pairs;
* ``goal_outcomes``: agent_goal_accuracy and agent_goal_accuracy_without_reference end to end
  on 42 agent conversations (both requests each).

    python benchmarks/bench_prompts.py --base-url "$(python benchmarks/real_judge/judge.py url)"
    python benchmarks/bench_prompts.py --base-url URL --only user_facts --split heldout
    python benchmarks/bench_prompts.py --base-url URL --json new.json --baseline old.json

``--json`` keeps every reading; ``--baseline`` a saved run's file: the cases whose reading
changed are printed, right → wrong first. Run with ``PYTHONPATH=TREE/src`` to read another
tree's requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rageval.judge import Judge, JudgeCallFailed

if TYPE_CHECKING:
    from pydantic import BaseModel

    M = TypeVar("M", bound=BaseModel)

PROMPTS = Path(__file__).resolve().parent / "prompts"
#: one reading: (case's name, label, what the judge read)
Reading = tuple[str, Any, Any]


async def ask_or_report(
    judge: Judge,
    messages: list[dict[str, str]],
    model: type[M],
    what: str,
    max_tokens: int | None = None,
) -> M | None:
    """The judge's reply, or None with the failed call printed under `what` (a reading not
    made counts as not right; it does not end the run)."""
    try:
        return (await judge.ask(messages, model, max_tokens=max_tokens)).value
    except JudgeCallFailed as error:
        print(f"  FAILED {what}: {error}")
        return None


async def user_facts(judge: Judge, cases: list[dict[str, Any]]) -> list[Reading]:
    from rageval.metrics.knowledge_retention import UserFacts, facts_prompt

    out: list[Reading] = []
    for case in cases:
        message = case["message"]
        reply = await ask_or_report(judge, facts_prompt("", message), UserFacts, message, 256)
        facts = None if reply is None else reply.stated()
        out.append((message, case["facts"] > 0, None if facts is None else bool(facts)))
    return out


async def retention_verdicts(judge: Judge, cases: list[dict[str, Any]]) -> list[Reading]:
    from rageval.metrics.knowledge_retention import retention_question

    out: list[Reading] = []
    for case in cases:
        question = retention_question(case["asked"], case["reply"])
        [request] = question.requests(case["facts"])
        answer = await ask_or_report(
            judge, request.messages, request.model, case["reply"], request.budget
        )
        for i, (fact, label) in enumerate(zip(case["facts"], case["retained"], strict=True)):
            read = (
                None if answer is None else getattr(getattr(answer, f"f{i + 1}"), question.verdict)
            )
            out.append((f"{case['reply']} / {fact}", label, read))
    return out


def _conversation(pairs: list[dict[str, Any]]) -> Any:
    from rageval.samples import Conversation

    turns: list[dict[str, Any]] = []
    for pair in pairs:
        turns.append({"role": "user", "content": pair["question"]})
        if "tool" in pair:
            tool = pair["tool"]
            call = {"id": "c1", "name": tool["name"], "arguments": {"query": pair["question"]}}
            turns += [
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "name": tool["name"],
                 "content": tool["returned"]},
                {"role": "assistant", "content": pair["reply"]},
            ]  # fmt: skip
        else:
            turns.append({"role": "assistant", "content": pair["reply"]})
    row = {"id": "x", "turns": turns, "reference_topics": ["anything"]}
    return Conversation.model_validate(row)


async def topic_refusals(judge: Judge, item: dict[str, Any]) -> list[Reading]:
    from rageval.metrics.conversation_judges import exchanges
    from rageval.metrics.topic_adherence import TopicAdherence, exchange_text
    from rageval.samples import Conversation
    from synthetic_data import make_conversation

    labelled: list[tuple[Any, list[bool]]] = [
        (_conversation(pairs), [p["answered"] for p in pairs])
        for pairs in item.get("conversations", [])
    ]
    for index in item.get("synthetic", []):
        synthetic = Conversation.model_validate(make_conversation(index, 0))
        answered = sum(e.answered_by_assistant for e in exchanges(synthetic))
        labelled.append((synthetic, [True] * answered))  # every question answered
    out: list[Reading] = []
    for number, (conversation, labels) in enumerate(labelled):
        _, question = TopicAdherence().verdict_questions(conversation)
        items = [exchange_text(e) for e in exchanges(conversation) if e.answered_by_assistant]
        [request] = question.requests(items)
        reply = await ask_or_report(
            judge, request.messages, request.model, f"conversation {number}", request.budget
        )
        for i, label in enumerate(labels):
            read = None
            if reply is not None:
                verdict = getattr(getattr(reply, f"q{i + 1}"), question.verdict)
                read = verdict if question.verdict == "answered" else not verdict
            out.append((f"conversation {number}, question {i + 1}", label, read))
    return out


async def goal_verdicts(judge: Judge, cases: list[dict[str, Any]]) -> list[Reading]:
    from rageval.metrics.agent_goal import GoalVerdict, verdict_prompt

    out: list[Reading] = []
    for case in cases:
        prompt = verdict_prompt(case["desired"], case["end_state"])
        reply = await ask_or_report(judge, prompt, GoalVerdict, case["desired"])
        name = f"{case['desired']} / {case['end_state']}"
        out.append((name, case["achieved"], None if reply is None else reply.achieved))
    return out


async def goal_outcomes(judge: Judge, item: dict[str, Any]) -> list[Reading]:
    from rageval import aevaluate

    conversations = item["conversations"]
    metrics = ("agent_goal_accuracy", "agent_goal_accuracy_without_reference")
    rows = [{"turns": c["turns"], "reference_goal": c["reference_goal"]} for c in conversations]
    result = await aevaluate(rows, list(metrics), llm=judge, progress=False, probe=False)
    out: list[Reading] = []
    for metric in metrics:
        for c, value in zip(conversations, result[metric], strict=True):
            read = None if value is None else value == 1.0
            out.append((f"{metric}: {c['reference_goal']}", c["reached"], read))
    return out


#: each request's reader: given the set's cases (or the whole set, for the conversations)
READERS: dict[str, tuple[Callable[[Judge, Any], Awaitable[list[Reading]]], str | None]] = {
    "user_facts": (user_facts, "cases"),
    "retention_verdicts": (retention_verdicts, "cases"),
    "topic_refusals": (topic_refusals, None),
    "goal_verdicts": (goal_verdicts, "cases"),
    "goal_outcomes": (goal_outcomes, None),
}


async def run(judge: Judge, only: list[str], split: str | None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in only:
        spec = json.loads((PROMPTS / f"{name}.json").read_text(encoding="utf-8"))
        reader, key = READERS[name]
        print(f"{name}: {spec['request']}\n  right when {spec['right_when']}", flush=True)
        for item in spec["sets"]:
            if split is not None and item["split"] != split:
                continue
            readings = await reader(judge, item[key] if key else item)
            right = sum(read == label for _, label, read in readings)
            failed = sum(read is None for _, _, read in readings)
            results[f"{name} / {item['name']}"] = {
                "split": item["split"], "right": right, "of": len(readings), "failed": failed,
                "readings": [list(r) for r in readings],
            }  # fmt: skip
            print(f"  {item['name']} ({item['split']}): {right} / {len(readings)} right"
                  + (f", {failed} not read (the call failed)" if failed else ""), flush=True)  # fmt: skip
    return results


def changes(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """The cases whose reading changed from `old` to `new`, right → wrong first."""
    worse: list[str] = []
    better: list[str] = []
    for key, result in new.items():
        before = {r[0]: r for r in old.get(key, {}).get("readings", [])}
        for case, label, read in result["readings"]:
            if case not in before or before[case][2] == read:
                continue
            line = f"  {key}: {case!r}: {before[case][2]} → {read} (label {label})"
            (worse if before[case][2] == label else better).append(line)
    return [*(["right → wrong:"] if worse else []), *worse,
            *(["wrong → right:"] if better else []), *better]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="qwen1.5b")
    parser.add_argument("--only", nargs="+", choices=list(READERS), default=list(READERS))
    parser.add_argument("--split", choices=("tune", "heldout"), help="default: both")
    parser.add_argument("--json", type=Path, help="write every reading here")
    parser.add_argument("--baseline", type=Path, help="a saved --json: print what changed")
    args = parser.parse_args(argv)
    # one request at a time, as a one-slot llama-server takes them; no cache: a regression
    # run asks the judge again
    judge = Judge(args.model, base_url=args.base_url, api_key="local", cache=False,
                  timeout=600, max_concurrency=1)  # fmt: skip
    results = asyncio.run(run(judge, args.only, args.split))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    if args.baseline:
        old = json.loads(args.baseline.read_text(encoding="utf-8"))
        print("\n".join(changes(results, old)) or "no reading changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
