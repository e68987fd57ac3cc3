"""In Chromium: the hosted workspace shows the task and the rules in a pane that folds by keyboard (and stays
folded after a reload), and the clock counts down there with its warnings at 10 and 2 minutes, each said once.

The deadline is moved in the database; no test waits for minutes to pass.
"""

from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from sessions_app.actions import do_start_session
from sessions_app.tests.browser.terminal import wait_connected
from sessions_app.tests.helpers import daphne_serving
from takehome.models import Invitation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def asgi_server(settings, shells, monkeypatch):
    with daphne_serving(settings, monkeypatch) as url:
        yield url


def deadline_in(invitation, minutes: float) -> None:
    Invitation.objects.filter(pk=invitation.pk).update(deadline=timezone.now() + timedelta(minutes=minutes))


# Counts what the live region says from here on (a change of its text is a new announcement).
COUNT_SAID = """() => {
  window.__said = [];
  const live = document.getElementById("clock-warning");
  if (live.textContent.trim()) window.__said.push(live.textContent.trim());
  new MutationObserver(() => { if (live.textContent.trim()) window.__said.push(live.textContent.trim()); })
    .observe(live, { childList: true, characterData: true, subtree: true });
}"""


def next_tick(page) -> None:
    """Until the countdown's text changes: one tick of the clock, however long it takes."""
    before = page.locator("#countdown").inner_text()
    page.wait_for_function("(before) => document.getElementById('countdown').textContent !== before", arg=before)


def test_the_task_pane_shows_the_prompt_and_the_rules_and_folds_by_keyboard(asgi_server, page, invitation):
    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    body = page.locator("#task-pane-body")
    assert body.is_visible()
    first_words = invitation.packet_version.prompt.strip().splitlines()[0].lstrip("# ").strip()[:30]
    assert first_words in body.inner_text()
    assert "Red means the test runner printed FAILED" in body.inner_text()
    assert "gate.py enforces" not in body.inner_text()  # the rules as a hosted candidate reads them
    # nothing on the page leaves it to read the task
    assert page.locator(f"a[href='/t/{invitation.raw_token}/']").count() == 0
    wait_connected(page)  # the terminal takes the focus when it connects
    page.focus("#task-pane-summary")
    page.keyboard.press("Enter")
    body.wait_for(state="hidden")
    assert page.evaluate("document.getElementById('task-pane').open") is False
    page.keyboard.press("Space")
    body.wait_for(state="visible")
    assert page.evaluate("document.activeElement.id") == "task-pane-summary"


FOLDED = "document.getElementById('task-pane').open === false"


def test_a_folded_task_pane_stays_folded_after_a_reload_and_an_opened_one_open(asgi_server, page, invitation):
    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    body = page.locator("#task-pane-body")
    page.locator("#task-pane-summary").click()
    body.wait_for(state="hidden")
    page.reload()
    assert page.evaluate(FOLDED) and body.is_hidden()
    # kept per pane, in the browser: one flag, and nothing of the candidate's
    assert page.evaluate("Object.entries(localStorage)") == [["takehome-folded:task-pane", "1"]]
    page.locator("#task-pane-summary").click()
    body.wait_for(state="visible")
    page.reload()
    assert not page.evaluate(FOLDED) and body.is_visible()
    assert page.evaluate("localStorage.length") == 0


def test_the_countdown_follows_the_servers_clock_not_the_candidates(asgi_server, browser, invitation):
    do_start_session(invitation)
    deadline_in(invitation, 30)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.clock.install(time=timezone.now() - timedelta(hours=3))  # this machine's clock is 3 hours slow
        page.clock.resume()
        page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
        next_tick(page)
        assert page.locator("#countdown").inner_text().startswith(("29 min", "30 min"))
        assert page.locator("#clock-banner").is_hidden()
    finally:
        context.close()


def test_the_warnings_at_10_and_2_minutes_are_each_said_once(asgi_server, page, invitation):
    do_start_session(invitation)
    deadline_in(invitation, 9)
    url = f"{asgi_server}/t/{invitation.raw_token}/workspace"
    page.goto(url)
    banner = page.locator("#clock-banner")
    banner.wait_for()
    assert banner.inner_text().startswith("10 minutes left.")
    page.locator("#clock-warning", has_text="10 minutes left.").wait_for()
    page.evaluate(COUNT_SAID)
    next_tick(page)
    next_tick(page)
    assert page.evaluate("window.__said") == [page.locator("#clock-warning").inner_text().strip()]  # not on each tick

    page.reload()  # the 10-minute warning was said: shown again, not said again
    banner.wait_for()
    next_tick(page)
    assert banner.inner_text().startswith("10 minutes left.")
    assert page.locator("#clock-warning").inner_text().strip() == ""

    deadline_in(invitation, 1)
    page.reload()
    page.locator("#clock-banner[data-warn-at='120']").wait_for()
    assert banner.inner_text().startswith("2 minutes left.")
    page.locator("#clock-warning", has_text="2 minutes left.").wait_for()


def test_a_page_opened_after_the_10_minute_mark_says_that_warning(asgi_server, page, invitation):
    do_start_session(invitation)
    deadline_in(invitation, 5)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    page.locator("#clock-warning", has_text="10 minutes left.").wait_for()


def test_when_the_deadline_passes_the_grace_period_is_said(shells, page, invitation, settings, monkeypatch):
    # why before daphne starts: the forked server keeps the settings of that moment
    settings.UPLOAD_GRACE_S = 600
    with daphne_serving(settings, monkeypatch) as asgi_server:
        do_start_session(invitation)
        deadline_in(invitation, 5)
        closes = Invitation.objects.get(pk=invitation.pk).upload_closes_at
        # why the page's clock, moved on: the deadline passes with the page open however long it took to load
        # (a deadline two seconds away had passed before a loaded server drew the page, which then had no clock
        # to run down)
        page.clock.install()
        page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
        page.locator("#clock.clock-running").wait_for()
        page.clock.fast_forward("06:00")
        clock = page.locator("#clock.clock-grace")
        clock.wait_for(timeout=10_000)
        assert clock.inner_text().startswith("The deadline has passed; the workspace closes at ")
        # the deadline plus the grace daphne was given (the default's would be five minutes earlier)
        assert clock.locator("time").get_attribute("datetime") == closes.astimezone(UTC).isoformat(timespec="seconds")
        page.locator("#clock-warning", has_text="The deadline has passed;").wait_for()
        assert page.locator("#clock-banner").is_hidden()
