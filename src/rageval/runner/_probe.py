"""Before a run: is each configured endpoint there, and does it take the key?

Without this, an endpoint that cannot be reached costs every request its full round of
retries before the run gives up (half a minute), and a judge with neither a key nor a base URL
would be asked at OpenAI's public endpoint without a key. Instead:

- no key for OpenAI's own endpoint is a configuration error before any request;
- one `GET {base_url}/models` with a short timeout: nothing listening, a name that does not
  resolve or a connection that cannot be made within the timeout stops the run at once, as
  does a refused key (401/403). Any other answer, even an error status (some servers have no
  model list), means the endpoint is there. A server that accepts the connection but is slow
  to answer is left to the run's own retries.

It costs no tokens. It cannot work for client objects passed in Python (their key and
transport are theirs), which are not probed; a key passed as `api_key=` is sent as the run's
requests send it. `--no-probe` (`probe=False`) turns it off.

A model list that says llama.cpp's llama-server serves it (``owned_by: "llamacpp"``) is
followed by one `GET /props`, where that server reports its slots: the requests it decodes at
once. The run then sends that many at a time to it (:class:`~rageval._client._run.ServerSlots`)
and waits longer for each, unless the user chose a concurrency or a timeout: on such a server
a request beyond its slots only queues inside its own timeout, and one given up on is work
thrown away and done again. The user's judge is left as built; the run's manifest records what
was used. The slots a server reported are remembered for the process, as the structured-output
mode an endpoint takes is (:mod:`rageval.judge._modes`): a later run that does not probe (the
pytest plugin probes once per session) still sends a llama.cpp server only what it decodes at
once. A model list that gives a model's ``max_model_len`` (vLLM's) tells the context window the
judge fits each request in and reads a cut reply against (:func:`reported_windows`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

from rageval import _env
from rageval._client._endpoint import EndpointClient
from rageval._client._limiter import Slots
from rageval._client._run import ServerSlots
from rageval._client._settings import LOCAL_SERVER_TIMEOUT
from rageval.errors import RunConfigError
from rageval.judge import FatalJudgeError
from rageval.judge._registry import BackendTraits, backend_traits

PROBE_TIMEOUT_S = 5.0
_MAX_BODY = 1 << 20  # of a model list: enough for any; a server cannot make the probe read more
_NOT_SET = " (which is not set)"


@dataclasses.dataclass(frozen=True)
class LlamaServer:
    """What llama.cpp's llama-server reports at ``GET /props``: the requests it decodes at once
    (`slots`) and the tokens one slot holds, prompt and reply together (`context`, its
    ``n_ctx``; None when not reported). Past that context it refuses a prompt (400) or stops a
    reply where the context is full, whatever ``max_tokens`` said."""

    slots: int
    context: int | None


#: the llama.cpp servers probed in this process, by base URL (what the server is, not the
#: state of a run: a later probe of the same URL replaces it)
_SERVER_SLOTS: dict[str, LlamaServer] = {}
#: the context windows model lists gave (vLLM's ``max_model_len``), by base URL and model
_LISTED_WINDOWS: dict[str, dict[str, int]] = {}


def key_variable(described: Mapping[str, Any]) -> str | None:
    """The environment variable an endpoint reads its key from, from its `describe()`'s
    `api_key_from`; None when the key came from Python ("the api_key argument", "the given
    client")."""
    source = str(described.get("api_key_from") or "")
    if not source or source.startswith("the "):
        return None
    return source.removesuffix(_NOT_SET)


def _traits(described: Mapping[str, Any]) -> BackendTraits:
    """The backend's traits of a judge's `describe()` (remote embeddings, which name none, are
    OpenAI-compatible)."""
    return backend_traits(str(described.get("backend") or "openai"))


def check_key(described: Mapping[str, Any], *, what: str) -> None:
    """RunConfigError when a backend's own endpoint (OpenAI's, Anthropic's, a plug-in's default
    address) would be asked without a key."""
    source = str(described.get("api_key_from") or "")
    traits = _traits(described)
    if traits.default_base_url is not None:
        if described.get("base_url") == traits.default_base_url and source.endswith(_NOT_SET):
            raise RunConfigError(
                f"the {what} {described.get('model')!r} would be asked at the {traits.kind} "
                f"API ({traits.default_base_url}) without an API key: set "
                f"{key_variable(described)}"
            )
        return
    if described.get("base_url") == _env.DEFAULT_BASE_URL and source.endswith(_NOT_SET):
        variable = key_variable(described)
        model = str(described.get("model"))
        claude = (
            f"; a Claude model is asked at Anthropic's API as anthropic:{model} (--llm, "
            "RAGEVAL_LLM) with ANTHROPIC_API_KEY"
            if model.lower().startswith("claude")
            else ""
        )
        raise RunConfigError(
            f"the {what} {model!r} would be asked at OpenAI "
            f"({_env.DEFAULT_BASE_URL}) without an API key: set {variable} for OpenAI, or point at "
            "your own endpoint with --base-url / OPENAI_BASE_URL (Ollama: "
            f"http://localhost:11434/v1, vLLM: http://<host>:8000/v1){claude}"
        )


async def probe(
    described: Mapping[str, Any],
    *,
    what: str,
    key: str | None,
    timeout: float = PROBE_TIMEOUT_S,
) -> LlamaServer | None:
    """One `GET /models` to the endpoint `described` (a judge's or remote embeddings'
    `describe()`) with `key`, the one its requests send (:meth:`Endpoint.probe_key`; None: a
    client object passed in Python, not ours to probe); raises FatalJudgeError when it cannot
    be reached or refuses the key. Returns what a llama.cpp server reports of itself (one more
    GET, to its `/props`), else None."""
    base_url = described.get("base_url")
    traits = _traits(described)
    if key is None or not base_url or traits.endpoint_check is None:
        return None
    where = f"the {what} endpoint {base_url}"
    headers = traits.auth_headers(key or "no-key-set")
    url = str(base_url).rstrip("/") + traits.endpoint_check
    try:
        # the standard library, in a thread: importing the openai SDK for this one GET would
        # cost half a second, and a run whose every cell is kept never needs the SDK
        status, body = await asyncio.to_thread(_get, url, headers, timeout)
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, ssl.SSLError):
            # a TLS server answered; the standard library's certificate store may differ from
            # the SDK's (certifi), so whether the certificate is trusted is the run's to find
            return None
        if isinstance(reason, TimeoutError):
            reason = f"no connection within {timeout:g} s"
        raise FatalJudgeError(
            f"could not reach {where} ({reason}); is the server running and the URL right? "
            "(--no-probe skips this check)"
        ) from None
    except TimeoutError:
        return None  # connected, slow to answer: the run's own retries deal with that
    except (http.client.HTTPException, ConnectionError) as e:  # accepted, then hung up
        raise FatalJudgeError(
            f"could not reach {where} ({type(e).__name__}: {e}); is the server running and the "
            "URL right? (--no-probe skips this check)"
        ) from None
    except Exception as e:  # raised below HTTP (e.g. a network policy): nothing was sent
        leaf = _first_leaf(e)
        raise FatalJudgeError(
            f"could not send a request to {where}: {type(leaf).__name__}: {leaf}"
        ) from None
    if status in (401, 403):
        raise FatalJudgeError(
            f"{where} refused the API key from "
            f"{key_variable(described) or described.get('api_key_from')} "
            f"({status}); check the key",
            status=status,
        )
    # any other answer, even an error status (some servers have no model list): it is there
    _LISTED_WINDOWS[str(base_url)] = _listed_windows(body) if status == 200 else {}
    if status != 200 or not _served_by_llama_cpp(body):
        return None
    try:
        return await asyncio.to_thread(_llama_server, str(base_url), headers, timeout)
    except Exception:  # the endpoint is there; its slots are only a better default
        return None


