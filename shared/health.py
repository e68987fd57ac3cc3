"""Is this installation alive, and ready to serve: `/healthz`, `/readyz` and `manage.py health`.

`/healthz` says the web process answers, and touches nothing else. `/readyz`
runs the readiness checks: the database, the broker and (where uploads are
kept in one) the S3 bucket here, and those the apps register in their
``AppConfig.ready`` (grading: a worker alive; the candidate's side: this
host's workspace host). Each answers with a state and
a short reason, and gives up after TAKEHOME_HEALTH_TIMEOUT_S, so a probe
polled every few seconds never hangs on a service that is down or stalled.

Anyone may ask, so a reason says what an operator needs to act and nothing
more: no password (the credentials in a URL are dropped), no folder (a path
is cut to its last part).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from celery import current_app
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import load_backend
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers

from shared import stored

OK, FAIL, OFF, UNKNOWN = "ok", "fail", "off", "unknown"

REASON_MAX = 200
# scheme://user:password@ in an error's text: the credentials go, the rest stays readable.
_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)[^/\s@]*@", re.IGNORECASE)
# An absolute path in an error's text (a socket's, a database file's): its last part is enough to act on.
_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.+-]+/)+(?P<name>[\w.+-]+)")


@dataclass(frozen=True)
class Check:
    name: str
    state: str  # OK, FAIL, OFF (does not apply here) or UNKNOWN (could not be asked: what it needs is down)
    reason: str

    @property
    def passed(self) -> bool:
        return self.state in (OK, OFF)


@dataclass(frozen=True)
class Readiness:
    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return all(check.passed for check in self.checks)

    def as_json(self) -> dict:
        return {"status": "ready" if self.ready else "not ready",
                "checks": {c.name: {"state": c.state, "reason": c.reason} for c in self.checks}}


# The apps' checks by name (register()), run after the database's and the broker's.
_APP_CHECKS: dict[str, Callable[[bool], Check]] = {}


def plain_error(exc: BaseException) -> str:
    """An exception as one short line fit to show anyone: its class and first line, with a URL's credentials
    dropped and a path cut to its last part."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = _PATH.sub(r"\g<name>", _CREDENTIALS.sub(r"\g<scheme>", text))
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line[:REASON_MAX]


def guarded(name: str, check: Callable[[], Check]) -> Check:
    """Run ``check``; an exception it raises is that check failing, with the error as its reason."""
    try:
        return check()
    except Exception as exc:
        return Check(name, FAIL, plain_error(exc))


def _elapsed_ms(start: float) -> int:
    return round((time.monotonic() - start) * 1000)


def check_database() -> Check:
    """SELECT 1 on a connection of its own, whose connect gives up after the timeout (PostgreSQL's
    ``connect_timeout``; SQLite opens a local file), so the request's own connection is never the one left
    waiting on a server that is down."""
    live = connections[DEFAULT_DB_ALIAS].settings_dict
    probe_settings = {**live, "OPTIONS": dict(live.get("OPTIONS", {}))}
    if probe_settings["ENGINE"].endswith("postgresql"):
        # why at least 2: libpq takes any smaller connect_timeout as 2 s
        probe_settings["OPTIONS"]["connect_timeout"] = max(2, math.ceil(settings.HEALTH_TIMEOUT_S))
    start = time.monotonic()
    probe = load_backend(probe_settings["ENGINE"]).DatabaseWrapper(probe_settings, DEFAULT_DB_ALIAS)
    try:
        with probe.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        probe.close()
    return Check("database", OK, f"answered in {_elapsed_ms(start)} ms")


