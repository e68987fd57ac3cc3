"""Fixtures shared by every app's tests.

Integration fixtures start real parts: a redis-server (unless CELERY_BROKER_URL
names one), a `celery worker` subprocess, headless Chromium. Under CI=true a
missing part is a failure with the reason, never a silent skip.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_balance import Balance
from shared import pytest_slots

ROOT = Path(__file__).resolve().parent
# Commands the tests start never read the checkout's .env (the settings skip it
# under pytest already): a developer's port or key must not change a result.
os.environ["TAKEHOME_ENV_FILE"] = ""
CHROMIUM = "/usr/bin/chromium"


# Fixtures that start a browser, a worker, a live server or a sandboxed run: a test that uses one is marked slow.
SLOW_FIXTURES = {"browser", "page", "worker_env", "celery_worker_proc", "runner_dir", "grading_sandbox",
                 "use_test_sandbox", "pythons", "real_logs", "local_index", "live_server", "daphne_url"}


def pytest_configure(config):
    config.pluginmanager.register(Balance(config), "takehome-balance")
    keep_connections_per_thread()


def keep_connections_per_thread() -> None:
    """The database connections are kept per thread, as the synchronous code under test expects.

    why: playwright's sync API leaves its event loop marked as running in the
    main thread between calls (it sets it again after each), and Django's
    connection handler keeps a thread's connections per async context while
    a loop runs there. A test after a browser test could then open a second
    connection beside the one whose transaction pytest-django holds: its
    writes wait on that transaction's lock ("database is locked" on SQLite),
    and a transaction left open that way blocked every later test of the
    worker. Live servers, workers and channels run their requests in threads
    of their own, each with its own connections still.
    """
    import threading

    from django.db import connections

    connections._connections = threading.local()


def pytest_report_header(config):
    return pytest_slots.describe()


# Fixtures that reach the database or the broker: pytest-django's (every database fixture and live_server
# depends on _django_db_helper) and ours that start or stop a broker's users.
SERVICE_FIXTURES = {"_django_db_helper", "worker_env", "celery_worker_proc", "stoppable_broker"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("browser") or item.get_closest_marker("worker") or SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        # why this rule is enough: pytest-django refuses the database to a test without one of these, and
        # the broker is reached only through a worker or a send from a test with the database.
        # A test that can only run on SQLite is not one: the PostgreSQL pass would only skip it.
        if item.get_closest_marker("sqlite_only"):
            continue
        if item.get_closest_marker("django_db") or item.get_closest_marker("worker") or SERVICE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.services)


_next_port = 0


def next_ports():
    """This process's ports (its test slot's band, shared.pytest_slots), each once in turn, from where the
    last call stopped: a port just closed may sit in TIME_WAIT, and the next one is fresh."""
    global _next_port
    band = pytest_slots.ports()
    for _ in range(len(band)):
        port = band[_next_port % len(band)]
        _next_port += 1
        yield port


def run_folder(tmp_path_factory) -> Path:
    """The test run's temporary folder that all its test processes share (pytest-xdist gives each process a
    folder inside it); the run's own folder without xdist. The next run starts afresh in a new one."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def free_port() -> int:
    """A port of this process's band that is free on 127.0.0.1; no other test process takes from the band."""
    import socket

    for port in next_ports():
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"every port in {pytest_slots.ports()} is in use")


