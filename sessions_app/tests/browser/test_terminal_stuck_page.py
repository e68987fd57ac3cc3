"""In Chromium: a fork bomb in the workspace is met on the page by "Restart the shell", in view without
scrolling (over the attached terminal, or after a reload that is not attached), which brings the terminal
back with the files kept.

The shell is the real workspace under the real caps (uids of test_terminal_stuck.py's range, which runs
apart from this file), served by daphne over a real WebSocket; the bomb is a real one.
"""

from __future__ import annotations

import pytest

from conftest import wait_focused
from sessions_app.tests.browser.terminal import wait_connected
from sessions_app.tests.helpers import daphne_serving
from sessions_app.tests.hosted_shell import use_uids
from sessions_app.tests.test_terminal_stuck import BOMB, UID_BASE, wait_for_the_cap
from takehome.tests.browser.test_every_page import axe_problems

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
LAPTOP, PHONE = {"width": 1280, "height": 720}, {"width": 360, "height": 640}


def in_view(page, selector: str) -> None:
    """The whole of ``selector`` lies inside the viewport, the page not scrolled, and nothing covers it."""
    box = page.locator(selector).bounding_box()  # relative to the viewport
    size = page.viewport_size
    assert box is not None, f"{selector} is not shown"
    assert page.evaluate("[window.scrollX, window.scrollY]") == [0, 0]
    assert (box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= size["width"]
            and box["y"] + box["height"] <= size["height"]), (selector, box, size)
    on_top = page.evaluate("([x, y, s]) => document.elementFromPoint(x, y).closest(s) !== null",
                           [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, selector])
    assert on_top, f"something covers {selector}"


def test_the_offer_is_in_view_without_scrolling_over_the_attached_terminal_and_after_a_reload(
        settings, monkeypatch, shells, browser, invitation):
    from axe_playwright_python.sync_playwright import Axe

    from sessions_app.actions import do_start_session
    from sessions_app.hosted.workspaces import ensure_open

    use_uids(settings, UID_BASE, slots=3)
    do_start_session(invitation)
    axe = Axe()
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(15000)
    try:
        with daphne_serving(settings, monkeypatch) as url:
            page.goto(f"{url}/t/{invitation.raw_token}/workspace")
            wait_connected(page)
            (ensure_open(invitation).home / "bomb.py").write_text(BOMB)
            terminal = page.locator("#terminal .xterm-helper-textarea")
            terminal.focus()
            page.keyboard.type("python bomb.py")
            page.keyboard.press("Enter")

            # the server sees the shell pinned at its cap: the offer comes over the terminal, which stays
            page.locator("#restart-shell").wait_for(state="visible", timeout=60_000)
            assert page.locator("#terminal-status").get_attribute("data-state") == "connected"
            alert = page.get_by_role("alert")
            assert "hold every process" in alert.inner_text() and "your files stay" in alert.inner_text()
            for selector in ("#restart-shell", "#restart-shell-button"):
                in_view(page, selector)
            # focus stays in the terminal (Ctrl+C may end the bomb); Tab takes it to the button
            assert page.evaluate("document.activeElement.classList.contains('xterm-helper-textarea')")
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.id") == "restart-shell-button"
            page.keyboard.press("Shift+Tab")
            assert page.evaluate("document.activeElement.classList.contains('xterm-helper-textarea')")
            assert axe_problems(axe, page, "the offer over the terminal") == []
            page.set_viewport_size(PHONE)
            for selector in ("#restart-shell", "#restart-shell-button"):
                in_view(page, selector)

            # a new visit on the phone is not attached to the pinned shell: the offer at once, focused
            page.reload()
            page.locator("#terminal-status[data-state='stuck']").wait_for(timeout=60_000)
            for selector in ("#restart-shell", "#restart-shell-button"):
                in_view(page, selector)
            assert "cannot attach" in page.get_by_role("alert").inner_text()
            wait_focused(page, "restart-shell-button")
            assert axe_problems(axe, page, "the offer after a reload") == []
            page.set_viewport_size(LAPTOP)
            in_view(page, "#restart-shell")
    finally:
        context.close()


def test_a_fork_bomb_offers_a_restart_on_the_page_and_the_shell_comes_back(settings, monkeypatch, shells,
                                                                            page, invitation, tmp_path):
    from sessions_app.actions import do_start_session
    from sessions_app.hosted.workspaces import ensure_open

    use_uids(settings, UID_BASE, slots=3)
    do_start_session(invitation)
    with daphne_serving(settings, monkeypatch) as url:
        address = f"{url}/t/{invitation.raw_token}/workspace"
        page.goto(address)
        wait_connected(page)
        assert page.locator("#restart-shell").is_hidden()
        ws = ensure_open(invitation)
        (ws.home / "bomb.py").write_text(BOMB)
        page.locator("#terminal .xterm-helper-textarea").focus()
        page.keyboard.type("echo kept-before > notes.txt; python bomb.py")
        page.keyboard.press("Enter")
        wait_for_the_cap(ws)

        # the attached terminal is offered the restart; its button leaves the page without asking
        # (the page asks before leaving a connected terminal otherwise)
        offer = page.locator("#restart-shell")
        offer.wait_for(state="visible", timeout=60_000)
        assert "your files stay as they are" in offer.inner_text()
        page.screenshot(path=str(tmp_path / "stuck.png"))
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.type), dialog.dismiss()))
        page.locator("#restart-shell-button").click()
        page.get_by_text("The shell was restarted").wait_for()
        assert page.url == address
        wait_connected(page, timeout=60_000)
        assert page.locator("#restart-shell").is_hidden()
        page.locator("#terminal .xterm-helper-textarea").focus()
        page.keyboard.type("echo again-$(cat notes.txt)")
        page.keyboard.press("Enter")
        page.locator("#terminal .xterm-rows").get_by_text("again-kept-before", exact=True).wait_for()
        assert dialogs == []
