"""Links: only a hash of the token is stored; lookups find live invitations only."""

import pytest

from takehome.models import Invitation, hash_token

from .factories import InvitationFactory, make_packet

pytestmark = pytest.mark.django_db


@pytest.fixture
def invitation():
    version = make_packet().latest_version()
    return InvitationFactory(packet_version=version)


def test_the_raw_token_is_not_stored(invitation):
    raw = invitation.raw_token
    assert len(raw) >= 32
    row = Invitation.objects.filter(pk=invitation.pk).values().get()
    assert raw not in {str(v) for v in row.values()}
    assert row["token_hash"] == hash_token(raw)


def test_lookup_by_token_finds_the_invitation(invitation):
    assert Invitation.objects.by_token(invitation.raw_token) == invitation


@pytest.mark.parametrize("token", ["", "nope", "x" * 500])
def test_lookup_of_unknown_tokens_finds_nothing(invitation, token):
    assert Invitation.objects.by_token(token) is None


def test_a_revoked_invitation_is_not_found(invitation):
    from takehome.actions import do_revoke_invitation

    do_revoke_invitation(invitation)
    assert Invitation.objects.by_token(invitation.raw_token) is None


def test_the_link_can_be_shown_again(invitation, settings):
    settings.SITE_URL = "https://jobs.example.com"
    assert invitation.link() == f"https://jobs.example.com/t/{invitation.raw_token}/"


def test_tokens_differ_between_invitations():
    version = make_packet().latest_version()
    a, b = InvitationFactory(packet_version=version), InvitationFactory(packet_version=version)
    assert a.raw_token != b.raw_token and a.token_hash != b.token_hash


def test_after_a_key_change_old_links_still_work_and_resend_issues_a_new_one(invitation, settings, mailoutbox):
    from takehome.actions import do_send_invitation

    old = invitation.raw_token
    settings.SECRET_KEY = "another-key-" + "z" * 50
    assert invitation.link() is None
    assert Invitation.objects.by_token(old) == invitation
    new_link = do_send_invitation(invitation)
    assert old not in new_link
    assert Invitation.objects.by_token(old) is None
    assert new_link in mailoutbox[0].body
