"""The project's log lines: what each carries, how it is written, and the request id that ties them together.

Every line says when (ISO 8601, UTC, to the millisecond), how severe, which
logger, the message, and which web request or Celery task it was written
for. settings.LOGGING puts ``LogContext`` and one of the two formatters on
the one console handler: ``JsonFormatter`` (one JSON object a line, for a
log collector) when TAKEHOME_LOG_FORMAT is ``json``, ``ReadableFormatter``
otherwise.

A web request's id comes from the proxy's X-Request-ID when it sent a sane
one (so a line here matches the proxy's own log), else it is made here; the
response carries it back in the same header (``RequestIdMiddleware``). A
Celery task's lines carry its task id, the one the grading run stores.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime

from celery import current_task
from django.http import HttpRequest, HttpResponse

REQUEST_ID_HEADER = "X-Request-ID"
# why so strict: the id is written into every line of the request, and it comes from outside; no space,
# quote, newline or control character can reach a log line through it, and 128 characters is enough
# for any proxy's (a UUID is 36).
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+/=-]{0,127}")

_request_id: ContextVar[str | None] = ContextVar("takehome_request_id", default=None)
access_log = logging.getLogger("takehome.access")


def request_id_for(header: str | None) -> str:
    """The id of a request: the proxy's, when it sent a sane one; otherwise a new one."""
    if header and SANE_REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    """The id of the web request being served in this context; None outside one."""
    return _request_id.get()


def current_task_id() -> str | None:
    """The id of the Celery task running in this process; None outside one (or in a task called directly)."""
    if not current_task:  # a proxy: false where no task runs
        return None
    return current_task.request.id


class RequestIdMiddleware:
    """Give each request its id, for its log lines and on its response; log one line when it is answered.

    First in MIDDLEWARE, so every other middleware's lines carry the id too.
    Synchronous, as the middleware after it: under ASGI, Django runs the whole
    chain in one thread, whose context the view's lines are logged in.
    The access line names the URL's route (``/t/<str:token>/upload``), never its
    path: a candidate's path holds their link's secret token.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started, token = self._begin(request)
        try:
            response = self.get_response(request)
            return self._end(request, response, started)
        finally:
            _request_id.reset(token)

    def _begin(self, request: HttpRequest):
        request.request_id = request_id_for(request.headers.get(REQUEST_ID_HEADER))
        return time.monotonic(), _request_id.set(request.request_id)

    def _end(self, request: HttpRequest, response: HttpResponse, started: float) -> HttpResponse:
        response[REQUEST_ID_HEADER] = request.request_id
        match = getattr(request, "resolver_match", None)
        route = f"/{match.route}" if match is not None and match.route is not None else "(no route)"
        access_log.info("%s %s %s %.0f ms", request.method, route, response.status_code,
                        (time.monotonic() - started) * 1000)
        return response


class LogContext(logging.Filter):
    """Put the request id or the task id on each record (``request_id``, ``task_id``: None when there is none).

    Django logs a 4xx or 5xx answer after the middleware has returned; its
    record carries the request, which carries its id.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id() or getattr(getattr(record, "request", None), "request_id", None)
        if getattr(record, "task_id", None) is None:
            record.task_id = current_task_id()
        return True


class QuietHeartbeat(logging.Filter):
    """The workers' heartbeat, sent every few seconds (shared.tasks.record_heartbeat), writes no INFO lines.

    Beat's "Sending due task", the worker's "received" and "succeeded" would be most of what `make run` shows
    and most of a quiet server's logs; a heartbeat that fails (WARNING and up) is still said.
    """

    TASK = "shared.tasks.record_heartbeat"

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or self.TASK not in record.getMessage()


class NoTracebackForClientErrors(logging.Filter):
    """A 4xx answer (a 403 to the wrong role, a 404) logs one line, not a traceback that reads like a crash.

    Django logs "Forbidden (Permission denied): /team/" with the exception
    attached; the answer was right, so the traceback is noise. 5xx keep theirs.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True


def utc_time(record: logging.LogRecord) -> str:
    """When the record was made, ISO 8601 in UTC to the millisecond: 2025-03-01T09:30:00.123Z."""
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and request_id or task_id when there is one.

    A traceback goes whole into ``exception``, so a line is always one line.
    """

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": utc_time(record), "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        for key in ("request_id", "task_id"):
            value = getattr(record, key, None)
            if value:
                line[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str)


class ReadableFormatter(logging.Formatter):
    """A line for people: ``2025-03-01T09:30:00.123Z INFO grading.tasks [task 8c1e...] message``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(context)s %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_time(record)

    def format(self, record: logging.LogRecord) -> str:
        request_id, task_id = getattr(record, "request_id", None), getattr(record, "task_id", None)
        record.context = f" [request {request_id}]" if request_id else f" [task {task_id}]" if task_id else ""
        return super().format(record)
