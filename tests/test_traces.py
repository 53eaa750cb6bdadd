"""Trace ingestion (issue 25.2): traces of a small RAG agent, recorded with the real
OpenTelemetry SDK and the real OpenInference instrumentation of the openai SDK against the
test server, load into one sample per answer and one conversation per session with every
turn, context and tool call the agent made; the samples evaluate; a malformed file is an
error naming the file, the span and the field."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest
from google.protobuf.json_format import MessageToDict
from openinference.instrumentation import using_session
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helpers import handle, make_judge
from rageval import traces
from rageval.runner import evaluate
from rageval.samples import Conversation, InvalidDataError, Sample
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply

SESSION = "session-1"
QUESTIONS = {"Weather in Paris?": "Paris", "And in Rome?": "Rome", "What about Oslo?": "Oslo"}
TEMPERATURES = {"Paris": "18C", "Rome": "24C", "Oslo": "4C"}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def agent_model(req: RecordedRequest) -> Reply:
    """The agent's model: asked a question, it calls the weather tool for the question's
    city; given the tool's answer, it answers with it."""
    last = req.messages[-1]
    if last["role"] == "user":
        return Reply.json({"city": QUESTIONS[last["content"]]})
    return Reply.text(f"It is {last['content']} there.")


@dataclass
class Done:
    """What the agent did in one turn."""

    question: str
    documents: list[str]
    call: dict[str, Any]
    answer: str


@dataclass
class Recording:
    spans: list[Any]
    done: list[Done] = field(default_factory=list)


def retrieve(tracer: Any, query: str, convention: str) -> list[str]:
    city = QUESTIONS[query]
    documents = [f"{city} is a city.", f"The weather service covers {city}."]
    with tracer.start_as_current_span("retrieve") as span:
        if convention == "openinference":
            span.set_attribute("openinference.span.kind", "RETRIEVER")
            span.set_attribute("input.value", query)
            for i, doc in enumerate(documents):
                span.set_attribute(f"retrieval.documents.{i}.document.content", doc)
        else:
            span.set_attribute("gen_ai.operation.name", "retrieval")
            span.set_attribute("gen_ai.conversation.id", SESSION)
            span.set_attribute(
                "gen_ai.retrieval.documents",
                json.dumps([{"id": f"d{i}", "content": d} for i, d in enumerate(documents)]),
            )
    return documents


def run_tool(tracer: Any, call: Any, convention: str) -> str:
    arguments = json.loads(call.function.arguments)
    result = TEMPERATURES[arguments["city"]]
    with tracer.start_as_current_span(f"tool {call.function.name}") as span:
        if convention == "openinference":
            span.set_attribute("openinference.span.kind", "TOOL")
            span.set_attribute("tool.name", call.function.name)
            span.set_attribute("input.value", call.function.arguments)
            span.set_attribute("output.value", result)
        else:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", call.function.name)
            span.set_attribute("gen_ai.tool.call.id", call.id)
            span.set_attribute("gen_ai.tool.call.arguments", call.function.arguments)
            span.set_attribute("gen_ai.tool.call.result", result)
    return result


def chat(client: openai.OpenAI, tracer: Any, messages: list[Any], convention: str) -> Any:
    """One model call; under the GenAI conventions the agent records the chat span itself
    (OpenInference's instrumentation records its own)."""
    if convention == "openinference":
        return client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    with tracer.start_as_current_span("chat m") as span:
        reply = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.conversation.id", SESSION)
        span.set_attribute("gen_ai.input.messages", json.dumps([_parts(m) for m in messages]))
        span.set_attribute("gen_ai.output.messages", json.dumps([_parts(message.model_dump())]))
    return reply


def _parts(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI message as the GenAI conventions' ``{role, parts}``."""
    parts: list[dict[str, Any]] = []
    if message["role"] == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": message["tool_call_id"],
                "response": message["content"],
            }
        )
    elif message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call["function"]
        parts.append(
            {
                "type": "tool_call",
                "id": call["id"],
                "name": function["name"],
                "arguments": function["arguments"],
            }
        )
    return {"role": message["role"], "parts": parts}


