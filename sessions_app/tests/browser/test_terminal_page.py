"""In Chromium: the workspace page's terminal, over a real WebSocket served by daphne (ASGI).

The shell is the real workspace (hosted_shell.py: tmux in bubblewrap).
"""

import re

import pytest

from sessions_app.actions import do_start_session
from sessions_app.tests.browser.terminal import wait_connected
from sessions_app.tests.helpers import daphne_serving

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def asgi_server(settings, shells, monkeypatch):
    with daphne_serving(settings, monkeypatch) as url:
        yield url


def test_typing_in_the_terminal_echoes_and_the_status_says_connected(asgi_server, page, invitation):
    do_start_session(invitation)
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    status = page.locator("#terminal-status")
    wait_connected(page)
    page.locator("#terminal .xterm-helper-textarea").focus()
    page.keyboard.type("echo hi-$((40+2))")
    page.keyboard.press("Enter")
    rows = page.locator("#terminal .xterm-rows")
    rows.get_by_text("hi-42", exact=True).wait_for()
    assert status.inner_text() == "connected"
    assert not [e for e in errors if "Content Security Policy" in e], errors


def test_paste_with_ctrl_shift_v_and_copy_of_a_selection(asgi_server, browser, invitation):
    do_start_session(invitation)
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  permissions=["clipboard-read", "clipboard-write"])
    try:
        page = context.new_page()
        page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
        wait_connected(page)
        # why the echo first: a command line that fills the width exactly (42 columns at this size) leaves the
        # next row marked as its continuation, and a double-click's word would run across both
        page.evaluate("navigator.clipboard.writeText('echo; echo pasted-$((3+4))')")
        page.locator("#terminal .xterm-helper-textarea").focus()
        page.keyboard.press("Control+Shift+V")
        page.keyboard.press("Enter")
        rows = page.locator("#terminal .xterm-rows")
        rows.get_by_text("pasted-7", exact=True).wait_for()
        page.evaluate("navigator.clipboard.writeText('')")
        box = rows.get_by_text("pasted-7", exact=True).bounding_box()
        page.mouse.dblclick(box["x"] + 5, box["y"] + box["height"] / 2)  # xterm selects the word
        page.keyboard.press("Control+Shift+C")
        assert page.evaluate("navigator.clipboard.readText()") == "pasted-7"
    finally:
        context.close()


def test_when_the_shell_ends_the_page_says_so_and_reconnects_to_a_new_one(asgi_server, page, invitation):
    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    wait_connected(page)
    page.locator("#terminal .xterm-helper-textarea").focus()
    page.keyboard.type("exit")
    page.keyboard.press("Enter")
    page.locator("#terminal-status[data-state='reconnecting']").wait_for()
    assert "The shell ended" in page.locator("#terminal-status").inner_text()
    wait_connected(page)
    page.locator("#terminal .xterm-helper-textarea").focus()
    page.keyboard.type("echo back-$((2*3))")
    page.keyboard.press("Enter")
    page.locator("#terminal .xterm-rows").get_by_text("back-6", exact=True).wait_for()


def test_a_revoked_link_closes_the_terminal_with_the_reason_and_no_retry(asgi_server, page, invitation):
    from takehome.actions import do_revoke_invitation

    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    wait_connected(page)
    do_revoke_invitation(invitation)  # the server's own process holds its channel layer: the recheck closes it
    closed = page.locator("#terminal-status[data-state='closed']")
    closed.wait_for(timeout=10000)
    assert closed.inner_text() == "closed: This invitation was withdrawn."


def test_a_reload_reattaches_to_the_same_shell_with_what_it_showed(asgi_server, page, invitation):
    do_start_session(invitation)
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    wait_connected(page)
    page.locator("#terminal .xterm-helper-textarea").focus()
    page.keyboard.type("cd /tmp; echo marker-1 shell-$$")
    page.keyboard.press("Enter")
    rows = page.locator("#terminal .xterm-rows")
    shell = rows.get_by_text(re.compile(r"^\s*marker-1 shell-\d+\s*$")).inner_text().split("shell-")[1].strip()
    page.reload()
    wait_connected(page)
    rows.get_by_text(f"marker-1 shell-{shell}", exact=True).wait_for()  # tmux draws the screen again
    page.locator("#terminal .xterm-helper-textarea").focus()
    page.keyboard.type("echo again-$$ in-$PWD")
    page.keyboard.press("Enter")
    rows.get_by_text(f"again-{shell} in-/tmp", exact=True).wait_for()  # the same shell, still in /tmp
