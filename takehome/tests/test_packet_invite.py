"""Inviting candidates from the packet page: all or nothing, one email each."""

from unittest.mock import patch

import pytest
from django.urls import reverse

from takehome.models import Candidate, Invitation
from takehome.tests.factories import make_packet, mark_failed

pytestmark = pytest.mark.django_db


def post_lines(client, lines, send=True, **capture):
    data = {"lines": lines}
    if send:
        data["send_email"] = "on"
    return client.post(reverse("takehome:packet-invite", args=["refund-sum"]), data)


def test_pasted_lines_create_invitations_and_email_each_link(
    recruiter_client, sample_packet, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_lines(recruiter_client, "Ada Lovelace, ada@example.com\nAlan Turing, alan@example.com")
    assert response.status_code == 200
    invitations = Invitation.objects.order_by("candidate__email")
    assert [i.candidate.email for i in invitations] == ["ada@example.com", "alan@example.com"]
    assert all(i.sent_at for i in invitations)
    assert sorted(m.to[0] for m in mailoutbox) == ["ada@example.com", "alan@example.com"]
    for message in mailoutbox:
        invitation = Invitation.objects.get(candidate__email=message.to[0])
        assert invitation.link() in message.body
        assert invitation.link() in response.content.decode()


def test_one_bad_line_creates_nothing_and_names_the_line(recruiter_client, sample_packet, mailoutbox):
    response = post_lines(recruiter_client, "Ada, ada@example.com\nBob bob@example.com\nCy, cy@")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Line 2" in body and "Line 3" in body
    assert "Bob bob@example.com" in body  # the pasted text is kept to be fixed
    assert Invitation.objects.count() == 0 and Candidate.objects.count() == 0
    assert mailoutbox == []


def test_a_candidate_already_invited_is_a_duplicate(recruiter_client, sample_packet):
    post_lines(recruiter_client, "Ada, ada@example.com", send=False)
    response = post_lines(recruiter_client, "Eve, eve@example.com\nAda again, ADA@example.com", send=False)
    assert "already has an invitation" in response.content.decode()
    assert Invitation.objects.count() == 1


def test_without_email_the_link_is_shown_but_not_sent(recruiter_client, sample_packet, mailoutbox,
                                                      django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_lines(recruiter_client, "Ada, ada@example.com", send=False)
    assert mailoutbox == []
    assert Invitation.objects.get().sent_at is None


def test_candidate_text_is_escaped_on_the_board(recruiter_client, sample_packet):
    post_lines(recruiter_client, '<script>alert(1)</script>, x@example.com', send=False)
    body = recruiter_client.get(reverse("takehome:invitation-board", args=["refund-sum"])).content.decode()
    assert "<script>alert(1)" not in body
    assert "&lt;script&gt;alert(1)" in body


def test_the_board_polls_a_partial(recruiter_client, sample_packet):
    post_lines(recruiter_client, "Ada, ada@example.com", send=False)
    url = reverse("takehome:invitation-board", args=["refund-sum"])
    partial = recruiter_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in partial
    assert 'id="invitation-rows"' in partial and "ada@example.com" in partial
    full = recruiter_client.get(url).content.decode()
    assert "<html" in full and 'id="invitation-rows"' in full


def test_resend_emails_again_and_revoke_kills_the_link(recruiter_client, sample_packet, mailoutbox, client):
    post_lines(recruiter_client, "Ada, ada@example.com", send=False)
    invitation = Invitation.objects.get()
    link = invitation.link()
    recruiter_client.post(reverse("takehome:invitation-resend", args=[invitation.pk]))
    assert len(mailoutbox) == 1 and link in mailoutbox[0].body
    path = link.split("127.0.0.1:8000", 1)[-1]
    assert client.get(path).status_code == 200
    recruiter_client.post(reverse("takehome:invitation-revoke", args=[invitation.pk]))
    assert client.get(path).status_code == 404


def test_a_revocation_closes_the_hosted_terminals_once_it_commits_and_stands_when_that_fails(
        recruiter_client, invitation, django_capture_on_commit_callbacks, caplog):
    url = reverse("takehome:invitation-revoke", args=[invitation.pk])
    with patch("sessions_app.hosted.consumers.close_terminals", side_effect=OSError("no channel layer")) as close:
        with django_capture_on_commit_callbacks(execute=False) as on_commit:
            recruiter_client.post(url)
        assert close.call_count == 0  # not before the commit
        for callback in on_commit:
            callback()
    close.assert_called_once_with(invitation.pk, 4403, "This invitation was withdrawn.")
    assert Invitation.objects.get(pk=invitation.pk).revoked_at is not None
    assert f"could not close the terminals of revoked invitation {invitation.pk}" in caplog.text


INVITE_BUTTON = '<button type="submit" class="primary">Invite</button>'


def test_a_draft_has_no_invite_button_and_says_to_publish_first(recruiter_client):
    packet = make_packet()
    mark_failed(packet.latest_version())
    url = reverse("takehome:packet-invite", args=[packet.slug])
    page = recruiter_client.get(url).content.decode()
    assert INVITE_BUTTON not in page and 'name="lines"' not in page
    refused = page.split('id="invite-refused"')[1].split("</section>")[0]
    assert "Publish a version first" in refused and "is a draft: its self-check failed" in refused
    assert reverse("takehome:packet-edit", args=[packet.slug]) in refused
    # A post all the same (a page opened earlier, a script) is refused by the server: nobody is invited.
    response = recruiter_client.post(url, {"lines": "Ada, ada@example.com", "send_email": "on"})
    page = response.content.decode()
    assert response.status_code == 200 and INVITE_BUTTON not in page
    assert "nobody was invited" in page and "Ada, ada@example.com" in page
    assert not Invitation.objects.exists() and not Candidate.objects.exists()


def test_a_version_still_checking_has_no_invite_button(recruiter_client):
    packet = make_packet(checked=False)
    page = recruiter_client.get(reverse("takehome:packet-invite", args=[packet.slug])).content.decode()
    assert INVITE_BUTTON not in page and "is still being checked" in page
    assert reverse("takehome:packet-edit", args=[packet.slug]) not in page.split('id="invite-refused"')[1]


def test_a_published_version_has_the_invite_button(recruiter_client, sample_packet):
    page = recruiter_client.get(reverse("takehome:packet-invite", args=["refund-sum"])).content.decode()
    assert INVITE_BUTTON in page and 'id="invite-refused"' not in page
