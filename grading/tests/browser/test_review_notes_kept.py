"""A reviewer's note in headless Chromium is saved as it is typed: a reload, or leaving the page,
while the focus is still in the box loses nothing, before pass or fail is chosen and after."""

import json
import time

import pytest
from playwright.sync_api import expect

from conftest import log_in
from grading.models import Mark, Review
from grading.tests.reviewing import make_submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def review_page(live_server, page, make_reviewer):
    """rob logged in, on Ada's review page, nothing scored yet; the page's errors and the policy's
    complaints are collected in ``page.blocked``."""
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    make_reviewer("rob")
    ada = make_submission(packet, "Ada Lovelace")
    page.blocked = []
    page.on("console", lambda m: page.blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: page.blocked.append(str(e)))
    log_in(page, live_server.url, "rob")
    page.goto(f"{live_server.url}/review/{ada.pk}/")
    return page


def eventually(read, timeout: float = 10.0, page=None):
    """The value once it is truthy: the saves reach the database on their own time. Given the page, the
    waits are the page's: a test that routes the page's requests needs them (routes run only while
    playwright waits on the page)."""
    deadline = time.monotonic() + timeout
    while not (value := read()):
        assert time.monotonic() < deadline, f"the note never reached the database; it holds {drafts()}"
        if page:
            page.wait_for_timeout(50)
        else:
            time.sleep(0.05)
    return value


def drafts() -> dict:
    review = Review.objects.first()
    return review.draft_notes if review else {}


def focused(page) -> str:
    return page.evaluate("document.activeElement ? document.activeElement.id : ''")


def test_a_note_typed_before_choosing_is_kept_across_a_reload_from_inside_the_box(review_page):
    page = review_page
    page.click("#note-red_log")
    page.keyboard.type("no closing line")
    assert focused(page) == "note-red_log"  # never left the box: no change event
    page.reload()
    expect(page.locator("#note-red_log")).to_have_value("no closing line")  # put back once htmx has loaded the page
    assert eventually(drafts) == {"red_log": "no closing line"}
    assert not Mark.objects.exists()  # a note scores nothing
    assert page.blocked == []


def test_a_note_is_saved_while_the_reviewer_is_still_typing(review_page):
    page = review_page
    page.click("#note-model_waited")
    page.keyboard.type("the stamp came first")
    assert eventually(drafts) == {"model_waited": "the stamp came first"}
    page.locator("#cell-status-model_waited", has_text="Note kept").wait_for()
    # The box was not swapped under the reviewer's fingers: the focus and the text stay, typing goes on.
    assert focused(page) == "note-model_waited"
    page.keyboard.type(", then the prompt")
    assert page.input_value("#note-model_waited") == "the stamp came first, then the prompt"
    eventually(lambda: drafts() == {"model_waited": "the stamp came first, then the prompt"})
    assert page.blocked == []


def test_a_note_typed_just_before_leaving_the_page_is_sent_as_the_page_goes(review_page):
    page = review_page
    page.click("#note-red_log")
    page.keyboard.type("left at once")
    page.goto("about:blank")  # before the pause in typing that would have saved it
    assert eventually(drafts) == {"red_log": "left at once"}


def test_a_note_typed_after_the_choice_goes_onto_the_mark(review_page):
    page = review_page
    page.click("#fail-red_log")
    page.locator("#cell-red_log[data-passed=false]").wait_for()
    page.click("#note-red_log")
    page.keyboard.type("only a summary line")
    page.reload()
    expect(page.locator("#note-red_log")).to_have_value("only a summary line")  # put back once htmx has loaded the page
    saved = eventually(lambda: Mark.objects.filter(cell="red_log", note="only a summary line").first())
    assert saved.passed is False and drafts() == {}
    assert page.blocked == []


def test_a_note_whose_save_was_lost_comes_back_from_the_tab_and_is_saved(review_page):
    """The page shows the note the typing began from (the last save did not arrive in time): the tab's copy wins.
    A page showing a third note was changed elsewhere since: that one stands and the tab's copy is dropped."""
    page = review_page
    key = page.evaluate("'takehome:note:' + document.getElementById('note-red_log').getAttribute('hx-post')")
    other = key.replace("red_log", "model_waited")
    page.evaluate("([k, v]) => sessionStorage.setItem(k, v)", [key, json.dumps({"base": "", "text": "lost on the way"})])
    page.evaluate("([k, v]) => sessionStorage.setItem(k, v)",
                  [other, json.dumps({"base": "an older note", "text": "typed over it"})])
    page.reload()
    expect(page.locator("#note-red_log")).to_have_value("lost on the way")  # put back once htmx has loaded the page
    assert eventually(drafts) == {"red_log": "lost on the way"}
    page.locator("#cell-status-red_log", has_text="Note kept").wait_for()
    assert page.input_value("#note-model_waited") == ""
    assert page.evaluate("([a, b]) => [sessionStorage.getItem(a), sessionStorage.getItem(b)]", [key, other]) == [None, None]
    assert page.blocked == []


def test_a_pause_in_typing_while_the_last_save_is_on_its_way_is_saved_after_it(review_page):
    """The box sends one save at a time: a pause while one is held up on a slow server used to be dropped,
    and the note kept on the server was the text of the first pause."""
    page = review_page
    held, release = [], []

    def slow(route):
        held.append(route.request.post_data)
        if len(held) == 1:
            release.append(route)  # the first save waits until the test lets it go
        else:
            route.continue_()

    page.route("**/mark/model_waited/", slow)
    page.click("#note-model_waited")
    page.keyboard.type("first half")
    eventually(lambda: release, page=page)
    page.keyboard.type(", second half")
    page.wait_for_timeout(900)  # past the pause that sends a save: it meets the first one still on its way
    release[0].continue_()
    eventually(lambda: drafts().get("model_waited") == "first half, second half", page=page)
    page.locator("#cell-status-model_waited", has_text="Note kept").wait_for()
    assert page.blocked == []
