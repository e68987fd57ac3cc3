"""The chat with the model in the workspace, in Chromium through daphne (the real page, the real workspace's
files) in front of the fake upstream: it starts from artifacts/prompt.txt, streams two turns of one
conversation with the keyboard, shows the replies as Markdown, and the server writes them into the files."""

from __future__ import annotations

import json

import pytest

from sessions_app.hosted import workspaces
from sessions_app.models import ModelExchange
from sessions_app.tests.conftest import REPLY
from sessions_app.tests.helpers import RED_LOG, daphne_serving, receipt

from ..conftest import url
from ..hosted_shell import shells  # noqa: F401  (the real workspace)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT = "invoices.py uses abs() on cents; refunds are negative. Which line is wrong?\n"


@pytest.fixture
def served(upstream, settings, shells, monkeypatch):  # noqa: F811
    """daphne with the fake upstream's settings (set before it forks)."""
    with daphne_serving(settings, monkeypatch) as address:
        yield address


def test_two_streamed_turns_in_the_workspace_chat_are_one_conversation_written_as_files(
        served, browser, client, upstream, started):
    response = client.post(url("gate-step", started, step="red"), receipt(RED_LOG), content_type="application/json")
    assert response.status_code == 201
    ws = workspaces.ensure_open(started)
    workspaces.write_files(started, {"artifacts/prompt.txt": PROMPT.encode()})
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        page.goto(f"{served}/t/{started.raw_token}/workspace")
        box = page.get_by_label("Your prompt")
        assert box.input_value() == PROMPT  # starts from artifacts/prompt.txt
        page.locator("#model-send").focus()
        page.keyboard.press("Enter")
        first = page.locator("#model-history .model-exchange")
        first.first.wait_for()
        page.locator('#model-history [data-artifact="artifacts/model.md"]').wait_for()
        assert REPLY in first.first.locator(".model-markdown").inner_text()
        assert page.locator("#model-reply").get_attribute("aria-live") == "polite"

        box.focus()
        page.keyboard.type("And with two refunds?")
        page.keyboard.press("Tab")  # to Send
        page.keyboard.press("Enter")
        page.locator('#model-history [data-artifact="artifacts/model-2.md"]').wait_for()
        assert [e.conversation for e in ModelExchange.objects.all()] == [1, 1]
        assert [m["content"] for m in upstream.got[1]["body"]["messages"]] == [PROMPT, REPLY, "And with two refunds?"]
        assert (ws.home / "artifacts" / "model-2.md").read_text() == REPLY
        assert (ws.home / "artifacts" / "prompt-2.txt").read_text() == "And with two refunds?"
        assert all(g["body"]["stream"] for g in upstream.got)

        # "New conversation" by the keyboard: the next prompt goes alone
        page.locator("#model-new").focus()
        page.keyboard.press("Enter")
        assert page.locator("#model-new").get_attribute("aria-pressed") == "true"
        box.fill("Start again.")
        page.locator("#model-send").click()
        page.locator('#model-history [data-conversation="2"]').first.wait_for()
        assert json.dumps(upstream.got[2]["body"]["messages"]) == json.dumps([{"role": "user", "content": "Start again."}])

        page.set_viewport_size({"width": 390, "height": 844})
        assert page.evaluate("(() => { const s = document.getElementById('model-window');"
                             " return s.scrollWidth <= s.clientWidth + 1; })()")
        assert blocked == []
    finally:
        context.close()


@pytest.fixture
def held_shell(monkeypatch, tmp_path):
    """The terminal's shell opens only once the test creates the file this returns, as on a busy server.

    Set before ``served`` forks daphne, whose consumer then waits (a file, not an Event: another process)."""
    import time

    from sessions_app.hosted import consumers

    go = tmp_path / "go"
    open_client = consumers.open_client

    def held_open(*args):
        deadline = time.monotonic() + 30
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return open_client(*args)

    monkeypatch.setattr(consumers, "open_client", held_open)
    return go


def test_a_shell_that_comes_up_while_the_candidate_types_elsewhere_takes_none_of_their_keys(
        held_shell, served, browser, started):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    try:
        page.goto(f"{served}/t/{started.raw_token}/workspace")
        page.locator("#terminal-status[data-state='starting']").wait_for()  # accepted; the shell is held
        field = page.locator("#editor-new-path")
        field.focus()
        page.keyboard.type("notes")
        held_shell.write_text("")
        page.locator("#terminal-status[data-state='connected']").wait_for()
        page.keyboard.type(".md")
        assert field.input_value() == "notes.md"
        assert page.evaluate("document.activeElement.id") == "editor-new-path"
    finally:
        context.close()
