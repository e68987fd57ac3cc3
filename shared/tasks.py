"""The workers' heartbeat task, and the wait before a task of ours is tried again."""

import socket

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.utils import timezone

from .models import WorkerHeartbeat

RETRY_FIRST_S = 10
RETRY_LONGEST_S = 600


def retry_countdown(retries: int) -> int:
    """Seconds before try ``retries`` + 1: Celery's own backoff (what ``retry_backoff`` and ``retry_jitter``
    use), doubling from RETRY_FIRST_S up to RETRY_LONGEST_S, with full jitter, so tasks that failed together
    (a sandbox or a database that was down for all of them) do not come back all at once."""
    return get_exponential_backoff_interval(RETRY_FIRST_S, retries, RETRY_LONGEST_S, full_jitter=True)


@shared_task(ignore_result=True)
def record_heartbeat(hostname: str = "") -> str:
    """Note that a worker is alive (beat sends this every 30 s) and which caps its
    sandbox enforces; pages show both."""
    from .sandboxes import sandbox_caps  # detected where the task runs: on a worker

    name = hostname or socket.gethostname()
    WorkerHeartbeat.objects.update_or_create(
        hostname=name, defaults={"seen_at": timezone.now(), "caps": sandbox_caps()[:500]}
    )
    return name