def require(condition: bool, reason: str) -> None:
    """Skip on a developer's machine, fail under CI: a green CI run means it ran."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: this test must run)")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _no_login_lockout(request, settings):
    """Failed-login limits (django-axes) are off in tests, except in tests marked `axes`.

    why: a test that fails a login on purpose must never lock out the next
    one, and Django's test client logs in without a request, which axes refuses.
    """
    if request.node.get_closest_marker("axes") is None:
        settings.AXES_ENABLED = False


@pytest.fixture(autouse=True)
def _outside_the_browsers_loop(request):
    """A test that does not drive the browser runs with no event loop marked running in this thread.

    why: playwright's sync API (the session's browser) runs its event loop in a greenlet of this thread
    and leaves it marked as the thread's running loop between calls; a later test of this process that
    calls asyncio.run() or async_to_sync() here would be refused ("cannot be called from a running event
    loop"). The mark is put back after the test, for the next one that drives the browser.
    """
    import asyncio

    loop = asyncio._get_running_loop()
    if loop is None or "browser" in request.fixturenames:
        yield
        return
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(loop)


_MEDIA_ROOTS = itertools.count()


@pytest.fixture(autouse=True)
def _media_root_of_its_own(settings, monkeypatch, tmp_path_factory):
    """Every test stores its files (uploads, recordings) in an empty folder of its own, and what it starts
    (a worker, a server) gets the same folder through TAKEHOME_MEDIA_ROOT.

    why: stored files are named by database ids (recordings/inv-<id>.cast), which the test database hands
    out again from test to test. In a folder shared by a test process's tests (and kept from run to run), a
    recording left by one test was shown on another's review page, with a "1 passed" marker among its
    buttons.
    """
    root = tmp_path_factory.getbasetemp() / "media" / str(next(_MEDIA_ROOTS))
    root.mkdir(parents=True)
    settings.MEDIA_ROOT = root
    monkeypatch.setenv("TAKEHOME_MEDIA_ROOT", str(root))


@pytest.fixture
def media_root(settings, tmp_path):
    """A media folder not made yet (the autouse one above exists already), for the tests about the folder
    itself: backups and restores that make it, fill it, refuse it or find something else in its place."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture(scope="session")
def s3_server() -> str:
    """A real S3 endpoint on 127.0.0.1 for the run (moto's standalone server, in a thread): its URL.

    why moto's: S3 is a service outside the project; this serves its HTTP API as a self-hosted server
    (MinIO, Garage) does, so the storage is tested over real requests, from this process and from the
    workers and servers the tests start.
    """
    import logging

    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        require(False, "moto is not installed (pip install -r requirements-dev.txt)")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # why: a log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass(frozen=True)
class S3Bucket:
    name: str
    env: dict[str, str]  # the settings' variables that point a process at it (TAKEHOME_STORAGE=s3...)


@pytest.fixture
def s3_bucket(s3_server, settings, media_root) -> S3Bucket:
    """A new bucket on the test's S3 server, the storage of uploads and recordings for this test's process
    (as TAKEHOME_STORAGE=s3 makes it); ``env`` points a worker or server the test starts at it too."""
    import uuid

    import boto3

    from shared.stored import s3_storage

    name = f"takehome-{uuid.uuid4().hex[:12]}"
    env = {"TAKEHOME_STORAGE": "s3", "TAKEHOME_S3_BUCKET": name, "TAKEHOME_S3_ENDPOINT_URL": s3_server,
           "TAKEHOME_S3_REGION": "us-east-1", "TAKEHOME_S3_ACCESS_KEY_ID": "test-key",
           "TAKEHOME_S3_SECRET_ACCESS_KEY": "test-secret"}
    boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1", aws_access_key_id="test-key",
                 aws_secret_access_key="test-secret").create_bucket(Bucket=name)
    settings.STORAGES = {**settings.STORAGES, "default": s3_storage(
        bucket=name, endpoint_url=s3_server, region="us-east-1", access_key="test-key", secret_key="test-secret")}
    return S3Bucket(name, env)


@pytest.fixture
def groups(db):
    from django.contrib.auth.models import Group

    from shared.access import RECRUITER_GROUP, REVIEWER_GROUP, TEAM_ADMIN_GROUP

    # why get_or_create: the migrations make them, but a transactional test before this one on the same
    # process flushed every table
    return {name: Group.objects.get_or_create(name=name)[0]
            for name in (RECRUITER_GROUP, REVIEWER_GROUP, TEAM_ADMIN_GROUP)}


def _user(username: str, group):
    from django.contrib.auth.models import User

    user = User.objects.create_user(username, password="pw-" + username)
    if group is not None:
        user.groups.add(group)
    return user


@pytest.fixture
def recruiter(groups):
    return _user("rita", groups["recruiter"])


@pytest.fixture
def make_reviewer(groups):
    """Make more reviewers by name (password pw-<name>), for double review."""
    return lambda name: _user(name, groups["reviewer"])


@pytest.fixture
def reviewer(make_reviewer):
    return make_reviewer("rob")


@pytest.fixture
def recruiter_client(client, recruiter):
    client.force_login(recruiter)
    return client


