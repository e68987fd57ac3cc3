"""A reviewer in headless Chromium replays a hosted session and jumps to the moment red was captured."""

from datetime import UTC, datetime

import pytest

from conftest import log_in, screenshot, wait_until
from grading.tests.casts import cast_for
from grading.tests.reviewing import make_submission

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
CURRENT = "document.getElementById('replay-player').takehomePlayer.getCurrentTime()"


def test_the_reviewer_replays_the_session_and_jumps_to_red(live_server, page, make_reviewer, settings, tmp_path):
    from takehome.actions import do_load_sample_packet

    settings.WORKSPACES_DIR = tmp_path / "workspaces"
    packet, _ = do_load_sample_packet()
    make_reviewer("rob")
    submission = make_submission(packet, "Ada Lovelace")
    # why this start: the ideal evidence's times are on 2026-11-30 around 14:08 (UTC), so the marks sit beside them
    cast_for(submission, started=datetime(2026, 11, 30, 14, 8, 30, tzinfo=UTC).timestamp())
    blocked = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: blocked.append(str(e)))

    log_in(page, live_server.url, "rob")
    page.goto(f"{live_server.url}/review/{submission.pk}/")

    player = page.locator("#section-stamp #replay-player .ap-player")
    player.wait_for()
    wait_until(page, f"{CURRENT} !== undefined")
    assert page.evaluate(CURRENT) == 0
    buttons = page.locator("#replay-markers button").all_inner_texts()
    assert buttons[0].startswith("Jump to red") and "green captured" in buttons[-1]

    page.click("#jump-to-red")
    wait_until(page, f"Math.abs({CURRENT} - 4.5) < 0.05")
    # the terminal shows the failing run at that moment
    wait_until(page, "document.querySelector('#replay-player').innerText.includes('1 failed')")
    assert page.locator("svg.timeline [data-event='recording: red captured']").count() == 1
    # a key pressed in the player is the player's, never the review page's "f = fail"
    page.click("#replay-player .ap-player")
    page.keyboard.press("f")
    page.wait_for_timeout(300)
    assert page.locator("#cell-model_waited[data-passed]").count() == 0
    page.keyboard.press("Escape")
    assert blocked == []
    page.locator("#replay").scroll_into_view_if_needed()
    screenshot(page, "review-replay")