def _get(url: str, headers: Mapping[str, str], timeout: float) -> tuple[int, bytes]:
    """The HTTP status and (the start of) the body of `GET url` with these headers (which
    carry the key)."""
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status), response.read(_MAX_BODY)
    except urllib.error.HTTPError as e:
        return int(e.code), b""


def _served_by_llama_cpp(models_body: bytes) -> bool:
    """Whether a model list is llama-server's (its models are ``owned_by: "llamacpp"``)."""
    try:
        listed = json.loads(models_body).get("data")
    except (ValueError, AttributeError):
        return False
    return isinstance(listed, list) and any(
        isinstance(m, dict) and m.get("owned_by") == "llamacpp" for m in listed
    )


def _listed_windows(models_body: bytes) -> dict[str, int]:
    """Each listed model's context window, where the list gives it (vLLM: ``max_model_len``)."""
    try:
        listed = json.loads(models_body).get("data")
    except (ValueError, AttributeError):
        return {}
    return {
        m["id"]: window
        for m in (listed if isinstance(listed, list) else [])
        if isinstance(m, dict) and isinstance(m.get("id"), str)
        if (window := _count(m.get("max_model_len"))) is not None
    }


def reported_windows(judges: Iterable[Any]) -> dict[int, int]:
    """The context window the model list of each judge's endpoint gave for its model (vLLM's
    ``max_model_len``), by ``id(endpoint)``, from the probes made in this process."""
    out: dict[int, int] = {}
    for judge in judges:
        window = _LISTED_WINDOWS.get(judge.base_url, {}).get(judge.model)
        if window is not None:
            out[id(judge.endpoint)] = window
    return out


