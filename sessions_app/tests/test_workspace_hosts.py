"""Each server keeps its own workspaces: uids are handed out per host, and a host serves and sweeps only its own."""

from __future__ import annotations

import pytest
from django.utils import timezone

from sessions_app import actions
from sessions_app.actions import SessionRefused
from sessions_app.hosted import gate_host, workspaces
from sessions_app.models import Workspace
from takehome.tests.factories import InvitationFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the gate host's reads close their connection


@pytest.fixture(autouse=True)
def _this_host(settings, tmp_path):
    settings.WORKSPACE_HOST = "web-1"
    settings.WORKSPACES_DIR = tmp_path / "workspaces"


def test_a_uid_taken_on_another_host_is_free_here(started, settings):
    other = InvitationFactory(packet_version=started.packet_version)
    Workspace.objects.create(invitation=other, host="web-2", uid=settings.WORKSPACE_UID_BASE)
    row = workspaces.workspace_row(started)
    assert (row.host, row.uid) == ("web-1", settings.WORKSPACE_UID_BASE)


def test_a_workspace_on_another_host_is_not_opened_here(started):
    Workspace.objects.create(invitation=started, host="web-2", uid=63001)
    with pytest.raises(workspaces.WorkspaceElsewhere, match="another server"):
        workspaces.ensure_open(started)
    with pytest.raises(SessionRefused, match="another server"):
        actions.do_capture(started, "red")
    assert not started.receipts.exists()


def test_the_sweep_and_the_gate_host_leave_another_hosts_workspaces_alone(started, monkeypatch):
    started.deadline = timezone.now() - timezone.timedelta(days=1)
    started.save(update_fields=["deadline"])
    Workspace.objects.create(invitation=started, host="web-2", uid=63001)
    monkeypatch.setattr(workspaces, "backend", lambda: pytest.fail("another host's workspace was touched"))
    assert gate_host.sweep() == []
    assert Workspace.objects.get(invitation=started).frozen_at is None
    assert gate_host._open_ids() == []


# --- a server that holds no workspaces (TAKEHOME_HOLDS_WORKSPACES=false: docker-compose.yml's web) ---------------

@pytest.fixture
def holds_none(settings):
    settings.HOLDS_WORKSPACES = False
    settings.WORKSPACE_HOST = "web"


def test_a_server_that_holds_no_workspaces_opens_none_and_says_so(started, holds_none, settings, caplog):
    with pytest.raises(workspaces.WorkspaceElsewhere, match="kept on another server"):
        workspaces.ensure_open(started)
    with pytest.raises(SessionRefused):
        actions.do_capture(started, "red")
    assert workspaces.write_files(started, {"a.txt": b"x"}) is False
    # nothing made here: no row tying the workspace to this server, no folder, no receipt
    assert not Workspace.objects.exists() and not started.receipts.exists()
    assert not settings.WORKSPACES_DIR.exists()
    assert "TAKEHOME_HOLDS_WORKSPACES=false" in caplog.text  # the log says what to route where


def test_nor_does_it_touch_a_workspace_its_host_name_would_match(started, holds_none):
    Workspace.objects.create(invitation=started, host="web", uid=63001, frozen_at=timezone.now(), closed=True)
    with pytest.raises(workspaces.WorkspaceElsewhere):
        workspaces.closed_files(started)
    with pytest.raises(SessionRefused, match="another server"):
        actions.do_capture(started, "red")
    with pytest.raises(workspaces.WorkspaceElsewhere):
        workspaces.folder_for(started)


def test_its_editor_and_terminal_refuse_with_the_words(started, holds_none, client, settings):
    from django.urls import reverse

    from sessions_app.tests.test_terminal import run, socket

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    answer = client.get(reverse("sessions_app:workspace-files", args=[started.raw_token]))
    assert answer.status_code == 503 and "kept on another server" in answer.json()["message"]

    async def scenario():
        comm = socket(started)
        connected, _ = await comm.connect()
        assert connected
        frames = []
        while (message := await comm.receive_output(timeout=10))["type"] != "websocket.close":
            frames.append(message.get("text", ""))
        assert message["code"] == 4403 and any("another server" in frame for frame in frames), frames

    run(scenario)
    assert not Workspace.objects.exists()


def test_the_commands_of_a_workspace_host_refuse_to_run_there(holds_none):
    from django.core.management import CommandError, call_command

    for command in ("serve_workspaces", "stop_workspaces"):
        with pytest.raises(CommandError, match="holds no hosted workspaces"):
            call_command(command)


def test_readiness_asks_no_workspace_host_unless_told_to(holds_none, settings):
    settings.HEALTH_WORKSPACES = "auto"
    check = gate_host.readiness(database_up=True)
    assert check.state == "off" and "holds no workspaces" in check.reason
    # told yes (compose's web, which shares the host's folder): it asks, and nothing answers here
    settings.HEALTH_WORKSPACES = "yes"
    check = gate_host.readiness(database_up=True)
    assert check.state == "fail" and "not running" in check.reason
