"""A hiring decision is a person's: set on the board or the debrief by a recruiter, audited, exported."""

import csv
import io

import pytest

from grading.tests.reviewing import make_submission, score
from takehome.actions import do_revoke_invitation
from takehome.models import AuditEvent, Decision

pytestmark = pytest.mark.django_db

ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def decide(client, invitation, outcome="advance", note="strong test", back="board"):
    return client.post(f"/packets/invitations/{invitation.pk}/decide",
                       {"outcome": outcome, "note": note, "back": back}, follow=True)


def test_a_recruiter_records_a_decision_on_the_board(recruiter_client, recruiter, invitation):
    response = decide(recruiter_client, invitation)
    decision = Decision.objects.get(invitation=invitation)
    assert (decision.choice, decision.note, decision.decided_by) == ("advance", "strong test", recruiter)
    html = response.content.decode()
    assert response.redirect_chain[-1][0].endswith(f"/invitations/#invitation-{invitation.pk}")
    assert 'data-decision="advance"' in html and "by rita" in html and "strong test" in html
    event = AuditEvent.objects.get(action="decision")
    assert event.actor == recruiter and event.invitation == invitation and "Advance: strong test" in event.detail


def test_a_new_decision_replaces_the_old_and_both_are_in_the_history(recruiter_client, invitation):
    decide(recruiter_client, invitation, "advance")
    decide(recruiter_client, invitation, "decline", "changed our mind")
    assert Decision.objects.get().choice == "decline"
    assert AuditEvent.objects.filter(action="decision").count() == 2


def test_a_decision_from_the_debrief_returns_to_the_debrief(recruiter_client, sample_packet):
    submission = make_submission(sample_packet)
    response = decide(recruiter_client, submission.invitation, "decline", back="debrief")
    assert response.redirect_chain[-1][0] == f"/review/debrief/{sample_packet.slug}/"
    assert 'data-decision="decline"' in response.content.decode()


def test_a_decision_on_a_revoked_candidate_is_refused_and_changes_nothing(recruiter_client, invitation):
    decide(recruiter_client, invitation, "advance", "before")
    do_revoke_invitation(invitation)
    response = decide(recruiter_client, invitation, "decline", "after")
    assert "was revoked" in response.content.decode() and "Nothing was changed" in response.content.decode()
    decision = Decision.objects.get()
    assert (decision.choice, decision.note) == ("advance", "before")
    assert AuditEvent.objects.filter(action="decision").count() == 1


@pytest.mark.parametrize("outcome", ["hire", "", "4"])
def test_an_unknown_outcome_is_refused_and_changes_nothing(recruiter_client, invitation, outcome):
    response = decide(recruiter_client, invitation, outcome)
    assert "Choose advance, decline or undecided" in response.content.decode()
    assert not Decision.objects.exists() and not AuditEvent.objects.filter(action="decision").exists()


def test_a_reviewer_cannot_decide(client, reviewer, invitation):
    client.force_login(reviewer)
    assert decide(client, invitation).status_code == 403
    assert not Decision.objects.exists()


def test_the_decision_is_never_computed_from_the_cells(recruiter_client, sample_packet, make_reviewer):
    submission = make_submission(sample_packet)
    score(submission, make_reviewer("ann"), ALL_PASS)
    html = recruiter_client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    assert "No decision yet" in html
    assert not Decision.objects.exists()


def test_the_decision_is_in_the_csv(recruiter_client, sample_packet, make_reviewer):
    reviewed = make_submission(sample_packet, "Ada Reviewed")
    score(reviewed, make_reviewer("ann"), ALL_PASS)
    unreviewed = make_submission(sample_packet, "Bo Unreviewed")
    decide(recruiter_client, reviewed.invitation, "advance", "=cmd|' /C calc'!A0")
    decide(recruiter_client, unreviewed.invitation, "decline", "no red log")
    body = b"".join(recruiter_client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode()
    rows = {r["candidate"]: r for r in csv.DictReader(io.StringIO(body))}
    assert rows["Ada Reviewed"]["decision"] == "advance" and rows["Ada Reviewed"]["reviewer"] == "ann"
    assert rows["Ada Reviewed"]["decision_note"].startswith("'=")  # no spreadsheet formula
    assert rows["Ada Reviewed"]["decided_by"] == "rita" and rows["Ada Reviewed"]["decided_at"]
    # A recruiter's export has a line for a candidate no reviewer has scored yet, so the decision is there.
    assert rows["Bo Unreviewed"]["decision"] == "decline" and rows["Bo Unreviewed"]["reviewer"] == ""


def test_a_reviewers_csv_keeps_its_shape_with_the_decision_columns(client, sample_packet, reviewer):
    reviewed = make_submission(sample_packet, "Ada Reviewed")
    score(reviewed, reviewer, ALL_PASS)
    make_submission(sample_packet, "Bo Unreviewed")
    client.force_login(reviewer)
    body = b"".join(client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [r["candidate"] for r in rows] == ["Ada Reviewed"] and rows[0]["decision"] == ""
