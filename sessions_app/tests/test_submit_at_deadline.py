"""Nothing lost at the deadline: once uploads close, the sweep submits a frozen hosted workspace that changed since
its last submission (as the Submit would, marked "at the deadline"), once, and settles the others.

The workspace's files are given here (actions._snapshot stands in for reading the sandbox), so these run without
root; test_submit_at_deadline_worker.py does it end to end, from a real workspace to a real worker's grading.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from sessions_app import actions
from sessions_app.hosted import gate_host, workspaces
from sessions_app.models import GateReceipt, Submission, Workspace
from takehome.models import AuditEvent, Invitation

from .test_workspace_gate import ws_settings  # noqa: F401  (fixture)
from .test_workspace_submit import complete, workspace  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def close(invitation, settings) -> None:
    """The deadline and its grace passed a second ago, and the sweep froze the workspace."""
    Invitation.objects.filter(pk=invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    invitation.refresh_from_db()
    Workspace.objects.filter(invitation=invitation).update(frozen_at=timezone.now(), closed=True)


def settled(invitation) -> bool:
    return Workspace.objects.get(invitation=invitation).deadline_settled_at is not None


@pytest.fixture
def closing(workspace, settings, django_capture_on_commit_callbacks):  # noqa: F811
    """The workspace of test_workspace_submit, complete; ``sweep()`` sweeps with the commits' callbacks run."""
    complete(workspace)

    def sweep():
        with django_capture_on_commit_callbacks(execute=True):
            return gate_host.sweep()

    return SimpleNamespace(**vars(workspace), sweep=sweep, close=lambda: close(workspace.invitation, settings))


def test_a_workspace_never_submitted_is_submitted_at_the_deadline_once(closing, settings):
    closing.close()
    done = closing.sweep()
    submission = Submission.objects.get(invitation=closing.invitation)
    assert done == [f"submitted the workspace of invitation {closing.invitation.pk} at the deadline "
                    f"(submission {submission.pk})"]
    assert submission.at_deadline and submission.via == "hosted" and submission.earlier_submit_at is None
    assert submission.is_latest and submission.late_minutes is None  # not "late within grace": the server's
    assert submission.files_digest == actions.files_digest(actions.hosted_files(closing.invitation, closing.files))
    # kept as any upload is: its receipt, the invitation submitted
    assert GateReceipt.objects.get(invitation=closing.invitation, step="upload").submission == submission
    closing.invitation.refresh_from_db()
    assert closing.invitation.status == Invitation.Status.SUBMITTED and settled(closing.invitation)
    # run again (the next sweep, or a second host process): nothing more
    assert closing.sweep() == [] and Submission.objects.filter(invitation=closing.invitation).count() == 1
    assert actions.do_submit_at_deadline(closing.invitation) is None


def test_a_candidate_who_submitted_and_kept_working_gets_the_newer_state_submitted(closing, client, settings):
    first = actions.do_submit_workspace(closing.invitation).submission
    closing.files["invoices.py"] = b"# changed after the submit\n"
    closing.close()
    closing.sweep()
    newest = Submission.objects.filter(invitation=closing.invitation).exclude(pk=first.pk).get()
    assert newest.at_deadline and newest.earlier_submit_at == first.uploaded_at and newest.is_latest
    assert not Submission.objects.get(pk=first.pk).at_deadline


def test_nothing_changed_since_the_submit_submits_nothing_and_only_settles(closing):
    actions.do_submit_workspace(closing.invitation)
    closing.close()
    assert closing.sweep() == []
    assert Submission.objects.filter(invitation=closing.invitation).count() == 1 and settled(closing.invitation)


def test_a_workspace_as_it_was_seeded_is_not_submitted(workspace, settings):  # noqa: F811
    workspace.files.clear()
    workspace.files.update(workspaces.seed_files(workspace.invitation))
    GateReceipt.objects.filter(invitation=workspace.invitation).delete()  # nothing captured either
    close(workspace.invitation, settings)
    assert gate_host.sweep() == [] and settled(workspace.invitation)
    assert not Submission.objects.filter(invitation=workspace.invitation).exists()


def test_only_closed_frozen_unsettled_workspaces_of_this_host_with_a_valid_link_are_submitted(closing, settings):
    invitation = closing.invitation
    Workspace.objects.filter(invitation=invitation).update(frozen_at=timezone.now(), closed=True)
    # frozen, but its deadline is still to come (extended since): reopened, nothing submitted
    assert closing.sweep() == [f"reopened the workspace of invitation {invitation.pk}: its deadline was extended"]
    closing.close()
    Workspace.objects.filter(invitation=invitation).update(host="elsewhere")
    assert closing.sweep() == []  # another host's: its files are there
    Workspace.objects.filter(invitation=invitation).update(host=settings.WORKSPACE_HOST)
    Invitation.objects.filter(pk=invitation.pk).update(revoked_at=timezone.now())
    assert closing.sweep() == []  # a revoked link submits nothing
    Invitation.objects.filter(pk=invitation.pk).update(revoked_at=None)
    Workspace.objects.filter(invitation=invitation).update(deadline_settled_at=timezone.now())
    assert closing.sweep() == []  # settled already
    assert not Submission.objects.filter(invitation=invitation).exists()


