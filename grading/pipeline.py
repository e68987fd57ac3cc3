"""The one place that joins the database and the pure grading core.

The worker's task calls ``grade_submission``; ``manage.py grade_zip`` calls
``sandbox_from_settings`` and the core directly, storing nothing.
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import GateReceipt, InvalidTransition, Submission

from .checks.timeline import Receipt
from .core import GRADER_VERSION, GradeOptions, clean_evidence, grade_archive
from .display import is_tampered
from .models import Evidence
from .sandbox import Sandbox, SandboxLimits, SandboxUnavailable

log = logging.getLogger(__name__)

# Gradings started for one submission before it is given up as an error: task
# retries and sweeps included. Without a cap, a submission that kills its
# worker (or outlives the hard time limit) every time is swept up and started
# again for ever.
MAX_ATTEMPTS = 6


def sandbox_from_settings() -> Sandbox:
    return Sandbox(
        runner_dir=settings.GRADING_RUNNER_DIR,
        scratch_dir=settings.GRADING_SCRATCH_DIR,
        uid_base=settings.GRADING_UID_BASE,
        slots=settings.GRADING_SANDBOX_SLOTS,
        limits=SandboxLimits(
            wall_s=settings.GRADING_RUN_WALL_S,
            memory_bytes=settings.GRADING_SANDBOX_MEMORY_MB << 20,
            nproc=settings.GRADING_SANDBOX_PROCESSES,
            tmpfs_inodes=settings.GRADING_SANDBOX_TMPFS_INODES,
            fallback_processes=settings.GRADING_SANDBOX_FALLBACK_PROCESSES,
        ),
        caps=settings.GRADING_SANDBOX_CAPS,
        tmpfs=settings.GRADING_SANDBOX_TMPFS,
    )


def clean_stale_runs() -> list[str]:
    """Remove cgroups and tmpfs mounts of sandbox runs whose worker process died.

    A hard time limit or an OOM kill ends a pool process mid-run, and its
    run's mounts would hold their memory until someone unmounts them.
    """
    try:
        removed = sandbox_from_settings().clean_stale()
    except SandboxUnavailable as exc:
        log.error("the sandbox's caps cannot be set up (grading will be retried): %s", exc)
        return []
    for leftover in removed:
        log.warning("removed a cgroup or mount left by a sandbox run whose worker died: %s", leftover)
    return removed


def sandbox_caps() -> str:
    """Which run-wide caps this process's sandbox enforces, in one sentence (for the heartbeat)."""
    try:
        return sandbox_from_settings().describe_caps()
    except SandboxUnavailable as exc:
        return f"unavailable: {exc}"


def grade_options() -> GradeOptions:
    return GradeOptions(cache_dir=settings.VAR_DIR / "cache" / "original-runs",
                        min_red_to_green_s=settings.GRADING_MIN_RED_TO_GREEN_S)


def receipts_for(submission: Submission) -> list[Receipt]:
    """Every gate receipt of the invitation up to this upload, refused ones too, as the checks want them."""
    rows = GateReceipt.objects.filter(
        invitation_id=submission.invitation_id, received_at__lte=submission.uploaded_at
    ).order_by("received_at", "pk")
    return [
        Receipt(step=r.step, at=r.received_at, local_time=r.local_time or None, accepted=r.accepted,
                refusal=r.refusal, log_text=r.log_text, tree_hashes=dict(r.tree_hashes or {}), id=r.pk)
        for r in rows
    ]


