"""The shell of rageval's two HTML pages, the run report and the labelling page: one document
with its stylesheet and script inlined, under a Content-Security-Policy that runs the page's
own script (allowed by its hash) and nothing else. Each page gives its body, its title, one
meta tag and the policy's extra directives; the shell (shell.html) is written once here.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from importlib.resources import files

__all__ = ["render_page"]

_PLACEHOLDER_RE = re.compile(r"\{\{([A-Z_]+)\}\}")


def render_page(
    package: str,
    stem: str,
    *,
    title: str,
    csp: str,
    meta: tuple[str, str],
    values: Mapping[str, str] | None = None,
) -> str:
    """The page of `package`'s files `stem`.html (its body), `stem`.css and `stem`.js, as one
    HTML document.

    Args:
        package: the package holding the page's files.
        stem: their name without its suffix.
        title: the document's title.
        csp: the policy's directives beyond the shell's, each ending in "; " (e.g. a page
            that calls its server: "connect-src 'self'; ").
        meta: the page's own meta tag, as (name, content).
        values: text for the body's own ``{{NAME}}`` placeholders (inserted as given).
    """
    assets = files(package)
    code = assets.joinpath(f"{stem}.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii")
    own = dict(values or {})
    # one pass over each template only: text inserted for a placeholder is never rescanned
    text = _PLACEHOLDER_RE.sub(
        lambda m: own[m.group(1)],
        assets.joinpath(f"{stem}.html").read_text(encoding="utf-8").rstrip("\n"),
    )
    shell = files(__package__).joinpath("shell.html").read_text(encoding="utf-8")
    fill = {
        "CSP": csp,
        "SCRIPT_HASH": f"sha256-{digest}",
        "META_NAME": meta[0],
        "META_CONTENT": meta[1],
        "TITLE": title,
        "STYLE": assets.joinpath(f"{stem}.css").read_text(encoding="utf-8"),
        "BODY": text,
        "SCRIPT": code,
    }
    return _PLACEHOLDER_RE.sub(lambda m: fill[m.group(1)], shell)
