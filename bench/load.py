#!/usr/bin/env python
"""Load test: candidates taking the sample packet while reviewers score, against the real stack.

Standalone. In a temporary folder it sets up what `make run` and the image
serve (daphne, ASGI): a migrated database (SQLite there, or the scratch database named by
--database-url / BENCH_DATABASE_URL, created if missing and emptied), a
private redis-server on a unix socket (or the broker named by
BENCH_BROKER_URL, whose Celery queue is purged), daphne on 127.0.0.1, a
Celery worker and beat, and the sandbox's runner as `make setup` built it.
It invites N candidates to the sample packet and makes M reviewer accounts,
then runs locust headless (bench/load_users.py: every request is a real
HTTP request, forms with their CSRF tokens, uploads as multipart) until
every candidate has been told its upload was received (never when it is
graded: candidates are not told) and every reviewer has scored at least one
upload and finished the review in hand, and waits for the worker to drain
what is left. The
figures are locust's as it quits, once every user has stopped.

It prints the requests and failures per endpoint with p50 and p95, the
uploads stored (Submission rows) and graded, the lost uploads (answered as
stored but not stored, or stored but never graded) and the time to drain
(from the last upload answered to the last one graded). A 503 with
Retry-After is waited out and sent again, as a real client does, and counted
as a retry; any other answer that is not the expected one (a 500 included)
is a failure. Exit status 1 on any failure or lost upload, or when --timeout
stopped the run before every user was done (a user then still finishes its
task in hand, up to 60 s).

    .venv/bin/python bench/load.py [--candidates 40] [--reviewers 5] [--spawn-rate 10]
        [--database-url postgres://postgres@127.0.0.1:5432/load] [--timeout 600] [--port 8320]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# why: run as a script, this folder comes first on sys.path, and bench/grading.py
# would shadow the grading package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from grading.engine.runner import RunnerUnavailable, ensure_runner, sandbox_home  # noqa: E402

VIEW_THREADS = 16  # as the Dockerfile and `make run` serve it: one daphne process, ASGI_THREADS
WORKER_CONCURRENCY = 2  # as `make run` grades
STOP_TIMEOUT = 60  # seconds a user has to finish its task in hand when --timeout stops the run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=40, help="candidates, each uploading once (default 40)")
    parser.add_argument("--reviewers", type=int, default=5, help="reviewers scoring meanwhile (default 5)")
    parser.add_argument("--spawn-rate", type=float, default=10.0,
                        help="users started per second (default 10)")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""),
                        help="a scratch database, emptied first (default $BENCH_DATABASE_URL, else SQLite "
                             "in the temporary folder)")
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds the whole run and drain may take before it stops (default 600)")
    parser.add_argument("--port", type=int, default=8320, help="daphne's port on 127.0.0.1 (default 8320)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, database)")
    args = parser.parse_args(argv)
    if args.candidates < 1 or args.reviewers < 0 or args.spawn_rate <= 0 or args.timeout < 30:
        parser.error("--candidates at least 1, --reviewers at least 0, --spawn-rate above 0, --timeout at least 30")
    return args


def runner_dir() -> Path:
    """The runner virtualenv `make setup` built: $TAKEHOME_RUNNER_DIR, or the one of var/ (as the settings say)."""
    if os.environ.get("TAKEHOME_RUNNER_DIR"):
        return Path(os.environ["TAKEHOME_RUNNER_DIR"])
    return sandbox_home(Path(os.environ.get("TAKEHOME_VAR_DIR") or ROOT / "var")) / "runner"


def configure(folder: Path, args: argparse.Namespace, broker: str) -> dict:
    """The environment of this process and of every server it starts."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TAKEHOME_MEDIA_ROOT", "TAKEHOME_SCRATCH_DIR", "CACHE_URL", "DATABASE_URL")}
    env.update({
        "TAKEHOME_VAR_DIR": str(folder),
        "TAKEHOME_RUNNER_DIR": str(runner_dir()),
        "DATABASE_URL": args.database_url or f"sqlite:///{folder / 'load.sqlite3'}",
        "CELERY_BROKER_URL": broker,
        # why DEBUG: with DEBUG off, session and CSRF cookies are Secure, and a
        # client on plain http (loopback, no proxy) never sends them back.
        "DEBUG": "true",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SITE_URL": f"http://127.0.0.1:{args.port}",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "takehome.settings",
    })
    return env


