"""The corpus a test set is generated from: chunks with ids.

Two inputs:

- a JSONL file of the user's own chunks, ``{"id": ..., "text": ...}`` a line: the ids are kept
  as they are, so that a generated item's ``reference_context_ids`` are the ids the user's
  retriever returns and the retrieval metrics score its ranking directly;
- a folder of text, Markdown and HTML files, cut at their headings into sections and each
  section into pieces of at most ``max_chars`` characters at paragraph boundaries. A chunk's id
  is ``<file path>#<heading slug>`` (``-2``, ``-3``... for a section's later pieces, and for a
  heading repeated in a file): it depends on where the text is, not on the run, so that chunking
  the same files again gives the same ids.
"""

from __future__ import annotations

import html.parser
import json
import re
from dataclasses import dataclass
from pathlib import Path

from rageval.errors import RagevalError

__all__ = ["Chunk", "CorpusError", "chunk_document", "load_corpus"]

#: the file types a folder is read for, by suffix
TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".html", ".htm"})
DEFAULT_MAX_CHARS = 1200
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


class CorpusError(RagevalError, ValueError):
    """The corpus cannot be read: the message names the file, line and field."""


@dataclass(frozen=True)
class Chunk:
    """One passage of the corpus: its id, text, the file (or JSONL line) it came from and the
    headings above it."""

    id: str
    text: str
    source: str
    heading: str = ""


def _slug(text: str) -> str:
    slug = re.sub(r"[^\w]+", "-", text.lower()).strip("-")
    return slug or "section"


class _HtmlText(html.parser.HTMLParser):
    """HTML as Markdown-ish text: headings become ``#`` lines, block elements end paragraphs,
    scripts and styles are dropped."""

    _BLOCKS = frozenset({"p", "div", "li", "br", "tr", "section", "article", "table", "ul"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(re.sub(r"\s+", " ", data))


def _sections(text: str) -> list[tuple[list[str], str]]:
    """(heading path, body) of each section of Markdown `text`, in order."""
    path: list[tuple[int, str]] = []
    out: list[tuple[list[str], str]] = []
    body: list[str] = []

    def close() -> None:
        if "".join(body).strip():
            out.append(([h for _, h in path], "\n".join(body).strip()))
        body.clear()

    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match is None:
            body.append(line)
            continue
        close()
        level = len(match.group(1))
        path = [(lv, h) for lv, h in path if lv < level] + [(level, match.group(2))]
    close()
    return out


def _pieces(body: str, max_chars: int) -> list[str]:
    """`body` cut at blank lines into pieces of at most `max_chars` (a longer paragraph is a
    piece of its own)."""
    pieces: list[str] = []
    current = ""
    for para in re.split(r"\n\s*\n", body):
        para = para.strip()
        if not para:
            continue
        if current and len(current) + 2 + len(para) > max_chars:
            pieces.append(current)
            current = para
        else:
            current = f"{current}\n\n{para}" if current else para
    if current:
        pieces.append(current)
    return pieces


def chunk_document(
    text: str, source: str, *, html: bool = False, max_chars: int = DEFAULT_MAX_CHARS
) -> list[Chunk]:
    """The chunks of one document, cut at its headings (see the module docstring).

    Args:
        text: the document's text (Markdown or plain text; HTML with `html`).
        source: the document's name, the first part of each chunk's id.
        html: read `text` as HTML.
        max_chars: the longest chunk, in characters (a longer paragraph stays whole).
    """
    if html:
        parser = _HtmlText()
        parser.feed(text)
        parser.close()
        text = "".join(parser.parts)
    seen: dict[str, int] = {}
    chunks = []
    for headings, body in _sections(text):
        base = _slug(headings[-1]) if headings else "top"
        for piece in _pieces(body, max_chars):
            seen[base] = seen.get(base, 0) + 1
            key = base if seen[base] == 1 else f"{base}-{seen[base]}"
            titled = f"{headings[-1]}\n\n{piece}" if headings else piece
            chunks.append(Chunk(f"{source}#{key}", titled, source, " > ".join(headings)))
    return chunks


def _read_jsonl(path: Path) -> list[Chunk]:
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorpusError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise CorpusError(f"{where}: a chunk is an object with 'id' and 'text'")
        ident, text = row.get("id"), row.get("text")
        if isinstance(ident, int) and not isinstance(ident, bool):
            ident = str(ident)
        if not isinstance(ident, str) or not ident.strip():
            raise CorpusError(f"{where}: field 'id' must be a non-empty string")
        if not isinstance(text, str) or not text.strip():
            raise CorpusError(f"{where}: field 'text' must be a non-empty string")
        if ident in seen:
            raise CorpusError(f"{where}: field 'id': {ident!r} is given twice")
        seen.add(ident)
        chunks.append(Chunk(ident, text.strip(), f"{path.name}:{number}"))
    return chunks


def load_corpus(path: str | Path, *, max_chars: int = DEFAULT_MAX_CHARS) -> list[Chunk]:
    """The chunks of `path`: a JSONL file of chunks, or a folder of documents.

    Args:
        path: a ``.jsonl`` file of ``{"id", "text"}`` objects, or a folder whose ``.md``,
            ``.markdown``, ``.txt``, ``.html`` and ``.htm`` files (in subfolders too) are
            chunked at their headings; ids are paths relative to the folder.
        max_chars: the longest chunk cut from a document, in characters.
    """
    path = Path(path)
    if path.is_file():
        if path.suffix != ".jsonl":
            raise CorpusError(f"{path}: give a folder of documents or a .jsonl file of chunks")
        chunks = _read_jsonl(path)
    elif path.is_dir():
        chunks = []
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            if file.suffix.lower() == ".pdf":
                raise CorpusError(f"{file}: PDF files are not read; convert them to text first")
            if file.suffix.lower() not in TEXT_SUFFIXES:
                continue
            text = file.read_text(encoding="utf-8", errors="replace")
            source = file.relative_to(path).as_posix()
            html = file.suffix.lower() in (".html", ".htm")
            chunks += chunk_document(text, source, html=html, max_chars=max_chars)
    else:
        raise CorpusError(f"{path}: no such file or folder")
    if not chunks:
        raise CorpusError(f"{path}: no text to generate from")
    return chunks
