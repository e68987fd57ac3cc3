"""In Chromium: the workspace's editor beside the real terminal (daphne, tmux in bubblewrap).

A candidate opens a file in the editor, types, saves with Ctrl+S, and the
terminal's `cat` shows the change; then the terminal changes the file, and the
next save says so instead of overwriting it. The page with a file open passes
the Content-Security-Policy, axe, and a phone's width.
"""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe

from conftest import screenshot, wait_until
from sessions_app.actions import do_start_session
from sessions_app.tests.browser.terminal import wait_connected
from takehome.tests.browser.test_every_page import PHONE_WIDTH, RECORD_CSP, WIDEST_ELEMENT, axe_problems

from .test_hosted_session import Terminal
from .test_terminal_page import asgi_server  # noqa: F401  (daphne with the real shell)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def saved_state(page, state: str) -> str:
    status = page.locator(f"#editor-status[data-state='{state}']")
    status.wait_for()
    return status.inner_text()


def test_the_editor_saves_what_the_terminal_sees_and_never_overwrites_its_change(
        asgi_server, browser, invitation):  # noqa: F811
    do_start_session(invitation)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(RECORD_CSP)
    page = context.new_page()
    page.set_default_timeout(15000)
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    try:
        page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
        wait_connected(page)
        term = Terminal(page)
        term.shows(r"candidate:/workspace\$")

        # Open invoices.py from the list with the keyboard, type at its end, save with Ctrl+S.
        page.locator("#editor-file-list button[data-path='invoices.py']").focus()
        page.keyboard.press("Enter")
        page.locator("#editor-status", has_text="Opened invoices.py").wait_for()
        assert page.locator("#editor-view .cm-content[aria-label='Contents of invoices.py']").count() == 1
        assert page.locator("#editor-view .cm-content .tok-keyword, #editor-view .cm-content span[class^='ͼ']").count()
        page.locator("#editor-view .cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("# typed-in-the-editor\n")
        page.keyboard.press("Control+s")
        assert saved_state(page, "saved").startswith("Saved invoices.py.")
        term.run("cat invoices.py", r"^# typed-in-the-editor\s*$")
        screenshot(page, "workspace-editor")

        # A save lists the files again; a candidate on the list meanwhile keeps their place (Enter there opens
        # the file, not nothing). The buttons of the list before the save carry a mark the new ones lack.
        page.locator("#editor-file-list button[data-path='test_invoices.py']").focus()
        page.evaluate("document.querySelectorAll('#editor-file-list button').forEach((b) => b.dataset.old = '1')")
        page.evaluate("document.getElementById('editor-status').dataset.state = 'waiting'")
        page.keyboard.press("Control+s")
        saved_state(page, "saved")
        wait_until(page, "!document.querySelector('#editor-file-list button[data-old]')")
        assert page.evaluate("document.activeElement.dataset.path") == "test_invoices.py"  # set as the list was

        # The page with a file open: no CSP violation, axe-clean, and no wider than a phone.
        assert page.evaluate("window.__csp") == [] and not [e for e in errors if "Content Security" in e], errors
        problems = axe_problems(Axe(), page, "workspace with the editor")
        # at a phone's width, loaded there as a phone loads it (a resized page refits its terminal only later)
        phone = context.new_page()
        phone.set_viewport_size({"width": PHONE_WIDTH, "height": 900})
        phone.goto(page.url)
        wait_connected(phone)
        phone.locator("#editor-file-list button[data-path='invoices.py']").click()
        phone.locator("#editor-status", has_text="Opened invoices.py").wait_for()
        width = phone.evaluate("document.documentElement.scrollWidth")
        widest = phone.evaluate(WIDEST_ELEMENT, PHONE_WIDTH)
        screenshot(phone, "workspace-editor-phone")
        problems += axe_problems(Axe(), phone, f"workspace with the editor at {PHONE_WIDTH} px")
        assert phone.evaluate("window.__csp") == []
        phone.close()
        assert width <= PHONE_WIDTH, f"{width} px wide at {PHONE_WIDTH} px: {widest}"
        assert not problems, "\n".join(problems)

        # The terminal changes the file; the editor's next save is refused and says so.
        term.run("echo '# from-the-terminal' >> invoices.py; echo appended-$((6*7))", r"^appended-42")
        page.locator("#editor-view .cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("# second-edit\n")
        page.locator("#editor-save").click()
        words = saved_state(page, "conflict")
        assert "changed on disk by the terminal" in words, words
        assert page.locator("#editor-conflict").is_visible()
        term.run("grep -c second-edit invoices.py; echo counted-$((6*7))", r"^counted-42")
        term.shows(r"^0\s*$")  # the terminal's change stands, the editor's text was not written

        # Reload shows the terminal's change in the editor.
        page.click("#editor-reload")
        page.locator("#editor-status", has_text="Reloaded invoices.py from disk.").wait_for()
        assert "# from-the-terminal" in page.locator("#editor-view .cm-content").inner_text()
        assert page.locator("#editor-conflict").is_hidden()
    finally:
        context.close()
