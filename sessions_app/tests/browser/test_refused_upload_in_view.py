"""A refused upload's message is in view when the answer comes, with or without JavaScript, on a laptop and a phone."""

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.actions import do_start_session
from sessions_app.models import Submission
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def in_viewport(page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()  # relative to the viewport
    size = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= size["height"] and box["x"] >= 0


@pytest.mark.parametrize("javascript", [True, False], ids=["htmx", "no-js"])
@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
                         ids=["laptop", "phone"])
def test_the_refusal_is_in_view(live_server, browser, sample_packet, media_root, javascript, viewport):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    context = browser.new_context(viewport=viewport, java_script_enabled=javascript)
    page = context.new_page()
    page.set_default_timeout(15000)
    try:
        page.goto(f"{live_server.url}/t/{invitation.raw_token}/")
        page.set_input_files("#id_archive", files=[{"name": "notes.zip", "mimeType": "application/zip",
                                                    "buffer": b"these are notes, not a zip"}])
        page.locator("#upload-button").scroll_into_view_if_needed()
        with page.expect_response(lambda r: r.url.endswith("/upload")):
            page.click("#upload-button")
        error = page.locator("#upload-form ul.errors li")
        error.wait_for()
        page.wait_for_timeout(300)  # let any scrolling settle
        assert "This file is not a zip" in error.inner_text()
        assert in_viewport(page, "#upload-form ul.errors"), (page.evaluate("window.scrollY"), error.bounding_box())
        assert not Submission.objects.exists()
    finally:
        context.close()


def test_an_upload_after_the_close_lands_on_the_reason_without_javascript(live_server, browser, sample_packet,
                                                                           media_root, settings):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/t/{invitation.raw_token}/")
        page.set_input_files("#id_archive", files=[{"name": "w.zip", "mimeType": "application/zip",
                                                    "buffer": b"PK\x05\x06" + b"\0" * 18}])
        # uploads closed while the page was open: its deadline and grace are past
        settings.UPLOAD_GRACE_S = 0
        past = timezone.now() - timedelta(hours=1)
        Invitation.objects.filter(pk=invitation.pk).update(started_at=past - timedelta(hours=1), deadline=past)
        page.click("#upload-button")
        page.locator("#upload-errors", has_text="Time is up").wait_for()
        assert in_viewport(page, "#upload-errors")
    finally:
        context.close()
