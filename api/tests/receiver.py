"""A webhook receiver on loopback for the tests: an http.server in a thread that keeps what it got and
answers with the codes it is told, checking signatures as the docs' example receiver does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from api.signing import HEADER, verify


class Receiver(ThreadingHTTPServer):
    """``answers``: the status codes of the next requests, in turn (then 200); ``got``: each request's
    headers, raw body and parsed JSON, in the order they came."""

    daemon_threads = True

    def __init__(self, port: int):
        super().__init__(("127.0.0.1", port), _Handler)
        self.answers: list[int] = []
        self.got: list[dict] = []
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hooks/takehome"

    def wait_for(self, event: str, timeout: float) -> dict:
        """The first request that carried ``event``, waiting for it to come."""

        def found():
            return next((r for r in self.got if r["json"].get("type") == event), None)

        with self.changed:
            if not self.changed.wait_for(found, timeout):
                raise AssertionError(f"no {event} within {timeout:.0f} s; got {[r['json'].get('type') for r in self.got]}")
            return found()

    def signed_by(self, request: dict, secret: str) -> bool:
        return verify(request["headers"].get(HEADER, ""), request["body"], secret)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.changed:
            code = self.server.answers.pop(0) if self.server.answers else 200
            self.server.got.append({"headers": dict(self.headers), "body": body, "json": json.loads(body or b"{}"),
                                    "path": self.path, "answered": code})
            self.server.changed.notify_all()
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()
