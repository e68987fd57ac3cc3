"""Two reviewers assigned to one upload in headless Chromium: one comments a line of the diff (by a click, and
by the keyboard), both submit, the debrief shows the comment; the side-by-side diff is kept in the browser."""

import pytest

from conftest import log_in, wait_focused
from grading import pipeline
from grading.models import Assignment, LineComment
from grading.tests.reviewing import ideal_evidence, make_submission
from sessions_app.models import Submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def mark_first_three(page):
    for cell in ("red_log", "model_waited", "refusal_specific"):
        page.click(f"#pass-{cell}")
        page.locator(f"#cell-{cell}.scored").wait_for()
    page.locator("#diff-file-1 table.diff-unified").wait_for()  # the diff unfolds


def submit(page, cell_choice="#pass-test_names_bug"):
    page.click(cell_choice)
    page.locator("#cell-test_names_bug.scored").wait_for()
    page.check("#confirm-submit")
    page.click("#submit-review")
    page.get_by_text("Your review is submitted").wait_for()


def test_two_assigned_reviewers_one_comments_a_diff_line_both_submit_the_debrief_shows_it(
        live_server, page, browser, make_reviewer):
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    packet.reviewers_per_submission = 2
    packet.save()
    ann = make_reviewer("ann")
    make_reviewer("rob"), make_reviewer("cy")
    Assignment.objects.create(submission=make_submission(packet, "Grace Hopper"), reviewer=ann)
    # Ada's upload is graded as the worker ends it: evidence recorded, and her two reviewers assigned by load
    # (ann has one open already, so rob and cy).
    ada = make_submission(packet, "Ada Lovelace", status=Submission.Status.GRADING)
    pipeline.record_evidence(pipeline.claim(ada.pk), ideal_evidence(), 1.0)
    assert sorted(Assignment.objects.filter(submission=ada).values_list("reviewer__username", flat=True)) == [
        "cy", "rob"]

    log_in(page, live_server.url, "rob")
    page.goto(live_server.url + "/review/")
    page.locator("#my-queue-rows").get_by_role("link", name="Ada Lovelace").click()
    assert page.locator('#assignments [data-assigned="rob"]').inner_text().startswith("rob (you)")
    mark_first_three(page)

    # A click on the line opens its comment box there, with the focus in it.
    page.click('#diff-file-1 table.diff-unified tr[data-anchor="new:9"] td.code span.gi')
    page.locator("#comment-body").wait_for()
    wait_focused(page, "comment-body")
    page.keyboard.type("abs() is gone: refunds now subtract")
    page.click("#comment-save")
    mine = page.locator('#diff-file-1 table.diff-unified tr.line-comments[data-anchor="new:9"] [data-by="you"]')
    mine.wait_for()
    assert "abs() is gone" in mine.inner_text()
    wait_focused(page, "comment-link-unified-1-new-9")  # back on the line

    # The keyboard alone: Tab reaches a line's link, Enter opens the box, Esc leaves it.
    page.focus('#comment-link-unified-1-old-9')
    page.keyboard.press("Enter")
    page.locator("#comment-body").wait_for()
    assert "removed line 9" in page.locator("label[for=comment-body]").inner_text()
    page.keyboard.type("the old line hid refunds")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # on "Save comment"
    page.locator('#diff-file-1 table.diff-unified tr.line-comments[data-anchor="old:9"] [data-by="you"]').wait_for()
    assert LineComment.objects.filter(review__reviewer__username="rob").count() == 2
    submit(page)

    # cy has not submitted: rob's comments are hidden from her until she does.
    other = browser.new_context(viewport={"width": 1280, "height": 900})
    cy = other.new_page()
    cy.set_default_timeout(15000)
    try:
        log_in(cy, live_server.url, "cy")
        cy.goto(f"{live_server.url}/review/{ada.pk}/")
        mark_first_three(cy)
        assert cy.locator('[data-by="rob"]').count() == 0 and "abs() is gone" not in cy.content()
        submit(cy, "#fail-test_names_bug")
        shown = cy.locator('#diff-file-1 table.diff-unified tr.line-comments[data-anchor="new:9"] [data-by="rob"]')
        assert "abs() is gone: refunds now subtract" in shown.inner_text()
        cy.goto(f"{live_server.url}/review/debrief/{packet.slug}/")
        debrief = cy.locator(f'tr[data-comments-for="{ada.pk}"]')
        assert "rob on invoices.py:9" in debrief.inner_text()
        assert "abs() is gone: refunds now subtract" in debrief.inner_text()
        assert "invoices.py:-9" in debrief.inner_text()  # the removed line, by its number before
    finally:
        other.close()


def test_the_side_by_side_view_is_kept_in_the_browser(live_server, page, make_reviewer):
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    make_reviewer("rob")
    ada = make_submission(packet, "Ada Lovelace")
    log_in(page, live_server.url, "rob")
    page.goto(f"{live_server.url}/review/{ada.pk}/")
    mark_first_three(page)
    unified = page.locator("#diff-file-1 [data-diff-view=unified]")
    split = page.locator("#diff-file-1 [data-diff-view=split]")
    assert unified.is_visible() and not split.is_visible()
    page.get_by_role("button", name="Side by side").click()
    assert split.is_visible() and not unified.is_visible()
    assert page.get_attribute("[data-diff-view-choice=split]", "aria-pressed") == "true"
    page.reload()
    page.locator("#diff-file-1 [data-diff-view=split]").wait_for()
    assert not page.locator("#diff-file-1 [data-diff-view=unified]").is_visible()
    # a comment opened from the side-by-side view opens there, and the view stays after the save
    page.click('#diff-file-1 table.diff-split td[data-anchor="new:9"] span.gi')
    page.locator("#diff-file-1 table.diff-split #comment-body").wait_for()
    page.fill("#comment-body", "side by side")
    page.click("#comment-save")
    page.locator('#diff-file-1 table.diff-split tr.line-comments [data-by="you"]').wait_for()
    assert not page.locator("#diff-file-1 [data-diff-view=unified]").is_visible()
    page.get_by_role("button", name="Unified").click()
    assert page.locator("#diff-file-1 [data-diff-view=unified]").is_visible()
