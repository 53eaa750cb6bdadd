"""The labelling page's web server: the standard library's, on 127.0.0.1 only.

Every request must carry the session's token (a random string printed in the URL, as Jupyter
does): the page's address has it as ``?token=``, the page's own requests send it in the
``X-Rageval-Token`` header. Several annotators may share one server (its one writer): each
opens the address with ``&annotator=NAME``, which the page's requests send in
``X-Rageval-Annotator``. A request without it, or with a ``Host`` other than the loopback
address the server listens on (a page elsewhere reaching it by DNS rebinding), is refused
(403). The page is one document, its script allowed by hash alone (Content-Security-Policy);
it builds every element from JSON with ``textContent``, as the report does.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from rageval.labelling._session import Session
from rageval.report._page import render_page as report_page

HOST = "127.0.0.1"
TOKEN_HEADER = "X-Rageval-Token"
ANNOTATOR_HEADER = "X-Rageval-Annotator"
#: an annotator's name: letters, digits and . _ @ -, at most 64 (it is written in every label)
_ANNOTATOR = re.compile(r"[\w.@-]{1,64}")
#: the largest request body read (a label and its note)
_MAX_BODY = 64 * 1024


class Action(BaseModel):
    """What the page asks: label the row it shows, skip it, or undo the last label or skip."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["label", "skip", "undo"]
    #: the row the page showed (a label or skip of any other row is refused: a stale page)
    id: str | None = None
    value: float | None = None
    note: str | None = None


def render_page() -> str:
    """The labelling page: its body in the report's page shell, stylesheet and script
    inlined; it may call its own server, and sends no referrer (the token is in its URL)."""
    return report_page(
        __package__,
        "page",
        title="rageval label",
        csp="connect-src 'self'; ",
        meta=("referrer", "no-referrer"),
    )


class LabellingServer(ThreadingHTTPServer):
    """Serves one :class:`Session` on 127.0.0.1 at `port` (0: a free one).

    Args:
        session: the labelling session.
        port: the port (0: a free one).
        token: the token requests must carry (None: a random one).
    """

    daemon_threads = True

    def __init__(self, session: Session, *, port: int = 0, token: str | None = None) -> None:
        super().__init__((HOST, port), _Handler)
        self.session = session
        self._sessions = {session.annotator: session}
        self.token = token or secrets.token_urlsafe(24)
        self.page = render_page().encode("utf-8")
        self.actions = threading.Lock()

    @property
    def url(self) -> str:
        """The page's address, token included."""
        return f"http://{HOST}:{self.server_port}/?token={self.token}"

    def session_for(self, annotator: str | None) -> Session | None:
        """The session of `annotator` (None: the server's own); None for a name that is not
        one (see :data:`_ANNOTATOR`).

        Args:
            annotator: the name the page sent, if any.
        """
        if annotator is None:
            return self.session
        if not _ANNOTATOR.fullmatch(annotator):
            return None
        with self.actions:
            if annotator not in self._sessions:
                self._sessions[annotator] = self.session.as_annotator(annotator)
            return self._sessions[annotator]

    def act(self, session: Session, action: Action) -> tuple[HTTPStatus, dict[str, Any]]:
        """Do `action` as `session`'s annotator and return the new state (409 with the state
        when the page was stale, 400 for a value off the scale).

        Args:
            session: the annotator's session.
            action: what the page asked.
        """
        with self.actions:  # one action at a time: a check and its write together
            if action.action == "undo":
                session.undo()
                return HTTPStatus.OK, session.state()
            current = session.next_row(session.standing())
            if action.id is None or action.id != current:
                return HTTPStatus.CONFLICT, {
                    **session.state(),
                    "error": "this row is no longer the next one (another tab labelled it?)",
                }
            try:
                if action.action == "skip":
                    session.skip(action.id)
                elif action.value is None:
                    raise ValueError("a label needs a value")
                else:
                    session.label(action.id, action.value, action.note)
            except ValueError as e:
                return HTTPStatus.BAD_REQUEST, {**session.state(), "error": str(e)}
            return HTTPStatus.OK, session.state()


class _Handler(BaseHTTPRequestHandler):
    server: LabellingServer
    server_version = "rageval-label"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the terminal shows the URL and the progress, not every request

    def _allowed(self) -> bool:
        url = urllib.parse.urlsplit(self.path)
        given = self.headers.get(TOKEN_HEADER) or next(
            iter(urllib.parse.parse_qs(url.query).get("token", [])), ""
        )
        hosts = {f"{HOST}:{self.server.server_port}", f"localhost:{self.server.server_port}"}
        if self.headers.get("Host") not in hosts:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.server.token.encode("utf-8"))

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")  # the token stays in this page
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json")

    def _refuse(self) -> None:
        self._send(HTTPStatus.FORBIDDEN, b"a rageval label page needs its token\n", "text/plain")

    def do_GET(self) -> None:
        if not self._allowed():
            return self._refuse()
        path = urllib.parse.urlsplit(self.path).path
        if path == "/":
            return self._send(HTTPStatus.OK, self.server.page, "text/html; charset=utf-8")
        if path == "/api/state":
            session = self._session()
            if session is None:
                return self._bad_annotator()
            with self.server.actions:
                return self._json(HTTPStatus.OK, session.state())
        self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        # the token comes in a header here, which a form on another site cannot send
        if not self._allowed() or not self.headers.get(TOKEN_HEADER):
            return self._refuse()
        if urllib.parse.urlsplit(self.path).path != "/api/action":
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            return self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"too large\n", "text/plain")
        try:
            action = Action.model_validate_json(self.rfile.read(length))
        except ValidationError as e:
            return self._json(HTTPStatus.BAD_REQUEST, {"error": str(e.errors()[0]["msg"])})
        session = self._session()
        if session is None:
            return self._bad_annotator()
        status, payload = self.server.act(session, action)
        self._json(status, payload)

    def _session(self) -> Session | None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        name = self.headers.get(ANNOTATOR_HEADER) or next(iter(query.get("annotator", [])), None)
        return self.server.session_for(name)

    def _bad_annotator(self) -> None:
        self._json(
            HTTPStatus.BAD_REQUEST,
            {"error": "an annotator's name is 1-64 letters, digits, '.', '_', '@' or '-'"},
        )


__all__ = ["ANNOTATOR_HEADER", "HOST", "TOKEN_HEADER", "Action", "LabellingServer", "render_page"]
