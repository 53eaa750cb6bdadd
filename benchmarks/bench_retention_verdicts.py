"""knowledge_retention's verdict request on a real judge: does it tell a reply that keeps the
user's facts from one that loses them?

Each case is a reply, the user message it answers and the facts stated before it, sent as the
metric sends its verdict request (:func:`rageval.metrics.knowledge_retention.retention_question`);
a fact's reading is right when it matches its label (retained or lost: contradicted, asked for
again, or ignored where it applies). Hand-labelled in session 12, before any run; no request
variant was chosen on them.

    python benchmarks/bench_retention_verdicts.py --base-url "$(python benchmarks/real_judge/judge.py url)"
"""

from __future__ import annotations

from _harness import ask_or_report, run_with_real_judge
from rageval.judge import Judge
from rageval.metrics.knowledge_retention import retention_question

#: (facts stated before, the user message, the assistant's reply, retained per fact)
CASES: list[tuple[list[str], str, str, list[bool]]] = [
    (["The user is vegetarian."], "Suggest a dinner for two.", "Try a beef steak.", [False]),
    (["The user is vegetarian."], "Suggest a dinner for two.", "Try a mushroom risotto.", [True]),
    (["The user is vegetarian.", "The user is allergic to nuts."], "Any dessert idea?", "A walnut brownie would be perfect.", [True, False]),
    (["The user is called Ana."], "What was my name again?", "Your name is Ana.", [True]),
    (["The user is called Ana."], "Can you book the table?", "Sure. What name should I book it under?", [False]),
    (["The user lives in Lyon."], "Where can I rent a bike?", "In Lyon, Velo'v stations are all over the city.", [True]),
    (["The user lives in Lyon."], "Where can I rent a bike?", "In Paris, try the Velib stations.", [False]),
    (["The user's budget is 500 euros."], "Which laptop should I buy?", "The X13 at 1,400 euros is the best choice.", [False]),
    (["The user's budget is 500 euros."], "Which laptop should I buy?", "The IdeaPad 3 at 479 euros fits your budget.", [True]),
    (["The user has two kids.", "The user flies to Lisbon on May 3rd."], "What should we pack?", "For Lisbon in early May with children: light layers, sun hats and snacks for the flight.", [True, True]),
    (["The user wants short answers."], "What is HTTP?", "HTTP is the protocol browsers use to fetch web pages.", [True]),
    (["The user works night shifts."], "When should I go to the gym?", "Go at 7 am before work, like most people.", [False]),
]  # fmt: skip


async def run(judge: Judge) -> None:
    right = total = 0
    for facts, asked, reply, labels in CASES:
        total += len(labels)
        question = retention_question(asked, reply)
        [request] = question.requests(facts)
        answer = await ask_or_report(
            judge, request.messages, request.model, repr(reply), request.budget
        )
        if answer is None:
            continue
        rulings = [getattr(answer, f"f{i}") for i in range(1, len(facts) + 1)]
        read = [getattr(r, question.verdict) for r in rulings]
        right += sum(r == label for r, label in zip(read, labels, strict=True))
        print(f"  labels {labels} read {read}  {reply!r}  ({rulings[0].reason})")
    print(f"facts read right: {right} / {total}", flush=True)


if __name__ == "__main__":
    run_with_real_judge(run, __doc__)