def run_agent(convention: str) -> Recording:
    """Three user turns in one session: retrieve, the model calls the tool, the tool runs,
    the model answers; each turn one trace (a CHAIN span over the turn)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-agent")
    instrumentor = OpenAIInstrumentor()
    if convention == "openinference":
        instrumentor.instrument(tracer_provider=provider)
    recording = Recording(spans=[])
    try:
        with FakeOpenAI(agent_model) as server, using_session(SESSION):
            client = openai.OpenAI(base_url=server.base_url, api_key="x")
            messages: list[Any] = [{"role": "system", "content": "Answer from the tools."}]
            for question in QUESTIONS:
                with tracer.start_as_current_span("agent turn") as turn:
                    turn.set_attribute("openinference.span.kind", "CHAIN")
                    documents = retrieve(tracer, question, convention)
                    messages.append({"role": "user", "content": question})
                    asked = chat(client, tracer, messages, convention).choices[0].message
                    messages.append(asked.model_dump(exclude_none=True))
                    (call,) = asked.tool_calls
                    result = run_tool(tracer, call, convention)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
                    answer = chat(client, tracer, messages, convention).choices[0].message.content
                    messages.append({"role": "assistant", "content": answer})
                recording.done.append(
                    Done(
                        question,
                        documents,
                        {
                            "name": call.function.name,
                            "arguments": json.loads(call.function.arguments),
                            "result": result,
                        },
                        answer,
                    )
                )
    finally:
        if convention == "openinference":
            instrumentor.uninstrument()
    recording.spans = list(exporter.get_finished_spans())
    return recording


def otlp_json(spans: list[Any], *, hex_ids: bool) -> dict[str, Any]:
    """The SDK's spans in OTLP JSON via the SDK's own protobuf encoding; protobuf's JSON
    writes ids as base64, the collector's file exporter as hex (``hex_ids``)."""
    document: dict[str, Any] = MessageToDict(encode_spans(spans))
    if hex_ids:
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = _b64_to_hex(span[key])
    return document


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


@pytest.fixture(scope="module", params=["openinference", "otlp"])
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[traces.Format, Path, Recording]]:
    convention: traces.Format = request.param
    recording = run_agent(convention)
    path = tmp_path_factory.mktemp("traces") / f"{convention}.json"
    path.write_text(json.dumps(otlp_json(recording.spans, hex_ids=True)))
    yield convention, path, recording


def test_conversations_have_every_turn_context_and_tool_call(
    recorded: tuple[traces.Format, Path, Recording],
) -> None:
    convention, path, recording = recorded
    (conv,) = traces.load(path, convention, view="conversations")
    assert isinstance(conv, Conversation) and conv.id == SESSION
    expected_roles = ["user", "assistant", "tool", "assistant"] * len(recording.done)
    assert [t.role for t in conv.turns] == expected_roles
    for n, done in enumerate(recording.done):
        user, asked, tool, answer = conv.turns[4 * n : 4 * n + 4]
        assert user.content == done.question
        assert asked.retrieved_contexts == done.documents
        (call,) = asked.tool_calls or []
        assert call.model_dump(exclude={"id"}) == done.call
        assert tool.content == done.call["result"] and tool.tool_call_id == call.id
        assert answer.content == done.answer and answer.retrieved_contexts is None
    # the CHAIN spans over each turn are no turn: kept as metadata
    assert [s["name"] for s in conv.metadata["other_spans"]] == ["agent turn"] * 3


def test_turns_view_is_one_sample_per_answer(
    recorded: tuple[traces.Format, Path, Recording],
) -> None:
    convention, path, recording = recorded
    samples = traces.load(path, convention, view="turns")
    assert [type(s) for s in samples] == [Sample] * 3
    assert [(s.user_input, s.retrieved_contexts, s.response) for s in samples] == [
        (d.question, d.documents, d.answer) for d in recording.done
    ]
    assert [s.id for s in samples] == [f"{SESSION}/{4 * n + 3}" for n in range(3)]
    assert samples[0].metadata["tool_calls"][0]["result"] == "18C"


def test_protobuf_base64_ids_read_as_the_collectors_hex(tmp_path: Path) -> None:
    recording = run_agent("openinference")
    hex_file, b64_file = tmp_path / "hex.json", tmp_path / "b64.json"
    hex_file.write_text(json.dumps(otlp_json(recording.spans, hex_ids=True)))
    b64_file.write_text(json.dumps(otlp_json(recording.spans, hex_ids=False)))
    assert traces.load(b64_file, "openinference") == traces.load(hex_file, "openinference")


