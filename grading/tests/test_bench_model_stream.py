"""bench/model_stream.py runs end to end through daphne. Its figures are not judged here: no timed asserts."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_the_model_stream_bench_runs_and_ends_with_the_first_chunks_p95(runner_dir):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "model_stream.py"), "--requests", "2", "--chunks", "2",
         "--port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True,
        timeout=600,  # a guard against a hang, not a measurement
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert re.fullmatch(r"first chunk p95: \d+\.\d ms \(target: under 100 ms\)", lines[-1]), done.stdout
    assert re.search(r"^every chunk: p50 \d+\.\d ms, p95 \d+\.\d ms, max \d+\.\d ms \(4 chunks\)$", done.stdout, re.M)


def test_a_chunk_is_never_noted_as_sent_after_the_client_read_it():
    """The upstream notes a chunk's time before writing it: a pause between its write and the note (a loaded
    machine) must not make the chunk's delay negative, as it did when the note came after the write."""
    import threading
    import time

    spec = importlib.util.spec_from_file_location("bench_model_stream", ROOT / "bench" / "model_stream.py")
    model_stream = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model_stream)

    class Paused(model_stream.Handler):
        def setup(self):
            super().setup()
            flush = self.wfile.flush

            def flush_then_pause():  # as a descheduled thread would, once the chunk has gone
                flush()
                time.sleep(0.3)

            self.wfile.flush = flush_then_pause

    upstream = model_stream.Upstream(chunks=2, gap_s=0.0)
    upstream.RequestHandlerClass = Paused
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        read = model_stream.one_reply(f"http://127.0.0.1:{upstream.server_address[1]}/v1/chat/completions")
    finally:
        upstream.shutdown()
    written = upstream.written[-1]
    assert len(read) == len(written) == 2
    assert all(r >= w for r, w in zip(read, written, strict=True)), (read, written)
