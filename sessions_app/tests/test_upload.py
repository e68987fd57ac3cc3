"""POST /t/<token>/upload: real multipart requests, streamed to disk, stored by hash."""

from datetime import timedelta
from pathlib import Path
from unittest.mock import patch

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone
from kombu.exceptions import OperationalError

from sessions_app.models import GateReceipt, Submission
from takehome.models import Invitation

from .conftest import url
from .helpers import honest_zip, sha, zip_bytes

pytestmark = pytest.mark.django_db
GATE = {"X-Takehome-Client": "gate", "Accept": "application/json"}


def archive(data: bytes, name: str = "work.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/zip")


def leftovers(media_root: Path) -> list[Path]:
    incoming = media_root / "uploads" / ".incoming"
    return list(incoming.iterdir()) if incoming.exists() else []


def assert_nothing_stored(invitation, media_root):
    assert not Submission.objects.exists()
    assert not GateReceipt.objects.exists()
    assert Invitation.objects.get(pk=invitation.pk).submitted_at is None
    assert leftovers(media_root) == []
    assert not (media_root / "uploads").exists() or not [
        p for p in (media_root / "uploads").rglob("*.zip")]


def test_an_upload_is_stored_by_hash_with_a_receipt_and_queued_after_commit(
        client, started, media_root, django_capture_on_commit_callbacks):
    data = honest_zip()
    with patch("sessions_app.actions.enqueue_grading", return_value=True) as enqueue, \
            django_capture_on_commit_callbacks(execute=True):
        r = client.post(url("upload", started), {"archive": archive(data)})
    submission = Submission.objects.get()
    enqueue.assert_called_once_with(submission.pk)
    assert r.status_code == 302 and r["Location"] == url("submission-detail", started, pk=submission.pk)
    assert submission.sha256 == sha(data) and submission.size == len(data)
    assert submission.archive.name == f"uploads/{sha(data)[:2]}/{sha(data)}.zip"
    assert (media_root / submission.archive.name).read_bytes() == data
    assert submission.is_latest and submission.via == "browser" and submission.original_name == "work.zip"
    receipt = GateReceipt.objects.get(step="upload")
    assert receipt.sha256 == submission.sha256 and receipt.received_at == submission.uploaded_at
    assert Invitation.objects.get(pk=started.pk).submitted_at == submission.uploaded_at
    assert leftovers(media_root) == []


def test_the_same_bytes_twice_reuse_the_file_and_the_newest_is_latest(client, started, media_root):
    data = honest_zip()
    client.post(url("upload", started), {"archive": archive(data)})
    client.post(url("upload", started), {"archive": archive(data, "again.zip")})
    first, second = Submission.objects.order_by("pk")
    assert first.archive.name == second.archive.name
    assert len(list((media_root / "uploads").rglob("*.zip"))) == 1
    assert (first.is_latest, second.is_latest) == (False, True)
    assert GateReceipt.objects.filter(step="upload").count() == 2


@pytest.mark.parametrize("data, expected", [
    (b"%PDF-1.4 this is a pdf, not a zip", "This file is not a zip"),
    (b"PK", "This file is not a zip"),
    (b"PK\x05\x06" + b"\0" * 18, "This zip holds no files"),  # an empty zip holds nothing to grade
    (b"", "The file is empty"),
])
def test_bad_files_are_refused_clearly_and_store_nothing(client, started, media_root, data, expected):
    r = client.post(url("upload", started), {"archive": archive(data)})
    assert r.status_code == 200  # the form again, so htmx swaps it in
    assert expected in r.content.decode()
    assert_nothing_stored(started, media_root)


def test_a_missing_file_is_asked_for(client, started, media_root):
    r = client.post(url("upload", started), {"other": archive(honest_zip())})
    assert "Choose a zip file to upload" in r.content.decode()
    assert_nothing_stored(started, media_root)


def test_too_large_is_refused_while_streaming(client, started, media_root, settings):
    settings.UPLOAD_MAX_BYTES = 2000
    big = zip_bytes({"a.bin": __import__("os").urandom(6000)})
    r = client.post(url("upload", started), {"archive": archive(big)})
    assert "larger than the limit of 2.0 KB" in r.content.decode()
    assert_nothing_stored(started, media_root)