def test_the_collectors_json_lines_are_read(
    recorded: tuple[traces.Format, Path, Recording], tmp_path: Path
) -> None:
    convention, path, _ = recorded
    document = json.loads(path.read_text())
    lines = tmp_path / "lines.jsonl"
    halves = [
        document["resourceSpans"][0]["scopeSpans"][:1],
        document["resourceSpans"][0]["scopeSpans"][1:],
    ]
    rows = [{"resourceSpans": [{**document["resourceSpans"][0], "scopeSpans": h}]} for h in halves]
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert traces.load(lines, convention) == traces.load(path, convention)


def test_the_turns_evaluate_with_faithfulness(
    recorded: tuple[traces.Format, Path, Recording],
) -> None:
    convention, path, _ = recorded
    with FakeOpenAI(handle) as server:
        result = evaluate(
            traces.load(path, convention, view="turns"),
            ["faithfulness"],
            llm=make_judge(server),
            progress=False,
        )
    scores = result["faithfulness"]
    assert len(scores) == 3 and all(s is not None and 0.0 <= s <= 1.0 for s in scores)  # NaN fails


def test_conversations_evaluate_with_tool_call_f1_against_references(
    recorded: tuple[traces.Format, Path, Recording],
) -> None:
    convention, path, _ = recorded
    references = {
        SESSION: {
            "reference_tool_calls": [
                {"name": "weather", "arguments": {"city": "Paris"}},
                {"name": "weather", "arguments": {"city": "Rome"}},
                {"name": "weather", "arguments": {"city": "Madrid"}},
            ]
        }
    }
    rows = traces.load(path, convention, view="conversations", references=references)
    result = evaluate(rows, ["tool_call_f1"], progress=False)
    # a call is its name and each argument (2 units): 6 made, 6 referenced, 5 shared (the
    # three names, Paris and Rome; Oslo is not Madrid), so P = R = F1 = 5/6
    assert result["tool_call_f1"] == [pytest.approx(5 / 6)]


def test_references_naming_no_row_are_an_error(
    recorded: tuple[traces.Format, Path, Recording],
) -> None:
    convention, path, _ = recorded
    with pytest.raises(InvalidDataError, match="'nope', which is no row's id"):
        traces.load(path, convention, view="conversations", references={"nope": {}})


# --------------------------------------------------------------------------- hand-written


def span(span_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": span_id,
        "name": "s",
        "startTimeUnixNano": "1700000000000000000",
        "attributes": [],
        **extra,
    }


def otlp_file(tmp_path: Path, *spans: dict[str, Any]) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}))
    return path


def test_a_malformed_span_names_the_file_the_span_and_the_field(tmp_path: Path) -> None:
    path = otlp_file(
        tmp_path,
        span("b7ad6b7169203331"),
        span("00f067aa0ba902b7", traceId="xyz"),
        span("53995c3f42cd8ad8", startTimeUnixNano="soon"),
        span(
            "e457b5a2e4d86bd1",
            attributes=[{"key": "k", "value": {"kvlistValue": {"values": [{}]}}}],
        ),
    )
    with pytest.raises(InvalidDataError) as caught:
        traces.load(path, "otlp")
    text = str(caught.value)
    assert str(path) in text
    assert "spans[1].traceId" in text and "'00f067aa0ba902b7'" in text
    assert "spans[2].startTimeUnixNano" in text and "'53995c3f42cd8ad8'" in text
    assert "spans[3].attributes[0].value" in text and "'e457b5a2e4d86bd1'" in text


def test_not_json_and_the_wrong_format_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("{not json")
    with pytest.raises(InvalidDataError, match="not JSON"):
        traces.load(path, "otlp")
    unknown_only = otlp_file(tmp_path, span("b7ad6b7169203331"))
    with pytest.raises(InvalidDataError, match="no span is an LLM call"):
        traces.load(unknown_only, "openinference")


