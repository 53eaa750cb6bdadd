"""knowledge_retention's first step on a real judge: does the facts request tell a message that
says something about the user from one that does not?

Each message is sent alone (no conversation before it) as the metric sends it
(:func:`rageval.metrics.knowledge_retention.facts_prompt`, :class:`UserFacts`), and the reply
is right when it states no fact for a message that says nothing about the user (a question
about the world, a greeting, thanks) and at least one for a message that does. Sets A and B
were used to choose the request's wording (session 12); set C was written before either
wording was run on it and was not used to choose: report C. Run with ``PYTHONPATH=TREE/src``
to measure another tree's request (an older one's is the list alone, without the decision).

    python benchmarks/bench_user_facts.py --base-url "$(python benchmarks/real_judge/judge.py url)"
"""

from __future__ import annotations

from _harness import ask_or_report, run_with_real_judge
from rageval.judge import Judge
from rageval.metrics.knowledge_retention import UserFacts, facts_prompt

#: (message, how many facts about the user it states); hand-labelled
SETS: dict[str, list[tuple[str, int]]] = {
    "A (tuning)": [
        ("What is the main industry of the town of Brukrukpor?", 0),
        ("Who invented the Lektoum engine, and when was the Lektoum engine first built?", 0),
        ("Where did the Dairmul festival begin?", 0),
        ("Can you recommend a good book about the French Revolution?", 0),
        ("How do I reset my router?", 0),
        ("I'm vegetarian and allergic to peanuts. What should I cook tonight?", 2),
        ("My budget is 500 euros. Which laptop should I buy?", 1),
        ("We are flying to Lisbon on May 3rd with two kids. Any tips?", 2),
        ("I live in Lyon. Where can I rent a bike?", 1),
        ("My name is Priya and I work night shifts.", 2),
    ],
    "B (tuning)": [
        ("Since I'm in Berlin this weekend, what's open on Sunday?", 1),
        ("The Eiffel Tower is about 330 metres tall, right?", 0),
        ("Hi there!", 0),
        ("Thanks, that helps.", 0),
        ("Please answer in French from now on.", 1),
        ("I already tried restarting it twice.", 1),
        ("What's the weather in Paris tomorrow?", 0),
        ("My son is 7 and loves dinosaurs; any museum ideas?", 2),
        ("Explain photosynthesis.", 0),
        ("I don't eat pork.", 1),
    ],
    "C (held out)": [
        ("As a nurse, how many hours can I legally work in a row?", 1),
        ("Who wrote Pride and Prejudice?", 0),
        ("Keep your answers short, please.", 1),
        ("I have two cats and a small flat. Which plant is safe for them?", 2),
        ("Is it going to rain in Oslo on Friday?", 0),
        ("How many bones are in the human body?", 0),
        ("I'm training for a marathon in October.", 1),
        ("Good morning!", 0),
        ("I moved to Canada last year; how do I file taxes?", 1),
        ("What does HTTP stand for?", 0),
    ],
}


async def run(judge: Judge) -> None:
    for name, cases in SETS.items():
        right = invented = missed = failed = 0
        for message, stated in cases:
            reply = await ask_or_report(
                judge, facts_prompt("", message), UserFacts, repr(message), 256
            )
            if reply is None:
                failed += 1
                continue
            # an older tree's UserFacts (before session 12) is the list alone
            stated_by = getattr(reply, "stated", None)
            facts = stated_by() if stated_by else [f for f in reply.facts if f.strip()]
            ok = bool(facts) == bool(stated)
            right += ok
            invented += bool(facts) and not stated
            missed += stated > 0 and not facts
            print(f"  {'ok ' if ok else 'BAD'} {stated} {message!r} -> {facts}")
        print(
            f"{name}: {right} / {len(cases)} right ({invented} with facts where the message "
            f"says nothing about the user, {missed} without facts where it does, {failed} "
            "failed)\n",
            flush=True,
        )


if __name__ == "__main__":
    run_with_real_judge(run, __doc__)