def test_two_sweeps_at_once_store_one_submission_at_the_deadline(closing, monkeypatch):
    closing.close()
    assert actions.do_submit_at_deadline(closing.invitation) is not None
    # a second sweep that read the digest before the first stored: the database keeps one
    monkeypatch.setattr(actions, "_last_submitted_digest", lambda invitation: "not this state")
    assert actions.do_submit_at_deadline(closing.invitation) is None
    assert Submission.objects.filter(invitation=closing.invitation, at_deadline=True).count() == 1


def test_a_submit_already_running_waits_for_the_next_sweep(closing):
    closing.close()
    with actions._capture_lock(closing.invitation):
        assert closing.sweep() == []
    assert not settled(closing.invitation)
    assert len(closing.sweep()) == 1 and settled(closing.invitation)


def test_missing_artifacts_are_submitted_all_the_same_and_named(workspace, settings):  # noqa: F811
    close(workspace.invitation, settings)
    result = actions.do_submit_at_deadline(workspace.invitation)
    assert result.submission.at_deadline
    assert [m.path for m in result.missing] == ["artifacts/model.md", "artifacts/refuse.md"]


def test_a_workspace_too_large_to_submit_is_kept_as_a_refused_upload_and_settled(closing, settings):
    settings.UPLOAD_MAX_BYTES = 100
    closing.close()
    assert closing.sweep() == [f"could not submit the workspace of invitation {closing.invitation.pk} at the "
                               "deadline (too_large): kept as a refused upload"]
    refused = GateReceipt.objects.get(invitation=closing.invitation, step="upload", accepted=False)
    assert refused.refusal.startswith(actions.AT_DEADLINE_REFUSED + "Your workspace zips to")
    assert settled(closing.invitation) and not Submission.objects.filter(invitation=closing.invitation).exists()


def test_the_submit_at_the_deadline_is_in_the_audit_trail_once(closing):
    first = actions.do_submit_workspace(closing.invitation).submission
    closing.files["notes.md"] = b"kept working\n"
    closing.close()
    closing.sweep()
    newest = Submission.objects.get(invitation=closing.invitation, at_deadline=True)
    event = AuditEvent.objects.get(invitation=closing.invitation, action="deadline_submit")
    assert event.actor is None and event.actor_name == "server"
    assert event.target_type == "sessions_app.submission" and event.target_id == str(newest.pk)
    assert event.detail == (f"submission {newest.pk}, sha256 {newest.sha256[:12]}, after an earlier submit at "
                            f"{first.uploaded_at.astimezone(UTC):%H:%M} UTC")
    assert closing.sweep() == [] and actions.do_submit_at_deadline(closing.invitation) is None
    assert AuditEvent.objects.filter(action="deadline_submit").count() == 1


def test_a_submit_at_the_deadline_that_fails_leaves_no_audit_event(closing, monkeypatch):
    def full_disk(incoming):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(actions, "_store", full_disk)  # the last step of the submission's transaction
    closing.close()
    with pytest.raises(OSError):
        actions.do_submit_at_deadline(closing.invitation)
    assert not Submission.objects.filter(invitation=closing.invitation).exists()
    assert not AuditEvent.objects.filter(invitation=closing.invitation).exists()


# --- what the recruiter and the reviewer read ----------------------------------------------------------------

def test_the_board_the_queue_and_the_review_page_say_submitted_at_the_deadline(closing, client, reviewer,
                                                                                recruiter):
    first = actions.do_submit_workspace(closing.invitation).submission
    closing.files["notes.md"] = b"kept working\n"
    closing.close()
    closing.sweep()
    newest = Submission.objects.get(invitation=closing.invitation, at_deadline=True)
    after = f"after an earlier submit at {timezone.localtime(first.uploaded_at):%H:%M}"
    client.force_login(recruiter)
    board = client.get(f"/packets/{closing.invitation.packet.slug}/invitations/").content.decode()
    cell = board.split(f'data-outcome="{closing.invitation.pk}"')[1].split("</td>")[0]
    assert 'data-at-deadline="after-submit"' in cell and "newest state submitted at the deadline" in cell
    assert after in re.sub(r"<[^>]+>", "", cell)
    history = board.split(f'id="history-{closing.invitation.pk}"')[1].split("</details>")[0]
    event = history.split('data-action="deadline_submit">')[1].split("</li>")[0]
    assert " server: Submitted at the deadline by the server (submission " in re.sub(r"<[^>]+>", "", event)
    client.force_login(reviewer)
    queue = client.get("/review/?show=all").content.decode()
    row = queue.split(f'data-submission="{newest.pk}"')[1].split("</tr>")[0]
    assert "newest state submitted at the deadline" in row
    page = client.get(f"/review/{newest.pk}/").content.decode()
    assert 'id="submitted-at-deadline"' in page and "kept working" in page.split('id="submitted-at-deadline"')[1]
    assert "late by" not in page.split('class="pagehead"')[1].split("</div>")[0]


def test_a_submission_at_the_deadline_alone_says_only_that(closing, client, reviewer):
    closing.close()
    closing.sweep()
    submission = Submission.objects.get(invitation=closing.invitation)
    client.force_login(reviewer)
    page = client.get(f"/review/{submission.pk}/").content.decode()
    head = page.split('class="pagehead"')[1].split("</div>")[0]
    assert 'data-at-deadline="only"' in head and ">submitted at the deadline</span>" in head
    assert "never pressed Submit" in page
