"""bench/model_stream.py runs end to end through daphne. Its figures are not judged here: no timed asserts."""

from __future__ import annotations

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