# --- the database and what the run needs in it ----------------------------------------------


def create_postgres_database(url: str) -> None:
    """Create the PostgreSQL database the URL names, if it is missing (SQLite makes its own file)."""
    from psycopg import sql

    with _server_connection(url) as (conn, name):
        if conn is not None and conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_postgres_database(url: str) -> None:
    """Drop the PostgreSQL database the URL names, whoever is still connected to it (nothing for SQLite)."""
    from psycopg import sql

    with _server_connection(url) as (conn, name):
        if conn is not None:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.contextmanager
def _server_connection(url: str):
    """A connection to the URL's PostgreSQL server (its maintenance database) and the database's name; None
    and the name for any other database."""
    import environ
    import psycopg

    config = environ.Env.db_url_config(url)
    if "postgresql" not in config["ENGINE"]:
        yield None, config["NAME"]
        return
    with psycopg.connect(host=config["HOST"] or None, port=config["PORT"] or None, user=config["USER"] or None,
                         password=config["PASSWORD"] or None, dbname="postgres", autocommit=True) as conn:
        yield conn, config["NAME"]


def prepare_database() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)


def upload_files(number: int) -> dict[str, bytes]:
    """An honest candidate's tree for the sample packet; a note of their own makes each zip unique."""
    from grading.tests.corpus import honest_files

    return honest_files(**{"artifacts/notes.md": f"Candidate {number}: worked through the gate.\n".encode()})


def make_plan(folder: Path, args: argparse.Namespace, deadline: float) -> dict:
    """Invitations, reviewer accounts and zips in the database and on disk; the plan locust reads."""
    import hashlib

    from django.contrib.auth.models import Group, User

    from grading.models import Cell
    from grading.tests.corpus import PROMPT, red_log, zip_with_times
    from sessions_app.models import Submission
    from shared.access import REVIEWER_GROUP
    from takehome.actions import InviteRow, do_check_version_now, do_invite_candidates, do_load_sample_packet

    packet, _ = do_load_sample_packet()
    if packet.latest_version().refusal_to_invite():  # a fresh database: the packet checks itself first
        do_check_version_now(packet.latest_version())
    rows = [InviteRow(line=i + 1, name=f"Load Candidate {i:03d}", email=f"load{i}@example.com")
            for i in range(args.candidates)]
    invited = do_invite_candidates(packet.latest_version(), rows, send=False)
    zips = folder / "zips"
    zips.mkdir()
    candidates = []
    for i, new in enumerate(invited):
        files = upload_files(i)
        path = zip_with_times(zips / f"{i}.zip", files, prefix=f"{packet.slug}/")
        candidates.append({
            "token": new.invitation.link_token(),
            "via": "gate" if i % 2 == 0 else "page",
            "zip": str(path),
            "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
        })
    group, _ = Group.objects.get_or_create(name=REVIEWER_GROUP)
    reviewers = []
    for i in range(args.reviewers):
        password = secrets.token_urlsafe(12)
        User.objects.create_user(f"load-reviewer-{i}", password=password).groups.add(group)
        reviewers.append({"username": f"load-reviewer-{i}", "password": password})
    return {
        "candidates": candidates,
        "reviewers": reviewers,
        "slug": packet.slug,
        "zip_name": f"{packet.slug}.zip",
        "red_log": red_log().decode(),
        "green_log": red_log("pytest9_green_q.log").decode(),
        "prompt": PROMPT.decode(),
        "cells": list(Cell.values),
        "finished_statuses": list(Submission.FINISHED),
        "deadline": deadline,
        "outcome": str(folder / "outcome.json"),
        "figures": str(folder / "locust"),  # locust_stats.csv and the others, written as locust quits
    }


