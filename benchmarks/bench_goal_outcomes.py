"""agent_goal_accuracy end to end on a real judge: does it tell a conversation that reached
the user's goal from one that did not?

Forty-two hand-labelled agent conversations (tool calls, tool errors, retries, goals changed
on the way, several requests in one conversation, an assistant that claims a success its tool
refused), each scored by ``agent_goal_accuracy`` (with the conversation's ``reference_goal``)
and ``agent_goal_accuracy_without_reference`` (the goal inferred), both steps, as a user's run
scores them; a value is right when it matches the label. The four sets were written and read
in turn as request variants were tried in session 13: TUNING chose among them, HELD_OUT and
FRESH were each written before the variant read on them was chosen, FRESH_2 after FRESH had
been read (benchmarks/RESULTS.md, "agent_goal_accuracy's outcome step and verdict").

    python benchmarks/bench_goal_outcomes.py --base-url "$(python benchmarks/real_judge/judge.py url)"

``GOAL_SETS=tuning`` runs the tuning conversations alone (as a variant is chosen);
``GOAL_SETS="held out,fresh"`` the others.
"""

from __future__ import annotations

import json
import os
from typing import Any

from _harness import run_with_real_judge
from rageval import aevaluate
from rageval.judge import Judge

Turn = dict[str, Any]


def user(text: str) -> Turn:
    return {"role": "user", "content": text}


def assistant(text: str | None = None, *calls: tuple[str, dict[str, Any]]) -> Turn:
    turn: Turn = {"role": "assistant", "content": text}
    if calls:
        turn["tool_calls"] = [{"name": name, "arguments": args} for name, args in calls]
    return turn


def tool(name: str, result: Any) -> Turn:
    return {"role": "tool", "name": name, "content": json.dumps(result)}


#: (reference goal, turns, goal reached); hand-labelled
Labelled = tuple[str, list[Turn], bool]

