"""Celery tasks for grading: thin wrappers, the logic lives in grading.pipeline."""

from __future__ import annotations

import logging
import uuid

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown
from django.conf import settings
from django.db import DatabaseError, connections

from sessions_app.models import Submission
from shared import publish
from shared.sandboxes import sandbox_caps
from shared.tasks import record_heartbeat, retry_countdown

from . import actions, lifecycle, pipeline
from .engine.runner import RunnerUnavailable, ensure_runner
from .models import InvalidTransition
from .runners import build_runners

log = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=3,
    soft_time_limit=settings.GRADING_TIME_LIMIT_S,
    time_limit=settings.GRADING_TIME_LIMIT_S + 60,
)
def grade_submission(self, submission_id: int) -> str:
    """Grade one submission in a run of its own. Our failures are retried; the candidate's code never raises here."""
    try:
        run = pipeline.claim(submission_id, self.request.id or "", self.request.hostname or "")
    except Submission.DoesNotExist:
        return "skipped"
    if run is None:  # finished already, or a live worker is on it: a duplicate message
        return Submission.objects.values_list("status", flat=True).get(pk=submission_id)
    try:
        return pipeline.grade_run(run)
    except InvalidTransition as exc:  # taken back as lost while this worker was still on it
        log.info("grading of submission %s was taken back: %s", submission_id, exc)
        return "skipped"
    except Exception as exc:  # SandboxUnavailable, disk full, database hiccup...
        final = self.request.retries >= self.max_retries or isinstance(exc, SoftTimeLimitExceeded)
        if not pipeline.record_failure(run, exc, retry=not final):
            return "error"
        log.warning("grading submission %s failed, will retry: %s", submission_id, exc)
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries))


def enqueue_grading(submission_id: int, *, by: str) -> bool:
    """Send the grading message as ``by`` (a Submission.Sender); False when the broker is down (the sweep
    sends it later).

    Call it from transaction.on_commit, so the worker never looks for a row
    that is not committed yet.
    """
    task_id = str(uuid.uuid4())
    if not publish.send(grade_submission, (submission_id,), task_id=task_id):
        log.warning("broker unavailable, submission %s waits for the sweep", submission_id)
        lifecycle.message_not_taken(submission_id, task_id, by)
        return False
    lifecycle.message_sent(submission_id, task_id, by)
    return True


@shared_task(ignore_result=True)
def sweep_submissions() -> int:
    """Send grading again where it stalled: a worker that died (its run's heartbeat stopped), a message
    the broker did not take or that was lost (lifecycle.due_for_sending says which, from the database alone);
    remove what sandbox runs of a dead worker process left behind; and give graded uploads still short of
    reviewers theirs (a reviewer who joined, a packet that asks for more)."""
    pipeline.clean_stale_runs()
    sent = lifecycle.recover_lost(lifecycle.lost_runs())
    for submission_id in list(lifecycle.due_for_sending().values_list("pk", flat=True)):
        if not enqueue_grading(submission_id, by=Submission.Sender.SWEEP):
            break  # why: the broker is down; each further send would wait out its timeout and fail the same
        sent += 1
    if sent:
        log.info("sweep sent %s submission(s) for grading", sent)
    assigned = actions.assign_waiting()
    if assigned:
        log.info("sweep assigned %s reviewer(s) to graded submissions", assigned)
    return sent


# why the least urgent: a build may take minutes, and a grading queued behind it (the one a worker's death cut
# off, sent again at the worker's start) would wait for all of it. With Redis, kombu takes a queue's
# priority 0 first and 9 last (a task that names none is 0), so every grading, sweep and heartbeat in the
# queue goes before this build, whatever order they were sent in; one already running is still waited for.
LEAST_URGENT = 9


@shared_task(ignore_result=True, priority=LEAST_URGENT)
def build_packet_runners() -> int:
    """Build the runner virtualenv of every packet version in use that lacks one (sent at worker start)."""
    built = build_runners()
    for line in built.failed:
        log.error("a packet's environment could not be built: %s", line)
    return len(built.ready)


@worker_ready.connect
def prepare_worker(sender=None, **kwargs) -> None:
    """A worker that starts builds the runner virtualenv if it is missing, says
    which caps its sandbox enforces, removes what runs of a worker that died
    left behind, sends again at once what it was grading when it died, then
    the build of the packets' environments, then looks for work left behind."""
    try:
        ensure_runner(settings.GRADING_RUNNER_DIR)
    except RunnerUnavailable as exc:
        # Grading will fail with SandboxUnavailable and be retried; say why now.
        log.error("the sandbox's runner virtualenv cannot be built: %s", exc)
    log.info("sandbox caps in force: %s", sandbox_caps())
    pipeline.clean_stale_runs()
    resume_own_runs(getattr(sender, "hostname", "") or "")
    # why a task: building a packet's environment may take a minute; the pool does it, not this handler.
    # It goes after every grading in the queue (LEAST_URGENT), also one the sweep below sends because
    # the broker did not take the send above in time; a grading that needs an environment still missing
    # builds it itself (shared.environments).
    build_packet_runners.delay()
    # Pages show whether a worker is alive; say so now rather than at beat's first tick.
    record_heartbeat.delay()
    sweep_submissions.delay()


@worker_process_init.connect
def warm_worker_process(**kwargs) -> None:
    """Each worker process keeps its own pre-started sandboxes ready (never the parent: they do not survive a fork)."""
    pipeline.warm_sandboxes()


@worker_process_shutdown.connect
def cool_worker_process(**kwargs) -> None:
    """A worker process that ends gracefully ends its warm sandboxes and removes their cgroups and mounts."""
    # why here: a pool process leaves through os._exit, which runs no atexit handler
    pipeline.stop_warm_sandboxes()


@worker_shutdown.connect
def clean_after_worker(**kwargs) -> None:
    """A worker that stops removes what its pool's processes left (one ended by a signal cleans up nothing)."""
    pipeline.clean_stale_runs(stopping=True)


def resume_own_runs(hostname: str) -> int:
    """Runs still marked running under this worker's name belong to its previous life: send them again now.

    why not wait for the sweep: their heartbeat stops only when the worker
    died, and the sweep would wait TAKEHOME_GRADING_LOST_AFTER_S to be sure.
    At worker_ready no task of this worker has started yet.
    """
    if not hostname:
        return 0
    try:
        sent = lifecycle.recover_lost(lifecycle.runs_of_worker(hostname))
    except DatabaseError as exc:
        log.error("could not look for runs this worker left when it stopped (the sweep will): %s", exc)
        return 0
    finally:
        connections.close_all()  # why: the main process grades nothing; keep no connection open
    if sent:
        log.warning("sent again %s submission(s) this worker was grading when it stopped", sent)
    return sent
