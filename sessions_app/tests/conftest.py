"""Fixtures for the candidate's side: an invitation to the sample packet, started or not, and a fake
OpenAI-compatible upstream on loopback for the model window."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.cache import cache
from django.urls import reverse

from conftest import require

from .helpers import RED_LOG, receipt
from .hosted_shell import shells  # noqa: F401  (the terminal's tests on the real sandboxed workspace)


@pytest.fixture(autouse=True)
def _fresh_lookup_counts():
    # why: the per-address limit counts in the cache, which outlives a test.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def started(invitation):
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    return invitation


def url(name: str, invitation, **kwargs) -> str:
    return reverse(f"sessions_app:{name}", kwargs={"token": invitation.raw_token, **kwargs})


@pytest.fixture
def ready(media_root, settings):
    """What grading by a real worker needs besides Redis: bubblewrap and the runner virtualenv."""
    from .helpers import runner_python

    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")


# --- a fake OpenAI-compatible upstream for the model window (its endpoint, gate.py ask, the page's panel) ---

KEY = "sk-upstream-SECRET-4711"
WORDS = ["Use ", "Decimal", " for cents."]
REPLY = "".join(WORDS)


KEY_MODES = ("key_split", "key_cut", "key_error")


class FakeUpstream(ThreadingHTTPServer):
    """An OpenAI-compatible chat API whose ``mode`` says how it answers: plain, stream, slow,
    http500, malformed, cut (a stream that stops mid-way), no_usage, chunked (HTTP/1.1 chunks that
    split events, as uvicorn and Ollama send them), held (a stream that waits
    after its first chunk until ``release`` is set, noting in ``held_too_long`` if it never was),
    held_plain (a plain reply that waits for ``release`` before it answers), or one that quotes the
    key (KEY_MODES): in a 200 body, in a stream's error event, split over two chunks, cut mid-key."""

    daemon_threads = True

    def __init__(self, port: int):
        super().__init__(("127.0.0.1", port), Handler)
        self.mode = "plain"
        self.got: list[dict] = []  # {"path", "headers", "body"} per request
        self.release, self.held_too_long = threading.Event(), False

    def handle_error(self, request, client_address):
        # why quiet for a client gone: the server under test giving up on a slow or held upstream is what
        # those tests check, and the reply the fake writes after it is no error of either
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def _chunk(content: str | None = None, usage: dict | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "upstream-model",
            "choices": [] if content is None else [{"index": 0, "delta": {"content": content},
                                                    "finish_reason": None}]}
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: every reply ends by closing the connection, so a cut stream is a plain close.
    server: FakeUpstream

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.got.append({"path": self.path, "headers": dict(self.headers), "body": body})
        mode = self.server.mode
        if mode == "slow":
            time.sleep(2)
        if mode == "http500":
            return self._send(500, json.dumps({"error": {"message": f"overloaded (key {KEY})"}}).encode())
        if mode == "malformed":
            return self._send(200, b'{"choices": [')
        if mode == "held_plain":
            self.server.held_too_long |= not self.server.release.wait(60)
        if mode in KEY_MODES:
            return self._quote_key(mode, bool(body.get("stream")))
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        if body.get("stream") and mode == "chunked":
            return self._send_chunked(b"".join(_chunk(w) for w in WORDS) + _chunk(usage=usage) + b"data: [DONE]\n\n")
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for word in WORDS[:1] if mode == "cut" else WORDS:
                self.wfile.write(_chunk(word))
                self.wfile.flush()
                time.sleep(0.05)
                if mode == "held" and word == WORDS[0]:
                    self.server.held_too_long = not self.server.release.wait(5)
            if mode == "cut":
                return
            self.wfile.write(_chunk(usage=usage) + b"data: [DONE]\n\n")
            return
        reply = {"id": "c1", "object": "chat.completion", "created": 1, "model": "upstream-model",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY},
                              "finish_reason": "stop"}]}
        if mode != "no_usage":
            reply["usage"] = usage
        self._send(200, json.dumps(reply).encode())

    def _quote_key(self, mode: str, stream: bool) -> None:
        """An upstream that says the key back, everywhere it can: the class of leak the window closes."""
        leaky = {"id": KEY, "model": KEY, "system_fingerprint": KEY}
        if not stream:
            return self._send(200, json.dumps({**leaky, "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": f"Your key is {KEY}.",
                                         "reasoning_content": KEY}, "finish_reason": KEY}],
                "usage": {"prompt_tokens": KEY, "completion_tokens": 1}}).encode())
        half = len(KEY) // 2
        pieces = {"key_split": ["Your key is " + KEY[:half], KEY[half:] + ", said twice: " + KEY[:3],
                                KEY[3:] + "."],
                  "key_cut": ["Your key is " + KEY[:half]],
                  "key_error": ["Use "]}[mode]
        events = b"".join(b"data: " + json.dumps({**leaky, "choices": [
            {"index": 0, "delta": {"content": piece, "reasoning_content": KEY,
                                   "tool_calls": [{"function": {"arguments": KEY}}]}, "finish_reason": None}],
        }).encode() + b"\n\n" for piece in pieces)
        if mode == "key_error":
            events += b"data: " + json.dumps({"error": {"message": f"invalid key {KEY}", "key": KEY}}).encode() + b"\n\n"
        elif mode == "key_split":
            events += _chunk(usage={"prompt_tokens": 3, "completion_tokens": 9}) + b"data: [DONE]\n\n"
        # why 7-byte HTTP chunks: the key is split over the transport's chunks too, not only over events.
        self.protocol_version = "HTTP/1.1"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        for start in range(0, len(events), 7):
            part = events[start:start + 7]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        self.wfile.write(b"0\r\n\r\n")

    def _send_chunked(self, data: bytes) -> None:
        self.protocol_version = "HTTP/1.1"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        for start in range(0, len(data), 50):  # 50 bytes: every event is split across chunks
            part = data[start:start + 50]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve_on() -> FakeUpstream:
    """A fake upstream on the next port of this process's band that it can bind.

    why not free_port(): the fake closes each connection, so its port sits in TIME_WAIT after a
    test, which a plain bind probe takes for busy; the server itself binds with SO_REUSEADDR."""
    from conftest import next_ports

    for port in next_ports():
        try:
            return FakeUpstream(port)
        except OSError:
            continue
    raise AssertionError("every port of this test process's band is in use")


@pytest.fixture
def upstream(settings):
    """A fake upstream, on a port of this test process's own."""
    server = serve_on()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.MODEL_URL, settings.MODEL_NAME, settings.MODEL_KEY = server.base_url, "packet-model", KEY
    # why generous: the fake answers from a thread of the test's own process, which a loaded machine can hold
    # for over a second; a test of the timeout sets a short one beside a fake slower than it
    settings.MODEL_TIMEOUT_S = 30
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def daphne_url(upstream, settings, monkeypatch):
    """daphne serving takehome.asgi in a forked process (the test's settings and the fake upstream go
    with it), on a port of this test process's own; yields its URL. The test needs the database
    in transaction mode, so that the forked server sees its rows."""
    from .helpers import daphne_serving

    with daphne_serving(settings, monkeypatch) as url:
        yield url


@pytest.fixture
def red(client, started):
    response = client.post(url("gate-step", started, step="red"), receipt(RED_LOG), content_type="application/json")
    assert response.status_code == 201, response.json()
    return started
