"""Shared plumbing of the benchmark scripts: the judge server process, the driver processes,
the per-run row and the markdown tables."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work"
RAGAS_VENV = WORK / "ragas-venv"
RAGAS_PYTHON = RAGAS_VENV / "bin" / "python"
#: what the ragas venv holds (``import ragas`` 0.4.3 fails with langchain-community 0.4.2)
RAGAS_REQUIREMENTS = ("ragas==0.4.3", "langchain-community==0.4.1", "langchain-openai")
EIGHT = (
    "answer_relevancy",
    "answer_correctness",
    "faithfulness",
    "context_precision",
    "context_recall",
    "answer_accuracy",
    "context_relevance",
    "response_groundedness",
)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "RAGAS_DO_NOT_TRACK": "true",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "LANGCHAIN_TRACING_V2": "false",
            "PYTHONPATH": str(ROOT / "src"),
        }
    )
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAGEVAL_LLM", "RAGEVAL_BASE_URL"):
        env.pop(key, None)
    return env


def ensure_ragas_venv() -> Path:
    """The ragas virtual environment's python, the venv made on first use: ragas is never a
    dependency of rageval nor installed beside it (the drivers talk to it as a subprocess)."""
    done = RAGAS_VENV / ".installed"
    if not done.exists():
        print(f"installing {' '.join(RAGAS_REQUIREMENTS)} into {RAGAS_VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(RAGAS_VENV)], check=True)
        pip = [str(RAGAS_PYTHON), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)  # pip 23's resolver backtracks
        subprocess.run([*pip, *RAGAS_REQUIREMENTS], check=True)
        done.write_text("\n".join(RAGAS_REQUIREMENTS) + "\n")
    return RAGAS_PYTHON


_Server = TypeVar("_Server", bound="CountingServer")


class CountingServer:
    """A server script in its own process that prints its base URL on its first stdout line
    and answers ``stats`` / ``reset`` / ``quit`` on stdin (``judge_server.py``,
    ``metered_proxy.py``)."""

    def __init__(self, cmd: Sequence[str]) -> None:
        self.proc = subprocess.Popen(
            list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env()
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.close()
            raise RuntimeError(f"{cmd[1]} did not start (got {self.base_url!r})")

    def _command(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def stats(self) -> dict[str, Any]:
        return self._command("stats")

    def reset(self) -> dict[str, Any]:
        return self._command("reset")

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self: _Server) -> _Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JudgeServer(CountingServer):
    """``judge_server.py``: the fake judge, with its counters."""

    def __init__(
        self,
        latency_ms: float,
        *,
        forget_every: float = 0.0,
        judge: str = "synthetic",
        fault_rate: float = 0.0,
        port: int = 0,
    ) -> None:
        cmd = [sys.executable, str(HERE / "judge_server.py"), "--latency-ms", str(latency_ms)]
        cmd += ["--judge", judge, "--fault-rate", str(fault_rate), "--port", str(port)]
        if forget_every:
            cmd += ["--forget-every", str(forget_every)]
        self.latency_ms = latency_ms
        super().__init__(cmd)

    def timeline(self) -> list[list[Any]]:
        """[start, end, path] per request since the last reset."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("timeline\n")
        self.proc.stdin.flush()
        spans: list[list[Any]] = json.loads(self.proc.stdout.readline())
        return spans


class MeteredProxy(CountingServer):
    """``metered_proxy.py`` in front of a llama-server (its root URL, no ``/v1``): what the
    server computed for the requests since the last reset (tokens, its own milliseconds)."""

    def __init__(self, upstream: str) -> None:
        super().__init__([sys.executable, str(HERE / "metered_proxy.py"), "--upstream", upstream])


