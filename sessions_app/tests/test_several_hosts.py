"""A site on several machines: the web server, the grading workers and the workspace hosts share only the
database, the broker and the storage of uploads and recordings, here a real S3 endpoint on 127.0.0.1
(conftest.s3_bucket), as a MinIO or a Garage would be.

Each "host" is a folder of its own for everything a process writes (TAKEHOME_VAR_DIR, TAKEHOME_MEDIA_ROOT,
TAKEHOME_SCRATCH_DIR, TAKEHOME_WORKSPACES_DIR): whatever one host stored on its own disk, the others
cannot see.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from grading.engine.replay import read_recording
from grading.models import Evidence
from grading.pages import recording_name, session_replay
from grading.tests.casts import SESSION, write_cast
from grading.tests.reviewing import ideal_evidence
from sessions_app import actions
from sessions_app.hosted import gate_host, workspaces
from sessions_app.models import Submission, Workspace
from shared import stored

from .test_workspace_gate import ws_settings  # noqa: F401  (a fixture of workspace's)
from .test_workspace_submit import complete, workspace  # noqa: F401  (a fixture)

# --- a hosted session recorded on one host, replayed on another -------------------------------------------------


def other_web_host(settings, tmp_path: Path) -> None:
    """From here on this process is another web server: nothing of the workspace host's disk, nor of its own
    media folder before, the same database and bucket."""
    settings.WORKSPACES_DIR = tmp_path / "web-b" / "workspaces"
    settings.MEDIA_ROOT = tmp_path / "web-b" / "media"
    settings.WORKSPACE_HOST = "web-b"


@pytest.mark.django_db
def test_a_hosted_session_recorded_on_its_host_replays_on_a_web_host_that_never_saw_it(
        workspace, s3_bucket, client, reviewer, settings, tmp_path):  # noqa: F811
    complete(workspace)
    invitation = workspace.invitation
    cast = workspaces.cast_path(invitation)
    write_cast(cast, SESSION[:5])  # the terminal recorded up to red's capture
    submission = actions.do_submit_workspace(invitation).submission  # marks "submitted", copies the recording
    Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.GRADED)
    Evidence.objects.create(submission=submission, data=ideal_evidence(), grader_version="1")  # as a worker would

    other_web_host(settings, tmp_path)
    replay = session_replay(submission)
    assert replay.playable, replay.problem
    assert [m.label for m in replay.recording.markers if m.by_server] == ["red captured", "submitted"]
    client.force_login(reviewer)
    page = client.get(reverse("grading:review-detail", args=[submission.pk])).content.decode()
    assert 'id="replay-player"' in page and 'data-moment="submitted, at ' in page
    response = client.get(reverse("grading:session-cast", args=[submission.pk]))
    assert response.status_code == 200 and b"".join(response.streaming_content) == cast.read_bytes()
    assert not settings.WORKSPACES_DIR.exists()


@pytest.mark.django_db
def test_the_sweep_copies_a_recording_that_grew_and_leaves_one_that_did_not(workspace, s3_bucket,  # noqa: F811
                                                                           monkeypatch):
    monkeypatch.setattr(gate_host, "_published_closed", True)  # a process that swept before
    invitation = workspace.invitation
    cast = workspaces.cast_path(invitation)
    write_cast(cast, SESSION[:3])
    name = recording_name(invitation)

    assert gate_host.sweep() == [] and stored_bytes(name) == cast.read_bytes()
    assert gate_host.publish_recordings() == 0  # unchanged since: not copied again
    workspaces.append_marker(invitation, "red captured")
    assert gate_host.publish_recordings() == 1 and stored_bytes(name) == cast.read_bytes()
    assert read_recording(cast).markers[-1].label == "red captured"

    # A closed workspace's recording no longer grows: copied at a process's first sweep only, for what a
    # host stopped or upgraded meanwhile did not copy.
    Workspace.objects.filter(invitation=invitation).update(closed=True)
    workspaces.append_marker(invitation, "written while this host was down")
    assert gate_host.publish_recordings() == 0
    monkeypatch.setattr(gate_host, "_published_closed", False)
    assert gate_host.publish_recordings() == 1 and stored_bytes(name) == cast.read_bytes()
    assert gate_host._published_closed


def stored_bytes(name: str) -> bytes:
    with stored.open(name) as handle:
        return handle.read()
