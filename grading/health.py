"""Readiness: is a grading worker alive (shared/health.py asks; grading.apps registers it)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from shared.health import FAIL, OK, UNKNOWN, Check
from shared.models import WorkerHeartbeat

from .models import GradingRun


def _ago(then: datetime, now: datetime) -> str:
    seconds = max(0, round((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def workers_alive(database_up: bool) -> Check:
    """Ready when a worker reported in within TAKEHOME_WORKER_HEARTBEAT_S, or is grading and noted so that
    recently.

    why the grading runs too: a worker reports in by taking the task beat sends, from the same queue as the
    gradings, so a worker busy with a backlog takes it late (or never: it expires). Each run it grades notes
    its own heartbeat every TAKEHOME_GRADING_HEARTBEAT_S meanwhile, which says as well that it is alive.
    """
    if not database_up:
        return Check("workers", UNKNOWN, "not asked: the database does not answer")
    now = timezone.now()
    window = settings.WORKER_HEARTBEAT_S
    since = now - timedelta(seconds=window)
    beat = WorkerHeartbeat.objects.filter(seen_at__gte=since).order_by("-seen_at").first()
    if beat is not None:
        return Check("workers", OK, f"{beat.hostname} reported in {_ago(beat.seen_at, now)}")
    run = (GradingRun.objects.filter(outcome=GradingRun.Outcome.RUNNING, heartbeat_at__gte=since)
           .order_by("-heartbeat_at").first())
    if run is not None:
        return Check("workers", OK, f"{run.worker or 'a worker'} is grading (noted {_ago(run.heartbeat_at, now)})")
    last = WorkerHeartbeat.objects.order_by("-seen_at").first()
    seen = f"the last report: {last.hostname}, {_ago(last.seen_at, now)}" if last else "none has ever reported"
    return Check("workers", FAIL, f"no worker reported in within {window:g} s ({seen}); a worker reports in "
                                  "when beat asks: are a worker and beat running, and the broker up?")
