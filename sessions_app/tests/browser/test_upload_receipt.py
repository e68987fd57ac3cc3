"""In Chromium: the page an upload leads to says "received" as it is drawn, and nothing polls after."""

import pytest

from sessions_app.actions import do_start_session
from sessions_app.tests.helpers import honest_zip
from takehome.tests.factories import InvitationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_receipt_says_received_as_the_page_is_drawn_and_polls_nothing(live_server, page, sample_packet, media_root):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    page.goto(f"{live_server.url}/t/{invitation.raw_token}/")
    page.set_input_files("#id_archive", files=[{"name": "work.zip", "mimeType": "application/zip",
                                                "buffer": honest_zip()}])
    asked = []
    page.on("request", lambda r: asked.append(r.url) if r.resource_type in ("xhr", "fetch") else None)
    with page.expect_response(lambda r: r.url.endswith("/upload")) as answer:
        page.click("#upload-button")
    assert answer.value.ok
    page.locator("#submission-status", has_text="received, will be reviewed").wait_for()
    assert asked == [answer.value.url]  # the upload alone: no script asked the server again to learn the status
    assert page.locator("[hx-trigger]").count() == 0  # decided as the upload arrived: nothing to ask again
    page.goto(f"{live_server.url}/t/{invitation.raw_token}/")
    assert page.locator("#upload-list tbody tr").inner_text().count("received, will be reviewed") == 1
