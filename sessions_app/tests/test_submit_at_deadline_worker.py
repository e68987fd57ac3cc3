"""End to end: a candidate works in a real hosted workspace, captures red, fixes the bug and never presses Submit;
once uploads close, `manage.py serve_workspaces --once` freezes the workspace and submits it, and a real Celery
worker grades that submission. Afterwards the page shows the frozen files read-only."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from grading.engine.sandbox import shell
from grading.models import Evidence
from sessions_app import actions
from sessions_app.models import Submission, Workspace
from takehome.models import Invitation

from .conftest import url
from .test_end_to_end import wait_graded
from .test_workspace_gate import hosted, real_workspaces, ws_settings  # noqa: F401  (fixtures)

REFUSAL = b"The model offered to drop the refund rows; that changes revenue and hides the bug.\n"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_workspace_never_submitted_is_submitted_at_the_deadline_and_graded(
        hosted, ready, celery_worker_proc, settings, client):  # noqa: F811
    invitation = hosted.invitation
    hosted.failing_test()
    assert actions.do_capture(invitation, "red").accepted
    hosted.fix()
    hosted.write("artifacts/refuse.md", REFUSAL)
    Invitation.objects.filter(pk=invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))

    out = io.StringIO()
    call_command("serve_workspaces", "--once", stdout=out)
    submission = Submission.objects.get(invitation=invitation)
    assert out.getvalue().splitlines() == [
        f"froze the workspace of invitation {invitation.pk}",
        f"submitted the workspace of invitation {invitation.pk} at the deadline (submission {submission.pk})"]
    assert submission.at_deadline and submission.via == "hosted"
    row = Workspace.objects.get(invitation=invitation)
    assert row.closed and row.deadline_settled_at is not None
    # the files it read went back to disk: nothing stays mounted for a closed workspace
    assert not shell._is_mounted(hosted.home) and hosted.ws.part("saved.tar").is_file()

    graded = wait_graded(submission.pk, celery_worker_proc)
    assert graded.status == Submission.Status.GRADED, graded.reject_reason
    evidence = Evidence.objects.get(submission=graded).data
    assert evidence["red_log"]["captured_by"] == "server" and evidence["red_log"]["genuine"]
    assert evidence["texts"]["refuse.md"] == REFUSAL.decode()

    call_command("serve_workspaces", "--once", stdout=(again := io.StringIO()))
    assert again.getvalue() == "" and Submission.objects.filter(invitation=invitation).count() == 1

    page = client.get(url("workspace-read-only", invitation), {"path": "invoices.py"}).content.decode()
    shown = page.split('id="closed-file-text"')[1].split("</pre>")[0]
    assert "abs(int(" not in shown and "int(row[" in shown and "submitted by the server at the deadline" in page
