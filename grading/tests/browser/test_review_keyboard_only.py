"""The review page with the keyboard alone: Tab, Shift+Tab, Enter, Space and typing, none of the
page's own shortcut keys, and no mouse. A reviewer who cannot use a mouse scores every cell,
leaves a note and submits."""

import pytest

from grading.models import Mark, Review
from grading.tests.reviewing import make_submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def focused(page) -> str:
    return page.evaluate("document.activeElement ? document.activeElement.id : ''")


def tab_to(page, element_id: str, limit: int = 120) -> None:
    """Press Tab until the element has the focus, as a person would; fail if it never comes."""
    for _ in range(limit):
        if focused(page) == element_id:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"#{element_id} never took the focus after {limit} presses of Tab")


def test_a_reviewer_scores_every_cell_and_submits_with_the_keyboard_alone(live_server, page, make_reviewer):
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    make_reviewer("rob")
    ada = make_submission(packet, "Ada Lovelace")

    # The cells htmx swaps in stay within the Content-Security-Policy too.
    blocked = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(live_server.url + "/")
    tab_to(page, "id_username")
    page.keyboard.type("rob")
    page.keyboard.press("Tab")
    page.keyboard.type("pw-rob")
    page.keyboard.press("Enter")
    page.wait_for_url(live_server.url + "/review/")
    # The queue's link to Ada's upload, reached by Tab.
    for _ in range(60):
        if page.evaluate("document.activeElement.textContent.trim()") == "Ada Lovelace":
            break
        page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_url(live_server.url + f"/review/{ada.pk}/")

    choices = [("red_log", "pass", "Enter"), ("model_waited", "fail", "Space"), ("refusal_specific", "pass", "Enter")]
    for cell, choice, key in choices:
        tab_to(page, f"{choice}-{cell}")
        page.keyboard.press(key)
        page.locator(f"#cell-{cell}[data-passed={'true' if choice == 'pass' else 'false'}]").wait_for()
        # The cell was swapped in place; the focus stayed on the button, not back at the page's top.
        assert focused(page) == f"{choice}-{cell}"

    # A note, typed (it is saved at the pause in typing), then left with Tab.
    tab_to(page, "note-refusal_specific")
    page.keyboard.type("names the harm precisely")
    page.locator("#cell-status-refusal_specific", has_text="with the note").wait_for()
    page.keyboard.press("Tab")

    # The diff unfolded once the three cells above were scored; its cell is next.
    tab_to(page, "fail-test_names_bug")
    page.keyboard.press("Shift+Tab")
    assert focused(page) == "pass-test_names_bug"
    page.keyboard.press("Enter")
    page.locator("#cell-test_names_bug[data-passed=true]").wait_for()
    page.locator("#submit-review:not([disabled])").wait_for()

    # Final marks ask first: the confirmation box, ticked with Space, then the button.
    tab_to(page, "confirm-submit")
    page.keyboard.press("Space")
    assert page.locator("#confirm-submit").is_checked()
    tab_to(page, "submit-review")
    page.keyboard.press("Enter")
    page.get_by_text("Your review is submitted").wait_for()

    review = Review.objects.get(submission=ada)
    assert review.submitted_at is not None
    marks = dict(Mark.objects.filter(review=review).values_list("cell", "passed"))
    assert marks == {"red_log": True, "model_waited": False, "refusal_specific": True, "test_names_bug": True}
    assert Mark.objects.get(review=review, cell="refusal_specific").note == "names the harm precisely"
    assert blocked == []
