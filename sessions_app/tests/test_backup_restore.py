"""`manage.py backup` of a running server, `manage.py restore` into an empty one: every page as before.

The server holds a hosted session that is open (its files mounted, its shell running, edits not
saved anywhere yet, a recording with the gate's markers) and graded (a Submit stored as an upload
and its evidence), a second session frozen at its deadline, and a third candidate's zip sent as a
real multipart upload and graded in the real sandbox. The backup is taken while all of it runs;
then the instance is emptied to what a new machine has (no table in the database, empty folders,
another host name) and the backup restored there. The reviewer's pages of both graded uploads, the
recording, the open workspace's files as they were (its last edit included) and the frozen
workspace's page come back as they were.

Runs on the real workspace sandbox (root, a writable cgroup, tmux: the ``shells`` fixture), and on
PostgreSQL too (DATABASE_URL), where the schema is rebuilt by the migrations in the restore's transaction.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from grading import lifecycle, pipeline
from grading.engine.asciicast import Recorder
from grading.tests import corpus
from grading.tests.reviewing import ideal_evidence
from sessions_app import actions
from sessions_app.hosted import workspaces
from sessions_app.models import Submission, Workspace
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

from .conftest import url
from .hosted_shell import shells, stop_all  # noqa: F401  (the workspaces' folder and uids of the tests)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FROZEN_FILES = {"invoices.py": b"def total(rows):\n    return 0  # frozen\n", "artifacts/refuse.md": b"No eval.\n"}


def editor(client, invitation, tail: str = "", **query) -> dict:
    response = client.get(f"/t/{invitation.raw_token}/workspace/files{tail}", query)
    assert response.status_code == 200, response.content
    data = response.json()
    for entry in data.get("entries", []):
        # why: a workspace's files get the time they were saved at, after a backup as after any stop of it
        entry.pop("mtime_ns", None)
    return data


def page(client, address: str, **query) -> str:
    response = client.get(address, query)
    assert response.status_code == 200, response.content[:500]
    # why: each response carries a CSRF token and a CSP nonce of its own, and the review page the server's
    # clock as it drew the page (the notes' stamps are counted on it)
    html = response.content.decode()
    html = re.sub(r'(csrfmiddlewaretoken" value="|X-CSRFToken&quot;: &quot;|"X-CSRFToken": ")[^"&]+', r"\1T", html)
    html = re.sub(r'(name="takehome-style-nonce" content=")[^"]+', r"\1N", html)
    html = re.sub(r'data-clock="\d+"', 'data-clock="C"', html)
    return re.sub(r'nonce="[^"]+"', 'nonce="N"', html)


def frozen_at_its_deadline(packet_version, uid: int) -> Invitation:
    """A second session as the deadline's sweep leaves it: frozen, closed, its files in saved.tar, nothing mounted."""
    invitation = InvitationFactory(packet_version=packet_version)
    actions.do_start_session(invitation)
    Invitation.objects.filter(pk=invitation.pk).update(deadline=timezone.now() - timedelta(hours=2))
    Workspace.objects.create(invitation=invitation, host=settings.WORKSPACE_HOST, uid=uid,
                             frozen_at=timezone.now(), closed=True, deadline_settled_at=timezone.now())
    folder = workspaces.folder_for(invitation)
    folder.mkdir(parents=True)
    with tarfile.open(folder / "saved.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in FROZEN_FILES.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (folder / "frozen").write_bytes(b"")
    workspaces.append_marker(invitation, "red captured")
    invitation.refresh_from_db()
    return invitation


def drop_every_table() -> None:
    """The database as a new server has it: not a single table."""
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA foreign_keys = OFF")
        for table in tables:
            cursor.execute(f"DROP TABLE {connection.ops.quote_name(table)}"
                           + (" CASCADE" if connection.vendor == "postgresql" else ""))
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA foreign_keys = ON")
        assert connection.introspection.table_names(cursor) == []


def test_a_running_server_backed_up_and_restored_into_an_empty_one_serves_every_page_as_before(
        shells, client, invitation, reviewer, media_root, settings, monkeypatch, tmp_path):  # noqa: F811
    # why: grading is done here as a worker stores it; no message goes to a broker
    monkeypatch.setattr("grading.tasks.enqueue_grading", lambda pk, by: None)
    # the open session: started, its workspace open with its shell, a recording with the gate's marks
    actions.do_start_session(invitation)
    workspaces.ensure_open(invitation)
    recorder = Recorder(workspaces.cast_path(invitation), 80, 24, settings.RECORDING_MAX_BYTES)
    recorder.output("candidate:/workspace$ python -m pytest -q\r\n1 failed in 0.02s\r\n")
    workspaces.append_marker(invitation, "red captured")
    workspaces.write_files(invitation, {"artifacts/refuse.md": b"Dropping the refund rows hides the bug.\n"})
    submitted = actions.do_submit_workspace(invitation, anyway=True).submission
    run = lifecycle.start_run(submitted.pk)
    pipeline.record_evidence(run, ideal_evidence(), 1.0)
    # typed after the Submit: only in the mounted workspace, saved nowhere yet
    workspaces.write_files(invitation, {"notes.md": b"the model took 40 s\n"})
    closed = frozen_at_its_deadline(invitation.packet_version, shells_uid())
    # the zip way: a real multipart upload, graded in the real sandbox
    by_zip = InvitationFactory(packet_version=invitation.packet_version)
    actions.do_start_session(by_zip)
    data = corpus.zip_with_times(tmp_path / "work.zip", corpus.honest_files()).read_bytes()
    response = client.post(url("upload", by_zip), {"archive": SimpleUploadedFile("work.zip", data)},
                           headers={"X-Takehome-Client": "gate"})
    assert response.status_code == 201, response.content
    uploaded = Submission.objects.get(pk=response.json()["submission"])
    assert pipeline.grade_submission(uploaded.pk) == "graded"

    desk = client_for(reviewer)
    review = f"/review/{submitted.pk}/"
    before = {
        "review": page(desk, review),
        "cast": b"".join(desk.get(f"{review}session.cast").streaming_content),
        "tree": editor(client, invitation),
        "notes": editor(client, invitation, "/read", path="notes.md"),
        "closed": page(client, url("workspace", closed)),
        "closed file": page(client, url("workspace-read-only", closed), path="invoices.py"),
        "upload": (Path(settings.MEDIA_ROOT) / submitted.archive.name).read_bytes(),
        "zip review": page(desk, f"/review/{uploaded.pk}/"),
        "zip": (Path(settings.MEDIA_ROOT) / uploaded.archive.name).read_bytes(),
    }
    assert before["zip"] == data
    assert 'id="replay-player"' in before["review"] and "No recording" not in before["review"]
    assert b'"red captured"' in before["cast"] and b'"submitted"' in before["cast"]
    assert before["notes"]["text"] == "the model took 40 s\n"
    assert "frozen" in before["closed file"]

    backup = tmp_path / "takehome-backup.tar.gz"
    said = io.StringIO()
    call_command("backup", str(backup), stdout=said)
    assert f"invitation {invitation.pk}: open: its files as they are now" in said.getvalue()
    assert f"invitation {closed.pk}: frozen: its saved files; its recording" in said.getvalue()
    assert backup.stat().st_mode & 0o777 == 0o600

    # a new machine: no table, empty folders, another host name
    stop_all(shells.folder)
    shells.folder.mkdir(mode=0o755)
    shutil.rmtree(settings.MEDIA_ROOT)
    Path(settings.MEDIA_ROOT).mkdir()
    drop_every_table()
    settings.WORKSPACE_HOST = "the-new-server"

    said = io.StringIO()
    call_command("restore", str(backup), stdout=said)
    assert "Database: restored" in said.getvalue()
    assert "2 workspaces of server" in said.getvalue() and "given to this one (the-new-server)" in said.getvalue()

    desk = client_for(reviewer)
    after = {
        "review": page(desk, review),
        "cast": b"".join(desk.get(f"{review}session.cast").streaming_content),
        "tree": editor(client, invitation),
        "notes": editor(client, invitation, "/read", path="notes.md"),
        "closed": page(client, url("workspace", closed)),
        "closed file": page(client, url("workspace-read-only", closed), path="invoices.py"),
        "upload": (Path(settings.MEDIA_ROOT) / submitted.archive.name).read_bytes(),
        "zip review": page(desk, f"/review/{uploaded.pk}/"),
        "zip": (Path(settings.MEDIA_ROOT) / uploaded.archive.name).read_bytes(),
    }
    for name in before:
        assert after[name] == before[name], name
    assert Submission.objects.get(pk=submitted.pk).status == Submission.Status.GRADED
    assert Submission.objects.get(pk=uploaded.pk).status == Submission.Status.GRADED
    open_row = Workspace.objects.get(invitation=invitation)
    assert open_row.host == "the-new-server" and not open_row.closed
    assert (workspaces.folder_for(closed) / "frozen").exists()  # it still opens read-only


def shells_uid() -> int:
    """A uid of the ``shells`` fixture's range that the open workspace does not hold."""
    return settings.WORKSPACE_UID_BASE + settings.WORKSPACE_SLOTS - 1


def client_for(user):
    from django.test import Client

    desk = Client()
    desk.force_login(user)
    return desk


def test_the_manifest_says_what_the_backup_holds(shells, invitation, media_root, settings, tmp_path):  # noqa: F811
    actions.do_start_session(invitation)
    workspaces.ensure_open(invitation)
    workspaces.append_marker(invitation, "red captured")
    backup = tmp_path / "b.tar.gz"
    call_command("backup", str(backup), stdout=io.StringIO())
    with tarfile.open(backup) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))
    assert names[0] == "takehome-backup.json" and names[-1] == "manifest.json"
    session = manifest["parts"]["workspaces"]["sessions"][str(invitation.pk)]
    assert session["files"] == "as they are now" and session["recording"] > 0 and not session["frozen"]
    assert manifest["parts"]["workspaces"]["host"] == settings.WORKSPACE_HOST
    assert {f"workspaces/inv-{invitation.pk}/saved.tar", f"workspaces/inv-{invitation.pk}/session.cast"} <= set(
        manifest["files"])
    # the workspace is as it was: mounted, its shell running, no saved.tar written by the backup
    folder = workspaces.folder_for(invitation)
    assert workspaces.backend().shell_running(workspaces.workspace_for(invitation))
    assert not (folder / "saved.tar").exists()


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_with_uploads_in_a_bucket_backup_and_restore_refuse_saying_how_to_back_it_up(settings, tmp_path, command):
    from django.core.management import CommandError, call_command

    settings.STORAGE = "s3"
    target = tmp_path / "site.backup"
    if command == "restore":
        target.write_bytes(b"not read")
    with pytest.raises(CommandError, match=r"kept in the S3 bucket.*Nothing was changed") as refused:
        call_command(command, str(target))
    if command == "backup":
        assert not target.exists() or target.stat().st_size == 0
    # the words docs/operations.md shows, which name the section saying what to do instead
    words = " ".join(str(refused.value).split())
    shown = " ".join((Path(settings.BASE_DIR) / "docs" / "operations.md").read_text().split())
    assert words.replace("Cannot restore here", "Cannot back up here") in shown
    assert '"Back up and restore"' in words and "## Back up and restore" in shown


def test_a_restore_refuses_while_a_workspace_is_open_on_this_server(shells, invitation, media_root, settings,  # noqa: F811
                                                                     tmp_path):
    from django.core.management import CommandError

    actions.do_start_session(invitation)
    workspaces.ensure_open(invitation)
    backup = tmp_path / "b.tar.gz"
    call_command("backup", str(backup), stdout=io.StringIO())
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(backup), "--force", stdout=io.StringIO())
    assert str(refused.value) == (
        f"The hosted workspaces of 1 invitation ({invitation.pk}) are open on this server, their files mounted "
        f"under {settings.WORKSPACES_DIR}: stop the web server and serve_workspaces, run `manage.py "
        "stop_workspaces`, then restore again. Nothing was restored.")
    # untouched: still mounted, its shell running
    assert workspaces.backend().shell_running(workspaces.workspace_for(invitation))