def test_langfuse_session_export(tmp_path: Path) -> None:
    def obs(oid: str, kind: str, second: int, **fields: Any) -> dict[str, Any]:
        return {"id": oid, "type": kind, "startTime": f"2025-01-01T00:00:{second:02d}Z", **fields}

    trace = {
        "id": "t1",
        "sessionId": "s1",
        "observations": [
            obs(
                "o1",
                "RETRIEVER",
                1,
                name="search",
                output=[{"page_content": "Paris is in France."}],
            ),
            obs(
                "o2",
                "GENERATION",
                2,
                input=[{"role": "user", "content": "Weather in Paris?"}],
                output={
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
            ),
            obs("o3", "TOOL", 3, name="weather", input={"city": "Paris"}, output="18C"),
            obs(
                "o4",
                "GENERATION",
                4,
                input=[{"role": "user", "content": "Weather in Paris?"}],
                output="18C in Paris.",
            ),
            obs("o5", "EVENT", 5, name="feedback"),
        ],
    }
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"id": "s1", "traces": [trace]}))
    (conv,) = traces.load(path, "langfuse", view="conversations")
    assert isinstance(conv, Conversation) and conv.id == "s1"
    assert [t.role for t in conv.turns] == ["user", "assistant", "tool", "assistant"]
    assert conv.turns[1].retrieved_contexts == ["Paris is in France."]
    assert conv.tool_calls[0].model_dump() == {
        "name": "weather",
        "arguments": {"city": "Paris"},
        "result": "18C",
        "id": "c1",
    }
    assert [s["name"] for s in conv.metadata["other_spans"]] == ["feedback"]
    (sample,) = traces.load(path, "langfuse")
    assert (sample.user_input, sample.retrieved_contexts, sample.response) == (
        "Weather in Paris?",
        ["Paris is in France."],
        "18C in Paris.",
    )


def test_older_genai_message_events_and_traces_without_a_session(tmp_path: Path) -> None:
    """Before ``gen_ai.input.messages``, the GenAI conventions put each message in a span event;
    with no session id, each trace is its own conversation."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    for question, answer in [("Capital of France?", "Paris."), ("Capital of Italy?", "Rome.")]:
        with tracer.start_as_current_span("chat m") as chat_span:
            chat_span.set_attribute("gen_ai.operation.name", "chat")
            chat_span.add_event("gen_ai.system.message", {"content": "Be brief."})
            chat_span.add_event("gen_ai.user.message", {"content": question})
            message = json.dumps({"role": "assistant", "content": answer})
            chat_span.add_event("gen_ai.choice", {"index": 0, "message": message})
    path = tmp_path / "events.json"
    spans = list(exporter.get_finished_spans())
    path.write_text(json.dumps(otlp_json(spans, hex_ids=True)))
    conversations = traces.load(path, "otlp", view="conversations")
    assert [c.id for c in conversations] == [f"{s.context.trace_id:032x}" for s in spans]
    assert [[(t.role, t.content) for t in c.turns] for c in conversations] == [  # type: ignore[attr-defined]
        [("user", "Capital of France?"), ("assistant", "Paris.")],
        [("user", "Capital of Italy?"), ("assistant", "Rome.")],
    ]
    # no retriever ran: the samples have no contexts (faithfulness reports them unscorable)
    assert [s.retrieved_contexts for s in traces.load(path, "otlp")] == [None, None]


def test_the_command_line_evaluates_a_trace_file_by_turns_or_by_conversations(
    recorded: tuple[traces.Format, Path, Recording],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rageval.cli import main
    from rageval.results import load_run

    convention, path, _ = recorded
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as server:
        judged = [str(path), "--format", convention, "--llm", "m", "--base-url", server.base_url]
        code = main(["evaluate", *judged, "-m", "faithfulness", "-o", str(tmp_path / "t"), "-q"])
        assert code == 0, capsys.readouterr()
    turns = load_run(tmp_path / "t")
    assert len(turns) == 3 and all(v is not None for v in turns["faithfulness"])
    # every metric scores conversations: one conversation per session (no reference tool
    # calls in a trace: the cell is skipped, and says why)
    code = main(
        ["evaluate", str(path), "--format", convention, "-m", "tool_call_accuracy", "-o",
         str(tmp_path / "c"), "-q", "--skip-invalid", "--allow-unmeasured"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr()
    capsys.readouterr()
    conversations = load_run(tmp_path / "c")
    assert conversations.ids == [SESSION]
    (cell,) = conversations.cells("tool_call_accuracy")
    assert cell is not None and "reference_tool_calls" in str(cell.cause)
    # a trace format reads a file: not stdin
    assert main(["evaluate", "-", "--format", convention, "-m", "tool_call_f1"]) == 2
    assert "reads a trace file" in capsys.readouterr().err