def check_broker() -> Check:
    """Connect to the broker and ping it, with the timeout on the connect and on each reply and no retries,
    on a connection of its own (as shared.publish sends): a Redis that is down fails at once, a stalled one
    within the timeout."""
    timeout = settings.HEALTH_TIMEOUT_S
    options = {"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0}
    start = time.monotonic()
    with current_app.connection_for_read(connect_timeout=timeout, transport_options=options) as connection:
        connection.default_channel  # noqa: B018  (opening the channel connects; kombu's Redis pings there)
    return Check("broker", OK, f"answered in {_elapsed_ms(start)} ms")


# How long the bucket's answer is reused: a probe polled every second asks the S3 server at most this often.
STORAGE_CACHE_S = 5.0
_storage_seen: dict[tuple, tuple[float, str | None]] = {}


def check_storage() -> Check:
    """Where uploads and recordings are kept in an S3 bucket (TAKEHOME_STORAGE=s3): the bucket answers a HEAD,
    within the timeout. Its answer is reused for STORAGE_CACHE_S, for the same bucket and server, so frequent
    probes stay cheap (and cost no request each on a paid S3). On this disk: off (the database's and the
    process's own checks cover it)."""
    if not stored.in_bucket():
        return Check("storage", OFF, "uploads and recordings are on this disk (TAKEHOME_STORAGE=filesystem)")
    options = settings.STORAGES["default"].get("OPTIONS", {})
    key = (options.get("bucket_name"), options.get("endpoint_url"), options.get("access_key"))
    now = time.monotonic()
    seen = _storage_seen.get(key)
    if seen is None or not 0 <= now - seen[0] < STORAGE_CACHE_S:
        seen = (now, stored.bucket_problem(settings.HEALTH_TIMEOUT_S))
        _storage_seen.clear()  # why: one entry, that of the bucket in use
        _storage_seen[key] = seen
    at, problem = seen
    when = "just now" if now - at < 1 else f"{now - at:.0f} s ago"
    if problem is not None:
        return Check("storage", FAIL, f"{problem} (asked {when})")
    return Check("storage", OK, f"the bucket answered (asked {when})")


def register(name: str, check: Callable[[bool], Check]) -> None:
    """Add an app's readiness check, from its AppConfig.ready. It is called with whether the database
    answered; one that reads the database answers UNKNOWN when it did not, rather than wait on it again."""
    _APP_CHECKS[name] = check


def check_names() -> list[str]:
    return ["database", "broker", "storage", *_APP_CHECKS]


def readiness(names: tuple[str, ...] | list[str] = ()) -> Readiness:
    """The readiness checks named (every one when none is), in check_names() order. The database is asked
    whatever the names: the apps' checks need to know whether it answers."""
    wanted = set(names or check_names())
    database = guarded("database", check_database)
    checks = [database]
    if "broker" in wanted:
        checks.append(guarded("broker", check_broker))
    if "storage" in wanted:
        checks.append(guarded("storage", check_storage))
    for name, check in _APP_CHECKS.items():
        if name in wanted:
            checks.append(guarded(name, lambda check=check: check(database.passed)))
    return Readiness(tuple(c for c in checks if c.name in wanted))


def _json(data: dict, status: int) -> HttpResponse:
    response = JsonResponse(data, status=status)
    add_never_cache_headers(response)  # why: a cached "ready" would hide an outage from the next probe
    response["X-Content-Type-Options"] = "nosniff"
    return response


class HealthMiddleware:
    """Answers GET or HEAD /healthz and /readyz before any other middleware runs.

    why first in MIDDLEWARE, and not views: a probe must be answered whatever
    Host it names (a container's healthcheck says 127.0.0.1, not one of
    ALLOWED_HOSTS), over plain http (SecurityMiddleware would redirect it to
    https), without a session, CSRF, login or django-axes, and never cached.
    Nothing it answers depends on the Host or on who asks, and it sets no
    cookie.
    """

    PATHS = ("/healthz", "/readyz")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info not in self.PATHS:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = _json({"error": "Only GET and HEAD are answered here."}, 405)
            response["Allow"] = "GET, HEAD"
            return response
        if request.path_info == "/healthz":
            return _json({"status": "alive"}, 200)
        result = readiness()
        response = _json(result.as_json(), 200 if result.ready else 503)
        # why: Django logs every 5xx as an error; a probe polled every few seconds during an outage would fill
        # the log with "Service Unavailable: /readyz". Not ready is an answer here, not a server error.
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response
