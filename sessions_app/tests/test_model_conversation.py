"""The model window keeps conversations: the earlier turns go upstream with a "continue", a "new" starts
again, the history is bounded and says so, replies are shown as safe Markdown, and a hosted Submit takes the
server's copy of a reply the workspace lacks. The endpoint in front of the fake upstream (conftest.py)."""

from __future__ import annotations

import json

import pytest

from sessions_app import actions
from sessions_app.model_window import window
from sessions_app.models import ModelExchange

from .conftest import REPLY, url

pytestmark = pytest.mark.django_db


def ask(client, invitation, text: str, conversation: str | None = "continue", stream: bool = False):
    body = {"messages": [{"role": "user", "content": text}]}
    if conversation:
        body["conversation"] = conversation
    if stream:
        body["stream"] = True
    response = client.post(url("model-chat", invitation), json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    if stream:
        b"".join(response)
    return response


def test_the_second_turn_sends_the_first_and_new_starts_again(client, upstream, red):
    ask(client, red, "Why is the refund total wrong?")
    second = ask(client, red, "And with two refunds?", stream=True)
    assert upstream.got[1]["body"]["messages"] == [
        {"role": "user", "content": "Why is the refund total wrong?"},
        {"role": "assistant", "content": REPLY},
        {"role": "user", "content": "And with two refunds?"},
    ]
    assert (second["X-Takehome-Conversation"], second["X-Takehome-Earlier-Turns"]) == ("1", "1")
    third = ask(client, red, "Start over: what does abs() do?", conversation="new")
    assert upstream.got[2]["body"]["messages"] == [{"role": "user", "content": "Start over: what does abs() do?"}]
    assert "conversation" not in upstream.got[2]["body"]  # ours, never the upstream's
    assert third["X-Takehome-Conversation"] == "2"
    ask(client, red, "And negative zero?")
    assert [m["content"] for m in upstream.got[3]["body"]["messages"]] == [
        "Start over: what does abs() do?", REPLY, "And negative zero?"]
    assert list(ModelExchange.objects.values_list("conversation", flat=True)) == [1, 1, 2, 2]


def test_a_client_keeping_its_own_history_is_sent_as_it_asked(client, upstream, red):
    ask(client, red, "One")
    ask(client, red, "Two", conversation=None)
    assert upstream.got[1]["body"]["messages"] == [{"role": "user", "content": "Two"}]
    response = client.post(url("model-chat", red), json.dumps({"messages": [{"role": "user", "content": "x"}],
                                                                "conversation": "later"}),
                           content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["param"] == "conversation"


def test_the_history_is_bounded_and_the_panel_says_where_it_cuts(client, upstream, red, monkeypatch):
    monkeypatch.setattr(window, "HISTORY_TURNS", 2)
    for text in ("First", "Second", "Third", "Fourth"):
        ask(client, red, text)
    assert [m["content"] for m in upstream.got[3]["body"]["messages"] if m["role"] == "user"] == [
        "Second", "Third", "Fourth"]
    assert window.history(red, "continue").left_out == 2
    monkeypatch.setattr(window, "HISTORY_CHARS", len("Fourth" + REPLY))  # one turn's worth of characters
    assert window.history(red, "continue").turns == 1
    html = client.get(url("landing", red)).content.decode()
    assert "3 earlier exchanges of conversation 1 are no longer sent" in html


HOSTILE = ("**Fix:** use `abs()` <script>alert(1)</script> <img src=x onerror=alert(2)> "
           "[click](javascript:alert(3)) [docs](https://example.com/x)\n\n```python\nprint('<b>')\n```\n")


def test_a_reply_is_rendered_as_markdown_without_any_of_its_html(client, upstream, red):
    ModelExchange.objects.create(invitation=red, messages=[{"role": "user", "content": "Why?"}], reply=HOSTILE)
    part = client.get(url("model-chat-panel", red), headers={"HX-Request": "true", "HX-Target": "model-history"})
    html = part.content.decode()
    assert "<html" not in html and html.lstrip().startswith('<div id="model-history"')
    assert "<strong>Fix:</strong>" in html and "<code>abs()</code>" in html
    assert '<pre tabindex="0"><code class="language-python">print(&#x27;&lt;b&gt;&#x27;)' in html or \
        "print('&lt;b&gt;')" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html.split("model-history", 1)[1]
    assert "<img" not in html and "href=" not in html.split('id="model-history"', 1)[1].split("hx-get", 1)[0]
    assert "javascript:" not in html.replace("[click](javascript:alert(3))", "")
    assert "docs (https://example.com/x)" in html


def test_the_chat_polls_while_closed_and_a_plain_visit_goes_to_its_page(client, upstream, started):
    part = client.get(url("model-chat-panel", started) + "?where=workspace", headers={"HX-Request": "true"})
    html = part.content.decode()
    assert "Closed." in html and 'hx-trigger="every 5s"' in html and 'id="model-form"' not in html
    plain = client.get(url("model-chat-panel", started) + "?where=workspace")
    assert plain.status_code == 302 and plain["Location"].endswith("/workspace")


def test_a_hosted_submit_takes_the_servers_copy_of_a_reply_the_workspace_lacks(client, upstream, red):
    ask(client, red, "Why is the refund total wrong?")
    ask(client, red, "And two refunds?")
    files = {"artifacts/refuse.md": b"Not abs() on everything.", "artifacts/prompt.txt": b"  \n"}
    before = [m.path for m in actions.hosted_missing(red, files)]
    assert "artifacts/model.md" in before and "artifacts/prompt.txt" in before
    sent = actions.hosted_files(red, files)
    assert sent["artifacts/prompt.txt"] == b"Why is the refund total wrong?" and sent["artifacts/model.md"] == REPLY.encode()
    assert (sent["artifacts/prompt-2.txt"], sent["artifacts/model-2.md"]) == (b"And two refunds?", REPLY.encode())
    assert not {"artifacts/model.md", "artifacts/prompt.txt"} & {m.path for m in actions.hosted_missing(red, sent)}
    kept = actions.hosted_files(red, {**files, "artifacts/model.md": b"my own notes on it"})
    assert kept["artifacts/model.md"] == b"my own notes on it"  # a file the workspace has stays as it is
