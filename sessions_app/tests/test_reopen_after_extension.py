"""A deadline extended after it passed reopens the frozen hosted workspace: writable again with its files as they
were frozen, on its own host at the next open or sweep (the extension itself changes only the invitation, on
whichever server the recruiter used), and its new deadline submits it again when it changed, then freezes it.
A revoked link never reopens, and two sweeps at once still keep one submission per deadline.

The first tests give the workspace's files in a dict, as test_submit_at_deadline.py does (actions._snapshot stands
in for the sandbox); the last one runs it all on a real workspace.
"""

from __future__ import annotations

import errno
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from grading.engine.sandbox import shell
from sessions_app import actions
from sessions_app.hosted import gate_host, workspaces
from sessions_app.models import GateReceipt, Submission, Workspace
from takehome.actions import ExtendError, do_extend_deadline, do_revoke_invitation
from takehome.models import Invitation

from .conftest import url
from .test_submit_at_deadline import close, closing, settled  # noqa: F401  (fixture)
from .test_workspace_gate import hosted, real_workspaces, ws_settings  # noqa: F401  (fixtures)
from .test_workspace_submit import workspace  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def frozen_mark(invitation) -> Path:
    return workspaces.folder_for(invitation) / "frozen"


def at_deadline(invitation) -> list[Submission]:
    return list(Submission.objects.filter(invitation=invitation, at_deadline=True).order_by("uploaded_at", "pk"))


def reopened_line(invitation) -> str:
    return f"reopened the workspace of invitation {invitation.pk}: its deadline was extended"


def test_an_extension_reopens_the_frozen_workspace_and_its_new_deadline_submits_it_again(closing):  # noqa: F811
    invitation = closing.invitation
    closing.close()
    closing.sweep()
    [first] = at_deadline(invitation)
    first_deadline = invitation.deadline
    assert first.for_deadline == first_deadline and settled(invitation)
    frozen_mark(invitation).touch()  # as the sandbox's freeze leaves it on the host's disk

    do_extend_deadline(invitation, 30)  # the recruiter's side: the invitation only
    assert Workspace.objects.get(invitation=invitation).frozen_at is not None
    assert closing.sweep() == [reopened_line(invitation)]
    row = Workspace.objects.get(invitation=invitation)
    assert row.frozen_at is None and not row.closed and row.deadline_settled_at is None
    assert not frozen_mark(invitation).exists()
    assert closing.sweep() == []  # once

    closing.files["notes.md"] = b"written in the extra time\n"
    close(invitation, settings)  # the new deadline passed, and the sweep froze the workspace again
    closing.sweep()
    kept, second = at_deadline(invitation)
    assert kept == first and not Submission.objects.get(pk=first.pk).is_latest  # the first is kept
    assert second.is_latest and second.for_deadline == invitation.deadline > first_deadline
    assert second.files_digest == actions.files_digest(actions.hosted_files(invitation, closing.files))
    assert settled(invitation) and closing.sweep() == []


def test_an_unchanged_workspace_is_not_submitted_again_at_the_new_deadline(closing):  # noqa: F811
    closing.close()
    closing.sweep()
    do_extend_deadline(closing.invitation, 30)
    closing.sweep()
    close(closing.invitation, settings)
    assert closing.sweep() == [] and len(at_deadline(closing.invitation)) == 1 and settled(closing.invitation)


def test_a_revoked_link_never_reopens(closing):  # noqa: F811
    invitation = closing.invitation
    closing.close()
    closing.sweep()
    frozen_mark(invitation).touch()
    do_extend_deadline(invitation, 30)
    do_revoke_invitation(invitation)  # before the host reopened it
    assert closing.sweep() == []
    row = Workspace.objects.get(invitation=invitation)
    assert workspaces.reopen(invitation, row) == row and row.frozen_at is not None and row.closed
    assert frozen_mark(invitation).exists()
    with pytest.raises(ExtendError):
        do_extend_deadline(invitation, 30)  # and a revoked one takes no more time


def test_a_workspace_frozen_for_its_revoked_link_stays_frozen_with_time_left(workspace):  # noqa: F811
    invitation = workspace.invitation  # the clock still runs
    Workspace.objects.filter(invitation=invitation).update(frozen_at=timezone.now(), closed=True)
    do_revoke_invitation(invitation)
    assert gate_host.sweep() == []
    assert Workspace.objects.get(invitation=invitation).frozen_at is not None


