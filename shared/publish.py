"""Sending a Celery task without ever holding a request on a broker that is down or stalls.

Nothing here asks the broker what it holds: the database says what is left
to do, and each caller's sweep sends again what is still due
(grading.lifecycle.due_for_sending, takehome.actions.do_resend_stale_checks).

why a connection of its own: Celery's producer pool connects with the broker
settings the worker consumes with, and those wait for ever on a Redis that
accepts the connection but never answers (paused, or a full network buffer).
Giving them a short ``socket_timeout`` would also cut the worker's own BRPOP,
which blocks on the socket by design (redis-py#2807; celery#3046 saw workers
die of it), so only this sending side gets short timeouts and no retries.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.conf import settings
from kombu.exceptions import OperationalError

log = logging.getLogger(__name__)


def _short_timeouts() -> dict:
    timeout = settings.BROKER_SEND_TIMEOUT_S
    return {"transport_options": {"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0},
            "connect_timeout": timeout}


def send(task, args: tuple, task_id: str | None = None) -> bool:
    """Publish ``task(*args)`` (as ``task_id`` when given); False, within about
    TAKEHOME_BROKER_SEND_TIMEOUT_S, when the broker cannot take it.

    A False is not proof the message is lost: a paused Redis may still run the
    command it had received once it resumes. The caller's sweep copes with both.
    """
    timeout = settings.BROKER_SEND_TIMEOUT_S
    try:
        with current_app.connection_for_write(**_short_timeouts()) as connection:
            try:
                task.apply_async(args, connection=connection, retry=False, task_id=task_id)
            except connection.connection_errors as exc:
                raise OperationalError(str(exc)) from exc
    except OperationalError as exc:
        log.warning("the broker did not take %s%s within %s s: %s", task.name, args, timeout, exc)
        return False
    return True
