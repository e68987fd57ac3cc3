"""A candidate in headless Chromium uploads twice in a row: the page shows the 429's message in the form."""

import pytest

from conftest import screenshot
from sessions_app.actions import do_start_session
from sessions_app.models import Submission
from sessions_app.tests.helpers import honest_zip
from takehome.tests.factories import InvitationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def choose_zip(page, name: str) -> None:
    page.set_input_files("#id_archive", files=[{"name": name, "mimeType": "application/zip", "buffer": honest_zip()}])


def test_an_upload_too_soon_after_the_last_shows_how_long_to_wait(live_server, page, sample_packet, media_root,
                                                                   settings):
    settings.UPLOAD_INTERVAL_S = 120
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    landing = f"{live_server.url}/t/{invitation.raw_token}/"

    page.goto(landing)
    choose_zip(page, "first.zip")
    page.click("#upload-button")
    page.locator("#receipt-sha256").wait_for()

    page.goto(landing)
    choose_zip(page, "second.zip")
    with page.expect_response(lambda r: r.url.endswith("/upload")) as answer:
        page.click("#upload-button")
    response = answer.value
    assert response.status == 429 and 1 <= int(response.headers["retry-after"]) <= 120
    error = page.locator("#upload-form ul.errors li")
    error.wait_for()
    text = error.inner_text()
    assert text.startswith("Too soon: this link takes one upload every 120 seconds")
    assert "then upload again. Your earlier uploads are kept." in text
    assert page.url == landing  # swapped into the page, not a new page
    # The form is ready for another try: the file input and the button are back, wired again.
    assert page.locator("#upload-button").is_enabled() and page.locator("form.upload[data-wired]").count() == 1
    assert "for review" in page.locator("#upload-list").inner_text()
    page.locator("#upload-form").scroll_into_view_if_needed()
    screenshot(page, "candidate-upload-too-soon")
    assert list(Submission.objects.values_list("original_name", flat=True)) == ["first.zip"]