@pytest.fixture
def sample_packet(db):
    from takehome.actions import do_load_sample_packet
    from takehome.tests.factories import mark_checked

    packet, _ = do_load_sample_packet()
    # why: most tests are not about the self-check (test_self_check.py runs it for real).
    mark_checked(packet.latest_version())
    return packet


@pytest.fixture
def invitation(sample_packet):
    """A fresh invitation to the sample packet, its raw token on `.raw_token`."""
    from takehome.tests.factories import InvitationFactory

    return InvitationFactory(packet_version=sample_packet.latest_version())


def pytest_sessionfinish(session):
    """Remove the two files SQLite's WAL keeps beside the test database, which Django's teardown leaves."""
    from django.conf import settings

    if not settings.configured:
        return
    name = settings.DATABASES["default"].get("TEST", {}).get("NAME")
    if name and settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        # an xdist worker's test database is the name with "_gw<N>" after it
        for path in Path(name).parent.glob(Path(name).name + "*"):
            if path.name.endswith(("-wal", "-shm")):
                path.unlink(missing_ok=True)


# --- Redis and a real Celery worker -------------------------------------------------


def _wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# A guard against a hang, not a guess at how long a start takes: wait_started ends as soon as the server answers
# or its process ends (two suites at once on a slow two-core machine took over 30 s to start Django).
START_GUARD_S = 180
# The same for a call that must not wait on something stopped (a broker down or paused): the test proves it
# ended while that thing was still stopped, and fails rather than hangs when it does not end.
HANG_GUARD_S = 120


def within_hang_guard(call, *args, **kwargs):
    """``call(*args, **kwargs)`` in a thread: its result, or TimeoutError after HANG_GUARD_S.

    why not a with block: leaving one waits for the thread, so a call that hangs would hang the test anyway.
    """
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(call, *args, **kwargs).result(timeout=HANG_GUARD_S)
    finally:
        pool.shutdown(wait=False)


@pytest.fixture
def connects(monkeypatch) -> list:
    """Every address this process's Python code connects a socket to, in order: a check that "fails at once"
    is proved by one attempt and no retry, not by a stopwatch."""
    import socket

    seen: list = []
    real = socket.socket.connect

    def connect(self, address):
        seen.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


def wait_started(proc, answers, what: str, *logs: Path, interval: float = 0.1) -> None:
    """Wait until ``answers()`` is true or ``proc`` (a Popen) has ended; fail with the logs' ends unless it answered."""
    try:
        _wait_for(lambda: answers() or proc.poll() is not None, START_GUARD_S, what, interval)
        assert proc.poll() is None, f"{what}: the process ended with {proc.returncode}"
    except AssertionError as exc:
        raise AssertionError("\n".join([str(exc), *(log.read_text(errors="replace")[-3000:] for log in logs)])) from None


