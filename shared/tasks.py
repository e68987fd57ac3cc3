"""The workers' heartbeat task."""

import socket

from celery import shared_task
from django.utils import timezone

from .models import WorkerHeartbeat


@shared_task(ignore_result=True)
def record_heartbeat(hostname: str = "") -> str:
    """Note that a worker is alive (beat sends this every 30 s) and which caps its
    sandbox enforces; pages show both."""
    from grading.pipeline import sandbox_caps  # detected where the task runs: on a worker

    name = hostname or socket.gethostname()
    WorkerHeartbeat.objects.update_or_create(
        hostname=name, defaults={"seen_at": timezone.now(), "caps": sandbox_caps()[:500]}
    )
    return name
