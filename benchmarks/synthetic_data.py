"""Deterministic synthetic RAG samples for the benchmarks (no real data).

Each sample is about an invented entity (a town, a machine, a festival, ...) with a handful of
invented facts. The question asks for one or two of those facts; the retrieved contexts are,
in a shuffled rank order,

* an *answering* passage that states the asked facts,
* an *on-topic but incomplete* passage about the same entity that leaves them out,
* a *distractor* about a different entity of the same kind,

each about 80 words. The response answers in 2–4 sentences (sometimes with an unsupported
extra claim, sometimes partly wrong), and the reference answers correctly in 1–2 sentences.

Sample ``i`` of seed ``s`` depends only on ``(s, i)``, so ``iter_samples`` can stream any number
of rows in constant memory and two runs produce byte-identical files.

``make_conversation`` strings consecutive samples into a multi-turn conversation (each exchange
one sample's question and answer, the assistant turn carrying the sample's contexts and
reference), with one tool call in one of its exchanges, the reference tool calls and a goal;
``write_jsonl(..., conversations=True)`` writes those.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
_CODAS = ("", "n", "r", "l", "s", "th", "m", "k")

# kind -> (noun phrase, facts: attribute -> (question phrase, statement template, value maker))
_KINDS: dict[str, dict[str, Any]] = {
    "town": {
        "noun": "the town of {name}",
        "facts": {
            "founded": ("when was {noun} founded", "{Noun} was founded in {value}", "year"),
            "river": (
                "which river runs through {noun}",
                "The {value} river runs through {noun}",
                "name",
            ),
            "population": (
                "how many people live in {noun}",
                "About {value} people live in {noun}",
                "count",
            ),
            "industry": (
                "what is the main industry of {noun}",
                "The main industry of {noun} is {value}",
                "industry",
            ),
        },
    },
    "machine": {
        "noun": "the {name} engine",
        "facts": {
            "inventor": ("who invented {noun}", "{Noun} was invented by {value}", "person"),
            "year": ("when was {noun} first built", "{Noun} was first built in {value}", "year"),
            "fuel": ("what fuel does {noun} burn", "{Noun} burns {value}", "fuel"),
            "power": (
                "how much power does {noun} deliver",
                "{Noun} delivers {value} kilowatts",
                "count",
            ),
        },
    },
    "festival": {
        "noun": "the {name} festival",
        "facts": {
            "month": ("in which month is {noun} held", "{Noun} is held every {value}", "month"),
            "origin": ("where did {noun} begin", "{Noun} began in the village of {value}", "name"),
            "food": (
                "which dish is served at {noun}",
                "The dish served at {noun} is {value}",
                "food",
            ),
            "visitors": (
                "how many visitors come to {noun}",
                "Roughly {value} visitors come to {noun} each year",
                "count",
            ),
        },
    },
    "species": {
        "noun": "the {name} beetle",
        "facts": {
            "habitat": ("where does {noun} live", "{Noun} lives in {value}", "habitat"),
            "diet": ("what does {noun} eat", "{Noun} feeds on {value}", "food"),
            "discovered": (
                "who first described {noun}",
                "{Noun} was first described by {value}",
                "person",
            ),
            "length": ("how long is {noun}", "{Noun} grows to {value} millimetres", "small"),
        },
    },
}
_VALUES: dict[str, tuple[str, ...]] = {
    "industry": (
        "glassmaking",
        "salt mining",
        "shipbuilding",
        "wool weaving",
        "clockmaking",
        "paper milling",
        "cheese making",
        "copper smelting",
    ),
    "fuel": ("peat", "charcoal", "whale oil", "coal gas", "pressed straw", "alcohol"),
    "month": ("January", "March", "April", "June", "August", "October", "November"),
    "food": (
        "smoked eel",
        "barley cakes",
        "plum dumplings",
        "fern shoots",
        "honey bread",
        "river snails",
        "pickled turnips",
    ),
    "habitat": (
        "pine forests",
        "salt marshes",
        "mountain meadows",
        "river banks",
        "limestone caves",
        "sand dunes",
    ),
}
_FILLER = (
    "Local records describe it in some detail.",
    "Visitors often remark on this.",
    "Historians still debate some of the early accounts.",
    "A small museum keeps documents about it.",
    "Several travel guides mention it only briefly.",
    "The regional archive holds letters from that period.",
    "Its story is told in a number of school books.",
    "Photographs from the last century show how little it has changed.",
    "A survey in the last decade confirmed the older descriptions.",
    "Newspapers of the time covered it at length.",
    "Experts from the university have written about it.",
    "Many of the details come from a single old chronicle.",
)
_OPENERS = ("To answer briefly,", "In short,", "According to the sources,", "", "", "")
_HEDGES = (
    "It is also said to be the oldest of its kind in the region.",
    "It was later renamed twice.",
    "It is widely considered a national treasure.",
    "It appears on a commemorative stamp.",
)
_CONTEXT_WORDS = 80


def _name(rng: random.Random) -> str:
    parts = [
        rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
        for _ in range(rng.randint(2, 3))
    ]
    return "".join(parts).capitalize()


def _person(rng: random.Random) -> str:
    return f"{_name(rng)} {_name(rng)}"


def _value(kind: str, rng: random.Random) -> str:
    if kind == "year":
        return str(rng.randint(1450, 1990))
    if kind == "count":
        return f"{rng.randint(2, 95) * 1000:,}"
    if kind == "small":
        return str(rng.randint(3, 60))
    if kind == "person":
        return _person(rng)
    if kind == "name":
        return _name(rng)
    return rng.choice(_VALUES[kind])


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Entity:
    def __init__(self, kind: str, rng: random.Random) -> None:
        spec = _KINDS[kind]
        self.kind = kind
        self.noun = spec["noun"].format(name=_name(rng))
        self.facts: dict[str, tuple[str, str]] = {}  # attribute -> (statement, value)
        self.questions: dict[str, str] = {}
        for attr, (question, statement, value_kind) in spec["facts"].items():
            value = _value(value_kind, rng)
            fill = {"noun": self.noun, "Noun": _capital(self.noun), "value": value}
            self.facts[attr] = (statement.format(**fill) + ".", value)
            self.questions[attr] = question.format(**fill)

    def statement(self, attr: str) -> str:
        return self.facts[attr][0]


def _passage(sentences: list[str], rng: random.Random) -> str:
    """The sentences, padded with filler to about `_CONTEXT_WORDS` words."""
    out = list(sentences)
    fillers = list(_FILLER)
    rng.shuffle(fillers)
    while sum(len(s.split()) for s in out) < _CONTEXT_WORDS and fillers:
        out.insert(rng.randint(1, len(out)), fillers.pop())
    return " ".join(out)


def make_sample(index: int, seed: int = 0) -> dict[str, Any]:
    """Sample number `index` of the stream `seed` (independent of every other index)."""
    rng = random.Random(seed * 1_000_003 + index)
    kind = rng.choice(sorted(_KINDS))
    entity = _Entity(kind, rng)
    other = _Entity(kind, rng)
    attrs = list(entity.facts)
    rng.shuffle(attrs)
    asked = attrs[: rng.choice((1, 1, 2))]
    rest = [a for a in attrs if a not in asked]

    question = _capital(entity.questions[asked[0]])
    if len(asked) == 2:
        question += f", and {entity.questions[asked[1]]}"
    question += "?"

    answering = _passage([entity.statement(a) for a in asked] + [entity.statement(rest[0])], rng)
    incomplete = _passage([entity.statement(a) for a in rest[1:]], rng)
    distractor = _passage([other.statement(a) for a in attrs[:3]], rng)
    contexts = [answering, incomplete, distractor]
    rng.shuffle(contexts)

    reference = " ".join(entity.statement(a) for a in asked)
    answer_sentences = [entity.statement(a) for a in asked]
    style = rng.random()
    if style < 0.15:  # partly wrong: one asked fact taken from the distractor entity
        wrong = other.facts[asked[0]][1]
        answer_sentences[0] = answer_sentences[0].replace(entity.facts[asked[0]][1], wrong)
    if style > 0.6:  # an unsupported extra claim
        answer_sentences.append(rng.choice(_HEDGES))
    answer_sentences.append(entity.statement(rest[0]))
    while len(answer_sentences) < 2:
        answer_sentences.append(rng.choice(_FILLER))
    opener = rng.choice(_OPENERS)
    answer = " ".join(answer_sentences[:4])
    if opener:
        answer = f"{opener} {answer[0].lower()}{answer[1:]}"

    return {
        "id": f"s{seed}-{index:06d}",
        "user_input": question,
        "response": answer,
        "retrieved_contexts": contexts,
        "reference": reference,
    }


def iter_samples(n: int, seed: int = 0, start: int = 0) -> Iterator[dict[str, Any]]:
    for i in range(start, start + n):
        yield make_sample(i, seed)


_TOOLS = ("search_archive", "lookup_record", "get_schedule")


def make_conversation(index: int, seed: int = 0, exchanges: int = 5) -> dict[str, Any]:
    """Conversation number `index` of the stream `seed`: `exchanges` user/assistant exchanges
    made of samples ``index * exchanges`` onwards; before one of the answers the assistant
    calls a tool, whose reference call differs from the real one in a third of the
    conversations (an argument off by one, so that tool_call_f1 has something to find)."""
    rng = random.Random(seed * 1_000_003 + index + 7_919)
    samples = [make_sample(index * exchanges + j, seed) for j in range(exchanges)]
    with_tool = rng.randrange(exchanges)
    tool = rng.choice(_TOOLS)
    arguments = {"query": samples[with_tool]["user_input"], "limit": rng.randint(1, 5)}
    turns: list[dict[str, Any]] = []
    for j, sample in enumerate(samples):
        turns.append({"role": "user", "content": sample["user_input"]})
        if j == with_tool:
            call = {"id": f"call-{index}", "name": tool, "arguments": arguments}
            turns.append({"role": "assistant", "tool_calls": [call]})
            result = sample["retrieved_contexts"][0]
            turns.append({"role": "tool", "tool_call_id": f"call-{index}", "name": tool,
                          "content": result})  # fmt: skip
        turns.append({"role": "assistant", "content": sample["response"],
                      "retrieved_contexts": sample["retrieved_contexts"],
                      "reference": sample["reference"]})  # fmt: skip
    expected = dict(arguments)
    if rng.random() < 1 / 3:
        expected["limit"] += 1
    return {
        "id": f"c{seed}-{index:06d}",
        "turns": turns,
        "reference_tool_calls": [{"name": tool, "arguments": expected}],
        "reference_goal": "Learn " + "; ".join(s["reference"] for s in samples[:2]),
        # so that every metric that scores conversations (topic_adherence too) has its fields
        "reference_topics": ["local history, industry and geography of small towns"],
    }


def write_jsonl(path: Path, n: int, seed: int = 0, *, conversations: bool = False) -> Path:
    """Write `n` samples (or `n` conversations) to `path` (streamed: memory does not grow
    with `n`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = (
        (make_conversation(i, seed) for i in range(n)) if conversations else iter_samples(n, seed)
    )
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("n", type=int)
    parser.add_argument("-o", "--output", type=Path, default=None, help="JSONL (default: stdout)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.output is None:
        for sample in iter_samples(args.n, args.seed):
            sys.stdout.write(json.dumps(sample, ensure_ascii=False) + "\n")
    else:
        write_jsonl(args.output, args.n, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
