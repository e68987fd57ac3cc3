"""A fork bomb no longer locks the candidate out of their terminal: an attached terminal is told when the
shell pins the workspace's process cap ({"stuck": ...}), a new one is not attached to a pinned shell but
told it is stuck (4503), and the page's restart (sessions_app.hosted.views.restart) ends the
workspace's processes and keeps its files.

The shell is the real workspace (hosted_shell.py) under the real caps of the settings, uids of its own
(shared/pytest_slots.py); the bomb is a real one.
"""

from __future__ import annotations

import json
import os
import select
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from conftest import HANG_GUARD_S
from grading.engine.sandbox.cgroups import _read_keys
from grading.engine.sandbox.processes import _uid_processes
from grading.engine.sandbox.shell import _cgroups, shell_running
from sessions_app.hosted import consumers
from sessions_app.tests.hosted_shell import use_uids
from sessions_app.tests.test_terminal import output_until, run, socket
from shared import pytest_slots

pytestmark = pytest.mark.django_db(transaction=True)
UID_BASE = pytest_slots.uids("terminal_stuck")
# every process forks for ever and retries at once when refused, so the bomb holds every process the
# cap allows (bash's own bomb gives up now and then, and a client may slip in)
# why it stops when STOP appears: Ctrl+C races a bomb (a child forked just after the signal goes on forking,
# and on a loaded machine for a long time); the file ends every copy at once, which a test can wait for.
STOP = "stop-the-bomb"
BOMB = f"import os, time\nwhile not os.path.exists({STOP!r}):\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.02)\n"


@pytest.fixture(autouse=True)
def _memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def started(invitation, shells, settings):
    from sessions_app.actions import do_start_session

    use_uids(settings, UID_BASE, slots=3)
    do_start_session(invitation)
    return invitation


def wait_for_the_cap(ws, timeout: float = 60) -> None:
    """Until the workspace's pids cgroup has refused a fork: the bomb holds every process it may have."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [c for c in _cgroups(ws, create=False) if (c / "pids.events").exists()]
        if pids and _read_keys(pids[0] / "pids.events").get("max", 0) > 0:
            return
        assert time.monotonic() < deadline, "the fork bomb never reached the process cap"
        time.sleep(0.05)


def bombed(invitation, before: bytes = b""):
    """A terminal of the workspace (as the page's first one, not the consumer's) that ran BOMB until the cap."""
    from grading.engine.sandbox.shell import spawn_client
    from sessions_app.hosted.workspaces import ensure_open

    ws = ensure_open(invitation)
    bomber = spawn_client(ws, 100, 30)
    seen = b""
    deadline = time.monotonic() + HANG_GUARD_S
    while b"candidate:" not in seen:
        assert time.monotonic() < deadline, f"no prompt: {seen[-500:]!r}"
        if select.select([bomber.fd], [], [], 0.2)[0]:
            seen += os.read(bomber.fd, 1 << 16)
    (ws.home / "bomb.py").write_text(BOMB)
    os.write(bomber.fd, before + b"python bomb.py\r")
    wait_for_the_cap(ws)
    return ws, bomber


async def until_control(comm, key: str, timeout: float = 60) -> dict:
    """The output until a control frame with ``key``; the socket must stay open meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {key!r} control frame came"
        try:
            message = await comm.receive_output(timeout=left)
        except TimeoutError:
            raise AssertionError(f"no {key!r} control frame came") from None
        assert message["type"] == "websocket.send", message  # not closed: the terminal stays attached
        text = message.get("text", "")
        if text.startswith("{"):
            try:
                control = json.loads(text)
            except ValueError:
                continue
            if isinstance(control, dict) and key in control:
                return control


def test_an_attached_terminal_is_offered_the_restart_when_the_shell_pins_the_process_cap(started, shells):
    """The terminal stays attached, and the page is told: then told again once the bomb is stopped."""
    from sessions_app.hosted.workspaces import ensure_open

    ws = ensure_open(started)
    (ws.home / "bomb.py").write_text(BOMB)

    async def scenario():
        comm = socket(started)
        assert (await comm.connect())[0]
        await output_until(comm, "candidate:")
        await comm.send_to(text_data="python bomb.py\r")
        assert await until_control(comm, "stuck") == {"stuck": consumers.REASON_PINNED}
        assert _read_keys(next(c for c in _cgroups(ws, create=False) if (c / "pids.events").exists())
                          / "pids.events").get("max", 0) > 0  # the cap refused forks: the bomb was there
        # the bomb ends (every copy at once), and the offer is withdrawn; the attached terminal still reaches
        # the shell.
        (ws.home / STOP).touch()
        assert await until_control(comm, "stuck") == {"stuck": None}
        await comm.send_to(text_data="echo after-$((40+2))\r")
        await output_until(comm, "after-42")
        await comm.disconnect()

    run(scenario)
    assert shell_running(ws)


