"""The grading lifecycle: the one module that changes a submission's grading state.

``Submission.status`` (with ``status_changed_at``, and ``grading_sent_at``,
``grading_sent_by`` and ``grading_task_id`` for the pending message) is the
summary the pages filter on; ``GradingRun`` rows are the attempts (worker,
pid, heartbeat, outcome, error). Nothing else writes either; the transitions
are documented on Submission and GradingRun. Who calls what:

- the candidate's side: ``request_grading`` inside an upload's transaction, and
  nothing else (it sends the message once the upload commits), through its
  signal sessions_app.signals.submission_stored (``upload_stored``, connected
  in grading.apps), since the candidate's side imports nothing of grading;
- the task's sender: ``message_sent``, or ``message_not_taken``; the worker:
  ``start_run``, ``keep_alive``, ``finish_graded``, ``finish_rejected``,
  ``finish_error``, ``retry_later``;
- the sweep and a worker that starts: ``recover_lost`` over ``lost_runs`` or
  ``runs_of_worker``; the sweep then sends again ``due_for_sending``;
- operators (``manage.py regrade``, the admin): ``regrade``.

Changes that can move the review flag (``is_latest``) take the invitation's
row lock first, then the submission's, the order an upload takes them in.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from sessions_app.models import Submission
from shared.tasks import RETRY_LONGEST_S
from takehome import audit, funnel
from takehome.models import Invitation

from .models import GradingRun, InvalidTransition
from .signals import submission_graded

log = logging.getLogger(__name__)

# Runs in a row that end without a result (the worker died, our side failed)
# before the submission is given up as an error. Without a cap, a submission
# that kills its worker every time would be sent again for ever.
MAX_ATTEMPTS = 6

S = Submission.Status
By = Submission.Sender
Outcome = GradingRun.Outcome
WAITING = (S.RECEIVED, S.QUEUED)
# The columns of a row whose grading message is not sent yet (or no longer pending).
NO_MESSAGE = {"grading_sent_at": None, "grading_task_id": "", "grading_sent_by": ""}


# -- the summary on Submission ------------------------------------------------------


def _move(submission: Submission, wanted: str, allowed_from: tuple[str, ...], **fields) -> None:
    """Change status with a conditional UPDATE, so two workers cannot both win."""
    if submission.status not in allowed_from:
        raise InvalidTransition(submission.status, wanted)
    now = timezone.now()
    changed = Submission.objects.filter(pk=submission.pk, status__in=allowed_from).update(
        status=wanted, status_changed_at=now, **fields
    )
    if not changed:
        submission.refresh_from_db(fields=["status"])
        raise InvalidTransition(submission.status, wanted)
    submission.status, submission.status_changed_at = wanted, now
    for name, value in fields.items():
        setattr(submission, name, value)
    # why here: "graded" counts the upload under review; the funnel is worked out once the transaction
    # commits, so a change of that upload later in the same transaction (settle_latest) is seen too.
    funnel.touch(submission.invitation_id)


def _lock(submission_id: int) -> Submission:
    """Take the invitation's row lock, then the submission's; raises Submission.DoesNotExist."""
    invitation_id = Submission.objects.values_list("invitation_id", flat=True).get(pk=submission_id)
    # why: the flag must move under the same lock an upload takes, or a refusal
    # and an upload at the same moment could leave two rows (or none) under review.
    Invitation.objects.select_for_update().filter(pk=invitation_id).only("pk").first()
    return Submission.objects.select_for_update().get(pk=submission_id)


def _hand_over_latest(submission: Submission) -> Submission | None:
    """After a refusal: move the flag to the latest accepted upload; returns it when it must be graded."""
    chosen = Submission.objects.settle_latest(submission.invitation_id)
    submission.is_latest = chosen is not None and chosen.pk == submission.pk
    if chosen is None or chosen.status != S.SUPERSEDED:
        return None
    # why: accepted work must never sit ungraded under review; grading it is
    # the rule that keeps the candidate's last good upload reachable.
    reinstated = Submission.objects.get(pk=chosen.pk)
    _move(reinstated, S.RECEIVED, (S.SUPERSEDED,), **NO_MESSAGE)
    return reinstated


def send_after_commit(submission: Submission | None, by: str) -> None:
    """Send grading for this submission once the transaction commits, as ``by`` (a Submission.Sender); a lost
    send is found by the sweep."""
    if submission is None:
        return
    from .tasks import enqueue_grading  # why here: grading.tasks imports this module

    pk = submission.pk
    transaction.on_commit(lambda: enqueue_grading(pk, by=by))


# -- the candidate's side -------------------------------------------------------------


@dataclass
class GradingRequest:
    """What ``request_grading`` did: ``sent`` is None until the upload commits, then whether the broker took the
    message (False: the sweep sends it later)."""

    submission: Submission
    sent: bool | None = None


def request_grading(submission: Submission) -> GradingRequest:
    """An upload was stored: the one call the candidate's side makes, inside the upload's transaction,
    under the invitation's row lock, once the new Submission row exists.

    Older uploads of the invitation whose grading has not started are
    superseded (``supersede_waiting``), and the grading message is sent once
    the transaction commits, so the worker never looks for a row that is not
    committed yet; a rollback sends nothing.
    """
    supersede_waiting(submission.invitation, newer=submission)
    request = GradingRequest(submission)

    def send() -> None:
        request.sent = submission_received(submission.pk)

    transaction.on_commit(send)
    return request


def upload_stored(sender, submission: Submission, **kwargs) -> GradingRequest:
    """sessions_app.signals.submission_stored: ``request_grading``."""
    return request_grading(submission)


def supersede_waiting(invitation: Invitation, newer: Submission | None = None) -> list[Submission]:
    """Inside an upload's transaction: older uploads whose grading has not started are not graded.

    An upload a worker claimed a moment ago is graded to the end, and one
    waiting to be graded again (it has evidence already) keeps its place.
    ``newer``, the upload that supersedes them, is left as it is.
    """
    superseded = []
    waiting = Submission.objects.filter(invitation=invitation, status__in=WAITING, evidence__isnull=True)
    if newer is not None:
        waiting = waiting.exclude(pk=newer.pk)
    for older in waiting:
        try:
            _move(older, S.SUPERSEDED, WAITING, **NO_MESSAGE)
        except InvalidTransition:
            continue  # a worker claimed it a moment ago: its grading goes on and its evidence is kept
        superseded.append(older)
    return superseded


def submission_received(submission_id: int) -> bool:
    """An upload committed: send it for grading. False when that failed (the sweep sends it later).

    ``request_grading`` calls it from transaction.on_commit.
    """
    from .tasks import enqueue_grading

    try:
        return enqueue_grading(submission_id, by=By.UPLOAD)
    except Exception:
        # why catch all: the upload is stored by now; a failure to send must not
        # undo it in the candidate's eyes.
        log.exception("could not send submission %s for grading", submission_id)
        return False


# -- messages and the sweep -------------------------------------------------------------


def message_sent(submission_id: int, task_id: str, by: str) -> None:
    """A grading message for this submission is in the broker: note which, when and who sent it (a
    Submission.Sender), so the sweep can tell a message still on its way from a lost one."""
    now = timezone.now()
    message = {"grading_sent_at": now, "grading_task_id": task_id, "grading_sent_by": by}
    Submission.objects.filter(pk=submission_id, status=S.RECEIVED).update(
        status=S.QUEUED, status_changed_at=now, **message)
    # why a second UPDATE: a re-sent message restarts the clock without being a change of status.
    Submission.objects.filter(pk=submission_id, status=S.QUEUED).update(**message)


def message_not_taken(submission_id: int, task_id: str, by: str) -> None:
    """The broker did not take the message in time: note its id and sender, with no time, so the next pass
    of the sweep sends it again.

    why not wait: a broker that is down has lost nothing it can hand back. A
    stalled Redis may still run the send once it resumes; the second message
    then finds the upload graded, or being graded, and leaves it alone.
    """
    Submission.objects.filter(pk=submission_id, status__in=WAITING).update(
        grading_sent_at=None, grading_task_id=task_id, grading_sent_by=by)


def due_for_sending(now: datetime | None = None) -> QuerySet:
    """Waiting submissions whose grading message is missing, judged from the database alone; oldest upload first.

    - The broker did not take the last send (``message_not_taken``): due at once.
    - Never sent since the status changed (the send after the commit has
      not run, or failed before it named a message): after TAKEHOME_STALE_RECEIVED_S.
    - Sent, and the queue has moved past it (``queue_passed``): a message sent
      after it has started, so this one left the queue and no worker started it.
    - Sent more than TAKEHOME_STALE_QUEUED_S ago while no grading has run for
      as long (``graders_idle``): had it been in the queue, a worker would have taken it.

    A message waiting behind a long queue matches none of these: the workers
    are busy with what is ahead of it, and nothing sent after it has started,
    so it is never sent twice, however long the backlog. A retry waits out its
    countdown on a worker, outside the queue: only the last rule applies to
    it, and not before its longest countdown.
    """
    now = now or timezone.now()
    waiting = Submission.objects.filter(status__in=WAITING)
    unsent = Q(grading_sent_at__isnull=True)
    due = unsent & ~Q(grading_task_id="")
    due |= unsent & Q(grading_task_id="",
                      status_changed_at__lt=now - timedelta(seconds=settings.GRADING_STALE_RECEIVED_S))
    passed = queue_passed(now)
    if passed is not None:
        due |= Q(grading_sent_at__lt=passed) & ~Q(grading_sent_by=By.RETRY)
    stale = now - timedelta(seconds=settings.GRADING_STALE_QUEUED_S)
    # why ask whether anything is that old first: the graders' activity is read only when it matters
    if waiting.filter(grading_sent_at__lt=stale).exists() and graders_idle(now):
        retry_stale = now - timedelta(seconds=max(settings.GRADING_STALE_QUEUED_S, RETRY_LONGEST_S))
        due |= Q(grading_sent_at__lt=stale) & (~Q(grading_sent_by=By.RETRY) | Q(grading_sent_at__lt=retry_stale))
    return waiting.filter(due).order_by("uploaded_at")


def queue_passed(now: datetime | None = None) -> datetime | None:
    """Grading messages sent before this time have all left the broker's queue; None while no run says so.

    The queue is first in, first out, and a worker takes a message only when
    one of its processes is free to start it (acks_late with a prefetch of
    one: a message counts against the prefetch until it is done). So once a
    message sent at T has been started, every message sent before T was taken
    too, and started within moments. The margin, TAKEHOME_GRADING_LOST_AFTER_S
    on both sides, covers the senders' clocks and a worker slow to start what
    it took: one that took a message and has not started it that much later
    is taken as dead, as a run whose heartbeat stopped that long ago is. Only
    runs started from a message sent through the queue count (``start_run``).
    """
    margin = timedelta(seconds=settings.GRADING_LOST_AFTER_S)
    latest = GradingRun.objects.filter(started_at__lt=(now or timezone.now()) - margin).aggregate(
        latest=Max("message_sent_at"))["latest"]
    return None if latest is None else latest - margin


def graders_idle(now: datetime | None = None) -> bool:
    """No grading is running and none ended within TAKEHOME_STALE_QUEUED_S: the queue holds no grading message.

    why the ends too: a worker that ends a run takes the next message at
    once, so the moment between two long runs of a backlog is not idleness.
    """
    since = (now or timezone.now()) - timedelta(seconds=settings.GRADING_STALE_QUEUED_S)
    return not GradingRun.objects.filter(Q(outcome=Outcome.RUNNING) | Q(finished_at__gte=since)).exists()


def lost_runs(now: datetime | None = None) -> QuerySet:
    """Running runs whose heartbeat stopped longer ago than TAKEHOME_GRADING_LOST_AFTER_S: their worker died."""
    return GradingRun.objects.filter(outcome=Outcome.RUNNING, heartbeat_at__lt=_lost_cutoff(now))


def _lost_cutoff(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(seconds=settings.GRADING_LOST_AFTER_S)


def runs_of_worker(hostname: str) -> QuerySet:
    """Runs still marked running under this worker's name: at its start, they belong to the worker that died."""
    return GradingRun.objects.filter(outcome=Outcome.RUNNING, worker=hostname)