def test_two_sweeps_at_once_keep_one_submission_per_deadline(closing, monkeypatch):  # noqa: F811
    invitation = closing.invitation
    closing.close()
    assert actions.do_submit_at_deadline(invitation) is not None
    closing.sweep()
    do_extend_deadline(invitation, 30)
    closing.sweep()
    closing.files["notes.md"] = b"more\n"
    close(invitation, settings)
    assert actions.do_submit_at_deadline(invitation) is not None  # the new deadline has its own
    # a second sweep that read the digest before the first stored: the database keeps one for this deadline
    monkeypatch.setattr(actions, "_last_submitted_digest", lambda invitation: "not this state")
    assert actions.do_submit_at_deadline(invitation) is None
    first, second = at_deadline(invitation)
    assert first.for_deadline < second.for_deadline == invitation.deadline


def test_an_extension_during_the_deadlines_submit_stores_nothing_and_reopens(closing, monkeypatch):  # noqa: F811
    invitation = closing.invitation
    closing.close()
    snapshot = actions._snapshot

    def extended_meanwhile(inv):
        do_extend_deadline(Invitation.objects.get(pk=inv.pk), 30)  # the recruiter, while the files are read
        return snapshot(inv)

    monkeypatch.setattr(actions, "_snapshot", extended_meanwhile)
    assert closing.sweep() == []
    # nothing stored, nothing kept as refused, nothing settled: the deadline it was for is not one any more
    assert not Submission.objects.filter(invitation=invitation).exists()
    assert not GateReceipt.objects.filter(invitation=invitation, step="upload").exists()
    assert not settled(invitation)
    assert closing.sweep() == [reopened_line(invitation)]


# --- on a real workspace ---------------------------------------------------------------------------------------

def expire(invitation) -> None:
    Invitation.objects.filter(pk=invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    invitation.refresh_from_db()


@pytest.mark.slow
def test_a_real_workspace_reopens_writable_and_is_submitted_at_its_new_deadline(hosted, client):  # noqa: F811
    invitation = hosted.invitation
    hosted.write("notes.md", b"before the deadline\n")
    expire(invitation)
    gate_host.sweep()
    [first] = at_deadline(invitation)
    frozen_ws = workspaces.workspace_for(invitation)
    assert frozen_ws.part("frozen").exists()

    do_extend_deadline(invitation, 30)
    # the pages say there is time again, with the terminal and the editor, not "Time is up"
    page = client.get(url("workspace", invitation)).content.decode()
    assert 'id="countdown"' in page and 'id="terminal"' in page and "Time is up" not in page
    landing = client.get(url("landing", invitation)).content.decode()
    assert 'id="countdown"' in landing and "Time is up" not in landing
    # the next visit (the terminal, or the editor) reopens it on its host: its files as they were frozen, writable
    ws = workspaces.ensure_open(invitation)
    row = Workspace.objects.get(invitation=invitation)
    assert row.frozen_at is None and not row.closed and ws.uid == row.uid
    assert not ws.part("frozen").exists() and shell.shell_running(ws)
    assert (ws.home / "notes.md").read_bytes() == b"before the deadline\n"
    assert (ws.home / "notes.md").stat().st_uid == row.uid
    saved = client.post(url("workspace", invitation) + "/files/create", {"path": "extra.py"},
                        content_type="application/json")
    assert saved.status_code == 200, saved.content
    (ws.home / "notes.md").write_bytes(b"after the extension\n")

    expire(invitation)
    done = gate_host.sweep()
    [kept, second] = at_deadline(invitation)
    assert done == [f"froze the workspace of invitation {invitation.pk}",
                    f"submitted the workspace of invitation {invitation.pk} at the deadline "
                    f"(submission {second.pk})"]
    assert kept == first and second.for_deadline == invitation.deadline
    with zipfile.ZipFile(second.archive.path) as zipped:
        names = zipped.namelist()
        notes = next(name for name in names if name.endswith("notes.md"))
        assert zipped.read(notes) == b"after the extension\n" and any(n.endswith("extra.py") for n in names)
    # frozen again: read-only, no shell
    ws = workspaces.ensure_open(invitation)
    assert ws.part("frozen").exists() and not shell.shell_running(ws)
    with pytest.raises(OSError) as refused:
        (ws.home / "notes.md").write_bytes(b"late\n")
    assert refused.value.errno == errno.EROFS
