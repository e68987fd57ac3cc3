"""A reviewer's note in headless Chromium is saved as it is typed: a reload, or leaving the page,
while the focus is still in the box loses nothing, before pass or fail is chosen and after."""

import json
import threading
import time
from unittest.mock import patch

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
    """The page shows a note typed before the tab's copy (the last save did not arrive in time): the tab's copy
    wins. A page showing a note typed after it was changed elsewhere since: that one stands and the tab's copy
    is dropped. A copy kept by a page from before the stamps goes by the note its typing began from (base)."""
    from django.contrib.auth import get_user_model

    from grading import actions
    from sessions_app.models import Submission

    page = review_page
    key = page.evaluate("'takehome:note:' + document.getElementById('note-red_log').getAttribute('hx-post')")
    elsewhere, older = key.replace("red_log", "refusal_specific"), key.replace("red_log", "model_waited")
    store = "([k, v]) => sessionStorage.setItem(k, v)"
    page.evaluate(store, [key, json.dumps({"text": "lost on the way", "stamp": 5})])
    page.evaluate(store, [elsewhere, json.dumps({"text": "typed before it", "stamp": 5})])
    page.evaluate(store, [older, json.dumps({"base": "an older note", "text": "typed over it"})])
    rob = get_user_model().objects.get(username="rob")
    actions.do_save_note_draft(Submission.objects.get(), rob, "refusal_specific", "written elsewhere, later", 9)
    page.reload()
    expect(page.locator("#note-red_log")).to_have_value("lost on the way")  # put back once htmx has loaded the page
    assert eventually(lambda: drafts().get("red_log")) == "lost on the way"
    page.locator("#cell-status-red_log", has_text="Note kept").wait_for()
    assert page.input_value("#note-refusal_specific") == "written elsewhere, later"
    assert page.input_value("#note-model_waited") == ""
    assert page.evaluate("(keys) => keys.map((k) => sessionStorage.getItem(k))", [key, elsewhere, older]) == [None] * 3
    assert drafts() == {"red_log": "lost on the way", "refusal_specific": "written elsewhere, later"}
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


FULL = "no closing line"
UNSAVED = "'takehome:note:' + document.getElementById('note-red_log').getAttribute('hx-post')"


def type_the_note_with_a_pause(page, heard) -> None:
    """Type FULL into the red-log box in two parts; the pause after "no clo" sends a save, which the server
    says it got by setting ``heard``."""
    page.click("#note-red_log")
    page.keyboard.type("no clo")
    assert heard.wait(15), "the pause in typing sent no save"
    page.keyboard.type("sing line")


def nothing_unsaved(page) -> bool:
    return page.evaluate(f"sessionStorage.getItem({UNSAVED}) === null")


def test_a_partial_save_the_server_writes_after_the_beacon_does_not_cut_the_note(review_page):
    """The first pause in typing sends "no clo"; the server is slow with it, and the beacon sent as the page
    reloads ("no closing line") is written first. The late partial save must not shorten the note."""
    from grading import actions

    page = review_page
    save = actions.do_save_note_draft
    held, go, done = threading.Event(), threading.Event(), threading.Event()

    def slow_first_pause(submission, reviewer, cell, note, *args, **kwargs):
        if note != "no clo" or held.is_set():
            return save(submission, reviewer, cell, note, *args, **kwargs)
        held.set()
        go.wait(30)
        try:
            return save(submission, reviewer, cell, note, *args, **kwargs)
        finally:
            done.set()

    with patch("grading.actions.do_save_note_draft", slow_first_pause):
        try:
            type_the_note_with_a_pause(page, held)
            page.reload()  # the beacon carries the whole note; the partial save is still held
            expect(page.locator("#note-red_log")).to_have_value(FULL)
            eventually(lambda: drafts() == {"red_log": FULL} and nothing_unsaved(page), page=page)
        finally:
            go.set()
        assert done.wait(15), "the held save never ended"
    assert drafts() == {"red_log": FULL}
    page.reload()
    expect(page.locator("#note-red_log")).to_have_value(FULL)
    assert page.blocked == []


