"""MkDocs hook (mkdocs.yml `hooks:`): links from a docs page to a repository file outside
docs/ (`../benchmarks/RESULTS.md`, `../README.md`) are right on GitHub but have no page on
the site, where `mkdocs build --strict` would refuse them. On the site such a link goes to the
page that stands for the file (RESULTS.md's summary page, the home page), or, for a file with
no page, becomes its path as code; the Markdown on disk is not changed."""

from __future__ import annotations

import posixpath
import re
from typing import Any

#: repository file -> the site page that stands for it
PAGES = {
    "README.md": "index.md",
    "benchmarks/RESULTS.md": "results.md",
    "benchmarks/README.md": "results.md",
}
#: a Markdown link whose target climbs out of docs/: [text](../path#anchor)
_LINK = re.compile(r"\[([^\]\n]+)\]\(((?:\.\./)+[^)#\s]+)(#[^)\s]*)?\)")


def rewrite(markdown: str, page_path: str) -> str:
    """`markdown` of the docs page at `page_path` (relative to docs/) with its links to
    repository files outside docs/ replaced as the module docstring says.

    Args:
        markdown: the page's Markdown source.
        page_path: the page's path relative to docs/, with forward slashes.
    """
    here = posixpath.dirname(posixpath.join("docs", page_path))

    def replace(m: re.Match[str]) -> str:
        text, target = m.group(1), posixpath.normpath(posixpath.join(here, m.group(2)))
        if target.startswith("docs/"):  # a page of the site after all
            return m.group(0)
        page = PAGES.get(target)
        if page is None or page == page_path:  # no page for it, or this page stands for it
            return f"{text} (`{target}` in the repository)"
        return f"[{text}]({posixpath.relpath(page, posixpath.dirname(page_path) or '.')})"

    return _LINK.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """The MkDocs event: each page's Markdown before it is rendered."""
    return rewrite(markdown, page.file.src_uri)