def test_a_connect_to_a_shell_pinned_at_the_process_cap_gets_the_offer_at_once(started, shells):
    """No client is attached to a flooded screen (none is even started): the socket says stuck (4503)."""
    from grading.engine.sandbox.shell import process_count

    ws, bomber = bombed(started)
    try:
        count = process_count(ws)
        assert count.at_cap and count.limit == ws.limits.processes and count.refused > 0

        async def connect():
            comm = socket(started)
            assert (await comm.connect(timeout=30))[0]  # counted for a moment before it is accepted
            said = await comm.receive_output(timeout=10)
            message = await comm.receive_output(timeout=10)
            return said, message

        said, message = run(connect)
        assert shells.clients == [], "a client was started for a shell pinned at the cap"
        assert message["type"] == "websocket.close" and message["code"] == consumers.STUCK, message
        assert message["reason"] == consumers.REASON_PINNED
        assert json.loads(said["text"]) == {"close": {"code": consumers.STUCK, "reason": consumers.REASON_PINNED}}
        assert shell_running(ws)
    finally:
        bomber.close()


def test_a_fork_bomb_is_met_by_an_offer_to_restart_and_the_restart_keeps_the_files(started, client):
    ws, bomber = bombed(started, before=b"echo kept-before > notes.txt; ")
    try:

        async def attach():
            comm = socket(started)
            # accepted, then closed: the shell is pinned at the cap (its count takes a moment under the bomb)
            assert (await comm.connect(timeout=30))[0]
            deadline = time.monotonic() + 60
            while (message := await comm.receive_output(timeout=30))["type"] != "websocket.close":
                assert time.monotonic() < deadline, "the terminal neither attached nor closed"
            return message

        assert run(attach) == {"type": "websocket.close", "code": consumers.STUCK, "reason": consumers.REASON_PINNED}
        assert shell_running(ws)
    finally:
        bomber.close()

    page = client.get(f"/t/{started.raw_token}/workspace").content.decode()
    assert 'id="restart-shell"' in page and f'action="/t/{started.raw_token}/workspace/restart" hidden' in page
    response = client.post(f"/t/{started.raw_token}/workspace/restart", follow=True)
    assert response.redirect_chain[-1][0] == f"/t/{started.raw_token}/workspace"
    assert "The shell was restarted" in response.content.decode()
    # the bomb is gone, a fresh shell runs, the files are as they were
    assert shell_running(ws) and len(_uid_processes(ws.uid)) < 10
    assert (ws.home / "notes.txt").read_text() == "kept-before\n"

    async def answer():
        comm = socket(started)
        assert (await comm.connect())[0]
        await comm.send_to(text_data="echo again-$(cat notes.txt)\r")
        seen = await output_until(comm, "again-kept-before")
        await comm.disconnect()
        return seen

    run(answer)


def test_a_client_that_ends_well_is_no_stuck_shell(started):
    """A detach (exit 0) or a shell that exited is not offered a restart: the page reconnects."""
    from sessions_app.hosted.workspaces import ensure_open

    ensure_open(started)
    assert not consumers.shell_stuck(started.pk, 0)
    assert consumers.shell_stuck(started.pk, 1)
    from grading.engine.sandbox.shell import stop_shell

    stop_shell(ensure_open(started))
    assert not consumers.shell_stuck(started.pk, 1)  # no shell: reconnecting starts one


def test_a_closed_workspace_is_not_restarted(started, client, monkeypatch, settings):
    from sessions_app.hosted.workspaces import ensure_open
    from sessions_app.models import Workspace

    ws = ensure_open(started)
    shell = ws.part("shell.pid").read_text()
    Workspace.objects.filter(invitation=started).update(closed=True, frozen_at=started.started_at)
    # the deadline passed after the page's check (which let the restart through): it is not reopened
    type(started).objects.filter(pk=started.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    monkeypatch.setattr(consumers, "refusal_for", lambda invitation: None)
    response = client.post(f"/t/{started.raw_token}/workspace/restart", follow=True)
    assert "closed and read-only" in response.content.decode()
    assert ws.part("shell.pid").read_text() == shell  # nothing was ended or started
