"""Nothing of a hosted workspace outlives what ends it: a terminal connection that ends by an
error closes its tmux client (sessions_app/hosted/consumers.py); ``manage.py stop_workspaces`` stops
every shell and unmounts every workspace (what `make run` does after Ctrl-C).

The shell is the real workspace (hosted_shell.py), under uids of its own (shared/pytest_slots.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tarfile
from io import StringIO

import pytest
from channels.layers import InMemoryChannelLayer
from django.core.management import CommandError, call_command

from grading.engine import asciicast
from grading.engine.sandbox.processes import _uid_processes
from sessions_app.tests.hosted_shell import use_uids
from sessions_app.tests.test_terminal import output_until, run, socket
from shared import pytest_slots

pytestmark = pytest.mark.django_db(transaction=True)
UID_BASE = pytest_slots.uids("hosted_cleanup")


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
    from sessions_app.hosted.workspaces import ensure_open
    from sessions_app.models import Workspace

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


def _sparse_and_linked(home) -> None:
    """What the red team wrote: three 30 MiB sparse files and one file under three names (as the shell's uid)."""
    for name in ("s1", "s2", "s3"):
        with open(home / name, "wb") as fh:
            fh.truncate(30 << 20)
    (home / "big").write_bytes(os.urandom(25 << 20))
    os.link(home / "big", home / "big2")
    os.link(home / "big", home / "big3")


def test_a_revoked_workspace_with_sparse_files_and_hard_links_is_saved_and_closed(started, own_uids):
    from sessions_app.hosted import gate_host
    from sessions_app.hosted.workspaces import ensure_open
    from sessions_app.models import Workspace
    from takehome.actions import do_revoke_invitation
    from takehome.models import AuditEvent

    ws = ensure_open(started)
    _sparse_and_linked(ws.home)
    do_revoke_invitation(started)
    assert gate_host.sweep() == [f"froze the workspace of invitation {started.pk}"]
    row = Workspace.objects.get(invitation=started)
    assert row.closed and row.frozen_at is not None
    assert not os.path.ismount(ws.home) and _uid_processes(ws.uid) == []
    with tarfile.open(ws.folder / "saved.tar") as tar:
        members = {m.name: m for m in tar}
    assert members["s2"].size == 30 << 20 and members["big3"].islnk()
    assert not AuditEvent.objects.filter(invitation=started, action="workspace_unsaved").exists()
    assert gate_host.sweep() == []  # nothing left to do, every round
    call_command("stop_workspaces", stdout=StringIO())  # exits 0


def test_a_save_that_fails_still_closes_the_workspace_and_says_so(started, own_uids, caplog, client, recruiter):
    from sessions_app.hosted import gate_host
    from sessions_app.hosted.workspaces import ensure_open
    from sessions_app.models import Workspace
    from takehome.actions import do_revoke_invitation
    from takehome.models import AuditEvent

    ws = ensure_open(started)
    (ws.home / "notes.txt").write_text("kept\n")
    # the host's side fails: saved.tar cannot be written (a folder stands in its place)
    (ws.folder / "saved.tar" / "in-the-way").mkdir(parents=True)
    do_revoke_invitation(started)
    done = gate_host.sweep()
    assert done == [f"froze the workspace of invitation {started.pk} (its files could not be saved: see the "
                    "error above)"]
    row = Workspace.objects.get(invitation=started)
    assert row.closed and row.frozen_at is not None and _uid_processes(ws.uid) == []
    # nothing lost: the files stay mounted, read-only
    assert os.path.ismount(ws.home) and (ws.home / "notes.txt").read_text() == "kept\n"
    with pytest.raises(OSError):
        (ws.home / "later.txt").write_text("x")
    event = AuditEvent.objects.get(invitation=started, action="workspace_unsaved")
    assert "could not be saved" in event.detail and "stop_workspaces" in event.detail
    assert any("could not be saved" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)
    # the recruiter reads it in the invitation's history on the board
    from django.urls import reverse

    client.force_login(recruiter)
    board = client.get(reverse("takehome:invitation-board", args=[started.packet_version.packet.slug]))
    assert "Workspace files not saved" in board.content.decode()
    assert gate_host.sweep() == []  # closed: the sweep does not fail on it every round
    with pytest.raises(CommandError):
        call_command("stop_workspaces", stdout=StringIO(), stderr=StringIO())  # the host's failure, said
    shutil.rmtree(ws.folder / "saved.tar")
    call_command("stop_workspaces", stdout=StringIO())
    assert not os.path.ismount(ws.home)
    with tarfile.open(ws.folder / "saved.tar") as tar:
        assert tar.extractfile("notes.txt").read() == b"kept\n"
