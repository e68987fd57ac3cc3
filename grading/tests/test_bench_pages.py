"""bench/pages.py runs end to end on a small database. Its figures are not judged here: no timed asserts."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pages_bench_runs_and_prints_every_page():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "pages.py"), "--submissions", "120", "--requests", "2"],
        cwd=ROOT, capture_output=True, text=True,
        timeout=600,  # a guard against a hang, not a measurement
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("baseline: login page", "queue (first page)", "review page", "debrief refund-sum (page 1)"):
        assert page in done.stdout, done.stdout
    assert "worst page p95:" in done.stdout.splitlines()[-1]
