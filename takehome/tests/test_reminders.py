"""Reminders to candidates who have not pressed Start (takehome.reminders), set on the packet's page."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from conftest import _wait_for
from takehome.models import AuditEvent, Reminder
from takehome.reminders import ReminderError, parse_hours, sweep
from takehome.tests.factories import InvitationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(sample_packet):
    """Make an invitation to the sample packet whose link was sent `hours` ago."""
    sample_packet.reminder_hours = [24, 72]
    sample_packet.save()

    def make(hours: float, **fields):
        return InvitationFactory(packet_version=sample_packet.latest_version(),
                                 sent_at=timezone.now() - timedelta(hours=hours), **fields)
    return make


def reminders_of(invitation) -> list[tuple[int, bool]]:
    return list(Reminder.objects.filter(invitation=invitation).order_by("after_hours").values_list("after_hours", "sent"))


@pytest.mark.parametrize("text, hours", [("24, 72", [24, 72]), ("72 24 24", [24, 72]), ("", []), (" 1 ", [1])])
def test_reminder_times_are_read_as_whole_hours_ascending(text, hours):
    assert parse_hours(text) == hours


@pytest.mark.parametrize("text, says", [("24h", "not a whole number"), ("0", "out of range"), ("721", "out of range"),
                                        ("1,2,3,4,5,6", "too many"), ("-5", "not a whole number")])
def test_bad_reminder_times_are_refused_saying_why(text, says):
    with pytest.raises(ReminderError, match=says):
        parse_hours(text)


def test_a_candidate_who_has_not_started_is_reminded_once_at_each_time(waiting, mailoutbox):
    invitation, fresh = waiting(25), waiting(2)
    assert sweep() == 1
    (mail,) = mailoutbox
    assert mail.to == [invitation.candidate.email] and "Reminder" in mail.subject
    assert invitation.link() in mail.body and "have not started" in mail.body
    assert reminders_of(invitation) == [(24, True)] and reminders_of(fresh) == []
    event = AuditEvent.objects.get(invitation=invitation, action="reminder")
    assert event.actor_name == "server" and "24 h after the link" in event.detail
    assert sweep() == 0 and len(mailoutbox) == 1  # the next sweep sends nothing again
    assert sweep(now=timezone.now() + timedelta(hours=48)) == 2  # 73 h: the second one; the fresh one's first
    assert reminders_of(invitation) == [(24, True), (72, True)] and reminders_of(fresh) == [(24, True)]


def test_started_revoked_and_unsent_invitations_are_never_reminded(waiting, mailoutbox):
    waiting(30, started_at=timezone.now() - timedelta(hours=1))
    waiting(30, revoked_at=timezone.now())
    InvitationFactory(packet_version=waiting(1).packet_version)  # never sent
    assert sweep() == 0 and mailoutbox == []


def test_times_already_past_when_set_send_the_latest_alone(waiting, mailoutbox):
    invitation = waiting(100)
    assert sweep() == 1 and len(mailoutbox) == 1
    assert reminders_of(invitation) == [(24, False), (72, True)]


def test_a_mail_server_that_fails_leaves_nothing_and_the_next_sweep_sends(waiting, mailoutbox, monkeypatch):
    invitation = waiting(25)

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("mail server away")

    monkeypatch.setattr("takehome.reminders.send_mail", refuse)
    assert sweep() == 0
    assert reminders_of(invitation) == [] and not AuditEvent.objects.filter(action="reminder").exists()
    monkeypatch.undo()
    assert sweep() == 1 and len(mailoutbox) == 1


def test_the_recruiter_sets_the_times_on_the_packet_page_and_bad_ones_change_nothing(recruiter_client, sample_packet):
    url = reverse("takehome:packet-reminders", args=[sample_packet.slug])
    recruiter_client.post(url, {"reminder_hours": "72, 24"})
    sample_packet.refresh_from_db()
    assert sample_packet.reminder_hours == [24, 72]
    page = recruiter_client.get(sample_packet.get_absolute_url()).content.decode()
    assert 'value="24, 72"' in page
    assert AuditEvent.objects.filter(action="reminders_set", actor_name="rita").count() == 1
    response = recruiter_client.post(url, {"reminder_hours": "soon"}, follow=True)
    assert "not a whole number of hours" in response.content.decode()
    sample_packet.refresh_from_db()
    assert sample_packet.reminder_hours == [24, 72]


@pytest.mark.worker
def test_a_real_worker_sends_the_due_reminders(celery_worker_proc, waiting):
    from takehome.tasks import send_reminders

    invitation = waiting(30)
    send_reminders.delay()
    try:
        _wait_for(lambda: Reminder.objects.filter(invitation=invitation, sent=True).exists(), 60, "the reminder")
    except AssertionError:
        raise AssertionError("worker log:\n" + celery_worker_proc.output()[-4000:])
    assert AuditEvent.objects.filter(invitation=invitation, action="reminder").count() == 1
