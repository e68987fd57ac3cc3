"""Nothing of a hosted workspace outlives what ends it: a terminal connection that ends by an
error closes its tmux client (sessions_app/consumers.py); ``manage.py stop_workspaces`` stops
every shell and unmounts every workspace (what `make run` does after Ctrl-C).

The shell is the real workspace (hosted_shell.py), under uids 64100.. that no other test uses.
"""

from __future__ import annotations

import asyncio
import os
import tarfile
from io import StringIO

import pytest
from channels.layers import InMemoryChannelLayer
from django.core.management import call_command

from grading import asciicast
from grading.sandbox import _uid_processes
from sessions_app.tests.hosted_shell import use_uids
from sessions_app.tests.test_terminal import output_until, run, socket

pytestmark = pytest.mark.django_db(transaction=True)
UID_BASE = 64100  # 64100..64104 here, 64105.. the browser's (browser/test_terminal_page_fixes.py)


@pytest.fixture(autouse=True)
def _memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def own_uids(shells, settings):
    use_uids(settings, UID_BASE, slots=5)
    return shells


@pytest.fixture
def started(invitation):
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    return invitation


def assert_closed(client) -> None:
    assert client.fd == -1, "the client's pty was left open"
    assert client.proc.poll() is not None, "the sandboxed tmux client is still running"


def test_a_channel_layer_that_fails_closes_the_client(started, own_uids, monkeypatch):
    failing = {}

    async def receive(self, channel):
        # the Redis read timeout of the walk-through: the layer's receive raises while the socket is open
        await failing["now"].wait()
        raise ConnectionError("Timeout reading from socket")

    monkeypatch.setattr(InMemoryChannelLayer, "receive", receive)

    async def scenario():
        failing["now"] = asyncio.Event()
        comm = socket(started)
        connected, _ = await comm.connect()
        assert connected
        await output_until(comm, "candidate:")
        client = own_uids.clients[0]
        assert client.proc.poll() is None
        failing["now"].set()
        with pytest.raises(ConnectionError):
            await comm.wait(timeout=10)
        return client

    assert_closed(run(scenario))


def test_a_pump_that_fails_closes_the_client_and_the_socket(started, own_uids, monkeypatch):
    def output(self, text):
        if "boom-now" in text:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(asciicast.Recorder, "output", output)

    async def scenario():
        comm = socket(started)
        connected, _ = await comm.connect()
        assert connected
        await output_until(comm, "candidate:")
        await comm.send_to(text_data="echo boom-now\r")
        while True:
            message = await comm.receive_output(timeout=10)
            if message["type"] == "websocket.close":
                break
        assert message["code"] == 1011
        await comm.disconnect()
        return own_uids.clients[0]

    assert_closed(run(scenario))


def test_stop_workspaces_stops_the_shell_saves_the_files_and_unmounts(started, own_uids):
    from sessions_app.models import Workspace
    from sessions_app.workspaces import ensure_open

    ws = ensure_open(started)
    assert ws.uid >= UID_BASE and _uid_processes(ws.uid), "the shell did not start"
    (ws.home / "notes.txt").write_text("written before the stop\n")
    out = StringIO()
    call_command("stop_workspaces", stdout=out)
    assert f"invitation {started.pk}" in out.getvalue() and "stopped its shell" in out.getvalue()
    assert _uid_processes(ws.uid) == []
    assert not os.path.ismount(ws.home)
    with tarfile.open(ws.folder / "saved.tar") as tar:
        assert tar.extractfile("notes.txt").read() == b"written before the stop\n"
    assert Workspace.objects.get(invitation=started).shell_stopped_at is not None

    again = StringIO()
    call_command("stop_workspaces", stdout=again)  # idempotent
    assert "No hosted workspace was running" in again.getvalue()

    ensure_open(started)  # the next visit restores the files
    assert (ws.home / "notes.txt").read_text() == "written before the stop\n"


def test_a_new_connection_gets_the_shells_history_before_tmux_draws_the_screen(started, own_uids):
    async def scenario():
        first = socket(started, "?cols=80&rows=24")
        assert (await first.connect())[0]
        await output_until(first, "candidate:")
        await first.send_to(text_data="for i in $(seq 1 120); do echo old-line-$i; done\r")
        await output_until(first, "old-line-120")
        await first.disconnect()

        again = socket(started, "?cols=80&rows=24")  # a reload: tmux redraws only the last 24 lines
        assert (await again.connect())[0]
        seen = await output_until(again, "old-line-120")
        await again.disconnect()
        return seen

    seen = run(scenario)
    assert "old-line-1\n" in seen.replace("\r", "") and "old-line-50\n" in seen.replace("\r", "")
    assert seen.index("old-line-1\n") < seen.index("old-line-120")
