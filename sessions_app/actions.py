"""Writes on the candidate's side: opening, starting, gate receipts, uploads.

Every write that touches more than one row, or must not race, is here, in a
transaction. Gate receipts are append-only and written nowhere else.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Mapping

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from grading.checks.redlog import CLOSING_RE, analyse_red_log, clean_log
from grading.tasks import enqueue_grading
from takehome.models import Invitation

from .models import GateReceipt, Submission
from .uploads import IncomingArchive

log = logging.getLogger(__name__)
Step = GateReceipt.Step
PROMPT_FILE = "artifacts/prompt.txt"
LOG_LIMIT = 200_000  # characters of a log kept on a receipt


class SessionRefused(Exception):
    """A candidate's request that the rules refuse; ``message`` says why, in plain words."""

    def __init__(self, message: str, code: str = "refused"):
        super().__init__(message)
        self.message, self.code = message, code


def upload_closes_at(invitation: Invitation) -> datetime | None:
    """The deadline plus the grace period: the last moment an upload is accepted."""
    if invitation.deadline is None:
        return None
    return invitation.deadline + timedelta(seconds=settings.UPLOAD_GRACE_S)


def check_upload_allowed(invitation: Invitation, now: datetime | None = None) -> None:
    """Raise SessionRefused unless this invitation may upload right now."""
    now = now or timezone.now()
    if invitation.started_at is None:
        raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
    closes = upload_closes_at(invitation)
    if closes is not None and now > closes:
        raise SessionRefused(
            f"Time is up: the deadline was {invitation.deadline:%Y-%m-%d %H:%M} UTC, and uploads closed "
            f"{settings.UPLOAD_GRACE_S // 60} minutes after it. Your earlier uploads, if any, are kept. "
            "If something went wrong, write to the person who invited you.",
            "deadline",
        )


def do_open_invitation(invitation: Invitation) -> None:
    """The candidate opened the link: remember the first time."""
    if invitation.opened_at is None:
        now = timezone.now()
        Invitation.objects.filter(pk=invitation.pk, opened_at__isnull=True).update(opened_at=now)
        invitation.opened_at = now


@transaction.atomic
def do_start_session(invitation: Invitation) -> bool:
    """Start the clock: started_at now, deadline after the version's time limit.

    Returns False (and changes nothing) when the clock was already running.
    """
    # why lock: two Start clicks at once must not both set the clock.
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if locked.started_at is not None:
        invitation.started_at, invitation.deadline = locked.started_at, locked.deadline
        return False
    now = timezone.now()
    locked.started_at = now
    locked.deadline = now + invitation.packet_version.time_limit
    locked.opened_at = locked.opened_at or now
    locked.save(update_fields=["started_at", "deadline", "opened_at"])
    invitation.started_at, invitation.deadline, invitation.opened_at = (
        locked.started_at, locked.deadline, locked.opened_at)
    return True


@dataclass(frozen=True)
class GateReport:
    """What the gate sent for one step: the log's text, a sha256 per file, the candidate's clock."""

    log_text: str
    tree_hashes: Mapping[str, str]
    local_time: str


def _green_shows_a_pass(text: str) -> bool:
    """pytest's closing line counts passes and no failures or errors."""
    for line in reversed(clean_log(text).split("\n")):
        match = CLOSING_RE.match(line.strip())
        if match:
            counts = match.group("counts")
            return " passed" in counts and " failed" not in counts and " error" not in counts
    return False


def refusal_for(invitation: Invitation, step: str, report: GateReport) -> str | None:
    """Why the server refuses this step now (None: accepted). The same order as the gate's own."""
    accepted = set(
        GateReceipt.objects.filter(invitation=invitation, accepted=True).values_list("step", flat=True)
    )
    if step == Step.RED:
        red = analyse_red_log(report.log_text, known_test_ids=None, original_failures=None)
        if not red.failed:
            return "The red log shows no failure: red means the test runner printed FAILED."
        if not red.genuine:
            return ("The red log does not look like pytest's own output (" + "; ".join(red.missing[:3])
                    + "). Run `python gate.py red` and let it capture the run.")
        return None
    if step == Step.MODEL:
        if Step.RED not in accepted:
            return "No red run has been witnessed yet. The model waits: run `python gate.py red` first."
        if PROMPT_FILE not in report.tree_hashes:
            return "Write artifacts/prompt.txt first."
        return None
    if step == Step.GREEN:
        if Step.MODEL not in accepted:
            return "Green before model is a skip, not a pass: run `python gate.py model` first."
        if not _green_shows_a_pass(report.log_text):
            return "still red: the green log does not end with pytest's passing summary."
        return None
    return f"Unknown step {step!r}."


