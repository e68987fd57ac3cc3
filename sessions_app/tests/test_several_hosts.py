"""A site on several machines: the web server, the grading workers and the workspace hosts share only the
database, the broker and the storage of uploads and recordings, here a real S3 endpoint on 127.0.0.1
(conftest.s3_bucket), as a MinIO or a Garage would be.

Each "host" is a folder of its own for everything a process writes (TAKEHOME_VAR_DIR, TAKEHOME_MEDIA_ROOT,
TAKEHOME_SCRATCH_DIR, TAKEHOME_WORKSPACES_DIR): whatever one host stored on its own disk, the others
cannot see.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from conftest import Worker, _wait_for
from grading.engine.replay import read_recording
from grading.models import Evidence
from grading.pages import recording_name, session_replay
from grading.tests.casts import SESSION, write_cast
from grading.tests.reviewing import ideal_evidence
from sessions_app import actions
from sessions_app.actions import do_start_session
from sessions_app.hosted import gate_host, workspaces
from sessions_app.models import Submission, Workspace
from shared import stored
from takehome.tests.factories import InvitationFactory

from .conftest import url
from .helpers import honest_zip, zip_bytes
from .test_workspace_gate import ws_settings  # noqa: F401  (a fixture of workspace's)
from .test_workspace_submit import complete, workspace  # noqa: F401  (a fixture)

GRADING_WAIT_S = 120


# --- two grading workers that share no disk --------------------------------------------------------------------


def host_env(worker_env: dict, bucket, settings, name: str, tmp_path: Path) -> dict:
    """The environment of a worker on a machine of its own: its own folders, the test's database, broker and
    bucket. Its scratch folder sits where the sandbox's uids can reach it (beside the test's own)."""
    scratch = Path(settings.GRADING_SCRATCH_DIR).parent / "hosts" / name / "scratch"
    return {
        **worker_env,
        **bucket.env,
        "TAKEHOME_VAR_DIR": str(tmp_path / name / "var"),
        "TAKEHOME_MEDIA_ROOT": str(tmp_path / name / "media"),
        "TAKEHOME_WORKSPACES_DIR": str(tmp_path / name / "workspaces"),
        "TAKEHOME_SCRATCH_DIR": str(scratch),
        # the runner virtualenvs are built once for the run, not per host: what a worker builds is no upload
        "TAKEHOME_RUNNER_DIR": str(settings.GRADING_RUNNER_DIR),
        "TAKEHOME_RUNNERS_DIR": str(settings.GRADING_RUNNERS_DIR),
    }


def upload(client, invitation, data: bytes) -> int:
    """A real multipart upload to the web server (this process), as gate.py sends it."""
    r = client.post(url("upload", invitation), {"archive": SimpleUploadedFile("work.zip", data)},
                    headers={"X-Takehome-Client": "gate"})
    assert r.status_code == 201, r.content
    return r.json()["submission"]


def graded_by(submission_id: int, worker: Worker) -> Submission:
    try:
        submission = _wait_for(
            lambda: Submission.objects.filter(pk=submission_id, status__in=Submission.FINISHED).first(),
            GRADING_WAIT_S, f"submission {submission_id} to be graded", interval=0.25)
    except AssertionError:
        raise AssertionError("worker log:\n" + worker.output()[-6000:])
    assert submission.status == Submission.Status.GRADED, worker.output()[-6000:]
    return submission


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_two_workers_on_two_machines_grade_what_the_web_server_stored_in_the_bucket(
        ready, client, worker_env, s3_bucket, sample_packet, settings, media_root, tmp_path):
    settings.UPLOAD_INTERVAL_S = 0
    invitations = [InvitationFactory(packet_version=sample_packet.latest_version()) for _ in range(2)]
    for invitation in invitations:
        do_start_session(invitation)
    hosts = {name: Worker(host_env(worker_env, s3_bucket, settings, name, tmp_path), tmp_path / f"{name}.log",
                          name=f"{name}-{tmp_path.name}")
             for name in ("host-a", "host-b")}
    zips = [honest_zip(), zip_bytes({**_files(honest_zip()), "refund-sum/notes.md": b"a second candidate\n"})]
    scratches = [Path(worker.env["TAKEHOME_SCRATCH_DIR"]) for worker in hosts.values()]
    graded = {}
    try:
        # why one worker at a time: the message goes to whichever worker consumes the queue, so each upload
        # is sent while only its worker runs; the other is stopped (or not started yet), never raced
        for (name, worker), invitation, data in zip(hosts.items(), invitations, zips):
            worker.start()
            submission_id = upload(client, invitation, data)
            graded[name] = graded_by(submission_id, worker)
            worker.stop()
        left_in_scratch = [p for folder in scratches for p in folder.iterdir()
                           if p.name.startswith(("grade-", "stored-"))]
    finally:
        for worker in hosts.values():
            worker.kill()
        for folder in scratches:
            shutil.rmtree(folder.parent, ignore_errors=True)
    for name, submission in graded.items():
        run = submission.runs.get()
        assert run.outcome == "graded" and run.worker.startswith(f"{name}-"), (name, run.worker)
        evidence = Evidence.objects.get(submission=submission).data
        assert evidence["archive"]["accepted"] and all(r["as_expected"] for r in evidence["runs"].values())

    # The zips are in the bucket, and on no machine's disk: the web server's received them and kept nothing,
    # each worker copied one into its scratch folder and removed it.
    assert stored.names(stored.UPLOADS) == sorted(s.archive.name for s in graded.values())
    assert files_under(media_root) == []
    for name in hosts:
        assert files_under(tmp_path / name / "media") == []
    assert left_in_scratch == []


def _files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist() if not info.is_dir()}


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
