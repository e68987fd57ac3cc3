"""The review page's keys act on the section on screen, Esc gives them back from a note, and they can be
turned off (WCAG 2.1.4)."""

from datetime import UTC, datetime

import pytest

from conftest import log_in, wait_until
from grading.tests.casts import cast_for
from grading.tests.reviewing import make_submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ACTIVE = "document.querySelector('[data-section].active').dataset.section"


def at_reading_line(page, section: str) -> None:
    """Scroll as a person would (the wheel), until the section sits a third down the window."""
    for _ in range(60):
        top = page.evaluate(f"document.querySelector('[data-section={section}]').getBoundingClientRect().top")
        line = page.evaluate("window.innerHeight / 3")
        if top <= line - 20 and page.evaluate(
                f"document.querySelector('[data-section={section}]').getBoundingClientRect().bottom") > line:
            return
        page.mouse.wheel(0, max(-400, min(400, top - line + 40)))
        page.wait_for_timeout(50)
    raise AssertionError(f"the {section} section never reached the reading line")


@pytest.fixture
def review_page(live_server, page, make_reviewer, settings, tmp_path):
    from takehome.actions import do_load_sample_packet

    settings.WORKSPACES_DIR = tmp_path / "workspaces"
    packet, _ = do_load_sample_packet()
    make_reviewer("rob")
    submission = make_submission(packet, "Ada Lovelace")
    cast_for(submission, started=datetime(2026, 11, 30, 14, 8, 30, tzinfo=UTC).timestamp())
    page.set_viewport_size({"width": 1280, "height": 700})
    log_in(page, live_server.url, "rob")
    page.goto(f"{live_server.url}/review/{submission.pk}/")
    page.locator("#section-stamp #replay-player .ap-player").wait_for()
    return page


def test_after_a_click_in_the_stamp_and_a_scroll_back_p_marks_the_red_log(review_page):
    page = review_page
    page.click("#jump-to-red")
    wait_until(page, f"{ACTIVE} === 'stamp'")
    at_reading_line(page, "red-log")
    wait_until(page, f"{ACTIVE} === 'red-log'")
    page.keyboard.press("p")
    page.locator("#cell-red_log[data-passed=true]").wait_for()
    assert page.locator("#cell-model_waited[data-passed]").count() == 0

    # n brings the next section in and it stays the active one, though the red log is still in view
    page.keyboard.press("n")
    wait_until(page, f"{ACTIVE} === 'stamp'")
    page.wait_for_timeout(200)  # the scroll n started has ended; nothing moved the mark back
    assert page.evaluate(ACTIVE) == "stamp"
    page.keyboard.press("f")
    page.locator("#cell-model_waited[data-passed=false]").wait_for()


def test_esc_leaves_a_note_and_the_keys_work_again(review_page):
    page = review_page
    at_reading_line(page, "refusal")
    page.click("#note-refusal_specific")
    page.keyboard.type("names the harm")
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.tagName") != "TEXTAREA"
    page.keyboard.press("f")
    page.locator("#cell-refusal_specific[data-passed=false]").wait_for()
    assert page.input_value("#note-refusal_specific") == "names the harm"


def test_the_single_key_shortcuts_can_be_turned_off_and_stay_off(review_page):
    page = review_page
    page.uncheck("#review-shortcuts")
    page.evaluate("document.activeElement.blur()")  # a key typed on the box itself is never a shortcut
    page.keyboard.press("p")
    page.keyboard.press("n")
    page.wait_for_timeout(300)  # a key that did something would have swapped the cell by now
    assert page.locator("[data-passed]").count() == 0
    page.reload()
    page.locator("#review-shortcuts").wait_for()
    assert not page.is_checked("#review-shortcuts")
    page.keyboard.press("p")
    page.wait_for_timeout(300)
    assert page.locator("#cell-red_log[data-passed]").count() == 0
    # the buttons still work
    page.click("#pass-red_log")
    page.locator("#cell-red_log[data-passed=true]").wait_for()
