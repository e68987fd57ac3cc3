#!/usr/bin/env python
"""The model window's streaming, through daphne: how long after the upstream sends a chunk the client has it.

Standalone, like bench/sessions.py. In a temporary folder it sets up a migrated
SQLite database (or --database-url), a private redis-server, and daphne serving
takehome.asgi on 127.0.0.1, with the model window pointed at a fake
OpenAI-compatible upstream that runs in this process. It invites one candidate
to the sample packet, starts the clock and has a red run witnessed, then sends
--requests streamed chat requests one after the other.

The fake upstream sends each reply as --chunks chunks, --gap ms apart, noting
when it sends each (just before writing it); the client, in this process too (one clock), notes when it
read each chunk's event. It prints the delay of the first chunk and of every
chunk (p50, p95, max, in ms); the last line is "first chunk p95: X ms (target:
under 100 ms)". Exit status 1 when a reply did not arrive whole.

    .venv/bin/python bench/model_stream.py [--requests 20] [--chunks 5] [--gap 50] [--port 8680]
        [--database-url URL] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# why: run as a script, this folder comes first on sys.path, and bench/grading.py
# would shadow the grading package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from bench.load import Servers, answers, configure, scratch_folder, start_redis, wait_for  # noqa: E402

TARGET_MS = 100.0


class Upstream(ThreadingHTTPServer):
    """A streaming chat API that notes (time.monotonic) when it sent each chunk of each reply."""

    daemon_threads = True

    def __init__(self, chunks: int, gap_s: float):
        super().__init__(("127.0.0.1", 0), Handler)
        self.chunks, self.gap_s = chunks, gap_s
        self.written: list[list[float]] = []


class Handler(BaseHTTPRequestHandler):
    server: Upstream

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        times: list[float] = []
        self.server.written.append(times)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for n in range(self.server.chunks):
            if n:
                time.sleep(self.server.gap_s)
            chunk = {"object": "chat.completion.chunk", "model": "bench-model",
                     "choices": [{"index": 0, "delta": {"content": f"word{n} "}, "finish_reason": None}]}
            # why before the write: noted after it, a thread paused between the write and the note could note a
            # time after the client had read the chunk (a negative delay); the chunk leaves no sooner than this
            times.append(time.monotonic())
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5}}\n\n'
                         b"data: [DONE]\n\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20, help="streamed requests, one after the other (20)")
    parser.add_argument("--chunks", type=int, default=5, help="chunks per reply (5)")
    parser.add_argument("--gap", type=float, default=50.0, help="ms between the upstream's chunks (50)")
    parser.add_argument("--port", type=int, default=8680, help="daphne's port on 127.0.0.1 (8680)")
    parser.add_argument("--database-url", default="", help="a PostgreSQL URL; SQLite in the folder otherwise")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return parser.parse_args(argv)


def open_window() -> str:
    """The sample packet, one candidate who pressed Start and whose red run was witnessed; their token."""
    from django.core.management import call_command

    from sessions_app.actions import GateReport, do_record_gate_step, do_start_session
    from takehome.actions import InviteRow, do_check_version_now, do_invite_candidates, do_load_sample_packet

    call_command("migrate", verbosity=0)
    packet, _ = do_load_sample_packet()
    version = packet.latest_version()
    if version.refusal_to_invite():  # a fresh database: the packet checks itself first
        do_check_version_now(version)
    invitation = do_invite_candidates(version, [InviteRow(line=1, name="Stream Candidate",
                                                          email="stream@example.com")], send=False)[0].invitation
    do_start_session(invitation)
    red_log = (ROOT / "grading" / "tests" / "logs" / "pytest9_gate_red.log").read_text()
    receipt = do_record_gate_step(invitation, "red", GateReport(red_log, {}, "2026-01-01T10:00:00+00:00"))
    if not receipt.accepted:
        raise SystemExit(f"model_stream: the red run was refused: {receipt.refusal}")
    return invitation.link_token()


def one_reply(url: str) -> list[float]:
    """Send one streamed request; the times (time.monotonic) each reply chunk's event was read."""
    import httpx2

    read = []
    body = {"messages": [{"role": "user", "content": "Why is the refund total wrong?"}], "stream": True}
    with httpx2.stream("POST", url, json=body, timeout=60) as response:
        if response.status_code != 200:
            raise SystemExit(f"model_stream: HTTP {response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if line.startswith("data:") and '"content": "word' in line:
                read.append(time.monotonic())
    return read


def figures(name: str, delays_ms: list[float]) -> tuple[str, float]:
    p95 = statistics.quantiles(delays_ms, n=20, method="inclusive")[-1] if len(delays_ms) > 1 else delays_ms[0]
    return (f"{name}: p50 {statistics.median(delays_ms):.1f} ms, p95 {p95:.1f} ms, max {max(delays_ms):.1f} ms "
            f"({len(delays_ms)} chunks)"), p95


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    folder = scratch_folder("th-stream-")
    servers = Servers(folder)
    upstream = Upstream(args.chunks, args.gap / 1000)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        broker = os.environ.get("BENCH_BROKER_URL") or start_redis(servers, folder)
        env = configure(folder, args, broker)
        env.update({"TAKEHOME_MODEL_URL": f"http://127.0.0.1:{upstream.server_address[1]}/v1",
                    "TAKEHOME_MODEL_NAME": "bench-model", "TAKEHOME_MODEL_KEY": "sk-bench",
                    "TAKEHOME_MODEL_MAX_REQUESTS": str(args.requests + 10), "TAKEHOME_MODEL_MAX_TOKENS": "10000000"})
        servers.env = env
        os.environ.update(env)
        import django

        django.setup()
        token = open_window()
        servers.start("web", [sys.executable, "-m", "daphne", "takehome.asgi:application", "--bind", "127.0.0.1",
                              "--port", str(args.port)])
        wait_for(lambda: answers(f"http://127.0.0.1:{args.port}/accounts/login/"), 60, "daphne to answer", servers)
        url = f"http://127.0.0.1:{args.port}/t/{token}/model/v1/chat/completions"
        first, every = [], []
        for _ in range(args.requests):
            read = one_reply(url)
            written = upstream.written[-1]
            if len(read) != len(written):
                print(f"model_stream: {len(read)} of {len(written)} chunks arrived")
                return 1
            delays = [(r - w) * 1000 for r, w in zip(read, written, strict=True)]
            first.append(delays[0])
            every.extend(delays)
        print(f"model_stream: {args.requests} streamed replies of {args.chunks} chunks, {args.gap:g} ms apart, "
              "through daphne")
        print(figures("every chunk", every)[0])
        line, p95 = figures("first chunk", first)
        print(line)
        print(f"first chunk p95: {p95:.1f} ms (target: under {TARGET_MS:.0f} ms)")
        return 0
    finally:
        upstream.shutdown()
        servers.stop()
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
