"""A scripted HTTP(S) server for what the emulator cannot produce: 5xx, throttling, HTTP 410, odd bodies."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    """One scripted answer: a JSON (or raw) body, or a chunked stream of watch events.

    ``delay`` holds the answer back (seconds) to make a client's read time out; ``cut`` drops the
    connection after the events instead of ending the stream properly.
    """

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] | None = None
    delay: float = 0.0
    cut: bool = False


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``Status`` object like the API server sends with errors."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }


@dataclass
class Seen:
    """A request the stub received (header names in lower case)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class StubServer:
    """Answers requests with the queued replies, in order (404 when the queue is empty)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                stub.requests.append(
                    Seen(
                        self.command,
                        url.path,
                        {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()},
                        {k.lower(): v for k, v in self.headers.items()},
                        json.loads(raw) if raw else None,
                    )
                )
                reply = (
                    stub.replies.popleft() if stub.replies else Reply(404, status_body(404, "NotFound", "x"))
                )
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.events is not None:
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for event in reply.events:
                        data = json.dumps(event).encode() + b"\n"
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    if not reply.cut:
                        self.wfile.write(b"0\r\n\r\n")
                    self.close_connection = True
                    return
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def do_PATCH(self) -> None:
                self._serve()

            def do_PUT(self) -> None:
                self._serve()

            def do_DELETE(self) -> None:
                self._serve()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the stub."""
        return f"{self.scheme}://127.0.0.1:{self.httpd.server_address[1]}"

    def queue(self, *replies: Reply) -> None:
        """Add replies to the script."""
        self.replies.extend(replies)

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
