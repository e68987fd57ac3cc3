"""The review page with the keyboard alone: Tab, Shift+Tab, Enter, Space and typing, none of the
page's own shortcut keys, and no mouse. A reviewer who cannot use a mouse scores every cell,
leaves a note and submits."""

import pytest

from conftest import log_in, wait_until
from grading.models import Mark, Review
from grading.tests.casts import cast_for
from grading.tests.reviewing import make_submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def focused(page) -> str:
    return page.evaluate("document.activeElement ? document.activeElement.id : ''")


def tab_to(page, element_id: str, limit: int = 150) -> None:
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


PLAYER_TIME = "document.getElementById('replay-player').takehomePlayer.getCurrentTime()"


def test_the_replays_markers_and_controls_are_reached_and_used_with_the_keyboard_alone(live_server, page, make_reviewer,
                                                                                       settings, tmp_path):
    from takehome.actions import do_load_sample_packet

    settings.WORKSPACES_DIR = tmp_path / "workspaces"
    packet, _ = do_load_sample_packet()
    make_reviewer("rob")
    ada = make_submission(packet, "Ada Lovelace")
    cast_for(ada)
    log_in(page, live_server.url, "rob")
    page.goto(f"{live_server.url}/review/{ada.pk}/")
    page.locator("#replay-player .ap-player").wait_for()
    wait_until(page, f"{PLAYER_TIME} !== undefined")

    # Tab from the top of the page passes through the player (it keeps no Tab for itself) to the markers.
    tab_to(page, "jump-to-red")
    page.keyboard.press("Enter")
    wait_until(page, f"Math.abs({PLAYER_TIME} - 4.5) < 0.05")
    assert page.locator("#replay-at").inner_text() == "Shown: red captured, at 0:04."
    assert focused(page) == "jump-to-red"  # the focus stays on the marker, for the next one
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent").startswith("green captured"):
            break
    page.keyboard.press("Space")
    wait_until(page, f"Math.abs({PLAYER_TIME} - 9.25) < 0.05")
    assert page.locator("#replay-at").inner_text() == "Shown: green captured, at 0:09."

    # Back into the player: its own buttons show while one of them has the focus, and each has a name.
    for _ in range(12):
        page.keyboard.press("Shift+Tab")
        if page.evaluate("document.activeElement.matches('#replay-player .ap-playback-button')"):
            break
    else:
        raise AssertionError("the player's play button never took the focus")
    wait_until(page, "getComputedStyle(document.querySelector('#replay-player .ap-control-bar')).opacity === '1'")
    page.keyboard.press("Enter")  # plays from the green marker on
    wait_until(page, f"{PLAYER_TIME} > 9.3")
    # The recorded terminal, reached by Tab, is named for a screen reader.
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "The recorded terminal"
