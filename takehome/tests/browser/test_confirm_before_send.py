"""A form with data-confirm asks first (static/takehome/site.js), as the inline onsubmit did before the CSP."""

import pytest

from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_revoke_asks_first_and_a_no_changes_nothing(live_server, page, recruiter, sample_packet):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    page.goto(live_server.url + "/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.get_by_role("link", name="Refunds in the invoice total").wait_for()
    page.goto(live_server.url + f"/packets/{sample_packet.slug}/invitations/")

    asked = []

    def answer(dialog, accept):
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, accept=False))
    page.get_by_role("button", name="Revoke").click()
    page.wait_for_timeout(300)
    assert asked == ["The link will stop working. Revoke?"]
    assert Invitation.objects.get(pk=invitation.pk).status != "revoked"

    page.once("dialog", lambda d: answer(d, accept=True))
    with page.expect_navigation():
        page.get_by_role("button", name="Revoke").click()
    assert Invitation.objects.get(pk=invitation.pk).status == "revoked"
