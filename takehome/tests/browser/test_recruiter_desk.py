"""A recruiter in headless Chromium sees what came back of a candidate, reads the review, and records a decision."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from conftest import SCREENSHOTS, screenshot
from grading.tests.reviewing import make_submission, score
from takehome.models import AuditEvent, Candidate, Decision, Invitation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

def screenshot_path(name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"


ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def test_recruiter_sees_an_outcome_and_records_a_decision(live_server, page, recruiter, make_reviewer, sample_packet):
    submission = make_submission(sample_packet, "Ada Lovelace")
    # The invitation as the candidate's path leaves it, so the board reads like a real one.
    start = timezone.now() - timedelta(minutes=70)
    Invitation.objects.filter(pk=submission.invitation_id).update(
        sent_at=start, opened_at=start, started_at=start, deadline=start + timedelta(minutes=90),
        submitted_at=start + timedelta(minutes=52))
    Candidate.objects.filter(pk=submission.invitation.candidate_id).update(email="ada@example.com")
    score(submission, make_reviewer("ann"), ALL_PASS)
    score(submission, make_reviewer("rob"), {**ALL_PASS, "refusal_specific": False})

    page.goto(live_server.url + "/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.get_by_role("link", name="Refunds in the invoice total").click()
    page.locator("#funnel svg").first.wait_for()
    page.locator("#funnel").screenshot(path=str(screenshot_path("recruiter-packet-funnel")))
    page.get_by_role("link", name="Invitations (1)").click()

    row = page.locator("tr", has_text="Ada Lovelace")
    outcome = row.locator("td.outcome")
    assert "Graded" in outcome.inner_text() and "2 reviews submitted" in outcome.inner_text()
    assert "disagree" in outcome.inner_text()
    screenshot(page, "recruiter-board-outcome")

    row.get_by_role("link", name="Review page").click()
    page.locator("#reader-note").wait_for()
    page.wait_for_load_state()  # the whole page is there before absences are counted
    assert page.get_by_role("button", name="Pass").count() == 0  # reading, never marking
    assert page.get_by_role("button", name="Submit my review").count() == 0
    page.go_back()

    row = page.locator("tr", has_text="Ada Lovelace")
    row.locator("summary", has_text="Record a decision").click()
    row.get_by_label("Decision").select_option("advance")
    row.get_by_label("Note").fill("Red log first, and a test that names refunds.")
    row.get_by_role("button", name="Save decision").click()
    page.get_by_text("Decision for Ada Lovelace: Advance.").wait_for()
    row = page.locator("tr", has_text="Ada Lovelace")
    assert "by rita" in row.locator(".decision").inner_text()
    decision = Decision.objects.get(invitation=submission.invitation)
    assert (decision.choice, decision.decided_by.username) == ("advance", "rita")
    assert AuditEvent.objects.filter(action="decision", invitation=submission.invitation).count() == 1

    row.locator("summary", has_text="History").click()
    assert "rita: Decision" in row.locator("ol.events").inner_text()

    # The debrief, reached from the navigation without filtering the queue: every mark, and the decision.
    page.get_by_role("navigation").get_by_role("link", name="Debriefs").click()
    page.get_by_role("heading", name="Debriefs").wait_for()
    page.get_by_role("link", name="Refunds in the invoice total").click()
    page.get_by_role("heading", name="How much the reviewers agree").wait_for()
    debrief_row = page.locator("tr", has_text="Ada Lovelace")
    expect(debrief_row.locator("[data-decision=advance]")).to_have_count(1)
    assert "ann" in debrief_row.inner_text() and "rob" in debrief_row.inner_text()
    screenshot(page, "recruiter-debrief")
    page.go_back()
    page.go_back()

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    # The board's wide table scrolls inside its own box; the page itself does not widen.
    box = page.locator(".table-scroll").first
    assert box.evaluate("el => el.clientWidth") <= 390
    screenshot(page, "recruiter-board-decision")
    # The packet's funnel: charts and tables fit the phone's width.
    page.goto(f"{live_server.url}/packets/{sample_packet.slug}/")
    funnel = page.locator("#funnel")
    assert funnel.evaluate("el => el.scrollWidth <= el.clientWidth && el.getBoundingClientRect().right <= 390")
