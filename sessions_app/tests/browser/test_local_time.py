"""In Chromium, each time shown in UTC gets the viewer's local time beside it, also in parts htmx swaps in."""

from datetime import timedelta

import pytest

from sessions_app.actions import do_start_session
from sessions_app.models import Submission
from takehome.tests.factories import InvitationFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def open_page(browser, url: str, timezone_id: str, javascript: bool = True):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id=timezone_id,
                                  java_script_enabled=javascript)
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(url)
    return context, page


@pytest.fixture
def landing(live_server, sample_packet):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    return invitation, f"{live_server.url}/t/{invitation.raw_token}/"


def test_the_deadline_shows_the_viewers_local_time_beside_utc(browser, landing):
    invitation, url = landing
    context, page = open_page(browser, url, "Asia/Kolkata")  # UTC+05:30 all year
    try:
        local = invitation.deadline + timedelta(hours=5, minutes=30)
        deadline = page.locator("#clock .muted")
        deadline.locator(".local-time").wait_for()
        assert deadline.inner_text() == (f"(deadline {invitation.deadline:%Y-%m-%d %H:%M} UTC "
                                         f"({local:%Y-%m-%d %H:%M} your time))")
        title = deadline.locator(".local-time").get_attribute("title")
        assert "Asia/Kolkata" in title or "Asia/Calcutta" in title  # ICU's older name
    finally:
        context.close()


def test_an_upload_row_keeps_its_local_time_and_grading_changes_nothing_on_the_page(browser, landing):
    """The upload list is not polled (grading's progress never reaches the candidate): the row reads
    "received" with its local time before and after the worker's verdict."""
    invitation, url = landing
    upload = Submission.objects.create(invitation=invitation, archive="uploads/a.zip", sha256="a" * 64, size=1,
                                       original_name="a.zip", status="queued", is_latest=True)
    context, page = open_page(browser, url, "America/Sao_Paulo")  # UTC-03:00, no summer time since 2019
    try:
        row = page.locator(f'tr[data-submission="{upload.pk}"]')
        row.locator(".local-time").wait_for()
        before = page.locator("#upload-list").inner_html()
        Submission.objects.filter(pk=upload.pk).update(status="graded")
        # nothing on the page asks again (the list was polled every few seconds while grading ran)
        assert page.locator("[hx-trigger*='every'], [data-poll]").count() == 0
        page.reload()
        row.locator(".local-time").wait_for()
        assert page.locator("#upload-list").inner_html() == before
        assert row.locator(".status-received").count() == 1
        local = upload.uploaded_at - timedelta(hours=3)
        assert row.locator(".local-time").inner_text() == f" ({local:%Y-%m-%d %H:%M:%S} your time)"
        assert page.locator("#upload-list .local-time").count() == page.locator("#upload-list time").count()
    finally:
        context.close()


def test_in_utc_or_without_javascript_the_utc_text_stands_alone(browser, landing):
    invitation, url = landing
    for zone, javascript in (("UTC", True), ("Asia/Kolkata", False)):
        context, page = open_page(browser, url, zone, javascript)
        try:
            page.locator("#clock time").wait_for()
            assert page.locator("#clock time").inner_text() == f"{invitation.deadline:%Y-%m-%d %H:%M} UTC"
            page.wait_for_timeout(200)
            assert page.locator(".local-time").count() == 0
        finally:
            context.close()


def test_when_the_deadline_passes_with_the_page_open_the_closing_time_is_local_too(browser, live_server, sample_packet,
                                                                                     settings):
    from django.utils import timezone

    from takehome.models import Invitation

    settings.UPLOAD_GRACE_S = 600
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    Invitation.objects.filter(pk=invitation.pk).update(deadline=timezone.now() + timedelta(minutes=5))
    invitation.refresh_from_db()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id="Asia/Kolkata")
    page = context.new_page()
    try:
        # why the page's clock, moved on: the deadline passes with the page open however long it took to load
        page.clock.install()
        page.goto(f"{live_server.url}/t/{invitation.raw_token}/")
        page.locator("#clock.clock-running").wait_for()
        page.clock.fast_forward("06:00")
        clock = page.locator("#clock.clock-grace")
        clock.wait_for()
        closes = invitation.deadline + timedelta(seconds=600)
        local = closes + timedelta(hours=5, minutes=30)
        assert clock.inner_text() == ("The deadline has passed. Upload your zip now: uploads are still accepted "
                                      f"until {closes:%H:%M} UTC ({local:%H:%M} your time).")
    finally:
        context.close()


def test_a_page_opened_in_the_grace_period_says_what_one_left_open_says(browser, live_server, sample_packet, settings):
    from django.utils import timezone

    from takehome.models import Invitation

    settings.UPLOAD_GRACE_S = 600
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    Invitation.objects.filter(pk=invitation.pk).update(deadline=timezone.now() - timedelta(minutes=1))
    invitation.refresh_from_db()
    context, page = open_page(browser, f"{live_server.url}/t/{invitation.raw_token}/", "Asia/Kolkata")
    try:
        closes = invitation.deadline + timedelta(seconds=600)
        local = closes + timedelta(hours=5, minutes=30)
        assert page.locator("#clock.clock-grace").inner_text() == (
            "The deadline has passed. Upload your zip now: uploads are still accepted "
            f"until {closes:%H:%M} UTC ({local:%H:%M} your time).")
    finally:
        context.close()