def upload_states() -> dict[int, str]:
    """Every stored upload's grading status, by submission id."""
    from sessions_app.models import Submission

    return dict(Submission.objects.values_list("pk", "status"))


# --- the servers -----------------------------------------------------------------------------


class Servers:
    """The processes of the run, each in its own session, its output in a log under the folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.env = dict(os.environ)  # configure() replaces it once the broker is known
        self.procs: dict[str, subprocess.Popen] = {}
        self._starting, self._deferred = False, None

    def start(self, name: str, argv: list[str], env: dict | None = None) -> None:
        log = (self.folder / f"{name}.log").open("ab")
        self._starting = True
        try:
            self.procs[name] = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **(env or {})}, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            self._starting = False
        if self._deferred is not None:
            handler, signum, frame = self._deferred
            self._deferred = None
            handler(signum, frame)

    def deferring(self, handler):
        """``handler`` as a signal handler that waits for a server being started to be recorded.

        why: a handler that ends the run (through stop(), which must know every process started) would
        otherwise leave running a process forked just before it ran and not yet recorded.
        """

        def handle(signum, frame):
            if self._starting:
                self._deferred = (handler, signum, frame)
            else:
                handler(signum, frame)

        return handle

    def check_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"load: {name} stopped (exit {proc.returncode}); the end of its log:\n"
                                 + self.tail(name))

    def tail(self, name: str, lines: int = 20) -> str:
        path = self.folder / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def wait_for(predicate, seconds: float, what: str, servers: Servers) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        servers.check_running()
        if predicate():
            return
        time.sleep(0.3)
    raise SystemExit(f"load: timed out after {seconds:.0f} s waiting for {what}")


def baseline(port: int, requests: int = 100) -> list[float]:
    """The login page, one request at a time before the load (same stack, no data): times in ms."""
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        if not answers(f"http://127.0.0.1:{port}/accounts/login/"):
            raise SystemExit("load: the login page did not answer 200 before the run")
        times.append((time.perf_counter() - started) * 1000)
    return times


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def start_redis(servers: Servers, folder: Path) -> str:
    """A private redis-server on a unix socket; returns its broker URL."""
    if shutil.which("redis-server") is None:
        raise SystemExit("load: redis-server is missing (apt-get install redis-server), or set BENCH_BROKER_URL")
    socket = folder / "redis" / "redis.sock"
    socket.parent.mkdir()
    servers.start("redis", ["redis-server", "--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700",
                            "--dir", str(socket.parent), "--save", "", "--appendonly", "no"])
    return f"redis+socket://{socket}"


def broker_answers() -> bool:
    from takehome.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        return False


def worker_answers() -> bool:
    from takehome.celery import app

    return bool(app.control.ping(timeout=1))


def start_servers(servers: Servers, port: int) -> None:
    """daphne, a Celery worker and beat; returns once the site and the worker answer."""
    python = sys.executable
    servers.start("web", [python, "-m", "daphne", "takehome.asgi:application", "--bind", "127.0.0.1",
                          "--port", str(port)], env={"ASGI_THREADS": str(VIEW_THREADS)})
    servers.start("worker", [python, "-m", "celery", "-A", "takehome", "worker", "--loglevel=WARNING",
                             f"--concurrency={WORKER_CONCURRENCY}", f"--hostname=load-{os.getpid()}@%h"])
    servers.start("beat", [python, "-m", "celery", "-A", "takehome", "beat", "--loglevel=WARNING"])
    wait_for(lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"), 60, "daphne to answer", servers)
    wait_for(worker_answers, 120, "the Celery worker to answer", servers)


# --- the run and its figures -----------------------------------------------------------------


def run_locust(folder: Path, env: dict, args: argparse.Namespace, plan_path: Path) -> None:
    argv = [sys.executable, "-m", "locust", "-f", str(HERE / "load_users.py"), "--headless",
            "--users", str(args.candidates + args.reviewers), "--spawn-rate", str(args.spawn_rate),
            # why --stop-timeout: should --timeout stop the run, a reviewer still finishes the review in
            # hand and a candidate its request, rather than being cut off between two of them.
            "--run-time", f"{args.timeout}s", "--stop-timeout", str(STOP_TIMEOUT),
            "--host", f"http://127.0.0.1:{args.port}", "--only-summary", "--loglevel", "WARNING"]
    log = folder / "locust.log"
    with log.open("wb") as out:
        done = subprocess.run(argv, cwd=ROOT, env={**env, "TAKEHOME_LOAD_PLAN": str(plan_path)},
                              stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    # why 0 or 1: locust exits 1 when a request failed; those are counted below.
    if done.returncode not in (0, 1) or not (folder / "outcome.json").exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"load: locust stopped with exit {done.returncode}:\n{tail}")


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def drain(plan: dict, outcome: dict) -> tuple[dict[int, str], float | None]:
    """Wait until every stored upload is finished (or the deadline); returns the states and the drain time."""
    finished = set(plan["finished_statuses"])
    states = upload_states()
    while any(s not in finished for s in states.values()) and time.time() < plan["deadline"]:
        time.sleep(1)
        states = upload_states()
    done_at = time.time()
    answered = [u["at"] for u in outcome["uploads"]]
    if not answered or any(s not in finished for s in states.values()):
        return states, None
    return states, max(0.0, done_at - max(answered))


def endpoint_table(stats: list[dict], base95: float) -> list[str]:
    """Per endpoint: requests, failures, p50 and p95 (locust's), and p95 over the baseline's p95."""
    lines = [f"{'endpoint':46} {'requests':>8} {'failures':>8} {'p50 ms':>7} {'p95 ms':>7} {'p95 / baseline p95':>19}"]
    for row in stats:
        name = "all requests" if row["Name"] == "Aggregated" else f"{row['Type']:4} {row['Name']}"
        ratio = float(row["95%"]) / base95 if row["95%"] not in ("", "N/A") else float("nan")
        lines.append(f"{name:46} {row['Request Count']:>8} {row['Failure Count']:>8} {row['50%']:>7} "
                     f"{row['95%']:>7} {ratio:19.1f}")
    return lines


def report(folder: Path, plan: dict, states: dict[int, str], drain_s: float | None, base: list[float]) -> int:
    """Print the figures; returns the exit status (1 on any failure or lost upload)."""
    outcome = json.loads(Path(plan["outcome"]).read_text())
    stats = read_csv(folder / "locust_stats.csv")
    failures = read_csv(folder / "locust_failures.csv")
    crashes = read_csv(folder / "locust_exceptions.csv")
    base95 = statistics.quantiles(base, n=100, method="inclusive")[94]
    print(f"baseline: the login page alone before the load, p50 {statistics.median(base):.1f} ms, "
          f"p95 {base95:.1f} ms\n")
    print("\n".join(endpoint_table(stats, base95)))
    total = next(r for r in stats if r["Name"] == "Aggregated")
    retries = Counter(outcome["retries"])
    failed = int(total["Failure Count"])
    print(f"\nrequests: {total['Request Count']}; failures: {failed}; "
          f"retried after 503 (Retry-After): {sum(retries.values())}")
    for endpoint, n in sorted(retries.items()):
        print(f"  retried {endpoint}: {n}")
    if failures:
        print("failures by endpoint and answer:")
    for row in failures:
        print(f"  {row['Method']:4} {row['Name']:40} {row['Error']}: {row['Occurrences']}")
    for row in crashes:
        print(f"errors in the load script ({row['Count']}): {row['Message']}")
    answered = {u["submission"] for u in outcome["uploads"]}
    not_stored = answered - set(states)
    not_graded = {pk: s for pk, s in states.items() if s != "graded"}
    graded = len(states) - len(not_graded)
    print(f"\nuploads answered as stored: {len(answered)}; stored (Submission rows): {len(states)}; "
          f"graded: {graded}")
    if not_graded:
        print("  not graded: " + ", ".join(f"{s} {n}" for s, n in sorted(Counter(not_graded.values()).items())))
    print(f"lost uploads: {len(not_stored) + len(not_graded)}")
    unfinished = outcome.get("users_left", 0)
    if unfinished:
        print(f"cut short: {unfinished} users still at work when --timeout stopped the run")
    print(f"time to drain: {drain_s:.1f} s (from the last upload answered to the last one graded)"
          if drain_s is not None else "time to drain: not drained before --timeout")
    return 1 if failed or crashes or not_stored or not_graded or drain_s is None or unfinished else 0


def machine() -> str:
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} cores, load average {load:.1f} at the start"


def check_tools() -> Path:
    """locust importable and the sandbox's runner built; returns the runner's folder."""
    # why not imported: importing locust patches this process's threads into gevent's green ones,
    # and this process runs Django and the sandbox (the packet's check) before locust starts.
    if importlib.util.find_spec("locust") is None:
        raise SystemExit("load: locust is not installed here: .venv/bin/pip install -r requirements.txt")
    try:
        return ensure_runner(runner_dir())
    except RunnerUnavailable as exc:
        raise SystemExit(f"load: the sandbox's runner is not ready ({exc}); run `make setup` first")


def set_up(folder: Path, args: argparse.Namespace, servers: Servers) -> tuple[dict, dict]:
    """The broker, the settings, the database and the plan; returns the environment and the plan."""
    broker = os.environ.get("BENCH_BROKER_URL") or start_redis(servers, folder)
    servers.env = env = configure(folder, args, broker)
    os.environ.update(env)
    import django

    django.setup()
    create_postgres_database(env["DATABASE_URL"])
    prepare_database()
    wait_for(broker_answers, 30, "the broker", servers)
    from takehome.celery import app

    app.control.purge()  # why: a given broker may hold grading messages of an earlier run
    plan = make_plan(folder, args, deadline=time.time() + args.timeout)
    return env, plan


def scratch_folder(prefix: str) -> Path:
    """A new temporary folder for a bench's servers and data."""
    # why /tmp and a short name: the Redis unix socket's path must stay under 108 bytes.
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    # why: the sandbox's unprivileged uids must pass through to the folders under it.
    folder.chmod(0o711)
    return folder


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runner = check_tools()
    folder = scratch_folder("th-load-")
    servers = Servers(folder)
    # why: a TERM (a timeout, a supervisor) ends the run as Ctrl-C does, through the finally below that
    # stops daphne, the worker, beat and Redis; by default it would leave them all running.
    signal.signal(signal.SIGTERM, servers.deferring(lambda *_: sys.exit(128 + signal.SIGTERM)))
    try:
        env, plan = set_up(folder, args, servers)
        plan_path = folder / "plan.json"
        plan_path.write_text(json.dumps(plan))
        from django.db import connection

        print(f"load: {args.candidates} candidates, {args.reviewers} reviewers, {args.spawn_rate:g} started a "
              f"second; {connection.vendor}, daphne with {VIEW_THREADS} view threads, a Celery worker "
              f"({WORKER_CONCURRENCY} processes) and beat; runner {runner}; {machine()}")
        start_servers(servers, args.port)
        base = baseline(args.port)
        run_started = time.time()
        run_locust(folder, env, args, plan_path)
        states, drain_s = drain(plan, json.loads(Path(plan["outcome"]).read_text()))
        print(f"run: {time.time() - run_started:.0f} s\n")
        return report(folder, plan, states, drain_s, base)
    finally:
        servers.stop()
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