TUNING: list[Labelled] = [
    (
        "A table for two booked at an Italian restaurant on Friday evening.",
        [
            user("Book me a table for two at an Italian place this Friday at 8pm."),
            assistant(None, ("search_restaurants", {"cuisine": "italian", "day": "Friday"})),
            tool("search_restaurants", [{"name": "Trattoria Belvio", "id": 17}]),
            assistant(None, ("book_table", {"restaurant": 17, "time": "20:00", "people": 2})),
            tool("book_table", {"status": "error", "message": "no table free at 20:00"}),
            assistant("Trattoria Belvio is full at 8pm. Would 8:30pm work?"),
            user("Yes, 8:30 is fine."),
            assistant(None, ("book_table", {"restaurant": 17, "time": "20:30", "people": 2})),
            tool("book_table", {"status": "confirmed", "booking": "TB-5521"}),
            assistant("Done: a table for two at Trattoria Belvio on Friday at 8:30pm (TB-5521)."),
        ],
        True,
    ),
    (
        "A refund of order 4471 to the user's card.",
        [
            user("I want a refund for order 4471."),
            assistant(None, ("get_order", {"order": 4471})),
            tool("get_order", {"order": 4471, "delivered_days_ago": 40, "refund_window_days": 30}),
            assistant(
                "Order 4471 was delivered 40 days ago, past the 30-day refund window. I can "
                "offer store credit instead."
            ),
            user("No, I only want my money back."),
            assistant("I'm sorry, I can't issue a refund for this order."),
        ],
        False,
    ),
    (
        "Learn Velmora's population, the year it was founded and its main export.",
        [
            user("How many people live in Velmora?"),
            assistant(None, ("search", {"q": "Velmora population"})),
            tool("search", "Velmora has about 48,000 inhabitants."),
            assistant("About 48,000 people live in Velmora."),
            user("When was it founded?"),
            assistant(None, ("search", {"q": "Velmora founded"})),
            tool("search", "Velmora was founded in 1312."),
            assistant("It was founded in 1312."),
            user("And what does it mainly export?"),
            assistant(None, ("search", {"q": "Velmora exports"})),
            tool("search", "Velmora's main export is woollen cloth."),
            assistant("Its main export is woollen cloth."),
        ],
        True,
    ),
    (
        "Learn the Kestrel Bridge's length and who designed it.",
        [
            user("How long is the Kestrel Bridge, and who designed it?"),
            assistant(None, ("search", {"q": "Kestrel Bridge"})),
            tool("search", "The Kestrel Bridge spans 1.2 km across the Ardle estuary."),
            assistant("The Kestrel Bridge is 1.2 km long. I couldn't find who designed it."),
            user("OK, thanks anyway."),
        ],
        False,
    ),
    (
        "The subscription cancelled and the account's data deleted.",
        [
            user("Please cancel my subscription."),
            assistant(None, ("cancel_subscription", {"account": "me"})),
            tool("cancel_subscription", {"status": "cancelled", "ends": "2026-12-31"}),
            assistant("Your subscription is cancelled; it runs until 31 December."),
            user("Also delete all my account data."),
            assistant(None, ("delete_account_data", {"account": "me"})),
            tool("delete_account_data", {"status": "deleted"}),
            assistant("All your account data has been deleted."),
        ],
        True,
    ),
    (
        "The router's admin password reset.",
        [
            user("Reset my router's admin password, please."),
            assistant(None, ("reset_router_password", {"device": "home-router"})),
            tool("reset_router_password", {"status": "error", "message": "device offline"}),
            assistant("Your router seems to be offline. Could you switch it on?"),
            user("It's on now."),
            assistant(None, ("reset_router_password", {"device": "home-router"})),
            tool("reset_router_password", {"status": "ok", "temporary_password": "kq7-Lm2"}),
            assistant("The password is reset. Your temporary password is kq7-Lm2."),
        ],
        True,
    ),
    (
        "A flight from Lisbon to Oslo on 3 May booked for under 200 euros.",
        [
            user("Book me a flight from Lisbon to Oslo on 3 May, under 200 euros."),
            assistant(None, ("search_flights", {"from": "LIS", "to": "OSL", "date": "05-03"})),
            tool("search_flights", [{"flight": "NR 411", "price_eur": 245}]),
            assistant("The cheapest flight is NR 411 at 245 euros; none is under 200. Book it?"),
            user("No thanks."),
        ],
        False,
    ),
    (
        "The failing unit test fixed so the test suite passes.",
        [
            user("test_totals is failing, can you fix it?"),
            assistant(None, ("run_tests", {"path": "tests/test_totals.py"})),
            tool("run_tests", "1 failed: expected 10, got 9 (off by one in sum_range)"),
            assistant(None, ("edit_file", {"path": "totals.py", "change": "range(a, b + 1)"})),
            tool("edit_file", {"status": "saved"}),
            assistant(None, ("run_tests", {"path": "tests"})),
            tool("run_tests", "42 passed"),
            assistant("Fixed the off-by-one in sum_range; all 42 tests pass now."),
        ],
        True,
    ),
    (
        "The shipping address of order 9002 changed to 12 Harbor Lane.",
        [
            user("Change the shipping address of order 9002 to 12 Harbor Lane."),
            assistant(None, ("update_address", {"order": 9002, "address": "12 Harbor Lane"})),
            tool("update_address", {"status": "error", "message": "order already shipped"}),
            assistant("Done! The address of order 9002 is now 12 Harbor Lane."),
        ],
        False,
    ),
    (
        "Get a recipe for a vegan chocolate cake.",
        [
            user("Can you give me a vegan lasagna recipe?"),
            assistant("Sure. Do you want a tomato-based or a mushroom-based one?"),
            user("Actually, make it a vegan chocolate cake instead."),
            assistant(
                "Vegan chocolate cake: mix 200 g flour, 40 g cocoa, 150 g sugar, 1 tsp baking "
                "soda, 250 ml oat milk, 80 ml oil and 1 tbsp vinegar; bake 30 minutes at 180 C."
            ),
        ],
        True,
    ),
]

