"""A hosted workspace's life has one writer: every step of it (opened, shell started, seen, shell stopped,
frozen, settled, reopened) is a function of sessions_app/hosted/workspaces.py, the only module that writes the
Workspace row."""

from __future__ import annotations

import pytest

from takehome.tests.writers import Watched, field_writes, writes_outside

WORKSPACE = Watched(frozenset({"Workspace"}),
                    frozenset({"uid", "host", "last_seen_at", "shell_stopped_at", "frozen_at", "closed",
                               "deadline_settled_at"}))
OWNER = "sessions_app/hosted/workspaces.py"


@pytest.mark.parametrize("source, written", [
    ("Workspace.objects.filter(pk=row.pk).update(frozen_at=now, closed=True)", [(1, "closed"), (1, "frozen_at")]),
    ("Workspace.objects.create(invitation_id=1, host=h, uid=u)", [(1, "host"), (1, "uid")]),
    ("row.shell_stopped_at = now\nrow.save(update_fields=['shell_stopped_at'])",
     [(1, "shell_stopped_at"), (2, "shell_stopped_at")]),
    ("invitation.workspace.last_seen_at = now", [(1, "last_seen_at")]),
    ("Workspace.objects.filter(host=h).update(closed=False)", [(1, "closed")]),
    # Reads are not writes.
    ("Workspace.objects.filter(closed=False, host=h).exclude(frozen_at=None).values_list('uid', flat=True)", []),
    ("if row.closed or row.frozen_at is not None: pass", []),
])
def test_the_write_finder_tells_a_workspaces_writes_from_reads(source, written):
    assert field_writes(source, WORKSPACE) == written


def test_only_the_workspaces_module_writes_the_workspace_row():
    offenders = writes_outside(WORKSPACE, {OWNER: WORKSPACE.fields})
    assert offenders == [], (f"change a Workspace row only through the transitions in {OWNER} (workspace_row, "
                             "ensure_open, touch, stop_idle_shell, stop_for_shutdown, freeze, settle_deadline, "
                             "reopen):\n"
                             + "\n".join(offenders))
