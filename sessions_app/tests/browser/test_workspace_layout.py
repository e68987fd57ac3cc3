"""In Chromium: on a laptop's screen and a desktop's, the workspace's editor is as high as the terminal, and the
terminal has at least 80 columns (static/sessions_app/editor.css chooses the layout by the width).

The page is axe-clean in each layout.
"""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe

from sessions_app.actions import do_start_session
from sessions_app.tests.browser.terminal import wait_connected
from takehome.tests.browser.test_every_page import axe_problems

from .test_terminal_page import asgi_server  # noqa: F401  (daphne with the real shell)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The sizes of the boxes (not of their contents) and the columns xterm.js fitted into its box.
MEASURE = """() => {
  const height = (selector) => document.querySelector(selector).getBoundingClientRect().height;
  return { editor: height("#editor-view"), codemirror: height("#editor-view .cm-editor"),
           terminal: height("#terminal"), cols: document.getElementById("terminal").xterm.cols };
}"""


def test_the_editor_is_as_high_as_the_terminal_which_has_80_columns(asgi_server, browser, invitation):  # noqa: F811
    do_start_session(invitation)
    problems = []
    for width, height in ((1280, 800), (1440, 900), (1920, 1080)):
        context = browser.new_context(viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
            wait_connected(page)
            page.locator("#editor-file-list button[data-path='invoices.py']").click()
            page.locator("#editor-status", has_text="Opened invoices.py").wait_for()
            sizes = page.evaluate(MEASURE)
            assert abs(sizes["editor"] - sizes["terminal"]) <= 3, (width, sizes)
            assert abs(sizes["codemirror"] - sizes["terminal"]) <= 3, (width, sizes)  # the text fills its box
            assert sizes["cols"] >= 80, (width, sizes)
            problems += axe_problems(Axe(), page, f"workspace at {width}x{height}")
        finally:
            context.close()
    assert not problems, "\n".join(problems)
