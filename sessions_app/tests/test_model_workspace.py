"""The model in a hosted workspace, over the real workspace sandbox: a reply through the window is written
into the workspace's files by the server, and `gate ask` in the terminal (the gate socket's host) asks, streams,
goes on with the conversation or starts a new one, and writes the files too. In front of the fake upstream."""

from __future__ import annotations

import json
import os

import pytest

from sessions_app.hosted import workspaces
from sessions_app.models import ModelExchange

from .conftest import REPLY, url
from .test_workspace_gate import gate, host, real_workspaces, wait_for_socket, ws_settings  # noqa: F401  (fixtures)

PROMPT = "invoices.py uses abs() on cents; refunds are negative. Propose a minimal patch.\n"


def read(ws, name: str) -> str:
    return (ws.home / "artifacts" / name).read_text()


def stream(client, invitation, text: str, conversation: str = "continue") -> None:
    body = {"messages": [{"role": "user", "content": text}], "stream": True, "conversation": conversation}
    response = client.post(url("model-chat", invitation), json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    assert b"[DONE]" in b"".join(response)


@pytest.mark.slow
@pytest.mark.django_db
def test_a_reply_through_the_window_is_written_into_the_workspace(client, upstream, red, real_workspaces):  # noqa: F811
    ws = workspaces.open_files(red)
    stream(client, red, PROMPT)
    assert (read(ws, "prompt.txt"), read(ws, "model.md")) == (PROMPT, REPLY)
    assert os.stat(ws.home / "artifacts" / "model.md").st_uid == ws.uid  # the candidate's own file, as any other
    stream(client, red, "And with two refunds?")
    assert (read(ws, "prompt-2.txt"), read(ws, "model-2.md")) == ("And with two refunds?", REPLY)
    assert list(ModelExchange.objects.values_list("artifact", flat=True)) == ["artifacts/model.md",
                                                                             "artifacts/model-2.md"]
    # a FIFO where the next reply goes: the server does not wait on it, it writes nothing and says so
    os.mkfifo(ws.home / "artifacts" / "model-3.md")
    stream(client, red, "A third?")
    assert ModelExchange.objects.last().artifact == ""
    html = client.get(url("workspace", red)).content.decode()
    assert 'data-artifact="artifacts/model-2.md"' in html and 'id="model-form"' in html


@pytest.mark.slow
def test_gate_ask_in_the_terminal_streams_continues_and_writes_the_files(host, upstream, red, real_workspaces):  # noqa: F811
    ws = workspaces.open_files(red)
    (ws.home / "artifacts").mkdir(exist_ok=True)
    workspaces.write_files(red, {"artifacts/prompt.txt": PROMPT.encode()})
    path = wait_for_socket(red)
    done = gate(path, "ask")
    assert done.returncode == 0, done.stderr
    assert REPLY in done.stdout and "Conversation 1, its first exchange" in done.stdout
    assert "saved in artifacts/model.md" in done.stdout
    assert (read(ws, "prompt.txt"), read(ws, "model.md")) == (PROMPT, REPLY)

    done = gate(path, "ask", "And", "with two refunds?")
    assert done.returncode == 0 and "with 1 earlier exchange of it sent along" in done.stdout, done.stderr
    assert upstream.got[1]["body"]["messages"] == [{"role": "user", "content": PROMPT},
                                                   {"role": "assistant", "content": REPLY},
                                                   {"role": "user", "content": "And with two refunds?"}]
    assert (read(ws, "prompt-2.txt"), read(ws, "model-2.md")) == ("And with two refunds?", REPLY)

    done = gate(path, "ask", "--new", "Start again: why abs()?")
    assert done.returncode == 0 and "Conversation 2" in done.stdout, done.stderr
    assert upstream.got[2]["body"]["messages"] == [{"role": "user", "content": "Start again: why abs()?"}]
    assert read(ws, "model-3.md") == REPLY