HELD_OUT: list[Labelled] = [
    (
        "A meeting with Priya scheduled on Tuesday morning.",
        [
            user("Set up a meeting with Priya next Tuesday at 10am."),
            assistant(None, ("create_event", {"with": "Priya", "day": "Tuesday", "at": "10:00"})),
            tool("create_event", {"status": "conflict", "busy": "10:00-11:00"}),
            assistant("Priya is busy from 10 to 11. Shall I book 11am instead?"),
            user("Yes, 11 works."),
            assistant(None, ("create_event", {"with": "Priya", "day": "Tuesday", "at": "11:00"})),
            tool("create_event", {"status": "created", "event": "EV-310"}),
            assistant("Booked: meeting with Priya on Tuesday at 11am."),
        ],
        True,
    ),
    (
        "500 euros moved from the current account to savings.",
        [
            user("Move 500 euros from my current account to savings."),
            assistant(None, ("transfer", {"from": "current", "to": "savings", "eur": 500})),
            tool(
                "transfer", {"status": "declined", "reason": "insufficient funds", "balance": 320}
            ),
            assistant("The transfer was declined: your current account holds only 320 euros."),
            user("Then forget it."),
        ],
        False,
    ),
    (
        "Learn when the Drennic Library opened, its Sunday hours and whether it lends e-books.",
        [
            user("When did the Drennic Library open?"),
            assistant(None, ("search", {"q": "Drennic Library opened"})),
            tool("search", "The Drennic Library opened in 1968."),
            assistant("It opened in 1968."),
            user("Is it open on Sundays?"),
            assistant("Yes, on Sundays it is open from noon to 5pm."),
            user("Does it lend e-books?"),
            assistant("Yes, members can borrow e-books through its app."),
        ],
        True,
    ),
    (
        "Learn the capital of the Ostrava Isles and their currency.",
        [
            user("What's the capital of the Ostrava Isles, and what currency do they use?"),
            assistant(None, ("search", {"q": "Ostrava Isles"})),
            tool("search", "Port Lennick is the capital of the Ostrava Isles."),
            assistant("The capital is Port Lennick. I don't have information on the currency."),
        ],
        False,
    ),
    (
        "Milk and eggs added to the shopping list and a 6pm reminder to buy them.",
        [
            user("Add milk and eggs to my shopping list."),
            assistant(None, ("add_items", {"list": "shopping", "items": ["milk", "eggs"]})),
            tool("add_items", {"status": "ok"}),
            assistant("Added milk and eggs."),
            user("And remind me at 6pm to buy them."),
            assistant(None, ("set_reminder", {"at": "18:00", "text": "buy milk and eggs"})),
            tool("set_reminder", {"status": "ok"}),
            assistant("Reminder set for 6pm."),
        ],
        True,
    ),
    (
        "Hotel booking HB-88 cancelled.",
        [
            user("Cancel my hotel booking HB-88."),
            assistant(None, ("cancel_booking", {"booking": "HB-88"})),
            tool(
                "cancel_booking",
                {"status": "failed", "reason": "non-refundable bookings cannot be cancelled"},
            ),
            assistant("Your booking HB-88 has been cancelled."),
        ],
        False,
    ),
    (
        "'Where is the station?' translated into German.",
        [
            user("How do I say 'Where is the station?' in German?"),
            assistant("'Wo ist der Bahnhof?'"),
        ],
        True,
    ),
    (
        "A pizza ordered.",
        [
            user("Order me a pizza."),
            assistant("Sure! Which size and which toppings would you like?"),
        ],
        False,
    ),
    (
        "A taxi booked for 6:30am tomorrow.",
        [
            user("Book a taxi for 7am tomorrow."),
            assistant("Where should it pick you up?"),
            user("At home. Actually, make it 6:30am."),
            assistant(None, ("book_taxi", {"pickup": "home", "at": "06:30"})),
            tool("book_taxi", {"status": "confirmed", "car": "grey Skoda, plate KT-204"}),
            assistant("Your taxi is booked for 6:30am tomorrow: a grey Skoda, KT-204."),
        ],
        True,
    ),
    (
        "report.txt renamed to report_2024.txt and emailed to Tom.",
        [
            user("Rename report.txt to report_2024.txt and email it to Tom."),
            assistant(None, ("rename_file", {"from": "report.txt", "to": "report_2024.txt"})),
            tool("rename_file", {"status": "ok"}),
            assistant(None, ("send_email", {"to": "Tom", "attach": "report_2024.txt"})),
            tool("send_email", {"status": "error", "message": "attachment too large"}),
            assistant("I renamed the file, but couldn't email it: the attachment is too large."),
        ],
        False,
    ),
]

