"""A write the server cannot do right now answers 503 with Retry-After, never a 500 page.

The database busy past its timeout, refusing writes or out of reach, a full
disk, and the storage of uploads (a bucket) out of reach, are the server's
state, not the client's mistake: the request's transaction has rolled back,
so nothing of it was stored, and the same request sent again later will do.
The answer says so in the form the client reads: JSON for gate.py and
scripts, a notice for htmx, a page for browsers.

why 503 for a full disk too, not 507: every client we have (gate.py, the
browser page, a load tool) already knows 503 with Retry-After as "not
stored, send it again later"; 507 is WebDAV's, which none of them treats as
retryable. The JSON ``code`` still tells a script which it was.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import sys
from dataclasses import dataclass

from django.conf import settings
from django.db import Error as DatabaseError
from django.db import InterfaceError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

from shared.http import wants_json
from shared.stored import StorageUnavailable
from shared.words import counted

log = logging.getLogger(__name__)

BUSY, NO_SPACE, DOWN = "busy", "no_space", "unavailable"
# The disk (or the user's quota) is full.
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)

# SQLite's primary result codes (the name before any extended suffix).
SQLITE_KINDS = {
    "SQLITE_BUSY": BUSY,
    "SQLITE_LOCKED": BUSY,
    "SQLITE_PROTOCOL": BUSY,
    "SQLITE_FULL": NO_SPACE,
    "SQLITE_READONLY": DOWN,
    "SQLITE_IOERR": DOWN,
    "SQLITE_CANTOPEN": DOWN,
}
# PostgreSQL's SQLSTATEs: exact codes first, then classes (the first two characters).
PG_KINDS = {
    "40001": BUSY,  # serialization_failure
    "40P01": BUSY,  # deadlock_detected
    "55P03": BUSY,  # lock_not_available (lock_timeout)
    "57014": BUSY,  # query_canceled (statement_timeout)
    "53300": BUSY,  # too_many_connections
    "53100": NO_SPACE,  # disk_full
    "25006": DOWN,  # read_only_sql_transaction (a replica, or a read-only switch)
}
PG_CLASS_KINDS = {"08": DOWN, "53": DOWN, "57": DOWN, "58": DOWN}


class Unavailable(Exception):
    """Raised by a view that found the server unable to store what was sent (a full disk while receiving)."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class Outage:
    kind: str  # BUSY, NO_SPACE or DOWN

    @property
    def retry_after(self) -> int:
        return settings.RETRY_AFTER_BUSY_S if self.kind == BUSY else settings.RETRY_AFTER_FAULT_S


def _database_kind(exc: DatabaseError) -> str | None:
    cause = exc.__cause__
    if isinstance(cause, sqlite3.Error):
        name = getattr(cause, "sqlite_errorname", "") or ""
        return SQLITE_KINDS.get("_".join(name.split("_")[:2]))
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if state:
        return PG_KINDS.get(state) or PG_CLASS_KINDS.get(state[:2])
    # No SQLSTATE: the client library failed before the server answered (refused, reset).
    if isinstance(exc, InterfaceError) or type(exc).__name__ == "OperationalError":
        return DOWN
    return None


def classify(exc: BaseException) -> Outage | None:
    """The outage ``exc`` means, or None when it is a bug (or anything a retry would not cure)."""
    if isinstance(exc, Unavailable):
        return Outage(exc.kind)
    if isinstance(exc, DatabaseError):
        kind = _database_kind(exc)
        return Outage(kind) if kind else None
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        return Outage(NO_SPACE)
    if isinstance(exc, StorageUnavailable):  # the bucket of uploads and recordings did not answer
        return Outage(DOWN)
    return None


def _not_done(request: HttpRequest) -> str:
    """What became of the request, in the words of the person who sent it."""
    if request.method in ("GET", "HEAD"):
        return "this page could not be loaded; nothing you stored before is lost"
    if request.content_type == "multipart/form-data":
        return "your upload was not stored"
    return "what you sent was not saved"


def message(request: HttpRequest, outage: Outage) -> str:
    seconds = outage.retry_after
    wait = f"Try again in {counted(seconds, 'second')}"
    if outage.kind == BUSY:
        return f"The server is busy right now, so {_not_done(request)}. {wait}."
    if outage.kind == NO_SPACE:
        problem = "The server has no room left to store files"
    else:
        problem = "The server cannot save anything right now"
    return (f"{problem}, so {_not_done(request)}. {wait}; if it keeps happening, tell the people who run "
            "this site (the problem is in their log).")


def unavailable_response(request: HttpRequest, outage: Outage) -> HttpResponse:
    """503 with Retry-After: JSON for scripts, a notice for htmx, a page for browsers. Reads no database."""
    text = message(request, outage)
    if wants_json(request):
        response = JsonResponse({"code": outage.kind, "message": text, "retry_after": outage.retry_after,
                                 "stored": False}, status=503)
    else:
        context = {"message": text, "outage": outage}
        if getattr(request, "htmx", False):
            response = HttpResponse(render_to_string("takehome/_unavailable_notice.html", context), status=503)
            # why: base.html's #server-busy takes the notice and lets it in; the form
            # the request came from stays as it was, ready to send again.
            response["HX-Retarget"] = "#server-busy"
            response["HX-Reswap"] = "innerHTML"
        else:
            # why no request context: the auth context reads the session, maybe the very database that is down.
            response = HttpResponse(render_to_string("503.html", context), status=503)
    response["Retry-After"] = str(outage.retry_after)
    response._has_been_logged = True  # why: _log() said it once, at the right level; Django would add an ERROR
    return response


def _log(request: HttpRequest, outage: Outage, exc: BaseException) -> None:
    if outage.kind == BUSY:
        log.warning("503 (busy) for %s %s: %s", request.method, request.path, exc)
    else:
        log.error("503 (%s) for %s %s", outage.kind, request.method, request.path, exc_info=exc)


class UnavailableMiddleware:
    """Turn a view's outage (see ``classify``) into a 503 with Retry-After."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        outage = classify(exc)
        if outage is None:
            return None
        _log(request, outage, exc)
        return unavailable_response(request, outage)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: an outage met outside a view (a session saved after it) is a 503 too."""
    exc = sys.exc_info()[1]
    outage = classify(exc) if exc is not None else None
    if outage is None:
        return defaults.server_error(request)
    _log(request, outage, exc)
    return unavailable_response(request, outage)
