"""The one place that joins the database and the pure grading core.

The worker's task claims a run (``claim``) and grades it (``grade_run``);
``grade_submission`` does both. Every change of status goes through
grading.lifecycle. ``manage.py grade_zip`` calls the sandbox
(shared/sandboxes.py) and the core directly, storing nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import traceback
from contextlib import ExitStack
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions_app.models import GateReceipt, ModelExchange, Submission
from sessions_app.uploads import unpack_limits
from shared import stored
from shared.sandboxes import sandbox_for_spec, sandbox_from_settings
from takehome.models import effective_policy

from . import actions, lifecycle
from .engine.checks.model import Exchange, ModelRecord
from .engine.checks.timeline import Receipt
from .engine.core import GRADER_VERSION, GradeOptions, clean_evidence, grade_archive
from .engine.display import is_tampered
from .engine.sandbox import SandboxUnavailable, clean_stale_scratch, close_warm_sandboxes, start_warm_sandboxes
from .engine.sandbox.cgroups import owned_name
from .models import Evidence, GradingRun

log = logging.getLogger(__name__)


def clean_stale_runs(stopping: bool = False) -> list[str]:
    """Remove cgroups, tmpfs mounts and scratch folders of sandbox runs whose worker process died.

    A hard time limit, an OOM kill or a SIGKILL ends a worker mid-run, and its
    run's mounts would hold their memory (and its scratch folder its disk)
    until someone removes them. Those of live processes are never touched.
    ``stopping``: called by a worker whose pool has stopped, for what its own
    processes left (their warm sandboxes' cgroups, say), which is no fault.
    """
    removed = clean_stale_scratch(Path(settings.GRADING_SCRATCH_DIR))
    try:
        removed += sandbox_from_settings().clean_stale()
    except SandboxUnavailable as exc:
        log.error("the sandbox's caps cannot be set up (grading will be retried): %s", exc)
    if removed:
        # why one line: a worker killed with its warm sandboxes up leaves three folders for each
        summary = leftovers_summary(removed)
        if stopping:
            log.info("removed what this worker's sandbox runs left: %s", summary)
        else:
            log.warning("removed what sandbox runs of worker processes that died left behind: %s", summary)
        for leftover in removed:
            log.debug("removed %s", leftover)
    elif stopping:
        log.info("this worker's sandbox runs left nothing to remove")
    return removed


def leftovers_summary(removed: list[str]) -> str:
    """'12 cgroups, 6 tmpfs mount folders and 1 scratch folder' for the paths clean_stale_runs removed."""
    kinds = {"cgroup": 0, "tmpfs mount folder": 0, "scratch folder": 0}
    for path in removed:
        kind = ("cgroup" if path.startswith("/sys/fs/cgroup") else
                "tmpfs mount folder" if "takehome-mounts-" in path or "/mounts/" in path else "scratch folder")
        kinds[kind] += 1
    parts = [f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in kinds.items() if n]
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def warm_sandboxes() -> bool:
    """Start this worker process's warm sandboxes (TAKEHOME_WARM_SANDBOXES; 0: off) for the shared runner."""
    try:
        return start_warm_sandboxes(sandbox_from_settings())
    except SandboxUnavailable as exc:
        log.error("warm sandboxes not started: %s", exc)
        return False


def stop_warm_sandboxes() -> None:
    """End this worker process's warm sandboxes (it is leaving)."""
    close_warm_sandboxes()


def grade_options() -> GradeOptions:
    # why the upload's own limits: the candidate was told, as the upload arrived, whether it unpacks under them.
    return GradeOptions(cache_dir=settings.VAR_DIR / "cache" / "original-runs", limits=unpack_limits(),
                        call_limit_s=settings.GRADING_CALL_LIMIT_S,
                        min_red_to_green_s=settings.GRADING_MIN_RED_TO_GREEN_S)


def receipts_for(submission: Submission) -> list[Receipt]:
    """Every gate receipt of the invitation up to this upload, refused ones too, as the checks want them."""
    rows = GateReceipt.objects.filter(
        invitation_id=submission.invitation_id, received_at__lte=submission.uploaded_at
    ).order_by("received_at", "pk")
    return [
        Receipt(step=r.step, at=r.received_at, local_time=r.local_time or None, accepted=r.accepted,
                refusal=r.refusal, log_text=r.log_text, tree_hashes=dict(r.tree_hashes or {}), id=r.pk,
                captured_by=r.captured_by, integrity=dict(r.integrity or {}))
        for r in rows
    ]


def model_record_for(submission: Submission) -> ModelRecord:
    """The packet's model policy and the invitation's model exchanges up to this upload, as the core wants them."""
    rows = ModelExchange.objects.filter(
        invitation_id=submission.invitation_id, at__lte=submission.uploaded_at).order_by("at", "pk")
    return ModelRecord(
        policy=effective_policy(submission.invitation.packet_version),
        configured=bool(settings.MODEL_URL),
        exchanges=tuple(Exchange(at=r.at, messages=r.messages, reply=r.reply, model=r.model, tokens_in=r.tokens_in,
                                 tokens_out=r.tokens_out, latency_s=r.latency_s, error=r.error, options=r.options,
                                 client_gone=r.client_gone, finished=r.finished, conversation=r.conversation,
                                 artifact=r.artifact) for r in rows),
    )


def claim(submission_id: int, task_id: str = "", worker: str = "") -> GradingRun | None:
    """Start a run for this process, or None when there is nothing to do (see lifecycle.start_run)."""
    return lifecycle.start_run(submission_id, task_id=task_id, worker=worker, pid=os.getpid())


def grade_submission(submission_id: int, task_id: str = "", worker: str = "") -> str:
    """Grade one submission and store its evidence; returns its status afterwards.

    Idempotent: a submission already finished, or being graded by a live
    worker, is left alone; one whose worker died is graded again from the
    start, replacing any evidence.
    """
    run = claim(submission_id, task_id, worker)
    if run is None:
        return Submission.objects.values_list("status", flat=True).get(pk=submission_id)
    return grade_run(run)


def grade_run(run: GradingRun) -> str:
    """Grade a claimed run, beating its heartbeat meanwhile; returns the submission's status.

    SandboxUnavailable and other errors of ours propagate to the task, which
    retries (``record_failure``); what the candidate's code does is evidence.
    """
    submission = Submission.objects.select_related("invitation__packet_version__packet").get(pk=run.submission_id)
    run.submission = submission
    name = submission.archive.name
    with ExitStack() as held:
        # why a local file: the zip is unpacked from a path; from a bucket shared by several hosts this
        # worker copies it into a folder of its own scratch space first (shared.stored.local_file), named
        # as a grading's, so that what a killed worker left there is removed (clean_stale_scratch)
        copies = Path(settings.GRADING_SCRATCH_DIR) / owned_name("grade")
        held.callback(shutil.rmtree, copies, ignore_errors=True)
        try:
            archive = held.enter_context(stored.local_file(name, copies)) if name else None
        except FileNotFoundError:
            archive = None
        if archive is None:
            # why: no retry brings a deleted file back; say so once, clearly, for operators
            lifecycle.finish_error(run, f"the uploaded archive is missing from storage ({name or 'no file recorded'}); "
                                        "restore the file and grade again, or ask the candidate to upload again")
            return run.submission.status
        spec = submission.invitation.packet_version.to_spec()
        started = time.monotonic()
        with lifecycle.keep_alive(run):
            evidence = grade_archive(
                archive,
                spec,
                sandbox_for_spec(spec),
                receipts=receipts_for(submission),
                model=model_record_for(submission),
                deadline=submission.invitation.deadline,
                options=grade_options(),
                scratch=settings.GRADING_SCRATCH_DIR,
            )
    record_evidence(run, evidence, time.monotonic() - started)
    return run.submission.status


def record_evidence(run: GradingRun, evidence: dict, duration_s: float) -> None:
    """Save the evidence and end the run (graded, or rejected) together.

    The evidence is cleaned first (NUL and lone surrogates become U+FFFD):
    PostgreSQL's jsonb refuses them, and a candidate's output must never make
    storing fail. A run that is no longer running (taken back as lost while
    this worker was still on it) raises InvalidTransition, and nothing is saved.
    """
    # why outside the transaction: both walk the whole evidence, and on SQLite
    # every upload waits while a transaction holds the write lock.
    evidence = clean_evidence(evidence)
    tampered = is_tampered(evidence)
    with transaction.atomic():
        Evidence.objects.update_or_create(
            submission_id=run.submission_id,
            defaults={"data": evidence, "grader_version": GRADER_VERSION, "duration_s": round(duration_s, 3),
                      "tampered": tampered, "created_at": timezone.now()},
        )
        if evidence["archive"]["accepted"]:
            lifecycle.finish_graded(run)
            # why in the same transaction: a graded upload is never seen in a queue without its reviewers
            actions.do_assign_reviewers(run.submission_id)
        else:
            lifecycle.finish_rejected(run, evidence["archive"]["reason"])


def record_failure(run: GradingRun, exc: BaseException, retry: bool) -> bool:
    """Our side failed: keep the traceback on the run for operators, never for candidates.

    With ``retry``, the submission goes back to queued for the task's retry
    (True); otherwise, or once too many attempts in a row failed, it ends in
    error (False).
    """
    text = "".join(traceback.format_exception(exc))[-20000:]
    if retry:
        return lifecycle.retry_later(run, text)
    lifecycle.finish_error(run, text)
    return False
