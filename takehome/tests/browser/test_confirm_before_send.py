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


def test_on_a_phone_the_way_back_from_start_is_a_finger_away_from_the_start_button(live_server, browser, sample_packet):
    """Start cannot be undone: its confirmation's "Not yet" link must not sit against the button, where a thumb
    aiming at one hits the other (WCAG 2.5.8 asks 24 px targets or that much space)."""
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/t/{invitation.raw_token}/start")
        button = page.locator("#confirm-start").bounding_box()
        back = page.locator("#not-yet").bounding_box()
        gap = back["y"] - (button["y"] + button["height"])
        assert gap >= 12, f"'Not yet' is {gap:.0f} px below the start button"
        assert back["height"] >= 24, f"'Not yet' is {back['height']:.0f} px tall"
        page.locator("#not-yet").tap()
        page.wait_for_url(f"**/t/{invitation.raw_token}/")
        assert Invitation.objects.get(pk=invitation.pk).started_at is None
    finally:
        context.close()
