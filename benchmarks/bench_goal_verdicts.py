"""agent_goal_accuracy's verdict request on a real judge: does it tell an end state that
achieves the desired outcome from one that does not?

Each (desired outcome, end state) pair is sent as the metric sends its second request
(:func:`rageval.metrics.agent_goal.verdict_prompt`, :class:`GoalVerdict`); a reading is right
when it matches the pair's label. TUNING chose among request variants in session 12 (none was
kept), HELD_OUT was written before any of them ran (benchmarks/RESULTS.md,
"agent_goal_accuracy's verdict: tried, not changed"). Session 13's verdict (the verdict before
its reason) was chosen on bench_goal_outcomes.py's conversations, not on these pairs: both
sets read it as a check (RESULTS.md, "agent_goal_accuracy's outcome step and verdict").

    python benchmarks/bench_goal_verdicts.py --base-url "$(python benchmarks/real_judge/judge.py url)"
"""

from __future__ import annotations

from _harness import ask_or_report, run_with_real_judge
from rageval.judge import Judge
from rageval.metrics.agent_goal import GoalVerdict, verdict_prompt

#: (desired outcome, end state, achieved); hand-labelled
TUNING: list[tuple[str, str, bool]] = [
    ("What is the main industry of the town of Brukrukpor?", "The main industry of the town of Brukrukpor is paper milling. It was later renamed twice.", True),
    ("Book a table for two at an Italian restaurant on Friday at 8pm.", "The assistant booked a table for two at Luigi's, an Italian restaurant, for Friday at 8pm.", True),
    ("Book a table for two at an Italian restaurant on Friday at 8pm.", "The assistant found three Italian restaurants but could not make a booking.", False),
    ("Get a refund for order 1234.", "The refund for order 1234 was approved and will arrive in 5 days.", True),
    ("Get a refund for order 1234.", "The assistant explained the refund policy; no refund was issued.", False),
    ("Learn who invented the Lektoum engine and when it was first built.", "The user learned that Drourei Lonnabam invented the Lektoum engine, first built in 1671.", True),
    ("Learn who invented the Lektoum engine and when it was first built.", "The user learned that the Lektoum engine burns coal gas.", False),
    ("Reset the router password.", "The router password was reset and the user logged in with the new one.", True),
    ("Find a flight from Paris to Rome under 100 euros.", "The cheapest flight found was 140 euros; none under 100.", False),
    ("Translate the letter into Spanish.", "The assistant translated the letter into Spanish.", True),
]  # fmt: skip
HELD_OUT: list[tuple[str, str, bool]] = [
    ("Where did the Dairmul festival begin?", "The Dairmul festival began in the village of Geimzaik.", True),
    ("Cancel my gym membership.", "The membership was cancelled from next month; a confirmation email was sent.", True),
    ("Cancel my gym membership.", "The assistant said cancellations must be done in person at the front desk.", False),
    ("Learn the population of Draimnoktu and its main industry.", "The user learned that about 92,000 people live in Draimnoktu.", False),
    ("Learn the population of Draimnoktu and its main industry.", "The user learned that about 92,000 people live in Draimnoktu and that its main industry is salt mining.", True),
    ("Fix the failing unit test.", "The test now passes after the off-by-one error was fixed.", True),
    ("Schedule a meeting with Anna next week.", "The assistant asked which day suits the user; nothing was scheduled.", False),
    ("Get a recipe for a vegan chocolate cake.", "The assistant gave a vegan chocolate cake recipe with ingredients and steps.", True),
    ("Update my shipping address to 5 Main St.", "The shipping address was changed to 5 Main St.", True),
    ("Find out whether the museum is open on Monday.", "The assistant said it does not know the museum's opening hours.", False),
]  # fmt: skip


async def run(judge: Judge) -> None:
    for name, pairs in (("tuning", TUNING), ("held out", HELD_OUT)):
        right = 0
        for desired, end_state, achieved in pairs:
            prompt = verdict_prompt(desired, end_state)
            reply = await ask_or_report(judge, prompt, GoalVerdict, repr(desired))
            if reply is None:
                continue
            ok = reply.achieved == achieved
            right += ok
            print(f"  {'ok ' if ok else 'BAD'} {achieved} {desired!r} / {end_state!r}")
        print(f"{name}: {right} / {len(pairs)} right\n", flush=True)


if __name__ == "__main__":
    run_with_real_judge(run, __doc__)
