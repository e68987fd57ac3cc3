"""What the API and the webhooks say of an invitation: read as the invitations board reads it.

The board's rows (takehome.pages.board_rows, with what came back filled in by the desk through
takehome.signals.board_rows_read) are the one reading of an invitation's state, outcome and decision; the
reviews are the submitted ones of the upload under review, as the debrief shows them.
"""

from __future__ import annotations

from django.http import Http404

from grading.models import Review
from takehome.pages import BoardRow, board_rows


def _at(value) -> str | None:
    return value.isoformat() if value else None


def invitation_row(invitation_id: int) -> BoardRow:
    rows = board_rows([invitation_id])
    if not rows:
        raise Http404("No such invitation.")
    return rows[0]


def invitation_state(row: BoardRow, with_reviews: bool = True) -> dict:
    """One invitation as JSON: who, which packet, its state and clock, its outcome, reviews and decision."""
    inv = row.invitation
    version = inv.packet_version
    submission = row.submission
    outcome = None
    if submission is not None:
        outcome = {"submission_id": submission.pk, "status": submission.status,
                   "uploaded_at": _at(submission.uploaded_at), "reviews_submitted": row.reviews,
                   "reviewers_disagree": row.disagree}
    decision = None
    if row.decision is not None:
        decision = {"choice": row.decision.choice, "note": row.decision.note,
                    "decided_by": row.decision.decided_by.get_username() if row.decision.decided_by else None,
                    "decided_at": _at(row.decision.decided_at)}
    state = {
        "id": inv.pk,
        "packet": version.packet.slug,
        "version": version.number,
        "candidate": {"name": inv.candidate.name, "email": inv.candidate.email},
        "status": inv.status,
        "phase": inv.phase,
        "created_at": _at(inv.created_at),
        "started_at": _at(inv.started_at),
        "deadline": _at(inv.deadline),
        "submitted_at": _at(inv.submitted_at),
        "revoked_at": _at(inv.revoked_at),
        "outcome": outcome,
        "refused_uploads": row.refused_uploads,
        "decision": decision,
    }
    if with_reviews:
        state["reviews"] = submitted_reviews(submission.pk) if submission is not None else []
    return state


def submitted_reviews(submission_id: int) -> list[dict]:
    """The submitted reviews of one upload, each with its four cells side by side (never summed)."""
    reviews = (Review.objects.submitted().filter(submission_id=submission_id).select_related("reviewer")
               .prefetch_related("marks").order_by("submitted_at", "pk"))
    return [review_state(r) for r in reviews]


def review_state(review: Review) -> dict:
    return {"id": review.pk, "reviewer": review.reviewer.get_username(), "submitted_at": _at(review.submitted_at),
            "marks": {m.cell: {"passed": m.passed, "note": m.note} for m in review.marks.all()}}