def test_too_large_is_refused_from_the_declared_length_before_reading(client, started, media_root, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    big = zip_bytes({"a.bin": __import__("os").urandom(100_000)})
    with patch("sessions_app.views.HashingUploadHandler.receive_data_chunk") as chunk:
        r = client.post(url("upload", started), {"archive": archive(big)}, headers=GATE)
    assert r.status_code == 413 and r.json()["code"] == "too_large"
    chunk.assert_not_called()
    assert_nothing_stored(started, media_root)


def test_htmx_gets_the_form_partial_back_with_the_error(client, started, media_root):
    r = client.post(url("upload", started), {"archive": archive(b"not a zip")}, headers={"HX-Request": "true"})
    html = r.content.decode()
    assert r.status_code == 200 and "<html" not in html
    assert html.strip().startswith('<section class="card" id="upload-form"')
    assert "This file is not a zip" in html


def test_htmx_success_redirects_the_whole_page(client, started, media_root):
    r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers={"HX-Request": "true"})
    assert r["HX-Redirect"] == url("submission-detail", started, pk=Submission.objects.get().pk)


def test_the_gate_uploads_without_csrf_and_gets_json(started, media_root):
    data = honest_zip()
    r = Client(enforce_csrf_checks=True).post(url("upload", started), {"archive": archive(data)}, headers=GATE)
    assert r.status_code == 201
    body = r.json()
    assert body["sha256"] == sha(data) and "graded shortly" in body["message"]
    assert Submission.objects.get().via == "gate"


def test_a_browser_post_without_csrf_is_refused_and_leaves_no_file(started, media_root):
    r = Client(enforce_csrf_checks=True).post(url("upload", started), {"archive": archive(honest_zip())})
    assert r.status_code == 403
    assert_nothing_stored(started, media_root)


def test_before_start_the_upload_is_refused(client, invitation, media_root):
    r = client.post(url("upload", invitation), {"archive": archive(honest_zip())}, headers=GATE)
    assert r.status_code == 403 and "Press Start" in r.json()["message"]
    assert_nothing_stored(invitation, media_root)


def test_within_the_grace_period_the_upload_is_accepted(client, started, media_root, settings):
    settings.UPLOAD_GRACE_S = 300
    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - timedelta(seconds=200))
    r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers=GATE)
    assert r.status_code == 201


def test_after_the_deadline_and_grace_the_upload_is_refused(client, started, media_root, settings):
    settings.UPLOAD_GRACE_S = 300
    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - timedelta(seconds=301))
    r = client.post(url("upload", started), {"archive": archive(honest_zip())})
    html = r.content.decode()
    assert r.status_code == 200 and "Time is up" in html
    assert_nothing_stored(started, media_root)
    r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers=GATE)
    assert r.status_code == 403 and "Time is up" in r.json()["message"]
    assert_nothing_stored(started, media_root)


def test_a_wrong_token_is_not_valid(client, started, media_root):
    r = client.post("/t/wrong/upload", {"archive": archive(honest_zip())})
    assert r.status_code == 404 and "This link is not valid" in r.content.decode()
    assert_nothing_stored(started, media_root)


def test_with_the_broker_down_the_upload_still_succeeds(
        client, started, media_root, django_capture_on_commit_callbacks):
    with patch("grading.tasks.grade_submission.apply_async", side_effect=OperationalError("down")), \
            django_capture_on_commit_callbacks(execute=True):
        r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers=GATE)
    assert r.status_code == 201 and "It will be graded shortly" in r.json()["message"]
    assert Submission.objects.get().status == Submission.Status.RECEIVED  # the sweep sends it later


def test_a_hostile_file_name_is_never_shown_back_unescaped(client, started, media_root):
    name = '<img src=x onerror=alert(1)>.zip'
    client.post(url("upload", started), {"archive": archive(honest_zip(), name)})
    submission = Submission.objects.get()
    for page in (url("landing", started), url("submission-detail", started, pk=submission.pk)):
        html = client.get(page).content.decode()
        assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;.zip" in html