#: written after a variant was chosen on TUNING and HELD_OUT (which were both read by then),
#: and read once for the chosen variant and once for the request it replaced
FRESH: list[Labelled] = [
    (
        "The email account's password changed.",
        [
            user("Change my email password to the one I gave you in the form."),
            assistant(None, ("change_password", {"account": "email"})),
            tool("change_password", {"status": "ok"}),
            assistant("Your email password has been changed."),
        ],
        True,
    ),
    (
        "A dentist appointment booked for this week.",
        [
            user("Book me a dentist appointment this week."),
            assistant(None, ("find_slots", {"service": "dentist", "week": "this"})),
            tool("find_slots", {"slots": [], "next_free": "Monday next week, 9:00"}),
            assistant("There is nothing free this week. The first free slot is Monday at 9:00."),
            user("I need it this week. Never mind."),
        ],
        False,
    ),
    (
        "The invoice PDF printed.",
        [
            user("Print the invoice PDF."),
            assistant(None, ("print", {"file": "invoice.pdf"})),
            tool("print", {"status": "error", "message": "printer out of paper"}),
            assistant("The printer is out of paper. Please add some and tell me."),
            user("Added paper."),
            assistant(None, ("print", {"file": "invoice.pdf"})),
            tool("print", {"status": "printed", "pages": 2}),
            assistant("Printed: both pages of the invoice."),
        ],
        True,
    ),
    (
        "Library book B-22 renewed.",
        [
            user("Renew my library book B-22."),
            assistant(None, ("renew", {"book": "B-22"})),
            tool("renew", {"status": "denied", "reason": "reserved by another member"}),
            assistant("Renewed! B-22 is now due in three weeks."),
        ],
        False,
    ),
    (
        "Learn Mount Orvan's height and the year it was first climbed.",
        [
            user("How high is Mount Orvan?"),
            assistant(None, ("search", {"q": "Mount Orvan height"})),
            tool("search", "Mount Orvan rises to 3,870 m."),
            assistant("Mount Orvan is 3,870 m high."),
            user("When was it first climbed?"),
            assistant(None, ("search", {"q": "Mount Orvan first ascent"})),
            tool("search", "The first ascent of Mount Orvan was in 1894."),
            assistant("It was first climbed in 1894."),
        ],
        True,
    ),
    (
        "The kitchen lights turned off and the front door locked.",
        [
            user("Turn off the kitchen lights and lock the front door."),
            assistant(None, ("lights", {"room": "kitchen", "on": False})),
            tool("lights", {"status": "ok"}),
            assistant(None, ("lock", {"door": "front"})),
            tool("lock", {"status": "error", "message": "lock not responding"}),
            assistant("The kitchen lights are off. The front door lock isn't responding."),
        ],
        False,
    ),
    (
        "Learn today's weather in Basel.",
        [
            user("What's the weather in Bern today?"),
            assistant("Checking Bern for you."),
            user("Sorry, I meant Basel."),
            assistant(None, ("weather", {"city": "Basel"})),
            tool("weather", {"city": "Basel", "sky": "cloudy", "high_c": 9}),
            assistant("Basel today: cloudy, with a high of 9 C."),
        ],
        True,
    ),
    (
        "Flowers sent to the user's mother.",
        [
            user("Send flowers to my mum."),
            assistant("Happy to. What is her address, and which flowers would she like?"),
        ],
        False,
    ),
    (
        "Learn what 15% of 80 is.",
        [user("What's 15% of 80?"), assistant("15% of 80 is 12.")],
        True,
    ),
    (
        "100 US dollars converted into euros.",
        [
            user("Convert 100 US dollars to euros."),
            assistant(None, ("convert", {"amount": 100, "from": "USD", "to": "GBP"})),
            tool("convert", {"result": 79, "currency": "GBP"}),
            assistant("100 US dollars is 79 pounds."),
        ],
        False,
    ),
]