def recover_lost(runs: QuerySet) -> int:
    """Mark these running runs lost and send their submissions again (or give up); returns how many were sent."""
    sent = 0
    for run_id, submission_id in list(runs.values_list("pk", "submission_id")):
        try:
            sent += _recover(runs, run_id, submission_id)
        except InvalidTransition as exc:  # another sweep (or the run's end) came first
            log.info("run %s was recovered elsewhere: %s", run_id, exc)
    return sent


@transaction.atomic
def _recover(runs: QuerySet, run_id: int, submission_id: int) -> int:
    submission = _lock(submission_id)
    # why again, under the lock: a heartbeat or the end of the run may have come in since.
    run = runs.filter(pk=run_id).first()
    if run is None:
        return 0
    if submission.status != S.GRADING:
        run.end(Outcome.LOST, _lost_words(run))  # the submission has moved on without it
        return 0
    if not _end_or_give_up(run, submission, Outcome.LOST, _lost_words(run)):
        return 0
    send_after_commit(submission, By.WORKER_DIED)
    return 1


def _lost_words(run: GradingRun) -> str:
    return (f"the worker {run.worker or '(unknown)'} (pid {run.pid or '?'}) died during this attempt: "
            f"no heartbeat since {run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC")


# -- the worker's side ----------------------------------------------------------------


