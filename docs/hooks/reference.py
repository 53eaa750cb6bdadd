"""MkDocs hook (mkdocs.yml `hooks:`): the API reference pages list rageval's public names
themselves, so a name added to ``rageval/__init__.py`` is documented without editing a page.

A reference page holds a line ``<!-- public names from: rageval.samples rageval.errors -->``
(the modules of ``_EXPORTS``, the table of the names ``rageval`` exports) or
``<!-- public names from: * -->`` (every module no other page claims); on the site the line
becomes one mkdocstrings block (``::: rageval.NAME``) per name, in ``_EXPORTS``' order."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_CLAIM = re.compile(r"^<!-- public names from: (.+?) -->$", re.M)
#: a public function made by ``rageval._sync.synchronous`` from its coroutine function, which
#: mkdocstrings would show as an attribute and its value: ``evaluate = synchronous(aevaluate, ...``
_SYNCHRONOUS = re.compile(
    r'^(\w+) = synchronous\(\s*(\w+),\s*"\w+",\s*(?:"""(.*?)"""|"([^"]*)")', re.M | re.S
)


def exports() -> dict[str, str]:
    """name -> defining module of every public name, read from ``rageval/__init__.py``
    without importing it."""
    tree = ast.parse((ROOT / "src" / "rageval" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS":
            assert node.value is not None
            table: dict[str, str] = ast.literal_eval(node.value)
            return table
    raise LookupError("rageval/__init__.py has no _EXPORTS table")


def synchronous_forms() -> dict[str, tuple[str, str]]:
    """name -> (its coroutine function's name, its docstring on one line) of each function
    the package makes with ``synchronous``."""
    found = {}
    for module in sorted((ROOT / "src" / "rageval").rglob("*.py")):
        for m in _SYNCHRONOUS.finditer(module.read_text(encoding="utf-8")):
            found[m.group(1)] = (m.group(2), " ".join((m.group(3) or m.group(4)).split()))
    return found


def block(name: str, synchronous: dict[str, tuple[str, str]]) -> str:
    """The Markdown that documents the public name `name`.

    Args:
        name: a name of ``rageval.__all__``.
        synchronous: :func:`synchronous_forms`.
    """
    if name not in synchronous:
        return f"::: rageval.{name}"
    coroutine, doc = synchronous[name]
    # its docstring opens "Synchronous :func:`aevaluate`.", which the link below says
    rest = re.sub(r"^Synchronous :func:`\w+`\.\s*", "", doc)
    return (
        f"## `{name}` {{ #rageval.{name} }}\n\n`{name}(...)`: the synchronous form of "
        f"[`{coroutine}`](#rageval.{coroutine}), with the same arguments and result. {rest}"
    )


def claims(reference: Path) -> dict[str, list[str]]:
    """page file name -> the modules its claim line names, for the pages in `reference`.

    Args:
        reference: the directory of the reference pages.
    """
    found = {}
    for page in sorted(reference.glob("*.md")):
        m = _CLAIM.search(page.read_text(encoding="utf-8"))
        if m:
            found[page.name] = m.group(1).split()
    return found


def names_by_page(reference: Path) -> dict[str, list[str]]:
    """page file name -> the public names it documents: each name on exactly one page.

    Args:
        reference: the directory of the reference pages.
    """
    pages = claims(reference)
    named = {module for modules in pages.values() for module in modules if module != "*"}
    return {
        page: [
            name
            for name, module in exports().items()
            if module in modules or ("*" in modules and module not in named)
        ]
        for page, modules in pages.items()
    }


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    """The MkDocs event: a reference page's claim line replaced by its names' blocks."""
    if not _CLAIM.search(markdown):
        return markdown
    reference = Path(config["docs_dir"]) / "reference"
    names = names_by_page(reference)[Path(page.file.src_uri).name]
    synchronous = synchronous_forms()
    blocks = "\n\n".join(block(name, synchronous) for name in names)
    return _CLAIM.sub(lambda _: blocks, markdown)


#: a Sphinx role before inline code, as the docstrings write cross-references
#: (:func:`rageval.evaluate`, :class:`~rageval.runner.RunSpec`), once rendered to HTML
_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):<code>~?")


def on_page_content(html: str, page: Any, **_: Any) -> str:
    """The MkDocs event: each page's HTML. The docstrings' Sphinx roles, which Markdown does
    not know, are shown as the plain code they mark (on the reference pages only)."""
    if not page.file.src_uri.startswith("reference/"):
        return html
    return _ROLE.sub("<code>", html)
