"""The invitation email: paragraphs on one line each, and the truth about the clock on a resend."""

from datetime import timedelta

import pytest
from django.utils import timezone

from takehome.actions import do_send_invitation

from .factories import CandidateFactory, InvitationFactory, make_packet

pytestmark = pytest.mark.django_db


@pytest.fixture
def invitation():
    version = make_packet(time_limit_minutes=90).latest_version()
    return InvitationFactory(packet_version=version, candidate=CandidateFactory(name="Ada & Co"))


def paragraphs(body: str) -> list[str]:
    return [p for p in body.strip().split("\n\n") if p.strip()]


def test_no_paragraph_is_wrapped_mid_sentence(invitation, mailoutbox):
    do_send_invitation(invitation)
    body = mailoutbox[0].body
    for paragraph in paragraphs(body):
        assert "\n" not in paragraph.strip(), f"hard-wrapped paragraph: {paragraph!r}"
    assert "The clock starts only when you press Start on that page. You will then have 90 minutes." in body


def test_the_email_is_plain_text_not_html_escaped(invitation, mailoutbox):
    do_send_invitation(invitation)
    assert "Hello Ada & Co," in mailoutbox[0].body


def test_a_resend_after_start_says_the_clock_runs_and_when_it_ends(invitation, mailoutbox):
    now = timezone.now()
    invitation.started_at = now - timedelta(minutes=30)
    invitation.deadline = now + timedelta(minutes=60, seconds=30)
    invitation.save()
    do_send_invitation(invitation)
    body = mailoutbox[0].body
    assert "press Start" not in body.replace("you pressed Start", "")
    assert "clock is already running" in body
    assert f"your deadline is {timezone.localtime(invitation.deadline):%Y-%m-%d %H:%M}" in body
    assert "1 hour from when this email was sent" in body
    for paragraph in paragraphs(body):
        assert "\n" not in paragraph.strip()


def test_a_resend_after_the_deadline_says_it_has_passed(invitation, mailoutbox):
    now = timezone.now()
    invitation.started_at = now - timedelta(hours=3)
    invitation.deadline = now - timedelta(hours=1)
    invitation.save()
    do_send_invitation(invitation)
    body = mailoutbox[0].body
    assert "has passed" in body
    assert "clock is already running" not in body and "The clock starts only" not in body
