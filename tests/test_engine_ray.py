"""The Ray engine, on a real Ray inside a loopback-only network namespace (marked ``ray``: run by
the CI's ray job, ``.ci/ray-tests``; see tests/conftest.py).

One Ray (2 CPUs, no dashboard) serves the module; tests that need a Ray of their own (the CLI
joining a cluster, two nodes) start it in a child process or namespace.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import (
    REPO,
    assert_ray_not_imported,
    handle,
    make_judge,
    rows,
    sample_id_of,
    write_jsonl,
)
from rageval._client._cache import merge_shards
from rageval.judge import FatalJudgeError, Judge
from rageval.log import read_lines
from rageval.metrics.base import registered_metrics, scores_conversations
from rageval.results import compare, load_run
from rageval.runner import evaluate
from rageval.runner._schedule import spread
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, FaultPlan, RandomJudge
from synthetic_data import make_conversation

pytestmark = pytest.mark.ray

JUDGE_METRICS = ["faithfulness", "context_recall", "context_precision", "answer_accuracy"]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    import ray

    ray.init("local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             _node_ip_address="127.0.0.1")  # fmt: skip
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


def wait_for_exit(pid: int, timeout: float = 120.0) -> None:
    """Wait until process `pid` has ended (an actor Ray is still tearing down)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError(f"process {pid} still runs {timeout:g} s after the run ended")


