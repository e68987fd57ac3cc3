"""bench/similarity.py runs end to end on small packets. Its figures are not judged here: no timed asserts."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_similarity_bench_prints_each_size_with_its_ratio():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "similarity.py"), "--sizes", "15", "30", "--uploads", "3"],
        cwd=ROOT, capture_output=True, text=True,
        timeout=600,  # a guard against a hang, not a measurement
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for size in (15, 30):
        assert re.search(rf"^ +{size} +\d+ +\d+ +\d+\.\d +\d+\.\d +\d+\.\d +\d+\.\d ", done.stdout, re.M), done.stdout
    assert re.fullmatch(r"worst per-upload p95: \d+\.\d ms \(target: under 1000 ms\)",
                        done.stdout.strip().splitlines()[-1]), done.stdout
