"""A recruiter in headless Chromium: log in, find the sample packet, invite, copy a link."""

import pytest

from conftest import screenshot
from takehome.models import Invitation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_recruiter_invites_by_pasted_lines_and_copies_a_link(live_server, page, recruiter, sample_packet, settings):
    settings.SITE_URL = live_server.url
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)

    page.goto(live_server.url + "/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.get_by_role("link", name="Refunds in the invoice total").wait_for()
    screenshot(page, "recruiter-packets")

    page.get_by_role("link", name="Refunds in the invoice total").click()
    page.get_by_text("invoices.py").first.wait_for()
    page.get_by_role("link", name="Invite candidates").click()

    page.fill("#id_lines", "Ada Lovelace, ada@example.com\nGrace Hopper grace@example.com")
    page.uncheck("#id_send_email")
    page.click("button:has-text('Invite')")
    error = page.locator("ul.errors li")
    error.first.wait_for()
    assert "Line 2" in error.first.inner_text()
    assert Invitation.objects.count() == 0
    screenshot(page, "recruiter-invite-error")

    page.fill("#id_lines", "Ada Lovelace, ada@example.com\nGrace Hopper, grace@example.com")
    page.click("button:has-text('Invite')")
    page.locator("#invite-result").wait_for()
    assert Invitation.objects.count() == 2
    # each new link is shown whole, not cut off in its field (at 1280 px), and a phone's page keeps its width
    for field in page.locator("#invite-result input.link-field").all():
        assert field.evaluate("f => f.scrollWidth <= f.clientWidth"), field.input_value()
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 900})

    page.get_by_role("link", name="See all invitations").click()
    row = page.locator("tr", has_text="ada@example.com")
    row.get_by_role("button", name="Copy link").click()
    row.get_by_role("button", name="Copied").wait_for()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == Invitation.objects.get(candidate__email="ada@example.com").link()
    screenshot(page, "recruiter-invitations")

    page.goto(copied)
    page.get_by_role("heading", name="Refunds in the invoice total").wait_for()
    assert Invitation.objects.get(candidate__email="ada@example.com").status == "opened"