def _llama_server(base_url: str, headers: Mapping[str, str], timeout: float) -> LlamaServer | None:
    """`total_slots` and the slots' `n_ctx` from llama-server's `GET /props`, beside its OpenAI
    routes under /v1; None without a number of slots."""
    root = base_url.rstrip("/").removesuffix("/v1")
    status, body = _get(root + "/props", headers, timeout)
    props = json.loads(body) if status == 200 else {}
    slots = _count(props.get("total_slots"))
    settings = props.get("default_generation_settings")
    context = _count(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return LlamaServer(slots, context) if slots is not None else None


def _count(value: Any) -> int | None:
    """`value` when it is a positive int (JSON's true is not 1 here), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def probe_endpoints(judges: Iterable[Any], embeddings: Any) -> None:
    """Probe each distinct endpoint of these judges and of remote embeddings once, and
    remember the slots of those that are llama.cpp servers (:func:`known_server_slots`)."""
    seen: set[str] = set()
    clients = [("judge", j) for j in judges] + [("embeddings", embeddings)]
    for what, client in clients:
        described = client.describe() if hasattr(client, "describe") else {}
        base_url = described.get("base_url")  # local embeddings have none
        if base_url and base_url not in seen:
            seen.add(base_url)
            key = client.probe_key() if isinstance(client, EndpointClient) else None
            found = await probe(described, what=what, key=key)
            if found is not None:
                _SERVER_SLOTS[str(base_url)] = found
            elif key is not None:
                _SERVER_SLOTS.pop(str(base_url), None)  # probed, and no llama.cpp server now


def known_server_slots() -> dict[str, LlamaServer]:
    """The llama.cpp servers an earlier probe in this process found, by base URL: what a run
    that does not probe follows."""
    return dict(_SERVER_SLOTS)


def follow_server_slots(
    judges: Iterable[Any], servers: Mapping[str, LlamaServer]
) -> dict[int, ServerSlots]:
    """How this run drives each judge endpoint that is one of these llama.cpp `servers` (by
    base URL, from :func:`known_server_slots`), by ``id(endpoint)``: as many requests at once as
    it has slots unless the user chose a concurrency, LOCAL_SERVER_TIMEOUT per attempt unless
    the user chose a timeout, every request fitted in a slot's context."""
    out: dict[int, ServerSlots] = {}
    for judge in judges:
        endpoint = judge.endpoint
        found = servers.get(endpoint.base_url)
        if found is None or id(endpoint) in out:
            continue
        concurrency = None if endpoint.limiter.concurrency_chosen else found.slots
        timeout = None if endpoint.timeout_chosen else max(endpoint.timeout, LOCAL_SERVER_TIMEOUT)
        out[id(endpoint)] = ServerSlots(found.slots, concurrency, timeout, found.context)
    return out


def run_gates(judges: Iterable[Any], followed: Mapping[int, ServerSlots]) -> dict[int, Slots]:
    """The run's own limit on each judge endpoint, by ``id(endpoint)``: the concurrency it
    drives the endpoint with (a followed llama.cpp server's, else the endpoint's limiter's).
    Its waiting requests go earliest row first, so with few slots rows finish in order; the
    limiter behind it is shared with other runs in arrival order, so no run waits on another's
    rows."""
    gates: dict[int, Slots] = {}
    for judge in judges:
        endpoint = judge.endpoint
        if id(endpoint) not in gates:
            server = followed.get(id(endpoint))
            limit = server.concurrency if server is not None else None
            gates[id(endpoint)] = Slots(limit or endpoint.limiter.max_concurrency)
    return gates


def _first_leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups; `exc` itself otherwise."""
    inner = getattr(exc, "exceptions", None)  # ExceptionGroup is Python 3.11+
    while isinstance(inner, (list, tuple)) and inner:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc
