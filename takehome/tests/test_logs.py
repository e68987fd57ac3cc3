"""The log lines (shared/logs.py, settings.LOGGING): time, level, logger, message and the request or task id.

The lines are read from the console handler settings.LOGGING configures, so
what is checked is what the processes write.
"""

import io
import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from celery import shared_task
from django.http import HttpResponse
from django.urls import include, path

from shared.logs import JsonFormatter, ReadableFormatter

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("takehome.tests.logs")


def logging_view(request):
    log.warning("inside the view")
    return HttpResponse("ok")


# The project's own URLs beside the test's view: the 404 page links to them.
urlpatterns = [path("logged/", logging_view), path("", include("takehome.urls"))]


@shared_task
def logging_task():
    log.warning("inside the task")


def console_handler() -> logging.Handler:
    return next(h for h in logging.getLogger().handlers if h.name == "console")


@pytest.fixture(params=["text", "json"])
def console(request):
    """What the settings' console handler writes, in each format, as a list of lines once the test reads it."""
    handler = console_handler()
    stream, formatter = io.StringIO(), handler.formatter
    handler.setFormatter(JsonFormatter() if request.param == "json" else ReadableFormatter())
    old = handler.setStream(stream)
    try:
        yield request.param, stream
    finally:
        handler.setStream(old)
        handler.setFormatter(formatter)


def lines_of(console, containing: str) -> list:
    """The lines holding ``containing``, each as a dict (JSON) or as the text itself."""
    kind, stream = console
    found = [line for line in stream.getvalue().splitlines() if containing in line]
    return [json.loads(line) for line in found] if kind == "json" else found


def carries(line, request_id: str = "", task_id: str = "") -> bool:
    if isinstance(line, dict):
        return line.get("request_id") == (request_id or None) and line.get("task_id") == (task_id or None)
    return (f"[request {request_id}]" in line) if request_id else (f"[task {task_id}]" in line)


def record(**attributes) -> logging.LogRecord:
    made = logging.LogRecord("grading.tasks", logging.WARNING, __file__, 1, "graded %s", ("it",), None)
    made.created = datetime(2025, 3, 1, 9, 30, 0, 123000, tzinfo=UTC).timestamp()
    for name, value in attributes.items():
        setattr(made, name, value)
    return made


@pytest.mark.parametrize("ids", [{}, {"request_id": "r-1"}, {"task_id": "t-1"}])
def test_a_json_line_has_time_level_logger_message_and_the_id(ids):
    line = json.loads(JsonFormatter().format(record(**ids)))
    assert line == {"time": "2025-03-01T09:30:00.123Z", "level": "WARNING", "logger": "grading.tasks",
                    "message": "graded it", **ids}


def test_a_json_line_keeps_a_traceback_on_its_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        text = JsonFormatter().format(record(exc_info=sys.exc_info()))
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["exception"]


def test_a_readable_line_starts_with_the_time_level_and_logger():
    assert ReadableFormatter().format(record(request_id="r-1")) == (
        "2025-03-01T09:30:00.123Z WARNING grading.tasks [request r-1] graded it")
    assert ReadableFormatter().format(record(task_id="t-1")).endswith("grading.tasks [task t-1] graded it")


@pytest.mark.urls(__name__)
def test_a_line_logged_during_a_request_carries_the_id_its_response_names(client, console):
    response = client.get("/logged/")
    request_id = response["X-Request-ID"]
    assert len(request_id) == 32  # made here: the request came with none
    [line] = lines_of(console, "inside the view")
    assert carries(line, request_id=request_id)
    # and the access line, which names the route, not the path
    [access] = lines_of(console, "GET /logged/ 200")
    assert carries(access, request_id=request_id)
    assert client.get("/logged/")["X-Request-ID"] != request_id


@pytest.mark.urls(__name__)
def test_the_same_under_asgi_where_the_view_runs_in_a_thread(async_client, console):
    """daphne serves the app through ASGI, which runs the middleware and the view away from the event loop."""
    from asgiref.sync import async_to_sync

    response = async_to_sync(async_client.get)("/logged/", headers={"X-Request-ID": "asgi-1"})
    assert response["X-Request-ID"] == "asgi-1"
    [line] = lines_of(console, "inside the view")
    assert carries(line, request_id="asgi-1")

