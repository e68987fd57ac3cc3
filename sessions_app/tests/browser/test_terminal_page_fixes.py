"""In Chromium: the terminal page after a reload keeps the shell's history in its scrollback,
and leaving the page while the terminal is connected asks first.

The shell is the real workspace (hosted_shell.py), under uids of its own (shared/pytest_slots.py).
"""

import re

import pytest

from sessions_app.actions import do_start_session
from sessions_app.tests.browser.terminal import wait_connected
from sessions_app.tests.helpers import daphne_serving
from sessions_app.tests.hosted_shell import use_uids
from shared import pytest_slots

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
UID_BASE = pytest_slots.uids("terminal_page_fixes")


@pytest.fixture
def asgi_server(settings, shells, monkeypatch):
    use_uids(settings, UID_BASE, slots=5)
    with daphne_serving(settings, monkeypatch) as url:
        yield url


def type_line(page, text: str) -> None:
    page.locator("#terminal .xterm-helper-textarea").focus()
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def test_after_a_reload_the_wheel_reaches_the_history_above_the_screen(asgi_server, page, invitation):
    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    wait_connected(page)
    type_line(page, "for i in $(seq 1 150); do echo early-$i; done")
    rows = page.locator("#terminal .xterm-rows")
    rows.get_by_text("early-150", exact=True).wait_for()
    page.reload()
    wait_connected(page)
    rows.get_by_text("early-150", exact=True).wait_for()  # tmux drew the screen
    assert rows.get_by_text("early-3", exact=True).count() == 0  # far above the screen
    page.locator("#terminal .xterm-screen").hover()
    for _ in range(100):  # xterm.js scrolls smoothly: a few turns of the wheel
        page.mouse.wheel(0, -3000)
        if rows.get_by_text("early-3", exact=True).count():
            break
        page.wait_for_timeout(100)
    rows.get_by_text("early-3", exact=True).wait_for(timeout=2000)


def test_leaving_the_page_while_connected_asks_first(asgi_server, page, invitation):
    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    wait_connected(page)
    type_line(page, "echo typed")  # a page the person used: Chromium asks only then
    page.locator("#terminal .xterm-rows").get_by_text("typed", exact=True).wait_for()
    asked = []

    def answer(dialog):
        asked.append(dialog.type)
        dialog.dismiss()  # stay on the page

    page.on("dialog", answer)
    page.close(run_before_unload=True)
    page.wait_for_timeout(1000)
    assert asked == ["beforeunload"]
    assert not page.is_closed()
    assert page.locator("#terminal-status").inner_text() == "connected"


BUFFER_LINES = """() => {
  const buffer = document.getElementById("terminal").xterm.buffer.active;
  const lines = [];
  for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i).translateToString(true));
  return lines;
}"""


def test_after_a_reload_a_command_typed_before_is_in_the_terminal_once(asgi_server, page, invitation):
    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    wait_connected(page)
    type_line(page, "echo first-$((6*7))")
    rows = page.locator("#terminal .xterm-rows")
    rows.get_by_text("first-42", exact=True).wait_for()
    page.reload()
    wait_connected(page)
    rows.get_by_text("first-42", exact=True).wait_for()  # tmux drew the screen
    lines = page.evaluate(BUFFER_LINES)
    assert [line for line in lines if "echo first-" in line] != [], lines
    assert len([line for line in lines if "echo first-" in line]) == 1, lines
    assert len([line for line in lines if line.strip() == "first-42"]) == 1, lines


MEASURE = """() => {
  const box = document.getElementById("terminal");
  const rect = (s) => { const e = box.querySelector(s); return e ? e.getBoundingClientRect().toJSON() : null; };
  const style = getComputedStyle(box);
  return {
    screen: rect(".xterm-screen"),
    scrollbar: rect(".xterm-scrollable-element > .scrollbar.vertical"),
    contentRight: box.getBoundingClientRect().right - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth),
    cols: box.xterm.cols,
  };
}"""


def test_the_scrollbar_covers_no_column_of_the_terminal_at_either_width(asgi_server, browser, invitation):
    """At 1280 px, then at 1111 px once the window is resized and the terminal has refitted itself: two widths
    whose columns fit the box differently. why one page resized, not two opened: each opening started its own
    server and shell, and a resize is what a person does to a window too."""
    do_start_session(invitation)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
        wait_connected(page)
        # why: the terminal may start below the fold (under the task), and xterm.js draws no rows it cannot show
        page.locator("#terminal").scroll_into_view_if_needed()
        page.locator("#terminal .xterm-rows").get_by_text(re.compile(r"\$\s*$")).first.wait_for()  # the prompt
        type_line(page, "for i in $(seq 1 80); do echo line-$i; done")  # a scrollback: the scrollbar shows
        page.locator("#terminal .xterm-rows").get_by_text("line-80", exact=True).wait_for()
        for width in (1280, 1111):
            if width != 1280:
                page.set_viewport_size({"width": width, "height": 800})
                page.locator(f"#terminal[data-fitted-width='{width}']").wait_for()
                page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
                page.locator("#terminal").scroll_into_view_if_needed()
            sizes = page.evaluate(MEASURE)
            assert sizes["scrollbar"] is not None, (width, sizes)
            assert sizes["screen"]["right"] <= sizes["scrollbar"]["left"] + 0.5, (width, sizes)
            assert sizes["scrollbar"]["right"] <= sizes["contentRight"] + 0.5, (width, sizes)
    finally:
        context.close()
