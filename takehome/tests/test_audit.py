"""Every intervention leaves an audit event: who, when, what; shown on the candidate's row and in the admin."""

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from grading import lifecycle
from grading.tests.reviewing import make_submission
from sessions_app.actions import do_start_session
from takehome.audit import record
from takehome.models import AuditEvent, ImmutableRowError, Invitation

pytestmark = pytest.mark.django_db


def events(action):
    return list(AuditEvent.objects.filter(action=action))


def test_inviting_records_one_event_per_candidate(recruiter_client, recruiter, sample_packet):
    recruiter_client.post(f"/packets/{sample_packet.slug}/invite/",
                          {"lines": "Ada Lovelace, ada@example.com\nGrace Hopper, grace@example.com"})
    assert {(e.actor, e.invitation.candidate.email) for e in events("invite")} == {
        (recruiter, "ada@example.com"), (recruiter, "grace@example.com")}


def test_a_refused_invite_records_nothing(recruiter_client, invitation, sample_packet):
    recruiter_client.post(f"/packets/{sample_packet.slug}/invite/",
                          {"lines": f"Again, {invitation.candidate.email}"})
    assert not events("invite")


def test_resend_revoke_and_extend_are_recorded_with_who_and_what(recruiter_client, recruiter, invitation):
    do_start_session(invitation)
    recruiter_client.post(reverse("takehome:invitation-resend", args=[invitation.pk]))
    recruiter_client.post(reverse("takehome:invitation-extend", args=[invitation.pk]), {"minutes": 30})
    recruiter_client.post(reverse("takehome:invitation-revoke", args=[invitation.pk]))
    recruiter_client.post(reverse("takehome:invitation-revoke", args=[invitation.pk]))  # twice: one event
    (resend,), (extend,), (revoke,) = events("resend"), events("extend"), events("revoke")
    assert resend.actor == extend.actor == revoke.actor == recruiter
    assert resend.invitation_id == extend.invitation_id == revoke.invitation_id == invitation.pk
    assert invitation.candidate.email in resend.detail
    deadline = Invitation.objects.get(pk=invitation.pk).deadline
    assert extend.detail == f"+30 min, deadline now {deadline:%Y-%m-%d %H:%M} UTC"


def test_a_refused_extension_records_nothing(recruiter_client, invitation):
    recruiter_client.post(reverse("takehome:invitation-extend", args=[invitation.pk]), {"minutes": 30})  # not started
    assert not events("extend")


def test_regrade_from_the_command_line_is_recorded(sample_packet):
    submission = make_submission(sample_packet)
    call_command("regrade", str(submission.pk), stdout=None)
    (event,) = events("regrade")
    assert event.actor is None and event.actor_name == "command line"
    assert event.invitation_id == submission.invitation_id and "manage.py regrade" in event.detail


def test_a_dry_run_or_a_skipped_regrade_records_nothing(sample_packet):
    submission = make_submission(sample_packet)
    lifecycle.regrade(submission.pk, dry_run=True)
    waiting = make_submission(sample_packet, "Still Waiting", status="queued")
    lifecycle.regrade(waiting.pk)
    assert not events("regrade")


def test_grade_again_from_the_admin_is_recorded(client, sample_packet):
    ops = User.objects.create_superuser("ops", password="pw-ops")
    client.force_login(ops)
    submission = make_submission(sample_packet)
    client.post("/admin/sessions_app/submission/", {"action": "grade_again", "_selected_action": [submission.pk]})
    (event,) = events("regrade")
    assert event.actor == ops and "Grade again" in event.detail


def test_record_takes_a_role_change_on_a_user(recruiter):
    someone = User.objects.create_user("newbie")
    event = record(recruiter, "role_change", someone, "roles: none -> reviewer")
    assert (event.target_type, event.target_id, event.target_repr) == ("auth.user", str(someone.pk), "newbie")
    assert event.invitation is None and event.actor_name == "rita"


def test_record_refuses_an_unknown_action(recruiter, invitation):
    with pytest.raises(ValueError, match="Unknown audit action 'promote'"):
        record(recruiter, "promote", invitation)
    assert not AuditEvent.objects.exists()


def test_an_event_never_changes(recruiter, invitation):
    event = record(recruiter, "resend", invitation)
    event.detail = "rewritten"
    with pytest.raises(ImmutableRowError):
        event.save()


def test_the_actor_name_outlives_the_account(invitation):
    gone = User.objects.create_user("gone")
    record(gone, "revoke", invitation)
    gone.delete()
    event = AuditEvent.objects.get()
    assert event.actor is None and event.actor_name == "gone"


def test_the_candidate_row_lists_its_history(recruiter_client, invitation, sample_packet):
    do_start_session(invitation)
    recruiter_client.post(reverse("takehome:invitation-extend", args=[invitation.pk]), {"minutes": 30})
    recruiter_client.post(f"/packets/invitations/{invitation.pk}/decide", {"outcome": "decline", "note": "late"})
    html = recruiter_client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    row = html.split(f'data-invitation="{invitation.pk}"')[1].split("</tr>")[0]
    assert "History (2)" in row
    history = row.split('<ol class="events">')[1]
    assert history.index('data-action="decision"') < history.index('data-action="extend"')  # newest first
    assert "rita: Decision" in history and "Decline: late" in history and "+30 min" in history


def test_the_admin_lists_events_read_only(client, recruiter, invitation):
    event = record(recruiter, "revoke", invitation, "the link no longer works")
    ops = User.objects.create_superuser("ops", password="pw-ops")
    client.force_login(ops)
    html = client.get("/admin/takehome/auditevent/").content.decode()
    assert "the link no longer works" in html and "rita" in html
    assert client.get("/admin/takehome/auditevent/add/").status_code == 403
    page = client.get(f"/admin/takehome/auditevent/{event.pk}/change/").content.decode()
    assert 'name="_save"' not in page
    client.post(f"/admin/takehome/auditevent/{event.pk}/delete/", {"post": "yes"})
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_a_resend_that_had_to_issue_a_new_link_says_so(recruiter, invitation, settings):
    from takehome.actions import do_resend_invitation

    settings.SECRET_KEY = "another-key-" + "z" * 50  # the old link can no longer be rebuilt (nor the session)
    do_resend_invitation(invitation, recruiter)
    (event,) = events("resend")
    assert event.actor == recruiter
    assert "a new link was issued, the old one stopped working" in event.detail


def test_an_invite_from_the_command_line_is_recorded_as_such(sample_packet):
    call_command("invite", "--packet", sample_packet.slug, "--name", "Ada", "--email", "ada@example.com",
                 "--no-email", stdout=None)
    (event,) = events("invite")
    assert event.actor is None and event.actor_name == "command line" and "link not emailed" in event.detail