class PrivateRedis:
    """A redis-server of the test run's own, on a unix socket or a TCP port of the test slot's band;
    stoppable and pausable for outage tests."""

    def __init__(self, folder: Path, port: int | None = None):
        self.folder = folder
        self.socket = folder / "redis.sock"
        self.port = port
        self.proc: subprocess.Popen | None = None
        self.paused_pid: int | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0" if self.port else f"redis+socket://{self.socket}"

    @property
    def address(self) -> tuple[str, int] | str:
        """What a client's socket connects to."""
        return ("127.0.0.1", self.port) if self.port else str(self.socket)

    def start(self) -> None:
        listen = ["--port", str(self.port), "--bind", "127.0.0.1"] if self.port else \
            ["--port", "0", "--unixsocket", str(self.socket)]
        self.proc = subprocess.Popen(
            ["redis-server", *listen, "--dir", str(self.folder),
             "--appendonly", "yes", "--save", "", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL,
        )
        _wait_for(lambda: self._ping(), 10, "redis-server to answer")

    def _ping(self) -> bool:
        import redis

        try:
            if self.port:
                return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2).ping()
            return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=2).ping()
        except Exception:
            return False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.running():
            self.proc.terminate()
            self.proc.wait(10)

    def pause(self) -> None:
        """Stall it as a hung broker does: connections are accepted, nothing is answered."""
        self.paused_pid = self.proc.pid
        os.kill(self.paused_pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.paused_pid:
            os.kill(self.paused_pid, signal.SIGCONT)
            self.paused_pid = None


@pytest.fixture(scope="session", autouse=True)
def broker_url():
    """CELERY_BROKER_URL when given (CI's real Redis), else a private redis-server.

    Autouse and session-wide: the Celery app is pointed at it before any test
    can send a message, so nothing ever talks to a broker that is not there.
    """
    from takehome.celery import app

    given = os.environ.get("CELERY_BROKER_URL")
    if given:
        yield given
        return
    if shutil.which("redis-server") is None:
        yield None
        return
    # why /tmp and a short name: a unix socket path must stay under 108 bytes.
    folder = Path(tempfile.mkdtemp(prefix="th-redis-"))
    server = PrivateRedis(folder)
    server.start()
    app.conf.broker_url = server.url
    yield server.url
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def point_celery_at(url: str, environment: str | None) -> None:
    """Send this process's Celery messages to ``url``, with ``environment`` as CELERY_BROKER_URL (None:
    unset). Celery reads that variable before its own configuration, and keeps connections in pools made
    for the broker it had: all three change together. The pools are kombu's, kept per broker for the whole
    process (kombu.pools): they are closed and forgotten, or pointing back here would find the closed one."""
    from kombu import pools

    from takehome.celery import app

    if environment is None:
        os.environ.pop("CELERY_BROKER_URL", None)
    else:
        os.environ["CELERY_BROKER_URL"] = environment
    app.conf.broker_url = url
    pools.reset()
    app._pool = None
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None


@pytest.fixture
def stoppable_broker(broker_url, request):
    """A broker of this test's own, stoppable (or pausable) for an outage test, in place of the run's.

    Never the run's broker: other test processes share the machine's Redis, and
    an outage there would reach their tests. The stand-in listens the way the
    run's broker does (a TCP port when that is one, a unix socket otherwise),
    keeps its queue on disk (appendonly) so messages sent before a stop are
    there after the start, and takes this process's Celery messages and those
    of a worker started from ``worker_env`` for the length of the test.
    """
    require(shutil.which("redis-server") is not None, "redis-server is not installed (apt-get install redis-server)")
    assert "celery_worker_proc" not in request.fixturenames, \
        "start the worker inside an outage test, from worker_env, so that it uses the test's own broker"
    folder = Path(tempfile.mkdtemp(prefix="th-redis-"))
    server = PrivateRedis(folder, port=free_port() if (broker_url or "").startswith("redis://") else None)
    server.start()
    before = os.environ.get("CELERY_BROKER_URL")
    point_celery_at(server.url, server.url)
    if "worker_env" in request.fixturenames:
        request.getfixturevalue("worker_env")["CELERY_BROKER_URL"] = server.url
    try:
        yield server
    finally:
        server.resume()
        server.stop()
        point_celery_at(broker_url, before)
        shutil.rmtree(folder, ignore_errors=True)


def database_url() -> str:
    """The URL of the database the tests are using right now (the test database)."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    if connection.vendor == "postgresql":
        auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
        return f"postgres://{auth}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"
    raise RuntimeError(f"no worker support for {connection.vendor}")


class Worker:
    """A real `celery worker` subprocess against the test database and broker."""

    def __init__(self, env: dict, log: Path, name: str = ""):
        # Workers of one test share a name unless told otherwise: a second one is the first restarted.
        self.env, self.log, self.proc = env, log, None
        self.name = name or f"test-{os.getpid()}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "takehome", "worker", "--loglevel=INFO",
             "--concurrency=1", "--without-gossip", "--without-mingle", "--hostname", f"{self.name}@%h"],
            cwd=ROOT, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def worker_env(transactional_db, broker_url, settings):
    """Environment for subprocesses that must share the test's database and broker."""
    require(broker_url is not None, "redis-server is not installed (apt-get install redis-server)")
    return {
        **os.environ,
        "DEBUG": "true",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        "TAKEHOME_MEDIA_ROOT": str(settings.MEDIA_ROOT),
    }


@pytest.fixture
def celery_worker_proc(worker_env, tmp_path):
    worker = Worker(worker_env, tmp_path / "worker.log")
    worker.start()
    yield worker
    worker.stop()


# --- the per-minute limits ----------------------------------------------------------------


class _HeldClock:
    """The time module with time() held at one moment: what a limiter module sees as ``time``."""

    def __init__(self, at: float):
        self.at = at

    def time(self) -> float:
        return self.at

    def __getattr__(self, name: str):
        return getattr(time, name)


@pytest.fixture
def held_minute(monkeypatch):
    """The per-minute limits (link look-ups, API calls) count in the middle of one minute for the whole test.

    why: their window is a wall-clock minute, so a test's requests that straddle a minute's turn were counted
    in two windows and the last one was not refused; on a loaded machine that happened.
    """
    from api import ratelimit
    from sessions_app import links

    clock = _HeldClock(time.time() // 60 * 60 + 30)
    for module in (links, ratelimit):
        monkeypatch.setattr(module, "time", clock)
    return clock


# --- headless Chromium -------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser():
    require(Path(CHROMIUM).exists(), f"{CHROMIUM} is missing (apt-get install chromium)")
    # why: playwright's sync API runs an event loop in this thread; the ORM
    # calls the tests make between page steps are still synchronous and safe.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
        )
        yield chromium
        chromium.close()


class InFlight:
    """The live server's application, counting the requests it has not finished answering. A page closed at
    a test's end may leave one running in the server's thread (a save sent as the page went); the database
    is emptied for the next test only once it is done, or the two meet (on PostgreSQL the flush fails, and
    the next test finds the last one's rows)."""

    def __init__(self, app):
        self.app = app
        self.running = 0
        self.changed = threading.Condition()

    def _done(self):
        with self.changed:
            self.running -= 1
            self.changed.notify_all()

    def __call__(self, environ, start_response):
        with self.changed:
            self.running += 1
        try:
            body = self.app(environ, start_response)
        except BaseException:
            self._done()
            raise
        return _ClosingBody(body, self._done)

    def wait_idle(self, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.running == 0, timeout)


class _ClosingBody:
    """A WSGI body that says when the server has closed it (the request is then answered)."""

    def __init__(self, body, on_close):
        self.body, self.on_close = body, on_close

    def __iter__(self):
        return iter(self.body)

    def close(self):
        try:
            if hasattr(self.body, "close"):
                self.body.close()
        finally:
            self.on_close()


def in_flight(live_server) -> InFlight:
    """The live server's request counter, put in front of its application on first use."""
    httpd = live_server.thread.httpd
    app = httpd.get_app()
    if not isinstance(app, InFlight):
        app = InFlight(app)
        httpd.set_app(app)
    return app


@pytest.fixture
def page(browser, request):
    server = in_flight(request.getfixturevalue("live_server")) if "live_server" in request.fixturenames else None
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()
    if server is not None:
        assert server.wait_idle(60), "the live server was still answering a request a minute after the page closed"


def log_in(page, base: str, username: str) -> None:
    """Log in through the form, as a person would, with the password the fixtures give (pw-NAME)."""
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def wait_until(page, expression: str, timeout: float = 10.0):
    """Poll an expression from the test's side (a page whose policy allows no eval of strings, like the
    review page's, refuses playwright's wait_for_function)."""
    deadline = time.monotonic() + timeout
    while not (value := page.evaluate(expression)):
        assert time.monotonic() < deadline, f"never true: {expression}"
        page.wait_for_timeout(50)
    return value


def wait_focused(page, element_id: str, timeout: float = 10.0) -> None:
    """Wait for the focus to reach ``#element_id``: where a page moves it after a swap or a message (htmx's
    autofocus settles after the new content shows), reading ``document.activeElement`` at once races it."""
    expression = f"document.activeElement && document.activeElement.id === {element_id!r}"
    try:
        wait_until(page, expression, timeout)
    except AssertionError:
        now = page.evaluate("document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : null")
        raise AssertionError(f"the focus never reached #{element_id}; it is on {now}") from None


# why not docs/screenshots/ itself: the tests never change a tracked file; `make screenshots` runs the tests
# that take them with SCREENSHOTS_DIR there, to refresh the pictures the README and the docs show.
SCREENSHOTS = Path(os.environ.get("SCREENSHOTS_DIR") or ROOT / "var" / "screenshots")


def screenshot(page, name: str) -> Path:
    """Keep a screenshot of the page under SCREENSHOTS (var/screenshots/, or docs/screenshots/ for
    `make screenshots`)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@contextmanager
def warm_pools_end_with_it():
    """A warm sandbox pool started in this process inside the block is ended when the block ends."""
    from grading.engine.sandbox import warm

    before = set(warm._POOLS)
    try:
        yield
    finally:
        with warm._POOLS_LOCK:
            ending = [key for key in warm._POOLS if key not in before and key[0] == os.getpid()]
            pools = [warm._POOLS.pop(key) for key in ending]
        for pool in pools:
            pool.close()


@pytest.fixture(autouse=True)
def _warm_pools_end_with_their_test():
    """A warm sandbox pool a test started in this process (grading in-process starts one) ends with it.

    why: a pool keeps refilling from a thread of its own for the life of the process, so every later test
    of this worker shared its CPU with sandboxes nobody would take, and a process forked then (daphne for
    the terminal tests) copied a process busy in that thread.
    """
    with warm_pools_end_with_it():
        yield


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # why: the default hasher is slow on purpose; tests log in hundreds of times.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# -- a package index on disk, for packets' environments (no network) ----------------------

@dataclass(frozen=True)
class LocalIndex:
    url: str
    sha256: dict[str, str]  # of each hand-made wheel, by project name
    setup_ran: Path  # the source-only release's setup.py would create this file


def _runner_wheels() -> Path:
    """The runner's pinned wheels, downloaded once into var/ (for each version of the pins)."""
    import fcntl

    from django.conf import settings

    from grading.engine.runner import RUNNER_REQUIREMENTS

    digest = hashlib.sha256(RUNNER_REQUIREMENTS.read_bytes()).hexdigest()[:12]
    folder = Path(settings.VAR_DIR) / "test-wheels" / digest
    if (folder / "complete").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    # why a lock: on a fresh checkout each test process asks at once; one downloads, and none removes the
    # folder while another copies from it
    with open(folder.with_name(folder.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "complete").exists():
            return folder
        staging = folder.with_name(folder.name + f".{os.getpid()}")
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
             "-d", str(staging), "-r", str(RUNNER_REQUIREMENTS)],
            capture_output=True, text=True,
        )
        require(done.returncode == 0, f"could not download the runner's wheels: {done.stderr[-500:]}")
        (staging / "complete").write_text("")
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    return folder


