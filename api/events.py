"""The events the apps below announce (Django signals), turned into webhook deliveries once their writes commit.

Each receiver runs inside the sender's transaction and only asks for a callback after the commit, so a
rollback sends nothing and the sender's work never waits on the webhooks. Connected in ApiConfig.ready.
"""

from __future__ import annotations

import logging

from django.db import transaction

from grading.models import Review
from grading.signals import review_submitted, submission_graded
from sessions_app.models import Submission
from sessions_app.signals import invitation_started, submission_stored
from takehome.signals import decision_recorded

from . import actions
from .reading import invitation_row, invitation_state, review_state

log = logging.getLogger(__name__)

# What the API and the webhooks write to the audit trail (takehome.audit.register_actions).
AUDIT_ACTIONS = {
    "api_token_created": "API token created",
    "api_token_revoked": "API token revoked",
    "api_call": "API call",
    "webhook_added": "Webhook endpoint added",
    "webhook_removed": "Webhook endpoint removed",
    "webhook_test": "Webhook test event sent",
}


def _later(event: str, build) -> None:
    """After the sender's commit: the event's data, built then, queued for each endpoint that asked for it."""

    def send() -> None:
        try:
            endpoints = actions.endpoints_for(event)
            if endpoints:  # why first: with no endpoint, nothing is read to build the event
                actions.do_queue_event(event, build(), endpoints)
        except Exception:
            # why swallowed: the sender's write has committed and stands; a webhook that could not be queued
            # is logged, never a failed upload or grading.
            log.exception("webhook event %s could not be queued", event)

    transaction.on_commit(send)


def _submission_data(submission_id: int) -> dict:
    submission = Submission.objects.get(pk=submission_id)
    return {"submission": {"id": submission.pk, "status": submission.status, "sha256": submission.sha256,
                           "uploaded_at": submission.uploaded_at.isoformat(), "via": submission.via},
            "invitation": invitation_state(invitation_row(submission.invitation_id), with_reviews=False)}


def on_invitation_started(sender, invitation_id: int, **kwargs) -> None:
    _later("invitation.started",
           lambda: {"invitation": invitation_state(invitation_row(invitation_id), with_reviews=False)})


def on_submission_stored(sender, submission, **kwargs) -> None:
    # Answers None: the candidate's side takes the desk's answer (grading.lifecycle.GradingRequest) and no other.
    _later("submission.received", lambda: _submission_data(submission.pk))


def on_submission_graded(sender, submission_id: int, **kwargs) -> None:
    _later("submission.graded", lambda: _submission_data(submission_id))


def on_review_submitted(sender, review_id: int, **kwargs) -> None:
    def build() -> dict:
        review = Review.objects.select_related("reviewer", "submission").prefetch_related("marks").get(pk=review_id)
        return {"review": review_state(review), "submission_id": review.submission_id,
                "invitation": invitation_state(invitation_row(review.submission.invitation_id), with_reviews=False)}

    _later("review.submitted", build)


def on_decision_recorded(sender, invitation_id: int, decision_id: int, **kwargs) -> None:
    _later("decision.recorded",
           lambda: {"invitation": invitation_state(invitation_row(invitation_id), with_reviews=False)})


def connect() -> None:
    # why dispatch_uid: connecting twice (a second ready) must not send every event twice.
    invitation_started.connect(on_invitation_started, dispatch_uid="api.invitation_started")
    submission_stored.connect(on_submission_stored, dispatch_uid="api.submission_stored")
    submission_graded.connect(on_submission_graded, dispatch_uid="api.submission_graded")
    review_submitted.connect(on_review_submitted, dispatch_uid="api.review_submitted")
    decision_recorded.connect(on_decision_recorded, dispatch_uid="api.decision_recorded")
