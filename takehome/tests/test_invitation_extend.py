"""POST /packets/invitations/<pk>/extend: a recruiter gives a candidate more time."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from sessions_app.actions import do_start_session
from takehome.actions import do_revoke_invitation
from takehome.models import Invitation

pytestmark = pytest.mark.django_db


def extend(client, invitation, minutes):
    return client.post(reverse("takehome:invitation-extend", args=[invitation.pk]), {"minutes": minutes}, follow=True)


def test_extending_moves_the_deadline_later(recruiter_client, invitation):
    do_start_session(invitation)
    before = invitation.deadline
    r = extend(recruiter_client, invitation, 30)
    assert Invitation.objects.get(pk=invitation.pk).deadline == before + timedelta(minutes=30)
    assert "now has until" in r.content.decode()


def test_a_passed_deadline_reopens_from_now(recruiter_client, invitation):
    do_start_session(invitation)
    Invitation.objects.filter(pk=invitation.pk).update(deadline=timezone.now() - timedelta(hours=2))
    extend(recruiter_client, invitation, 10)
    deadline = Invitation.objects.get(pk=invitation.pk).deadline
    assert timezone.now() + timedelta(minutes=9) < deadline <= timezone.now() + timedelta(minutes=10)


@pytest.mark.parametrize("minutes", ["0", "-5", "abc", ""])
def test_bad_minutes_change_nothing(recruiter_client, invitation, minutes):
    do_start_session(invitation)
    before = invitation.deadline
    r = extend(recruiter_client, invitation, minutes)
    assert "whole number of minutes" in r.content.decode()
    assert Invitation.objects.get(pk=invitation.pk).deadline == before


def test_not_started_or_revoked_cannot_be_extended(recruiter_client, invitation):
    r = extend(recruiter_client, invitation, 10)
    assert "has not started yet" in r.content.decode()
    assert Invitation.objects.get(pk=invitation.pk).deadline is None
    do_start_session(invitation)
    do_revoke_invitation(invitation)
    before = Invitation.objects.get(pk=invitation.pk).deadline
    assert "revoked" in extend(recruiter_client, invitation, 10).content.decode()
    assert Invitation.objects.get(pk=invitation.pk).deadline == before


def test_only_recruiters_may_extend(client, reviewer, invitation):
    do_start_session(invitation)
    client.force_login(reviewer)
    r = client.post(reverse("takehome:invitation-extend", args=[invitation.pk]), {"minutes": 10})
    assert r.status_code in (302, 403)
    assert Invitation.objects.get(pk=invitation.pk).deadline == invitation.deadline


def test_the_board_offers_extend_for_started_invitations(recruiter_client, invitation, sample_packet):
    board = reverse("takehome:invitation-board", args=[sample_packet.slug])
    assert "invitation-extend" not in recruiter_client.get(board).content.decode()
    do_start_session(invitation)
    html = recruiter_client.get(board).content.decode()
    assert reverse("takehome:invitation-extend", args=[invitation.pk]) in html