@pytest.mark.urls(__name__)
@pytest.mark.parametrize("sent, kept", [
    ("3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b", True),
    ("caddy:01HZX3YV7K", True),
    ("two words", False),
    ("line\nbreak", False),
    ('quote"', False),
    ("x" * 129, False),
    ("-leading-dash", False),
])
def test_the_proxy_s_request_id_is_kept_only_when_sane(client, console, sent, kept):
    response = client.get("/logged/", headers={"X-Request-ID": sent})
    assert (response["X-Request-ID"] == sent) is kept
    [line] = lines_of(console, "inside the view")
    assert carries(line, request_id=response["X-Request-ID"])


@pytest.mark.urls(__name__)
def test_django_s_own_line_about_a_404_carries_the_request_id(client, console):
    """Django logs an error answer once the middleware has returned: its record's request carries the id."""
    response = client.get("/nowhere/", headers={"X-Request-ID": "req-404"})
    assert response.status_code == 404 and response["X-Request-ID"] == "req-404"
    [line] = lines_of(console, "Not Found: /nowhere/")
    assert carries(line, request_id="req-404")


def test_a_task_s_lines_carry_its_task_id(console):
    logging_task.apply(task_id="task-42")
    [line] = lines_of(console, "inside the task")
    assert carries(line, task_id="task-42")


def test_a_line_outside_a_request_or_task_carries_no_id(console):
    log.warning("on its own")
    [line] = lines_of(console, "on its own")
    if isinstance(line, dict):
        assert "request_id" not in line and "task_id" not in line
    else:
        assert line.endswith(" WARNING takehome.tests.logs on its own")


def test_celery_keeps_the_settings_logging(monkeypatch):
    """A worker's logging set-up leaves the root's handler as the settings made it (Celery would replace it)."""
    from takehome.celery import app

    for name in ("_MP_FORK_LOGLEVEL_", "_MP_FORK_LOGFILE_", "_MP_FORK_LOGFORMAT_"):
        monkeypatch.delenv(name, raising=False)  # Celery sets these; they are put back as they were
    monkeypatch.setattr(app.log, "already_setup", False)
    app.log.setup_logging_subsystem(loglevel="DEBUG", format="%(message)s")
    handlers = logging.getLogger().handlers
    assert [h.name for h in handlers if not type(h).__module__.startswith("_pytest")] == ["console"]
    assert isinstance(console_handler().formatter, ReadableFormatter)


def test_takehome_log_format_json_writes_json_lines(tmp_path):
    """The setting itself: a process started with TAKEHOME_LOG_FORMAT=json writes one JSON object a line."""
    env = {**os.environ, "TAKEHOME_ENV_FILE": "", "DEBUG": "true", "TAKEHOME_LOG_FORMAT": "json",
           "TAKEHOME_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "takehome.settings"}
    code = "import django, logging; django.setup(); logging.getLogger('probe').warning('hello %s', 'there')"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stderr.strip().splitlines()[-1])
    assert (line["level"], line["logger"], line["message"]) == ("WARNING", "probe", "hello there")
    assert datetime.fromisoformat(line["time"]).utcoffset().total_seconds() == 0


def test_the_heartbeat_s_routine_lines_are_left_out_and_its_failures_kept(console):
    # Celery's own wording: beat sends it, the worker receives it and says it succeeded, every few seconds.
    logging.getLogger("celery.beat").info("Scheduler: Sending due task %s (%s)", "record-heartbeat",
                                          "shared.tasks.record_heartbeat")
    logging.getLogger("celery.app.trace").info("Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s",
                                               {"name": "shared.tasks.record_heartbeat", "id": "h-1",
                                                "runtime": 0.004, "return_value": "'vm'"})
    logging.getLogger("celery.app.trace").info("Task %(name)s[%(id)s] succeeded", {"name": "grading.tasks.grade",
                                                                                    "id": "g-1"})
    logging.getLogger("celery.app.trace").error("Task %s[%s] raised unexpected: %s",
                                                "shared.tasks.record_heartbeat", "h-2", "OperationalError")
    assert lines_of(console, "record_heartbeat") and all("h-2" in str(line) for line in
                                                         lines_of(console, "record_heartbeat"))
    assert lines_of(console, "grading.tasks.grade")  # every other task's lines stay
