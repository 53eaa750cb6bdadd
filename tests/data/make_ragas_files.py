"""Files written by ragas itself (``EvaluationDataset.to_jsonl`` / ``to_csv``, a generated
test set's ``Testset.to_jsonl``), which rageval must read as they are, with no column map
(tests/test_ragas_files.py). The rows are a handful of made-up ones, no real data; every row of
a file gives the same fields, as a dataset does that `rageval evaluate FILE` scores with no
flags (a row without a field the default metrics read is an error naming it).

Run with a Python that has ragas installed (the files under ``tests/data/ragas_files/``
were written by ragas 0.4.3)::

    python tests/data/make_ragas_files.py -o tests/data/ragas_files
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragas import EvaluationDataset, MultiTurnSample, SingleTurnSample
from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from ragas.testset.synthesizers.testset_schema import Testset, TestsetSample

SINGLE = [
    SingleTurnSample(
        user_input="Which river runs through Lyon?",
        response="The Rhône and the Saône meet in Lyon.",
        retrieved_contexts=["Lyon lies where the Rhône meets the Saône.", "Lyon is in France."],
        reference="The Rhône and the Saône.",
        retrieved_context_ids=["doc-7", "doc-2"],
        reference_context_ids=["doc-7"],
        # ragas' to_csv takes its columns from the first row: the row with every field
        rubrics={"score1_description": "wrong river", "score5_description": "both rivers"},
    ),
    SingleTurnSample(
        user_input="How tall is the tower?",
        response="It is 330 metres tall.",
        retrieved_contexts=["The tower is 330 metres tall."],
        reference="330 metres",
        retrieved_context_ids=["doc-1"],
        reference_context_ids=["doc-1", "doc-4"],
    ),
    SingleTurnSample(
        user_input="東京の人口は?",
        response="約1400万人です。",
        retrieved_contexts=["東京都の人口は約1400万人。"],
        reference="約1400万人",
        retrieved_context_ids=[9, 3],  # ragas takes integer ids too
        reference_context_ids=[3],
    ),
]

MULTI = [
    MultiTurnSample(
        user_input=[
            HumanMessage(content="Book a table for two at 8pm."),
            AIMessage(
                content="Booking it.",
                tool_calls=[ToolCall(name="book_table", args={"people": 2, "time": "20:00"})],
            ),
            ToolMessage(content="Booked: table 12."),
            AIMessage(content="Your table for two at 8pm is booked (table 12)."),
        ],
        reference="A table for two is booked at 8pm.",
        reference_tool_calls=[ToolCall(name="book_table", args={"people": 2, "time": "20:00"})],
        reference_topics=["restaurant bookings"],
    ),
    MultiTurnSample(
        user_input=[
            HumanMessage(content="What's the weather in Oslo?"),
            AIMessage(content="I can only help with bookings."),
        ],
        reference="The assistant declines: it only handles bookings.",
        reference_tool_calls=[],
        reference_topics=["restaurant bookings"],
    ),
]

TESTSET = Testset(
    samples=[
        TestsetSample(
            eval_sample=SingleTurnSample(
                user_input="What does the Saône flow into?",
                reference_contexts=["Lyon lies where the Rhône meets the Saône."],
                reference="The Rhône, at Lyon.",
                persona_name="Geography student",
                query_style="PERFECT_GRAMMAR",
                query_length="SHORT",
            ),
            synthesizer_name="single_hop_specific_query_synthesizer",
        )
    ]
)


def main() -> None:
    """Write the files into -o DIR."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-o", "--out", type=Path, required=True)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    single, multi = EvaluationDataset(samples=list(SINGLE)), EvaluationDataset(samples=list(MULTI))
    single.to_jsonl(str(out / "single_turn.jsonl"))
    single.to_csv(str(out / "single_turn.csv"))
    multi.to_jsonl(str(out / "multi_turn.jsonl"))
    multi.to_csv(str(out / "multi_turn.csv"))
    TESTSET.to_jsonl(str(out / "testset.jsonl"))


if __name__ == "__main__":
    main()
