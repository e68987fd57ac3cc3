"""conftest.wait_started: a server's start is waited for until it answers or its process ends, never for a
guessed time; the failure names what ended and shows the end of its log."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import wait_started


def test_a_process_that_ends_before_answering_fails_at_once_with_its_log(tmp_path):
    log = tmp_path / "server.log"
    proc = subprocess.Popen([sys.executable, "-c", "print('port already in use'); raise SystemExit(3)"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    proc.wait(30)
    with pytest.raises(AssertionError) as failed:
        wait_started(proc, lambda: False, "the server", log)
    assert "the server: the process ended with 3" in str(failed.value)
    assert "port already in use" in str(failed.value)


def test_a_process_that_answers_is_waited_for_and_left_running(tmp_path):
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(ready)!r}).touch(); "
                                                   "time.sleep(60)"])
    try:
        wait_started(proc, ready.exists, "the server")
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(30)
