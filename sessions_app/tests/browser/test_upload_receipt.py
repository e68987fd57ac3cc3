"""In Chromium: an upload's receipt says "received" at once (within 2 s of the upload), and nothing polls after."""

import time

import pytest

from sessions_app.actions import do_start_session
from sessions_app.tests.helpers import honest_zip
from takehome.tests.factories import InvitationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_receipt_says_received_within_2_seconds_and_polls_nothing(live_server, page, sample_packet, media_root):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    page.goto(f"{live_server.url}/t/{invitation.raw_token}/")
    page.set_input_files("#id_archive", files=[{"name": "work.zip", "mimeType": "application/zip",
                                                "buffer": honest_zip()}])
    with page.expect_response(lambda r: r.url.endswith("/upload")) as answer:
        page.click("#upload-button")
    sent = time.monotonic()
    assert answer.value.ok
    page.locator("#submission-status", has_text="received, will be reviewed").wait_for(timeout=2000)
    assert time.monotonic() - sent < 2
    assert page.locator("[hx-trigger]").count() == 0  # decided as the upload arrived: nothing to ask again
    page.goto(f"{live_server.url}/t/{invitation.raw_token}/")
    assert page.locator("#upload-list tbody tr").inner_text().count("received, will be reviewed") == 1
