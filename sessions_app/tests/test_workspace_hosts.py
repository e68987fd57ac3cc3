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