def grade_submission(submission_id: int) -> str:
    """Grade one submission and store its evidence; returns the final status.

    Idempotent: a submission already finished is left alone, and one found
    half-way (its worker died) is graded again from the start, replacing any
    evidence. SandboxUnavailable and other errors of ours propagate to the
    task, which retries; what the candidate's code does is evidence.
    """
    submission = Submission.objects.select_related("invitation__packet_version__packet").get(pk=submission_id)
    if submission.is_finished:
        return submission.status
    archive = _archive_path(submission)
    if archive is None or not archive.is_file():
        # why: no retry brings a deleted file back; say so once, clearly, for operators
        grade_after_commit(submission.mark_error(
            f"the uploaded archive is missing from storage ({archive or 'no file recorded'}); "
            "restore the file and grade again, or ask the candidate to upload again"))
        return submission.status
    if submission.attempts >= MAX_ATTEMPTS:
        grade_after_commit(submission.mark_error(
            f"gave up after {submission.attempts} attempts to grade: each one ended without "
            "evidence (the worker died, timed out or our side failed); see the worker's log"))
        return submission.status
    submission.mark_grading()
    spec = submission.invitation.packet_version.to_spec()
    started = time.monotonic()
    evidence = grade_archive(
        archive,
        spec,
        sandbox_from_settings(),
        receipts=receipts_for(submission),
        deadline=submission.invitation.deadline,
        options=grade_options(),
        scratch=settings.GRADING_SCRATCH_DIR,
    )
    record_evidence(submission, evidence, time.monotonic() - started)
    return submission.status


def record_evidence(submission: Submission, evidence: dict, duration_s: float) -> None:
    """Save the evidence and move the submission to graded (or rejected) together.

    The evidence is cleaned first (NUL and lone surrogates become U+FFFD):
    PostgreSQL's jsonb refuses them, and a candidate's output must never make
    storing fail.
    """
    # why outside the transaction: both walk the whole evidence, and on SQLite
    # every upload waits while a transaction holds the write lock.
    evidence = clean_evidence(evidence)
    tampered = is_tampered(evidence)
    with transaction.atomic():
        Evidence.objects.update_or_create(
            submission=submission,
            defaults={"data": evidence, "grader_version": GRADER_VERSION, "duration_s": round(duration_s, 3),
                      "tampered": tampered, "created_at": timezone.now()},
        )
        if evidence["archive"]["accepted"]:
            submission.mark_graded()
        else:
            grade_after_commit(submission.mark_rejected(evidence["archive"]["reason"]))


def grade_after_commit(reinstated: Submission | None) -> None:
    """Send an upload back to grading once the transaction commits.

    A refusal (rejected, error) can hand the review back to an older upload
    that a newer one had superseded; that upload is received again and must be
    graded (see Submission.mark_rejected). If this send is lost, the sweep
    finds it.
    """
    if reinstated is None:
        return
    from .tasks import enqueue_grading  # why here: grading.tasks imports this module

    transaction.on_commit(lambda: enqueue_grading(reinstated.pk))


def _archive_path(submission: Submission) -> Path | None:
    if not submission.archive:
        return None
    try:
        return Path(submission.archive.path)
    except (NotImplementedError, ValueError):
        return None


def mark_failed(submission_id: int, exc: BaseException) -> None:
    """Retries are exhausted: keep the traceback for operators, never for candidates."""
    text = "".join(traceback.format_exception(exc))[-20000:]
    try:
        grade_after_commit(Submission.objects.get(pk=submission_id).mark_error(text))
    except (Submission.DoesNotExist, InvalidTransition):
        log.warning("could not mark submission %s as error", submission_id)


def stale_submissions():
    """Submissions whose grading should have moved on by now: lost message, dead worker, broker down.

    Thresholds per status (settings): received (never sent: the broker was
    down at upload), queued (the message was lost), grading (the worker died;
    longer than the task's hard time limit, so a slow run is never doubled).
    """
    now = timezone.now()
    S = Submission.Status
    limits = {
        S.RECEIVED: settings.GRADING_STALE_RECEIVED_S,
        S.QUEUED: settings.GRADING_STALE_QUEUED_S,
        S.GRADING: settings.GRADING_STALE_GRADING_S,
    }
    query = Q()
    for status, seconds in limits.items():
        query |= Q(status=status, status_changed_at__lt=now - timedelta(seconds=seconds))
    return Submission.objects.filter(query).order_by("uploaded_at")