def run_driver(cmd: Sequence[str], timeout: float = 7200) -> dict[str, Any]:
    """Run a driver process; its last stdout line is its JSON result."""
    proc = subprocess.run(
        list(cmd), capture_output=True, text=True, env=child_env(), timeout=timeout, cwd=ROOT
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"driver failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-4000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    # warnings worth reporting (e.g. ragas' "LLM returned 1 generations instead of 3")
    result["stderr_lines"] = len([ln for ln in proc.stderr.splitlines() if ln.strip()])
    result["stderr_tail"] = proc.stderr[-600:]
    # ragas logs why a cell is NaN as "Exception raised in Job[3]: LLMDidNotFinishException(...)"
    result["job_exceptions"] = dict(Counter(_RAGAS_JOB_EXCEPTION.findall(proc.stderr)))
    return result


_RAGAS_JOB_EXCEPTION = re.compile(r"Exception raised in Job\[\d+\]: (\w+)")


def rageval_cmd(
    base_url: str | None,
    data: str,
    metrics: Sequence[str],
    cache_dir: Path,
    *,
    run_dir: Path | None = None,
    resume: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    cmd = [
        sys.executable,
        str(HERE / "rageval_driver.py"),
        "--data",
        data,
        "--cache-dir",
        str(cache_dir),
        "--metrics",
        *metrics,
    ]
    if base_url:
        cmd += ["--base-url", base_url]
    if run_dir is not None:
        cmd += ["--run-dir", str(run_dir)]
    if resume:
        cmd.append("--resume")
    return [*cmd, *extra]


def ragas_cmd(
    base_url: str, data: str, metrics: Sequence[str], extra: Sequence[str] = ()
) -> list[str]:
    return [
        str(RAGAS_PYTHON),
        str(HERE / "ragas_driver.py"),
        "--base-url",
        base_url,
        "--data",
        data,
        "--metrics",
        *metrics,
        *extra,
    ]


class Scratch:
    """A fresh temporary directory per run (request cache, run dir), removed afterwards."""

    def __init__(self) -> None:
        WORK.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix="run-", dir=WORK))

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@dataclass
class Row:
    """One measured run, normalised per sample / per request."""

    tool: str
    metrics: str
    samples: int
    latency_ms: float
    wall_s: float
    cpu_s: float
    maxrss_mb: float
    server: dict[str, Any]
    scores: dict[str, Any]
    load: float

    @property
    def requests(self) -> int:
        return int(self.server["chat_requests"])

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.wall_s

    @property
    def http_requests(self) -> int:
        return self.requests + int(self.server.get("embedding_requests", 0))

    @property
    def cpu_ms_per_request(self) -> float | None:
        """Client CPU per judge (chat) request, embedding calls included in the CPU."""
        return 1000 * self.cpu_s / self.requests if self.requests else None

    @property
    def cpu_ms_per_http_request(self) -> float | None:
        """Client CPU per HTTP request of either kind (chat or embeddings)."""
        return 1000 * self.cpu_s / self.http_requests if self.http_requests else None

    def per_sample(self, key: str) -> float:
        return float(self.server[key]) / self.samples

    @property
    def latency_limit_s(self) -> float:
        """requests × latency / 16: the wall time 16 always-busy request slots would need
        (embedding requests carry the latency too, so they count)."""
        return self.http_requests * self.latency_ms / 1000 / 16

    @property
    def measured_share(self) -> float:
        """Cells with a value / all cells."""
        cells = self.samples * max(1, len(self.scores))
        return 1 - self.unmeasured / cells

    @property
    def unmeasured(self) -> int:
        """Cells without a value: NaN (ragas) or not measured / skipped (rageval)."""
        out = 0
        for s in self.scores.values():
            out += int(s.get("nan", 0)) + int(s.get("not_measured", 0)) + int(s.get("skipped", 0))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "metrics": self.metrics,
            "samples": self.samples,
            "latency_ms": self.latency_ms,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "maxrss_mb": self.maxrss_mb,
            "server": self.server,
            "scores": self.scores,
            "load": self.load,
        }


_VENV_TOOLING = ("pip", "setuptools", "pkg_resources", "_distutils_hack", "distutils")


@dataclass
class SitePackages:
    """Sum of file sizes in a virtualenv's site-packages, by top-level package (bytes)."""

    sizes: dict[str, int]
    bytecode: dict[str, int]
    python: str

    @classmethod
    def measure(cls, venv: Path) -> SitePackages:
        site = next((venv / "lib").glob("python3*/site-packages"))
        sizes: dict[str, int] = {}
        bytecode: dict[str, int] = {}
        for path in site.rglob("*"):
            if not path.is_file():
                continue
            key = path.relative_to(site).parts[0].split("-")[0].split(".")[0].lower()
            sizes[key] = sizes.get(key, 0) + path.stat().st_size
            if "__pycache__" in path.parts:
                bytecode[key] = bytecode.get(key, 0) + path.stat().st_size
        return cls(sizes, bytecode, site.parent.name.removeprefix("python"))

    @property
    def total(self) -> int:
        return sum(self.sizes.values())

    @property
    def ours(self) -> dict[str, int]:
        """Without pip and setuptools, which every virtualenv has."""
        return {k: v for k, v in self.sizes.items() if k not in _VENV_TOOLING}

    @property
    def ours_total(self) -> int:
        return sum(self.ours.values())

    @property
    def ours_bytecode(self) -> int:
        return sum(v for k, v in self.bytecode.items() if k not in _VENV_TOOLING)


def pinned_versions(venv: Path, names: Sequence[str]) -> list[str]:
    """``name==version`` of the packages `names` installed in `venv`."""
    freeze = [str(venv / "bin" / "python"), "-m", "pip", "freeze"]
    frozen = subprocess.run(freeze, check=True, capture_output=True, text=True).stdout
    return [line for line in frozen.split() if line.split("==")[0].lower() in names]


def load_average() -> float:
    return os.getloadavg()[0]


def fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def run_subcommand(
    commands: Mapping[str, tuple[Callable[[list[str]], int], str]],
    doc: str | None,
    argv: list[str] | None = None,
) -> int:
    """The entry point of a benchmark made of subcommands: run the one ``argv``'s first word
    names with the rest of it; without one, print the module's ``doc`` (which lists them) and
    return 2."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in commands:
        print(doc)
        return 2
    command, _ = commands[args[0]]
    return command(args[1:])