def start_run(submission_id: int, *, task_id: str = "", worker: str = "", pid: int | None = None
              ) -> GradingRun | None:
    """A worker is about to grade: claim the submission with a new run; None when there is nothing to do.

    Nothing to do: the submission is finished (a late duplicate message), or
    a live worker is grading it (its run's heartbeat is fresh). A running run
    whose heartbeat stopped, or whose process was this worker's and is gone
    (a pool process killed, its message handed back), belonged to a worker
    that died: it is marked lost and this worker takes over. Raises
    Submission.DoesNotExist.
    """
    with transaction.atomic():
        submission = _lock(submission_id)
        if submission.is_finished:
            return None
        current = submission.runs.filter(outcome=Outcome.RUNNING).first()
        if current is not None:
            if current.heartbeat_at >= _lost_cutoff() and not _died_here(current, worker):
                return None
            current.end(Outcome.LOST, _lost_words(current))
        # why: the sweep gives up first; this catches a submission sent again by other means.
        given_up = _give_up_words(submission) if _attempts_in_a_row(submission) >= MAX_ATTEMPTS else None
        run = GradingRun.objects.create(submission=submission, attempt=submission.runs.count() + 1,
                                        task_id=task_id[:64], worker=worker[:200], pid=pid,
                                        message_sent_at=_sent_through_queue(submission, task_id))
        _move(submission, S.GRADING, (S.RECEIVED, S.QUEUED, S.GRADING), **NO_MESSAGE)
        run.submission = submission
        if given_up:
            finish_error(run, f"not started: {given_up}")
            return None
        return run


