"""The benchmark script runs end to end. Its figures are not judged here: no timed asserts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from shared import pytest_slots

ROOT = Path(__file__).resolve().parents[2]


def test_grading_bench_runs_and_ends_with_the_ratio(runner_dir, scratch_dir):
    # why no DJANGO_SETTINGS_MODULE: the benchmark is pure core and must run without settings.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "grading.py"), "--rounds", "1", "--true-runs", "1",
         "--pytest-runs", "1", "--sizes", "100", "--size-rounds", "1",
         "--runner", str(runner_dir), "--scratch", str(scratch_dir),
         # why uids of its own: this test process's warm sandboxes may hold the worker's range
         "--uid-base", str(pytest_slots.uids("bench_grading")), "--slots", "8"],
        cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,  # a guard against a hang, not a measurement
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert re.fullmatch(r"ratio: \d+\.\d\d", lines[-1]), done.stdout
    # the tree-size sweep: a row for the sample alone and one for 100 extra files, each with its ratio
    assert re.search(r"^ +0 +\d+ +\d+ +\d+\.\d\d ", done.stdout, re.M), done.stdout
    assert re.search(r"^ +100 +\d+ +\d+ +\d+\.\d\d ", done.stdout, re.M), done.stdout
    # CPU time beside the clock, and whether the sandboxes were warm
    assert re.search(r"^CPU time, user\+sys .* grading \d+ ms, bare \d+ ms, ratio \d+\.\d\d", done.stdout, re.M)
    assert re.search(r"^warm sandboxes: \d+", done.stdout, re.M), done.stdout


def test_the_packets_bench_compares_business_days_with_refund_sum(runner_dir, scratch_dir, business_days_sandbox):
    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "grading.py"), "--packets", "--rounds", "1", "--pytest-runs", "1",
         "--runner", str(runner_dir), "--runners", str(settings.GRADING_RUNNERS_DIR), "--scratch", str(scratch_dir),
         "--uid-base", str(pytest_slots.uids("bench_grading")), "--slots", "8"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "grading business-days (grade_archive)" in done.stdout and "built before this run" in done.stdout
    assert re.fullmatch(r"ratio: \d+\.\d\d", done.stdout.strip().splitlines()[-1]), done.stdout
