"""In Chromium: the workspace page's terminal, over a real WebSocket served by daphne (ASGI).

The shell is the stand-in (standin_terminal.py) until the sandboxed workspace lands.
"""

import pytest

from conftest import free_port, screenshot
from sessions_app.actions import do_start_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def asgi_application():
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from takehome.asgi import application

    return ASGIStaticFilesHandler(application)


@pytest.fixture
def asgi_server(settings, standin):
    """daphne serving takehome.asgi in a forked process (the stand-in and the settings go with it)."""
    from daphne.testing import DaphneProcess

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    server = DaphneProcess("127.0.0.1", asgi_application, port=free_port(range(8520, 8540)))
    server.daemon = True
    server.start()
    assert server.ready.wait(timeout=20), "daphne did not start"
    yield f"http://127.0.0.1:{server.port.value}"
    server.terminate()
    server.join(timeout=10)


def test_typing_in_the_terminal_echoes_and_the_status_says_connected(asgi_server, page, invitation):
    do_start_session(invitation)
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.goto(f"{asgi_server}/t/{invitation.raw_token}/workspace")
    status = page.locator("#terminal-status")
    page.locator("#terminal-status[data-state='connected']").wait_for()
    page.locator("#terminal .xterm-helper-textarea").focus()
    page.keyboard.type("echo hi-$((40+2))")
    page.keyboard.press("Enter")
    rows = page.locator("#terminal .xterm-rows")
    rows.get_by_text("hi-42", exact=True).wait_for()
    assert status.inner_text() == "connected"
    assert not [e for e in errors if "Content Security Policy" in e], errors
    screenshot(page, "workspace-terminal")
