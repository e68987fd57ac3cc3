"""Celery tasks for grading: thin wrappers, the logic lives in grading.pipeline."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready
from django.conf import settings

from sessions_app.models import InvalidTransition, Submission

from . import pipeline, publish
from takehome.tasks import record_heartbeat

from .runner import RunnerUnavailable, ensure_runner

log = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=3,
    soft_time_limit=settings.GRADING_TIME_LIMIT_S,
    time_limit=settings.GRADING_TIME_LIMIT_S + 60,
)
def grade_submission(self, submission_id: int) -> str:
    """Grade one submission. Our failures are retried; the candidate's code never raises here."""
    try:
        return pipeline.grade_submission(submission_id)
    except (Submission.DoesNotExist, InvalidTransition) as exc:
        log.info("nothing to grade for submission %s: %s", submission_id, exc)
        return "skipped"
    except Exception as exc:  # SandboxUnavailable, disk full, database hiccup...
        if self.request.retries >= self.max_retries or isinstance(exc, SoftTimeLimitExceeded):
            pipeline.mark_failed(submission_id, exc)
            return "error"
        log.warning("grading submission %s failed, will retry: %s", submission_id, exc)
        Submission.objects.filter(pk=submission_id, status=Submission.Status.GRADING).update(
            status=Submission.Status.QUEUED
        )
        raise self.retry(exc=exc, countdown=10 * 2**self.request.retries)


def enqueue_grading(submission_id: int) -> bool:
    """Send the grading message; False when the broker is down (the sweep sends it later).

    Call it from transaction.on_commit, so the worker never looks for a row
    that is not committed yet.
    """
    if not publish.send(grade_submission, (submission_id,)):
        log.warning("broker unavailable, submission %s waits for the sweep", submission_id)
        return False
    Submission.objects.filter(pk=submission_id, status=Submission.Status.RECEIVED).update(
        status=Submission.Status.QUEUED
    )
    return True


@shared_task(ignore_result=True)
def sweep_submissions() -> int:
    """Send grading again for submissions stuck too long: lost message, dead worker, broker outage;
    and remove what sandbox runs of a dead worker process left behind."""
    pipeline.clean_stale_runs()
    sent = 0
    for submission in pipeline.stale_submissions():
        if enqueue_grading(submission.pk):
            sent += 1
    if sent:
        log.info("sweep re-sent %s submission(s) for grading", sent)
    return sent


@worker_ready.connect
def prepare_worker(sender=None, **kwargs) -> None:
    """A worker that starts builds the runner virtualenv if it is missing, says
    which caps its sandbox enforces, removes cgroups and mounts left by a worker
    that died, then looks for work left behind."""
    try:
        ensure_runner(settings.GRADING_RUNNER_DIR)
    except RunnerUnavailable as exc:
        # Grading will fail with SandboxUnavailable and be retried; say why now.
        log.error("the sandbox's runner virtualenv cannot be built: %s", exc)
    log.info("sandbox caps in force: %s", pipeline.sandbox_caps())
    pipeline.clean_stale_runs()
    # Pages show whether a worker is alive; say so now rather than at beat's first tick.
    record_heartbeat.delay()
    sweep_submissions.delay()