def _sent_through_queue(submission: Submission, task_id: str) -> datetime | None:
    """When the message being started was sent, if it is the submission's last one and came through the
    queue in turn; None for a retry (it waited out its countdown on a worker) or another copy."""
    if not task_id or task_id != submission.grading_task_id or submission.grading_sent_by == By.RETRY:
        return None
    return submission.grading_sent_at


def _died_here(run: GradingRun, worker: str) -> bool:
    """The run was this worker's (same name, so same machine) and its process is gone."""
    if not worker or run.worker != worker or not run.pid:
        return False
    try:
        os.kill(run.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextmanager
def keep_alive(run: GradingRun) -> Iterator[None]:
    """Beat the run's heartbeat from a daemon thread (its own database connection) while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.GRADING_HEARTBEAT_S):
                try:
                    if not run.beat():
                        log.warning("run %s was taken back while this worker is still on it", run.pk)
                        return
                except DatabaseError as exc:  # a busy database: the next beat may pass
                    log.warning("could not record the heartbeat of run %s: %s", run.pk, exc)
        finally:
            connections.close_all()  # this thread's connections only

    thread = threading.Thread(target=beat, name=f"heartbeat-run-{run.pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def finish_graded(run: GradingRun) -> None:
    """Evidence saved: the run and the submission are graded. Call it inside the evidence's transaction."""
    run.end(Outcome.GRADED)
    _move(run.submission, S.GRADED, (S.GRADING,), reject_reason="")
    submission_graded.send(sender=Submission, submission_id=run.submission_id)


def finish_rejected(run: GradingRun, reason: str) -> None:
    """The archive was refused on unpacking; an older upload may go back to grading (see Submission)."""
    with transaction.atomic():
        submission = _lock(run.submission_id)
        run.end(Outcome.REJECTED)
        _move(submission, S.REJECTED, (S.GRADING,), reject_reason=reason)
        send_after_commit(_hand_over_latest(submission), By.REINSTATED)
        run.submission = submission


def finish_error(run: GradingRun, error: str) -> None:
    """Our side failed for good (the reason kept on the run, for operators); an older upload may go back."""
    with transaction.atomic():
        submission = _lock(run.submission_id)
        run.end(Outcome.ERROR, error)
        _move(submission, S.ERROR, (S.GRADING,))
        send_after_commit(_hand_over_latest(submission), By.REINSTATED)
        run.submission = submission


def retry_later(run: GradingRun, error: str) -> bool:
    """Our side failed and the task will send itself again: back to queued. False when it gave up instead."""
    with transaction.atomic():
        submission = _lock(run.submission_id)
        run.submission = submission
        # why the run's task id: Celery's retry sends a message with the same id.
        retry = {"grading_sent_at": timezone.now(), "grading_task_id": run.task_id, "grading_sent_by": By.RETRY}
        return _end_or_give_up(run, submission, Outcome.RETRIED, error, message=retry)


def _end_or_give_up(run: GradingRun, submission: Submission, outcome: str, error: str,
                    message: dict | None = None) -> bool:
    """End a run without a result: back to queued (True), or an error once MAX_ATTEMPTS ran in a row.

    ``message``: the columns of the message already sent (a retry); none when the caller sends one after commit.
    """
    if _attempts_in_a_row(submission) < MAX_ATTEMPTS:
        run.end(outcome, error)
        _move(submission, S.QUEUED, (S.GRADING,), **(message or NO_MESSAGE))
        return True
    run.end(Outcome.ERROR, f"{error}\n{_give_up_words(submission, last=outcome)}")
    _move(submission, S.ERROR, (S.GRADING,))
    send_after_commit(_hand_over_latest(submission), By.REINSTATED)
    return False


def _runs_in_a_row(submission: Submission) -> list[GradingRun]:
    """The runs since the last one that gave the submission a result (or a regrade): oldest first."""
    runs = list(submission.runs.order_by("-attempt").only("attempt", "outcome", "started_at"))
    recent = []
    for run in runs:
        if run.outcome in GradingRun.FINAL:
            break
        recent.append(run)
    return recent[::-1]


def _attempts_in_a_row(submission: Submission) -> int:
    return len(_runs_in_a_row(submission))


def _give_up_words(submission: Submission, last: str | None = None) -> str:
    """Why grading stops, in words: "gave up after 6 attempts: the worker died during each of them (...)"."""
    runs = _runs_in_a_row(submission)
    outcomes = [r.outcome for r in runs]
    if last is not None and outcomes:
        outcomes[-1] = last  # the run being ended now
    at = f"the last started at {runs[-1].started_at:%Y-%m-%d %H:%M:%S} UTC" if runs else "none recorded"
    if outcomes and all(o == Outcome.LOST for o in outcomes):
        return f"gave up after {len(outcomes)} attempts: the worker died during each of them ({at})"
    lost = outcomes.count(Outcome.LOST)
    return (f"gave up after {len(outcomes)} attempts, none of which ended with evidence: the worker died "
            f"during {lost} and our side failed in {len(outcomes) - lost} ({at}); see each attempt's error")


# -- operators ----------------------------------------------------------------------


@dataclass(frozen=True)
class Regrade:
    """What ``regrade`` did with one submission: sent, skipped (left as it is) or unknown; ``line`` says it."""

    submission_id: int
    result: str
    line: str


def regrade(submission_id: int, dry_run: bool = False, actor=None, via: str = "manage.py regrade") -> Regrade:
    """Send a finished submission to grading again (a new run); says what happened in one line.

    Its evidence is replaced when the new run finishes; its reviews are kept.
    Waiting, running and superseded uploads are left as they are. A sending
    is recorded in the audit trail as ``actor``'s (None: the command line), from ``via``.
    """
    said = f"submission {submission_id}:"
    with transaction.atomic():
        try:
            submission = _lock(submission_id)
        except Submission.DoesNotExist:
            return Regrade(submission_id, "unknown", f"{said} no such submission, nothing sent")
        before = submission.status
        if before in (S.RECEIVED, S.QUEUED, S.GRADING):
            return Regrade(submission_id, "skipped", f"{said} already {before}, nothing sent")
        if before == S.SUPERSEDED:
            return Regrade(submission_id, "skipped",
                           f"{said} superseded by a newer upload and never graded, nothing sent (grade the newer one)")
        if dry_run:
            return Regrade(submission_id, "sent", f"{said} {before}, would be sent for grading again")
        _move(submission, S.QUEUED, (S.GRADED, S.REJECTED, S.ERROR), **NO_MESSAGE)
        # why: a refused upload that is queued again counts as accepted work until it is graded.
        Submission.objects.settle_latest(submission.invitation_id)
        send_after_commit(submission, By.REGRADE)
        audit.record(actor, "regrade", submission, f"was {before}; from {via}")
    return Regrade(submission_id, "sent", f"{said} {before}, sent for grading again")