def test_a_save_answered_after_the_reloaded_page_was_drawn_loses_nothing(review_page):
    """The reloaded page is drawn before any save of the note is written (an empty box); then the old
    page, still alive until the new one replaces it, hears that its partial save "no clo" was kept and
    sends the rest again. The page that arrives must still put the whole note back."""
    from grading import actions, views

    page = review_page
    save, draw = actions.do_save_note_draft, views.pages.review_page
    partial_held, partial_go, go = threading.Event(), threading.Event(), threading.Event()
    whole = []  # the saves of the whole note that reached the server (the beacon, then the old page's resend)
    arrived = threading.Condition()
    drawn = []

    def held_saves(submission, reviewer, cell, note, *args, **kwargs):
        if note == "no clo" and not partial_held.is_set():
            partial_held.set()
            partial_go.wait(30)
        elif note == FULL and not go.is_set():
            with arrived:
                whole.append(note)
                arrived.notify_all()
            go.wait(30)
        return save(submission, reviewer, cell, note, *args, **kwargs)

    def drawn_then_partial_answered(*args, **kwargs):
        context = draw(*args, **kwargs)
        if not drawn:
            drawn.append(context)
            # The page is drawn (nothing written yet): now the partial save is written and answered, and
            # the reloaded page is sent only once the old one has heard it (its resend reached the server).
            partial_go.set()
            with arrived:
                arrived.wait_for(lambda: len(whole) >= 2, 30)
        return context

    with patch("grading.actions.do_save_note_draft", held_saves), \
         patch("grading.views.pages.review_page", drawn_then_partial_answered):
        try:
            type_the_note_with_a_pause(page, partial_held)
            page.reload()
            assert len(whole) >= 2, "the old page never sent the note again after its partial save was answered"
            go.set()
            expect(page.locator("#note-red_log")).to_have_value(FULL)  # put back once htmx has loaded the page
            eventually(lambda: drafts() == {"red_log": FULL} and nothing_unsaved(page), page=page)
        finally:
            partial_go.set()
            go.set()
    assert drafts() == {"red_log": FULL}
    page.reload()
    expect(page.locator("#note-red_log")).to_have_value(FULL)
    assert page.blocked == []


def test_a_save_the_old_page_hears_of_before_the_reloaded_page_arrives_loses_nothing(review_page):
    """The reloaded page is drawn before any save of the note is written (an empty box; the beacon is slow).
    The old page, alive until the new one replaces it, then hears that its partial save "no clo" was kept,
    sends the rest again and hears that this one was kept too, all before the new page arrives. The new
    page must still put the whole note back: what it shows is older than what the old page heard."""
    from grading import actions

    page = review_page
    save = actions.do_save_note_draft
    partial_held, partial_go, beacon_held, beacon_go = (threading.Event() for _ in range(4))
    drawn, navigation = [], []

    def held_saves(submission, reviewer, cell, note, *args, **kwargs):
        if note == "no clo" and not partial_held.is_set():
            partial_held.set()
            partial_go.wait(30)
        elif note == FULL and not beacon_held.is_set():  # the first whole note to arrive is the beacon's
            beacon_held.set()
            beacon_go.wait(30)
        return save(submission, reviewer, cell, note, *args, **kwargs)

    def drawn_now_sent_later(route):
        if not route.request.is_navigation_request() or navigation:
            route.continue_()
            return
        drawn.append(route.fetch())  # drawn while neither save is written
        navigation.append(route)

    page.route(page.url, drawn_now_sent_later)
    # What the old page hears of its saves, told after the page's own handler (nothing can be asked of a
    # page whose replacement is on its way).
    heard = []
    page.on("console", lambda message: heard.append(message.text))
    page.evaluate("""() => document.addEventListener("htmx:afterRequest", () => {
        const box = document.getElementById('note-red_log');
        if (box.dataset.savedStamp === box.form.elements.namedItem('note_stamp').value) {
            console.log("saved the note it holds");
        }
    })""")
    with patch("grading.actions.do_save_note_draft", held_saves):
        try:
            type_the_note_with_a_pause(page, partial_held)
            page.evaluate("setTimeout(() => location.reload(), 0)")
            eventually(lambda: navigation and beacon_held.is_set(), page=page)
            assert FULL not in drawn[0].text() and "no clo" not in drawn[0].text()
            partial_go.set()
            # The old page heard the partial save, sent the whole note again, and heard that it was kept.
            eventually(lambda: "saved the note it holds" in heard, page=page)
            navigation[0].fulfill(response=drawn[0])
            expect(page.locator("#note-red_log")).to_have_value(FULL)  # put back once htmx has loaded the page
            beacon_go.set()
            eventually(lambda: drafts() == {"red_log": FULL} and nothing_unsaved(page), page=page)
        finally:
            partial_go.set()
            beacon_go.set()
    assert drafts() == {"red_log": FULL}
    assert page.blocked == []