#: written after FRESH was read, to compare the request FRESH's results pointed to (the
#: verdict of the variant alone, the outcome step unchanged) with the current one
FRESH_2: list[Labelled] = [
    (
        "An alarm set for 6am.",
        [
            user("Set an alarm for 6am."),
            assistant(None, ("set_alarm", {"at": "06:00"})),
            tool("set_alarm", {"status": "ok"}),
            assistant("Alarm set for 6:00."),
        ],
        True,
    ),
    (
        "A hotel in Riga booked for Friday under 60 euros a night.",
        [
            user("Find me a hotel in Riga for Friday, under 60 euros a night."),
            assistant(None, ("search_hotels", {"city": "Riga", "night": "Friday"})),
            tool("search_hotels", [{"hotel": "Hotel Daugava", "eur": 85}]),
            assistant("The cheapest I found is Hotel Daugava at 85 euros a night."),
            user("Too expensive, thanks."),
        ],
        False,
    ),
    (
        "Jonas added to the project channel.",
        [
            user("Add Jonas to the project channel."),
            assistant(None, ("add_member", {"channel": "project", "user": "jonas"})),
            tool("add_member", {"status": "error", "message": "user not found: jonas"}),
            assistant("I couldn't find 'jonas'. Do you mean Jonas Berg?"),
            user("Yes."),
            assistant(None, ("add_member", {"channel": "project", "user": "jonas.berg"})),
            tool("add_member", {"status": "ok"}),
            assistant("Jonas Berg is now in the project channel."),
        ],
        True,
    ),
    (
        "The photos folder backed up to the cloud.",
        [
            user("Back up my photos folder to the cloud."),
            assistant(None, ("backup", {"folder": "photos"})),
            tool("backup", {"status": "error", "message": "quota exceeded"}),
            assistant("Your photos are backed up."),
        ],
        False,
    ),
    (
        "Learn who wrote The Glass Orchard and when it was published.",
        [
            user("Who wrote the novel The Glass Orchard, and when was it published?"),
            assistant(None, ("search", {"q": "The Glass Orchard novel"})),
            tool("search", "The Glass Orchard is a 1957 novel by Mirela Dovan."),
            assistant("Mirela Dovan wrote it; it was published in 1957."),
        ],
        True,
    ),
    (
        "The electricity bill and the water bill paid.",
        [
            user("Pay my electricity bill and my water bill."),
            assistant(None, ("pay_bill", {"bill": "electricity"})),
            tool("pay_bill", {"status": "paid"}),
            assistant(None, ("pay_bill", {"bill": "water"})),
            tool("pay_bill", {"status": "error", "message": "bill not found"}),
            assistant("The electricity bill is paid. I couldn't find a water bill."),
        ],
        False,
    ),
    (
        "Classical music playing.",
        [
            user("Play some jazz."),
            assistant(None, ("play", {"playlist": "jazz"})),
            tool("play", {"status": "playing", "playlist": "Jazz Classics"}),
            assistant("Playing Jazz Classics."),
            user("Actually, play classical instead."),
            assistant(None, ("play", {"playlist": "classical"})),
            tool("play", {"status": "playing", "playlist": "Classical Essentials"}),
            assistant("Now playing Classical Essentials."),
        ],
        True,
    ),
    (
        "The user unsubscribed from the newsletter.",
        [
            user("Unsubscribe me from the newsletter."),
            assistant("You can unsubscribe with the link at the bottom of any newsletter email."),
        ],
        False,
    ),
    (
        "Learn how 'necessary' is spelled backwards.",
        [user("Spell 'necessary' backwards."), assistant("yrassecen")],
        True,
    ),
    (
        "A large oat latte ordered.",
        [
            user("Order a large oat latte."),
            assistant(None, ("order", {"item": "oat latte"})),
            tool("order", {"status": "placed", "item": "small oat latte"}),
            assistant("Ordered a small oat latte."),
        ],
        False,
    ),
    (
        "A folder called 2025 created and invoice.pdf moved into it.",
        [
            user("Create a folder called 2025 and move invoice.pdf into it."),
            assistant(None, ("make_folder", {"name": "2025"})),
            tool("make_folder", {"status": "ok"}),
            assistant(None, ("move", {"file": "invoice.pdf", "to": "2025/"})),
            tool("move", {"status": "ok"}),
            assistant("Done: invoice.pdf is in the new folder 2025."),
        ],
        True,
    ),
    (
        "Connected to the office VPN.",
        [
            user("Connect me to the office VPN."),
            assistant(None, ("vpn_connect", {"profile": "office"})),
            tool("vpn_connect", {"status": "error", "message": "authentication failed"}),
            assistant("Authentication failed. Could you give me your current token?"),
            user("It's 448213."),
            assistant(None, ("vpn_connect", {"profile": "office", "token": "448213"})),
            tool("vpn_connect", {"status": "error", "message": "authentication failed"}),
            assistant("It still fails to authenticate. Please contact IT support."),
        ],
        False,
    ),
]

METRICS = ("agent_goal_accuracy", "agent_goal_accuracy_without_reference")


async def run(judge: Judge) -> None:
    sets = {"tuning": TUNING, "held out": HELD_OUT, "fresh": FRESH, "fresh 2": FRESH_2}
    chosen = os.environ.get("GOAL_SETS", ",".join(sets)).split(",")
    for name, labelled in ((name, sets[name]) for name in chosen):
        rows = [{"turns": turns, "reference_goal": goal} for goal, turns, _ in labelled]
        result = await aevaluate(rows, list(METRICS), llm=judge, progress=False, probe=False)
        for metric in METRICS:
            right = 0
            for (goal, _, reached), cell in zip(labelled, result.cells(metric), strict=True):
                value = None if cell is None else cell.value
                ok = value is not None and (value == 1.0) == reached
                right += ok
                evidence = {} if cell is None else cell.evidence.model_dump()
                print(
                    f"  {'ok ' if ok else 'BAD'} {reached!s:5} {value} {goal!r}\n"
                    f"      inferred goal: {evidence.get('user_goal')!r}\n"
                    f"      end state: {evidence.get('end_state')!r}\n"
                    f"      {None if cell is None else cell.reason}"
                )
            print(f"{name}, {metric}: {right} / {len(labelled)} right\n", flush=True)


if __name__ == "__main__":
    run_with_real_judge(run, __doc__)