@transaction.atomic
def do_record_gate_step(invitation: Invitation, step: str, report: GateReport) -> GateReceipt:
    """Witness one gate step: store a receipt with the server's time, accepted or refused.

    Refused steps are kept too (accepted=False, with the reason): a gate that
    says no is part of the story a reviewer reads. They never count as a step.
    Raises SessionRefused, storing nothing, before the clock has started.
    """
    # why lock: two receipts at once must see each other when checking the order.
    invitation = Invitation.objects.select_for_update().select_related("packet_version").get(pk=invitation.pk)
    if invitation.started_at is None:
        raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
    refusal = refusal_for(invitation, step, report)
    return GateReceipt.objects.create(
        invitation=invitation,
        step=step,
        accepted=refusal is None,
        refusal=(refusal or "")[:300],
        local_time=report.local_time[:64],
        log_text=report.log_text[-LOG_LIMIT:],
        tree_hashes=dict(report.tree_hashes),
    )


def stored_name(sha256: str) -> str:
    """Where an upload lives under MEDIA_ROOT: by content, so the same bytes are stored once."""
    return f"uploads/{sha256[:2]}/{sha256}.zip"


def _store(incoming: IncomingArchive) -> tuple[str, bool]:
    """Move the received file to its place by hash; returns (name, whether this call created it)."""
    name = stored_name(incoming.sha256)
    final = Path(settings.MEDIA_ROOT) / name
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        incoming.discard()
        return name, False
    os.replace(incoming.path, final)
    return name, True


@dataclass
class UploadResult:
    submission: Submission
    receipt: GateReceipt
    queued: bool | None = None  # None until the commit; False: the broker was down


def do_accept_upload(invitation: Invitation, incoming: IncomingArchive, via: str = "browser") -> UploadResult:
    """Keep an upload: file by hash, Submission and an upload receipt in one transaction, then grade.

    The submission becomes the invitation's latest. Grading is enqueued after
    the commit; if the broker is down it waits for the sweep, and the upload
    still succeeds. Raises SessionRefused (storing nothing, deleting the
    received file) after the deadline plus grace.
    """
    created_file = None
    try:
        with transaction.atomic():
            # why lock: "latest" must be one row even when two uploads race.
            locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
            if locked.revoked_at is not None:
                raise SessionRefused("This link is not valid.", "invalid")
            check_upload_allowed(locked)
            name, created = _store(incoming)
            created_file = Path(settings.MEDIA_ROOT) / name if created else None
            now = timezone.now()
            Submission.objects.filter(invitation=locked, is_latest=True).update(is_latest=False)
            submission = Submission.objects.create(
                invitation=locked, archive=name, sha256=incoming.sha256, size=incoming.size,
                original_name=incoming.original_name, via=via, uploaded_at=now, status_changed_at=now,
            )
            receipt = GateReceipt.objects.create(
                invitation=locked, step=Step.UPLOAD, received_at=now, sha256=incoming.sha256
            )
            locked.submitted_at = now
            locked.save(update_fields=["submitted_at"])
            invitation.submitted_at = now
            result = UploadResult(submission, receipt)

            def send() -> None:
                # why catch all: the row is committed by now; a failure to send must
                # not undo the upload in the caller's eyes. The sweep sends it later.
                try:
                    result.queued = enqueue_grading(submission.pk)
                except Exception:
                    log.exception("could not send submission %s for grading", submission.pk)
                    result.queued = False

            transaction.on_commit(send)
    except BaseException:
        incoming.discard()
        if created_file is not None:
            # why: a file this call created belongs to no row once the transaction is gone.
            created_file.unlink(missing_ok=True)
        raise
    return result
