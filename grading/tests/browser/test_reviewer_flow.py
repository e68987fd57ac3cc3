"""A reviewer in headless Chromium scores a submission through the whole page, in order, with the keyboard."""

from datetime import timedelta

import pytest
from django.utils import timezone

from conftest import screenshot
from grading.models import Mark, Review
from grading.tests.reviewing import ideal_evidence, make_submission, score

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_reviewer_scores_in_order_with_the_keyboard_then_sees_the_debrief(live_server, page, make_reviewer):
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    rob, ann = make_reviewer("rob"), make_reviewer("ann")
    now = timezone.now()
    ada = make_submission(packet, "Ada Lovelace", uploaded_at=now)
    # Earlier candidates, already scored by both, so the debrief has something to say.
    forged = ideal_evidence()
    forged["red_log"].update(genuine=False, signals=["names of the failing tests"],
                             missing=["progress line", "FAILURES section", "closing 'N failed in X s' line"])
    forged["texts"]["red.log"] = "FAILED test_invoices.py::test_charges_only\n"
    forged["timeline"]["problems"] = ["zip times: red.log (2026-11-30 14:09:30) is newer than green.log (2026-11-30 14:08:48)"]
    forged["timeline"]["events"].append({"name": "green.log", "at": "2026-11-30T14:08:40", "source": "zip DOS time (zone unknown)", "precision": "2 s", "local_time": None})
    forged["timeline"]["events"][1]["at"] = "2026-11-30T14:09:30"
    earlier = [
        (make_submission(packet, "Grace Hopper", uploaded_at=now - timedelta(hours=1)),
         dict(red_log=True, model_waited=True, refusal_specific=True, test_names_bug=True),
         dict(red_log=True, model_waited=True, refusal_specific=False, test_names_bug=True)),
        (make_submission(packet, "Alan Turing", evidence=forged, uploaded_at=now - timedelta(hours=2)),
         dict(red_log=False, model_waited=False, refusal_specific=True, test_names_bug=False),
         dict(red_log=False, model_waited=True, refusal_specific=True, test_names_bug=False)),
        (make_submission(packet, "Edsger Dijkstra", uploaded_at=now - timedelta(hours=3)),
         dict(red_log=True, model_waited=True, refusal_specific=False, test_names_bug=True),
         dict(red_log=True, model_waited=True, refusal_specific=False, test_names_bug=False)),
    ]
    for submission, rob_marks, ann_marks in earlier:
        score(submission, rob, rob_marks)
        score(submission, ann, ann_marks, notes={"refusal_specific": "names abs(), but no harm said"})
    score(ada, ann, dict(red_log=True, model_waited=True, refusal_specific=False, test_names_bug=True),
          notes={"refusal_specific": "\"be careful\" only"})

    page.goto(live_server.url + "/")
    page.fill("#id_username", "rob")
    page.fill("#id_password", "pw-rob")
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/review/")
    assert page.locator("tbody#queue-rows tr").count() == 1  # only Ada waits for rob
    page.get_by_role("link", name="Ada Lovelace").click()
    page.locator("[data-section=red-log].active").wait_for()
    sections = page.eval_on_selector_all("[data-section]", "els => els.map(e => e.dataset.section)")
    assert sections == ["red-log", "stamp", "refusal", "diff"]
    assert page.locator("svg.timeline").count() == 1
    # Blind: ann has submitted, rob sees none of her marks yet.
    assert page.locator("[data-reviewer=ann]").count() == 0
    assert "Folded until" in page.locator("[data-section=diff]").inner_text()

    page.keyboard.press("p")
    page.locator("#cell-red_log[data-passed=true]").wait_for()
    page.keyboard.press("n")
    page.locator("[data-section=stamp].active").wait_for()
    page.keyboard.press("p")
    page.locator("#cell-model_waited[data-passed=true]").wait_for()
    page.keyboard.press("n")
    page.keyboard.press("f")
    page.locator("#cell-refusal_specific[data-passed=false]").wait_for()
    # The diff unfolds once the three cells above are scored: test files first, the four reruns.
    page.locator("[data-section=diff] table.runs").first.wait_for()
    assert page.locator("[data-section=diff] details.file summary code").first.inner_text() == "test_invoices.py"
    assert page.locator("[data-section=diff] [data-run]").count() == 4
    page.keyboard.press("n")
    page.locator("[data-section=diff].active").wait_for()
    page.keyboard.press("p")
    page.locator("#cell-test_names_bug[data-passed=true]").wait_for()
    page.locator("#submit-review:not([disabled])").wait_for()
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "review-page")

    # The keys act on the section on screen: back at the diff, n goes on to the submit button.
    page.locator("#submit-review").scroll_into_view_if_needed()
    page.locator("[data-section=diff].active").wait_for()
    page.keyboard.press("n")
    # Final marks take a confirmation: the box first (Space ticks it), then the button.
    assert page.evaluate("document.activeElement.id") == "confirm-submit"
    page.keyboard.press(" ")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "submit-review"
    page.keyboard.press("Enter")
    page.get_by_text("Your review is submitted").wait_for()

    review = Review.objects.get(submission=ada, reviewer=rob)
    assert review.submitted_at is not None
    order = list(Mark.objects.filter(review=review).order_by("updated_at").values_list("cell", "passed"))
    assert order == [("red_log", True), ("model_waited", True), ("refusal_specific", False), ("test_names_bug", True)]
    # Now ann's marks appear beside each cell, and cannot be changed from here.
    assert page.locator("#cell-refusal_specific [data-reviewer=ann]").count() == 1
    assert page.locator("button[name=passed]").count() == 0

    page.goto(live_server.url + f"/review/debrief/{packet.slug}/")
    page.get_by_role("heading", name="How much the reviewers agree").wait_for()
    assert page.locator("td.disagree").count() == 3
    assert "ann & rob" in page.locator("[data-agreement=red_log]").inner_text()
    screenshot(page, "debrief")