def actors_and_nodes(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    found = re.findall(r"scored by (\d+) actors on (\d+) nodes", caplog.text)
    assert found, "the engine reports the actors that scored"
    return int(found[-1][0]), int(found[-1][1])


def logged_ids(run_dir: Path) -> list[str]:
    return [entry.line.id for entry in read_lines(run_dir / "results.jsonl")]


# ---------------------------------------------------------------------- same results


def test_ray_is_installed_and_still_not_imported_by_rageval() -> None:
    import importlib.util

    assert importlib.util.find_spec("ray.data") is not None
    assert_ray_not_imported()


def test_ray_engine_gives_the_local_engines_results(
    ray_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rageval.ray")
    data = rows(48)
    with FakeOpenAI(handle, latency=0.02) as srv:
        judge = make_judge(srv)
        local = evaluate(data, JUDGE_METRICS, llm=judge, run_dir=tmp_path / "local", progress=False)
        asked_local = len(srv.chat_requests)
        on_ray = evaluate(data, JUDGE_METRICS, llm=judge, run_dir=tmp_path / "ray",
                          engine="ray", progress=False)  # fmt: skip
        asked_ray = len(srv.chat_requests) - asked_local
        assert srv.handler_errors == []
    assert asked_ray == asked_local
    assert actors_and_nodes(caplog)[0] == 2  # one per core, a quarter CPU each
    for metric in JUDGE_METRICS:
        assert on_ray[metric] == local[metric]
        assert on_ray.statuses(metric) == local.statuses(metric)
        assert on_ray.summary()[metric].usage == local.summary()[metric].usage
    assert on_ray.usage == local.usage
    assert judge.usage.total.requests == asked_local + asked_ray  # booked in the driver's judge
    assert sorted(logged_ids(tmp_path / "ray")) == sorted(r["id"] for r in data)
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["engine"] == "ray"
    # the run directory is the local engine's: read back, reported and compared the same way
    assert (tmp_path / "ray" / "report.html").exists()
    again = load_run(tmp_path / "ray")
    assert again[JUDGE_METRICS[0]] == local[JUDGE_METRICS[0]]
    for c in compare(load_run(tmp_path / "local"), again):
        assert c.diff.n_pairs == len(data) and c.diff.mean_diff == 0
    first = on_ray.sample(data[0]["id"])
    assert (
        first.cells["faithfulness"].evidence
        == local.sample(data[0]["id"]).cells["faithfulness"].evidence
    )


def test_repeats_are_scored_in_the_actors(ray_address: str) -> None:
    data = rows(12)
    with FakeOpenAI(RandomJudge()) as srv:
        local = evaluate(data, JUDGE_METRICS, llm=make_judge(srv), repeats=2, progress=False)
        asked_local = len(srv.chat_requests)
        on_ray = evaluate(data, JUDGE_METRICS, llm=make_judge(srv), repeats=2, engine="ray",
                          progress=False)  # fmt: skip
        asked_ray = len(srv.chat_requests) - asked_local
    assert asked_ray == asked_local
    for metric in JUDGE_METRICS:
        assert on_ray[metric] == local[metric]


def test_local_embeddings_run_in_the_actors(
    ray_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rageval.ray")
    metrics = ["answer_relevancy", "semantic_similarity"]
    data = rows(12)
    with FakeOpenAI(handle) as srv:
        local = evaluate(data, metrics, llm=make_judge(srv), progress=False)
        on_ray = evaluate(data, metrics, llm=make_judge(srv), engine="ray", progress=False)
    assert actors_and_nodes(caplog)[0] == 1  # a whole CPU each, and one CPU left free
    for metric in metrics:
        assert on_ray.statuses(metric) == ["ok"] * len(data)
        assert on_ray[metric] == local[metric]  # the local model gives the same bits


def test_remote_embeddings_are_booked_in_the_run_log(ray_address: str, tmp_path: Path) -> None:
    from rageval.embeddings.openai import OpenAIEmbeddings

    metrics = ["answer_relevancy", "semantic_similarity"]
    data = rows(20)
    with FakeOpenAI(handle) as srv:

        def embedder() -> OpenAIEmbeddings:
            return OpenAIEmbeddings("embed-model", base_url=srv.base_url, api_key=FAKE_API_KEY,
                                    cache=False, batch_size=8)  # fmt: skip

        local = evaluate(data, metrics, llm=make_judge(srv), embeddings=embedder(), progress=False)
        before = len(srv.embedding_requests)
        on_ray = evaluate(data, metrics, llm=make_judge(srv), embeddings=embedder(),
                          run_dir=tmp_path / "run", engine="ray", progress=False)  # fmt: skip
        sent = len(srv.embedding_requests) - before
    for metric in metrics:
        assert on_ray[metric] == pytest.approx(local[metric], abs=1e-9)
    # every embeddings request the actors sent is booked once: in the result, and in the log
    assert sent > 0
    assert on_ray.embeddings_usage.requests == sent
    assert load_run(tmp_path / "run").embeddings_usage.requests == sent


def test_a_rerun_finds_everything_in_the_merged_cache_shards(
    ray_address: str, tmp_path: Path, rageval_cache_dir: Path
) -> None:
    data = rows(24)
    with FakeOpenAI(handle) as srv:
        first = evaluate(data, JUDGE_METRICS, llm=make_judge(srv, cache=True), engine="ray",
                         progress=False)  # fmt: skip
        asked = len(srv.chat_requests)
        assert asked > 0
        # merged, then gone: a shard outlives the run only while its actor's process is still
        # exiting (the engine waits MERGE_WAIT_S for that, which a loaded machine can exceed);
        # its rows were copied all the same, and the next merge deletes it once its writer ended
        for shard in (rageval_cache_dir / "shards").glob("*.sqlite3"):
            wait_for_exit(int(shard.name.split(".")[1]))
        merge_shards(rageval_cache_dir)
        assert not list((rageval_cache_dir / "shards").glob("*.sqlite3"))
        second = evaluate(data, JUDGE_METRICS, llm=make_judge(srv, cache=True), engine="ray",
                          progress=False)  # fmt: skip
        local = evaluate(data, JUDGE_METRICS, llm=make_judge(srv, cache=True), progress=False)
        assert len(srv.chat_requests) == asked, "both re-runs were answered by the cache"
    for metric in JUDGE_METRICS:
        assert second[metric] == first[metric] == local[metric]
    assert second.usage.requests == 0 and second.usage.cache_hits > 0


# ---------------------------------------------------------------------- judges that misbehave
# the random judge answers within the schema sent, seeded by the request: both engines get the
# same replies


def test_a_random_judge_gives_both_engines_the_same_cells(ray_address: str) -> None:
    data = rows(30)
    with FakeOpenAI(RandomJudge()) as srv:
        local = evaluate(data, JUDGE_METRICS, llm=make_judge(srv), progress=False)
        on_ray = evaluate(data, JUDGE_METRICS, llm=make_judge(srv), engine="ray", progress=False)
    for metric in JUDGE_METRICS:
        assert on_ray[metric] == local[metric]
        assert on_ray.statuses(metric) == local.statuses(metric)
        for a, b in zip(on_ray.cells(metric), local.cells(metric), strict=True):
            assert a is not None and b is not None and a.cause == b.cause


def test_conversations_get_the_local_engines_cells_on_ray(ray_address: str, tmp_path: Path) -> None:
    """Every conversation metric, judge and deterministic, with the local embedding model in
    the actors: each cell (value, status, cause, per-turn evidence) and the requests sent are
    the local engine's."""
    metrics = sorted(n for n, cls in registered_metrics().items() if scores_conversations(cls))
    data = [make_conversation(i) for i in range(10)]
    # a judge of its own per engine: at temperature > 0 (turn_answer_relevancy's questions)
    # the random judge draws anew for a request it has answered before
    with FakeOpenAI(RandomJudge(seed=5)) as srv:
        local = evaluate(data, metrics, llm=make_judge(srv), progress=False)
        asked_local = len(srv.chat_requests)
    with FakeOpenAI(RandomJudge(seed=5)) as srv:
        on_ray = evaluate(data, metrics, llm=make_judge(srv), run_dir=tmp_path / "ray",
                          engine="ray", progress=False)  # fmt: skip
        asked_ray = len(srv.chat_requests)
        assert srv.handler_errors == []
    assert asked_ray == asked_local
    assert sorted(logged_ids(tmp_path / "ray")) == sorted(r["id"] for r in data)
    for metric in metrics:
        assert on_ray.statuses(metric) == local.statuses(metric), metric
        assert "ok" in on_ray.statuses(metric), metric
        assert on_ray[metric] == local[metric], metric
        for a, b in zip(on_ray.cells(metric), local.cells(metric), strict=True):
            assert a is not None and b is not None
            assert (a.cause, a.reason, dict(a.evidence)) == (b.cause, b.reason, dict(b.evidence))
    # read back from the Ray run's directory, the conversations are whole again
    again = load_run(tmp_path / "ray")
    for metric in metrics:
        assert again[metric] == local[metric], metric
    assert again.sample(data[0]["id"]).cells["turn_faithfulness"].evidence["turns"]


def test_injected_faults_leave_every_row_once_with_a_value_or_a_cause(
    ray_address: str, tmp_path: Path
) -> None:
    data = rows(30)
    faults = FaultPlan(0.25, [Fault.rate_limit(0.05), Fault.status(500), Fault.drop(),
                              Fault.status(503)], seed=7)  # fmt: skip
    with FakeOpenAI(RandomJudge(), faults=faults) as srv:
        result = evaluate(data, JUDGE_METRICS, llm=make_judge(srv, max_retries=2, timeout=5),
                          run_dir=tmp_path / "run", engine="ray", progress=False)  # fmt: skip
        sent = len(srv.chat_requests)
        assert faults.injected, "faults were injected"
    assert sorted(logged_ids(tmp_path / "run")) == sorted(r["id"] for r in data)
    for metric in JUDGE_METRICS:
        for cell in result.cells(metric):
            assert cell is not None
            if cell.status == "ok":
                assert cell.value is not None and math.isfinite(cell.value)
            else:
                assert cell.status == "not_measured" and cell.cause
    # every request the server saw (failed ones and retries included) is booked in the usage
    assert result.usage.requests == sent


def test_a_fatal_judge_error_stops_the_ray_run_and_keeps_what_finished(
    ray_address: str, tmp_path: Path
) -> None:
    with FakeOpenAI(handle, api_key="sk-the-right-key") as srv:
        judge = Judge("test-model", base_url=srv.base_url, api_key="sk-wrong", cache=False)
        with pytest.raises(FatalJudgeError, match="rejected the API key"):
            # no endpoint check first: the refusal comes to the actors, in the middle of the run
            evaluate(rows(16), JUDGE_METRICS, llm=judge, run_dir=tmp_path / "run",
                     engine="ray", progress=False, probe=False)  # fmt: skip
    # as with the local engine, the stopped run's directory says how far it got
    assert (tmp_path / "run" / "manifest.json").exists()
    stopped = load_run(tmp_path / "run")
    assert stopped.n_finished < 16
    assert (tmp_path / "run" / "summary.json").exists()


# ---------------------------------------------------------------------- limits and endpoints


def test_a_rate_limit_holds_for_all_actors_together(
    ray_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rageval.ray")
    rpm = 300  # 5 a second for the whole job
    with FakeOpenAI(handle) as srv:
        judge = make_judge(srv, requests_per_minute=rpm)
        evaluate(rows(40), ["context_precision"], llm=judge, engine="ray", ray_actors=2,
                 progress=False)  # fmt: skip
        starts = sorted(r.started for r in srv.chat_requests)
    assert actors_and_nodes(caplog)[0] == 2
    assert len(starts) == 40
    step = (60 + 0.5) / rpm
    # k consecutive requests span at least k steps, less what one late send can take away: a
    # request that reaches the server late (a busy machine delays a send after its turn, by
    # 0.28 s in a stressed CI run) shortens the window it opens. A limit held per actor and
    # not for all of them (the fault this guards against) would halve every span: 2 s for 20
    # requests where at least 4.03 - 1 are required. That the limit is used, not wasted, is a
    # rate reached: measured (benchmarks/archive/RESULTS-2026-12.md, "Ray engine"), not here.
    for k in (20, 39):
        assert min(b - a for a, b in zip(starts, starts[k:], strict=False)) >= k * step - 1.0


def test_rows_spread_over_endpoints_on_ray(ray_address: str) -> None:
    data = rows(24)
    with FakeOpenAI(handle) as one, FakeOpenAI(handle) as two, FakeOpenAI(handle) as alone:
        spread_out = evaluate(data, JUDGE_METRICS, llm=[make_judge(one), make_judge(two)],
                              engine="ray", progress=False)  # fmt: skip
        single = evaluate(data, JUDGE_METRICS, llm=make_judge(alone), progress=False)
        for index, server in enumerate((one, two)):
            asked = {sample_id_of(r) for r in server.chat_requests}
            assert asked == {r["id"] for r in data if spread(r["id"], 2) == index}
    for metric in JUDGE_METRICS:
        assert spread_out[metric] == single[metric]


# ---------------------------------------------------------------------- the command line


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rageval", "evaluate", *args]


def test_kill_9_of_the_driver_then_resume_on_ray(ray_address: str, tmp_path: Path) -> None:
    data = rows(60)
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, data)
    run = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": FAKE_API_KEY,
           "RAGEVAL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO / "src")}  # fmt: skip
    with FakeOpenAI(handle, latency=0.15) as srv:
        args = [str(data_path), *(a for m in JUDGE_METRICS for a in ("-m", m)),
                "--llm", "test-model", "--base-url", srv.base_url, "--concurrency", "4",
                "--engine", "ray", "--ray-address", ray_address, "-q"]  # fmt: skip
        proc = subprocess.Popen([*cli(*args), "-o", str(run)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        log = run / "results.jsonl"
        deadline = time.monotonic() + 240
        while not log.exists() or log.read_bytes().count(b"\n") < 8:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        finished = set(logged_ids(run))
        assert 8 <= len(finished) < len(data), "the kill must land mid-run"
        resumed = subprocess.run([*cli(*args), "--resume", str(run)], env=env,
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        asked_in_all = len(srv.chat_requests)
    ids = logged_ids(run)
    assert sorted(ids) == sorted(r["id"] for r in data), "every row once, none twice"
    # an uninterrupted run asks 5 requests a row (4 metrics and the shared statements)
    assert asked_in_all <= 1.25 * 5 * len(data)


def test_two_node_cluster_through_ray_address(tmp_path: Path) -> None:
    data = rows(24)
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, data)
    # no CPU on the head node: every actor runs on the second node, away from the driver
    env = {**os.environ, "RAGEVAL_CACHE_DIR": str(tmp_path / "cache"), "HEAD_CPUS": "0",
           "NODE_CPUS": "2", "PYTHON": sys.executable}  # fmt: skip
    done = subprocess.run(
        [str(REPO / ".ci" / "ray-two-nodes"), str(data_path), str(tmp_path / "run"),
         "-m", "faithfulness", "-m", "context_recall"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cluster: 2 nodes, 2.0 CPUs" in done.stdout
    assert "all on 127.0.0.1" in done.stdout
    assert re.search(r"scored by [12] actors on 1 nodes", done.stderr), done.stderr
    with FakeOpenAI(handle) as srv:
        local = evaluate(data, ["faithfulness", "context_recall"], llm=make_judge(srv),
                         progress=False)  # fmt: skip
    two_nodes = load_run(tmp_path / "run")
    for metric in ("faithfulness", "context_recall"):
        assert two_nodes[metric] == local[metric]


@pytest.mark.parametrize(
    ("join", "connected_to"),
    [("env", "127.0.0.1:6390"), ("none", "a Ray of its own")],
)
def test_without_ray_address_a_ray_job_joins_its_cluster_and_a_run_beside_one_starts_its_own(
    join: str, connected_to: str, tmp_path: Path
) -> None:
    # "env": RAY_ADDRESS names the cluster, as inside a Ray job; "none": a `ray start` cluster
    # runs on the machine and nothing names it (ray.init() would join it, then refuse the CPUs
    # rageval asks of a Ray of its own)
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, rows(8))
    # a cluster of one node (1 CPU) is enough to be joined or stood beside
    env = {**os.environ, "RAGEVAL_CACHE_DIR": str(tmp_path / "cache"), "JOIN": join,
           "HEAD_CPUS": "1", "NODE_CPUS": "0", "PYTHON": sys.executable}  # fmt: skip
    done = subprocess.run(
        [str(REPO / ".ci" / "ray-two-nodes"), str(data_path), str(tmp_path / "run"),
         "-m", "faithfulness"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ray: connected to {connected_to} in" in done.stderr, done.stderr
    assert sorted(logged_ids(tmp_path / "run")) == sorted(r["id"] for r in rows(8))


def test_the_actors_skip_the_cells_the_drivers_plan_skips(ray_address: str) -> None:
    data = rows(6)
    del data[1]["reference"]  # context_recall's cell is skipped: scored by an actor
    data[2]["retrieved_contexts"] = "one context as a string"  # a bad field: kept local
    with FakeOpenAI(handle) as srv:
        local = evaluate(data, JUDGE_METRICS, llm=make_judge(srv), on_invalid="skip",
                         progress=False)  # fmt: skip
        on_ray = evaluate(data, JUDGE_METRICS, llm=make_judge(srv), on_invalid="skip",
                          engine="ray", progress=False)  # fmt: skip
    for row in range(len(data)):
        assert on_ray.sample(row).cells == local.sample(row).cells, row
    assert on_ray.sample(1).cells["context_recall"].cause_kind == "missing_field"
    assert on_ray.sample(2).cells["faithfulness"].cause_kind == "invalid_row"


def test_the_ray_rageval_starts_runs_its_workers_at_the_callers_priority() -> None:
    # Ray's default (nice 15) starved the actors 25-fold on a machine with other work
    code = (
        "import os, ray\n"
        "from rageval.runner.engines._ray import _connect\n"
        "_connect(None)\n"
        "niceness = ray.remote(lambda: os.nice(0))\n"
        "print(os.nice(0), ray.get(niceness.remote()))\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_worker_niceness"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    caller, worker = done.stdout.split()
    assert worker == caller, done.stdout
    # a user's own setting is kept
    env["RAY_worker_niceness"] = "7"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == str(int(caller) + 7), done.stdout
