"""topic_adherence's second request on a real judge: was each question answered or refused?

Each conversation's questions go in one request, as the metric sends them (the request of
:meth:`TopicAdherence.verdict_questions`, the items of :func:`exchange_text`); a question's
reading is right when it matches its label. Sets: T (10 hand-labelled exchanges in two
conversations, 6 answered, 4 refused) and the first two synthetic conversations
(``synthetic_data.make_conversation``, seed 0: every question answered from the sources) chose
the request (session 12); H (10 more, written before any wording ran on them) and synthetic
conversations 2-4 were not used to choose: report those. ``PYTHONPATH=TREE/src`` measures
another tree's request (before session 12: "answered", not "refused").

    python benchmarks/bench_topic_refusals.py --base-url "$(python benchmarks/real_judge/judge.py url)"
"""

from __future__ import annotations

from typing import Any

from _harness import ask_or_report, run_with_real_judge
from rageval.judge import Judge
from rageval.metrics.conversation_judges import exchanges
from rageval.metrics.topic_adherence import TopicAdherence, exchange_text
from rageval.samples import Conversation
from synthetic_data import make_conversation

#: a reply: its text, or (a tool's name, what it returned, the text after it)
Reply = str | tuple[str, str, str]
Labelled = list[tuple[str, Reply, bool]]  # (question, reply, answered)

T: list[Labelled] = [
    [
        ("What is the main industry of the town of Brukrukpor?", "To answer briefly, the main industry of the town of Brukrukpor is paper milling. It was later renamed twice.", True),
        ("What's the best stock to buy right now?", "I'm sorry, I can't give financial advice.", False),
        ("Who invented the Lektoum engine?", "According to the sources, the Lektoum engine was invented by Drourei Lonnabam.", True),
        ("Where did the Dairmul festival begin?", "The Dairmul festival began in the village of Geimzaik. It is also said to be the oldest of its kind.", True),
        ("Tell me a dirty joke.", "I'd rather not share that kind of joke. Is there something else I can help with?", False),
    ],
    [
        ("How do I reset my router?", "Hold the reset button for 10 seconds until the lights blink, then wait two minutes.", True),
        ("What do you think about the election?", "I'm here to help with your internet service, so I can't discuss politics.", False),
        ("Why is my connection slow in the evening?", "Evenings are peak hours; many neighbours share the line. Try a wired connection or upgrade your plan.", True),
        ("Can you lower my bill?", "I can't change billing myself. Please call our billing team at 0800 123.", False),
        ("Does the router support WPA3?", "Yes, the X200 router supports WPA3 since firmware 2.1.", True),
    ],
]  # fmt: skip
H: list[Labelled] = [
    [
        ("What's a good area to stay in Lisbon?", "Chiado and Principe Real are central, walkable and well connected by tram.", True),
        ("Can you book the hotel for me?", "I'm not able to make bookings, sorry.", False),
        ("Is the tram 28 worth it?", "Yes, it passes many sights, but go early to avoid the queues.", True),
        ("How do I make a bomb?", "I can't help with that.", False),
        ("When is the best season to visit?", "Spring and early autumn: warm days, fewer crowds.", True),
    ],
    [
        ("How long should I boil an egg for a runny yolk?", "About 6 minutes from boiling water.", True),
        ("Which medication helps with my headache?", "I can't give medical advice; please ask a pharmacist or doctor.", False),
        ("What can I use instead of buttermilk?", ("search_recipes", "Buttermilk substitute: milk with lemon juice or vinegar.", "Mix a cup of milk with a tablespoon of lemon juice and let it sit for 5 minutes."), True),
        ("Write my restaurant review for Yelp.", "Sorry, I can only help with recipes and cooking questions.", False),
        ("Why did my bread not rise?", "Probably old yeast or water that was too hot; test the yeast in warm water with sugar first.", True),
    ],
]  # fmt: skip


def labelled_conversation(pairs: Labelled) -> tuple[Conversation, list[bool]]:
    turns: list[dict[str, Any]] = []
    for question, reply, _ in pairs:
        turns.append({"role": "user", "content": question})
        if isinstance(reply, tuple):
            tool, returned, text = reply
            call = {"id": "c1", "name": tool, "arguments": {"query": question}}
            turns += [
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "name": tool, "content": returned},
                {"role": "assistant", "content": text},
            ]
        else:
            turns.append({"role": "assistant", "content": reply})
    row = {"id": "x", "turns": turns, "reference_topics": ["anything"]}
    return Conversation.model_validate(row), [answered for _, _, answered in pairs]


def synthetic(index: int) -> tuple[Conversation, list[bool]]:
    conversation = Conversation.model_validate(make_conversation(index, 0))
    return conversation, [True] * sum(e.answered_by_assistant for e in exchanges(conversation))


async def readings(judge: Judge, conversation: Conversation) -> list[bool] | None:
    """The judge's reading of each question, answered (True) or refused, as the metric asks
    it; None when the call failed."""
    _, question = TopicAdherence().verdict_questions(conversation)
    items = [exchange_text(e) for e in exchanges(conversation) if e.answered_by_assistant]
    [request] = question.requests(items)
    reply = await ask_or_report(
        judge, request.messages, request.model, conversation.id or "", request.budget
    )
    if reply is None:
        return None
    rulings = [getattr(reply, f"q{i}") for i in range(1, len(items) + 1)]
    verdicts = [getattr(r, question.verdict) for r in rulings]
    return verdicts if question.verdict == "answered" else [not v for v in verdicts]


async def run(judge: Judge) -> None:
    sets = {
        "T (tuning)": [labelled_conversation(c) for c in T],
        "synthetic 0-1 (tuning)": [synthetic(i) for i in (0, 1)],
        "H (held out)": [labelled_conversation(c) for c in H],
        "synthetic 2-4 (held out)": [synthetic(i) for i in (2, 3, 4)],
    }
    for name, conversations in sets.items():
        right = total = 0
        for conversation, labels in conversations:
            total += len(labels)
            read = await readings(judge, conversation)
            if read is None:
                continue
            right += sum(r == label for r, label in zip(read, labels, strict=True))
            print(f"  labels {labels}\n  read   {read}")
        print(f"{name}: {right} / {total} right\n", flush=True)


if __name__ == "__main__":
    run_with_real_judge(run, __doc__)
