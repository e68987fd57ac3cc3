"""Build submissions with evidence straight in the database, for the reviewer's page tests.

The pages read only what grading stored, so these tests need no sandbox: they
write the Evidence row the worker would have written (a real `grade_zip`
output of an honest zip, kept in evidence_ideal.json), edited where a test
needs something else.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from django.utils import timezone

from grading.actions import do_save_mark, do_submit_review
from grading.models import Cell, Evidence
from sessions_app.models import Submission
from takehome.models import Candidate, Invitation

IDEAL = json.loads((Path(__file__).parent / "evidence_ideal.json").read_text())


def ideal_evidence() -> dict:
    return copy.deepcopy(IDEAL)


def make_submission(packet, name="Ada Lovelace", evidence=None, status=Submission.Status.GRADED, uploaded_at=None):
    """A candidate, an invitation to the packet's latest version and one graded submission."""
    n = Candidate.objects.count()
    candidate = Candidate.objects.create(name=name, email=f"c{n}-{abs(hash(name)) % 10**6}@example.com")
    invitation = Invitation(candidate=candidate, packet_version=packet.latest_version())
    invitation.issue_token()
    invitation.save()
    submission = Submission.objects.create(
        invitation=invitation, archive=f"uploads/{n}.zip", sha256=f"{n:064d}", size=100,
        status=status, uploaded_at=uploaded_at or timezone.now(),
    )
    if status in (Submission.Status.GRADED, Submission.Status.REJECTED):
        Evidence.objects.create(submission=submission, data=evidence or ideal_evidence(), grader_version="1")
    return submission


def upload_again(submission, status=Submission.Status.GRADED, evidence=None, uploaded_at=None, reason=""):
    """A newer upload by the same candidate, flagged as the upload action and the worker would leave it."""
    invitation_id = submission.invitation_id
    n = Submission.objects.count()
    Submission.objects.filter(invitation_id=invitation_id).update(is_latest=False)
    newer = Submission.objects.create(
        invitation_id=invitation_id, archive=f"uploads/again-{n}.zip", sha256=f"{n:064x}", size=100,
        status=status, uploaded_at=uploaded_at or timezone.now(), reject_reason=reason,
    )
    if status in (Submission.Status.GRADED, Submission.Status.REJECTED):
        Evidence.objects.create(submission=newer, data=evidence or ideal_evidence(), grader_version="1")
    Submission.objects.settle_latest(invitation_id)  # a refused upload hands the review back
    newer.refresh_from_db()
    return newer


def score(submission, reviewer, marks: dict[str, bool], submit=True, notes: dict[str, str] | None = None):
    """Record a reviewer's marks in the page's order (the diff cell last), then submit."""
    notes = notes or {}
    for cell in (Cell.RED_LOG, Cell.MODEL_WAITED, Cell.REFUSAL_SPECIFIC, Cell.TEST_NAMES_BUG):
        if cell.value in marks:
            do_save_mark(submission, reviewer, cell.value, marks[cell.value], notes.get(cell.value, ""))
    if submit:
        do_submit_review(submission, reviewer)