@pytest.fixture(scope="session")
def seed_envs(tmp_path_factory):
    """Puts into a new environments' folder the bare venv of /usr/bin/python3 that its first build would make
    (grading.engine.runner._seed_for: ``python -m venv``, about 3 s of CPU), made once per test process. The
    tests of what a build does start from it as a worker's second build does; one test makes its own."""
    from grading.engine import runner

    seed = runner._seed_for(Path("/usr/bin/python3"), tmp_path_factory.mktemp("env-seed"), 300)

    def into(folder: Path) -> None:
        shutil.copytree(seed, folder / seed.name, symlinks=True)

    return into


@pytest.fixture(scope="session")
def local_index(tmp_path_factory) -> LocalIndex:
    """A PEP 503 index on disk: tinylib 1.0 and 1.1, clash (needs pluggy<1), an old pluggy,
    needsnew (Python >=3.99 only), srconly (source only) and the runner's pinned wheels."""
    from grading.tests.pypi import make_sdist, make_wheel, sha256_of, write_index

    made = tmp_path_factory.mktemp("wheels")
    setup_ran = tmp_path_factory.mktemp("setup") / "setup-ran"
    files = [
        make_wheel(made, "tinylib", "1.0"),
        make_wheel(made, "tinylib", "1.1"),
        make_wheel(made, "clash", "1.0", requires=["pluggy<1"]),
        make_wheel(made, "pluggy", "0.9"),
        make_wheel(made, "needsnew", "1.0", requires_python=">=3.99"),
        make_sdist(made, "srconly", "1.0", setup_writes=setup_ran),
        *sorted(_runner_wheels().glob("*.whl")),
    ]
    url = write_index(tmp_path_factory.mktemp("index"), files,
                      requires_python={"needsnew-1.0-py3-none-any.whl": ">=3.99"})
    return LocalIndex(url, {"tinylib": sha256_of(files[0]), "clash": sha256_of(files[2])}, setup_ran)
