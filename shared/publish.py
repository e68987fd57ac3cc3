"""Sending a Celery task without ever holding a request on a broker that is down or stalls,
and asking the broker which of a task's messages it still holds.

why a connection of its own: Celery's producer pool connects with the broker
settings the worker consumes with, and those wait for ever on a Redis that
accepts the connection but never answers (paused, or a full network buffer).
Giving them a short ``socket_timeout`` would also cut the worker's own BRPOP,
which blocks on the socket by design (redis-py#2807; celery#3046 saw workers
die of it), so only this sending side gets short timeouts and no retries.
"""

from __future__ import annotations

import json
import logging

from celery import current_app
from django.conf import settings
from kombu.exceptions import OperationalError

log = logging.getLogger(__name__)

# Messages read from the broker per reply while looking for pending ones.
PAGE = 500


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


def pending_task_ids(task) -> set[str] | None:
    """The ids of ``task``'s messages the broker still holds: waiting in the task's queue, or delivered to
    a worker and not acknowledged yet. None when the broker cannot be asked: down or stalled (within about
    TAKEHOME_BROKER_SEND_TIMEOUT_S per reply), or not Redis.

    One pass, read in pages of PAGE: the queue's lists (kombu's Redis transport
    keeps one per priority step), then the transport's hash of unacknowledged
    messages, which holds a message from its delivery (a worker's reserved and
    running tasks, a retry waiting for its countdown) until it is acknowledged,
    or handed back to the queue after the visibility timeout. Reading the queue
    first and the hash second, a message moving from one to the other in the
    meantime is seen.
    """
    queue = current_app.amqp.router.route({}, task.name)["queue"].name
    try:
        with current_app.connection_for_read(**_short_timeouts()) as connection:
            if connection.transport.driver_type != "redis":
                log.warning("cannot ask a %s broker which messages are pending", connection.transport.driver_type)
                return None
            try:
                return _pending_in_redis(connection.default_channel, queue, task.name)
            except (*connection.connection_errors, *connection.channel_errors) as exc:
                raise OperationalError(str(exc)) from exc
    except OperationalError as exc:
        log.warning("could not ask the broker which %s messages are pending: %s", task.name, exc)
        return None


def _pending_in_redis(channel, queue: str, task_name: str) -> set[str]:
    # why the channel's own names: they follow the transport options (priority
    # steps, the unacked key, a global key prefix) as the workers see them.
    client = channel.client
    found: set[str] = set()
    for key in dict.fromkeys(channel._q_for_pri(queue, step) for step in channel.priority_steps):
        # why from the left: kombu pushes there and workers take from the right, so a message pushed
        # between two pages only moves the others further on: one may be read twice, none is skipped.
        start = 0
        while page := client.lrange(key, start, start + PAGE - 1):
            found.update(_task_ids(page, task_name))
            start += PAGE
    # why no mutex: kombu's own restore holds one while it moves messages back, which this only reads.
    delivered = (json.loads(value)[0] for _, value in client.hscan_iter(channel.unacked_key, count=PAGE))
    found.update(_task_ids(delivered, task_name))
    return found


def _task_ids(messages, task_name: str) -> set[str]:
    """The task ids of the messages (kombu's JSON envelopes, raw or parsed) that run ``task_name``."""
    ids = set()
    for message in messages:
        envelope = json.loads(message) if isinstance(message, (bytes, str)) else message
        headers = envelope.get("headers") or {}
        if headers.get("task") == task_name and headers.get("id"):
            ids.add(headers["id"])
    return ids
