"""bench/load.py runs end to end, and its count of lost uploads can see a loss. No timed asserts."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import _wait_for, free_port, require
from grading.engine.sandbox.cgroups import _zombie

ROOT = Path(__file__).resolve().parents[2]
LOAD = ROOT / "bench" / "load.py"


@pytest.fixture
def bench_database() -> Iterator[list[str]]:
    """The bench's --database-url: on PostgreSQL (CI's second run) a database of this test process's own,
    dropped afterwards; else nothing (the bench makes its own SQLite file)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        yield []
        return
    # why one per test process: two bench tests running at once in two processes each emptied the
    # database and invited the same addresses into it, and one found the other's invitations.
    server, _, name = url.partition("?")[0].rpartition("/")
    own = f"{server}/{name}_load_bench_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    yield ["--database-url", own]
    load_module().drop_postgres_database(own)


# Loaded by the bench's locust process only (the one that gets the plan): its CSV writer, which
# rewrites its files once a second and never at exit, then writes them once at the start and never
# again, so figures taken from those files miss the run's last requests every time, not only when
# the run ends within a second of them (a reviewer's last marks and submit).
SLOW_CSV_WRITER = """\
import os
if "TAKEHOME_LOAD_PLAN" in os.environ:
    import locust.stats
    locust.stats.CSV_STATS_INTERVAL_SEC = 3600
"""


@pytest.mark.worker  # starts daphne, a Celery worker, beat and a redis-server
def test_load_bench_grades_every_upload_and_loses_none(runner_dir, tmp_path, bench_database):
    require(shutil.which("redis-server") is not None, "redis-server is not installed (apt-get install redis-server)")
    env = {k: v for k, v in os.environ.items() if k != "BENCH_BROKER_URL"}
    env["TAKEHOME_RUNNER_DIR"] = str(runner_dir)
    (tmp_path / "sitecustomize.py").write_text(SLOW_CSV_WRITER)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(LOAD), "--candidates", "2", "--reviewers", "1", "--port", str(free_port()),
         "--timeout", "300", *bench_database],
        cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,  # a guard against a hang, not a measurement
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "lost uploads: 0" in out, out
    assert "requests: " in out and "; failures: 0;" in out, out
    assert "uploads answered as stored: 2; stored (Submission rows): 2; graded: 2" in out, out
    # the reviewer finished the review in hand before the run ended, and the figures show it
    for endpoint in ("POST /t/[token]/upload (gate)", "POST /t/[token]/upload (page)", "POST /t/[token]/gate/red",
                     "POST /review/[pk]/mark/red_log/", "POST /review/[pk]/mark/test_names_bug/",
                     "POST /review/[pk]/submit/"):
        assert endpoint in out, out
    assert "cut short" not in out, out


def load_module():
    spec = importlib.util.spec_from_file_location("bench_load", LOAD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CSV = {
    "locust_stats.csv": "Type,Name,Request Count,Failure Count,50%,95%\n"
                        "POST,/t/[token]/upload (gate),2,0,120,200\n,Aggregated,2,0,120,200\n",
    "locust_failures.csv": "Method,Name,Error,Occurrences\n",
    "locust_exceptions.csv": "Count,Message,Traceback,Nodes\n",
}


@pytest.mark.parametrize("states, lost", [
    ({1: "graded", 2: "graded"}, 0),
    ({1: "graded"}, 1),  # answered as stored, but no row
    ({1: "graded", 2: "queued"}, 1),  # stored, never graded
    ({1: "error", 2: "queued"}, 2),
])
def test_load_report_counts_lost_uploads(tmp_path, capsys, states, lost):
    for name, text in CSV.items():
        (tmp_path / name).write_text(text)
    outcome = {"uploads": [{"submission": 1, "at": 1.0}, {"submission": 2, "at": 2.0}], "retries": {}}
    (tmp_path / "outcome.json").write_text(json.dumps(outcome))
    plan = {"outcome": str(tmp_path / "outcome.json")}
    drained = 3.0 if lost == 0 else None
    status = load_module().report(tmp_path, plan, states, drained, base=[10.0, 12.0, 20.0])
    out = capsys.readouterr().out
    assert f"lost uploads: {lost}" in out
    assert status == (0 if lost == 0 else 1)


@pytest.mark.worker
def test_a_load_bench_ended_by_term_stops_what_it_started(runner_dir, tmp_path, bench_database):
    """A TERM (a timeout, a supervisor) stops daphne, the worker, beat and Redis, as Ctrl-C does."""
    require(shutil.which("redis-server") is not None, "redis-server is not installed (apt-get install redis-server)")
    env = {k: v for k, v in os.environ.items() if k != "BENCH_BROKER_URL"}
    env["TAKEHOME_RUNNER_DIR"] = str(runner_dir)
    env["PYTHONUNBUFFERED"] = "1"
    bench = subprocess.Popen([sys.executable, str(LOAD), "--candidates", "1", "--reviewers", "1", "--port",
                              str(free_port()), "--timeout", "60", *bench_database],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert bench.stdout.readline().startswith("load: ")  # set up; the servers start now
        # Redis, daphne, the worker and beat (at least three of them up)
        started = _wait_for(lambda: bench.poll() is None and len(children(bench.pid)) >= 3 and children(bench.pid),
                            60, "the bench's servers")
        bench.terminate()
        bench.wait(60)
    finally:
        bench.kill()
    _wait_for(lambda: not [pid for pid in started if not _zombie(pid)], 30, "the bench's servers to end")


def children(pid: int) -> list[int]:
    listed = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in listed.split()]


def test_a_term_as_a_server_starts_ends_the_run_with_that_server_stopped(tmp_path, monkeypatch):
    """A TERM landing between a server's fork and its record would leave that server running after the bench."""
    load = load_module()
    servers = load.Servers(tmp_path)
    on_term = servers.deferring(lambda *_: sys.exit(128 + signal.SIGTERM))  # what main() sets
    popen = subprocess.Popen

    def term_as_it_forks(*args, **kwargs):
        proc = popen(*args, **kwargs)
        on_term(signal.SIGTERM, None)
        return proc

    monkeypatch.setattr(load.subprocess, "Popen", term_as_it_forks)
    with pytest.raises(SystemExit) as ended:
        servers.start("sleeper", ["sleep", "60"])
    monkeypatch.undo()
    assert ended.value.code == 128 + signal.SIGTERM
    sleeper = servers.procs["sleeper"]
    servers.stop()
    assert sleeper.poll() is not None
    with pytest.raises(SystemExit):  # outside a start, a TERM ends the run at once
        on_term(signal.SIGTERM, None)
