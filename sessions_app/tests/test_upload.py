"""POST /t/<token>/upload: real multipart requests, streamed to disk, stored by hash."""

import re
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
    # the refusal itself is kept, as a refused upload receipt, and nothing else
    assert set(GateReceipt.objects.values_list("step", "accepted")) <= {("upload", False)}
    assert Invitation.objects.get(pk=invitation.pk).submitted_at is None
    assert leftovers(media_root) == []
    assert not (media_root / "uploads").exists() or not [
        p for p in (media_root / "uploads").rglob("*.zip")]


def test_an_upload_is_stored_by_hash_with_a_receipt_and_queued_after_commit(
        client, started, media_root, django_capture_on_commit_callbacks):
    data = honest_zip()
    with patch("grading.tasks.enqueue_grading", return_value=True) as enqueue, \
            django_capture_on_commit_callbacks(execute=True):
        r = client.post(url("upload", started), {"archive": archive(data)})
    submission = Submission.objects.get()
    enqueue.assert_called_once_with(submission.pk, by=Submission.Sender.UPLOAD)
    assert r.status_code == 302 and r["Location"] == url("submission-detail", started, pk=submission.pk)
    assert submission.sha256 == sha(data) and submission.size == len(data)
    assert submission.archive.name == f"uploads/{sha(data)[:2]}/{sha(data)}.zip"
    assert (media_root / submission.archive.name).read_bytes() == data
    assert submission.is_latest and submission.via == "browser" and submission.original_name == "work.zip"
    receipt = GateReceipt.objects.get(step="upload")
    assert receipt.sha256 == submission.sha256 and receipt.received_at == submission.uploaded_at
    assert Invitation.objects.get(pk=started.pk).submitted_at == submission.uploaded_at
    assert leftovers(media_root) == []


def test_the_same_bytes_twice_reuse_the_file_and_the_newest_is_latest(client, started, media_root, settings):
    settings.UPLOAD_INTERVAL_S = 0  # two uploads in a row; the limits are tested below
    data = honest_zip()
    client.post(url("upload", started), {"archive": archive(data)})
    client.post(url("upload", started), {"archive": archive(data, "again.zip")})
    first, second = Submission.objects.order_by("pk")
    assert first.archive.name == second.archive.name
    assert len(list((media_root / "uploads").rglob("*.zip"))) == 1
    assert (first.is_latest, second.is_latest) == (False, True)
    assert GateReceipt.objects.filter(step="upload").count() == 2


@pytest.mark.parametrize("data, expected, code", [
    (b"%PDF-1.4 this is a pdf, not a zip", "This file is not a zip", "not_zip"),
    (b"PK", "This file is not a zip", "not_zip"),
    (b"PK\x05\x06" + b"\0" * 18, "This zip holds no files", "empty_zip"),  # an empty zip holds nothing to grade
    (b"", "The file is empty", "empty"),
])
def test_bad_files_are_refused_clearly_and_store_nothing(client, started, media_root, data, expected, code):
    r = client.post(url("upload", started), {"archive": archive(data)})
    assert r.status_code == 200  # the form again, so htmx swaps it in
    assert expected in r.content.decode()
    assert_nothing_stored(started, media_root)
    # the reason is kept as a code too, which the metrics count refusals by
    assert list(GateReceipt.objects.values_list("refusal_code", flat=True)) == [code]


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
    assert body["sha256"] == sha(data) and "It will be reviewed." in body["message"]
    assert (body["status"], body["refusal"]) == ("received", "")
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


def test_the_upload_calls_one_grading_action_and_grading_is_sent_only_once_it_commits(
        client, started, media_root, django_capture_on_commit_callbacks):
    from grading import lifecycle

    with patch("grading.lifecycle.request_grading", wraps=lifecycle.request_grading) as request, \
            patch("grading.tasks.enqueue_grading", return_value=True) as enqueue:
        with django_capture_on_commit_callbacks(execute=False) as on_commit:
            r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers=GATE)
        submission = Submission.objects.get()
        request.assert_called_once_with(submission)
        assert r.status_code == 201 and r.json()["status"] == "received"
        assert enqueue.call_count == 0  # not committed yet: nothing is sent
        for callback in on_commit:  # the commit
            callback()
        enqueue.assert_called_once_with(submission.pk, by=Submission.Sender.UPLOAD)


def test_an_upload_rolled_back_sends_nothing(client, started, media_root, django_capture_on_commit_callbacks):
    with patch("sessions_app.actions._store", side_effect=OSError(28, "No space left on device")), \
            patch("grading.tasks.enqueue_grading", return_value=True) as enqueue, \
            django_capture_on_commit_callbacks(execute=True) as on_commit:
        r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers=GATE)
    assert r.status_code == 503 and on_commit == [] and enqueue.call_count == 0
    assert not Submission.objects.exists()


def test_with_the_broker_down_the_upload_still_succeeds(
        client, started, media_root, django_capture_on_commit_callbacks):
    with patch("grading.tasks.grade_submission.apply_async", side_effect=OperationalError("down")), \
            django_capture_on_commit_callbacks(execute=True):
        r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers=GATE)
    assert r.status_code == 201 and "It will be reviewed." in r.json()["message"]
    assert Submission.objects.get().status == Submission.Status.RECEIVED  # the sweep sends it later


def test_a_hostile_file_name_is_never_shown_back_unescaped(client, started, media_root):
    name = '<img src=x onerror=alert(1)>.zip'
    client.post(url("upload", started), {"archive": archive(honest_zip(), name)})
    submission = Submission.objects.get()
    for page in (url("landing", started), url("submission-detail", started, pk=submission.pk)):
        html = client.get(page).content.decode()
        assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;.zip" in html


# --- a newer upload supersedes the ones still waiting --------------------------------------


def test_a_newer_upload_supersedes_older_ones_whose_grading_has_not_started(client, started, media_root, settings):
    settings.UPLOAD_INTERVAL_S = 0
    for name in ("one.zip", "two.zip"):
        client.post(url("upload", started), {"archive": archive(honest_zip(), name)}, headers=GATE)
    Submission.objects.filter(original_name="two.zip").update(status=Submission.Status.GRADING)
    client.post(url("upload", started), {"archive": archive(honest_zip(), "three.zip")}, headers=GATE)
    found = dict(Submission.objects.values_list("original_name", "status"))
    # "two" was already being graded: it finishes; "one" never started, so it is not graded.
    assert found == {"one.zip": "superseded", "two.zip": "grading", "three.zip": "received"}
    assert list(Submission.objects.latest_per_invitation().values_list("original_name", flat=True)) == ["three.zip"]


# --- per-invitation upload limits: 429 with a message a person can act on -------------------


def upload_as(client, invitation, how: str, data: bytes | None = None):
    """Post one upload as the browser form (plain or htmx) or as the gate."""
    headers = {"browser": {}, "htmx": {"HX-Request": "true"}, "gate": GATE}[how]
    return client.post(url("upload", invitation), {"archive": archive(data or honest_zip())}, headers=headers)


def message_of(response) -> str:
    if response["Content-Type"].startswith("application/json"):
        return response.json()["message"]
    return response.content.decode()


@pytest.mark.parametrize("how", ["browser", "htmx", "gate"])
def test_a_second_upload_within_the_interval_is_refused_with_429_and_retry_after(client, started, media_root,
                                                                                  settings, how):
    settings.UPLOAD_INTERVAL_S = 10
    assert upload_as(client, started, "gate").status_code == 201
    r = upload_as(client, started, how)
    assert r.status_code == 429
    assert 1 <= int(r["Retry-After"]) <= 10
    text = message_of(r)
    assert "one upload every 10 seconds" in text and f"Wait {r['Retry-After']} second" in text
    assert "Your earlier uploads are kept" in text
    assert Submission.objects.count() == 1 and GateReceipt.objects.filter(step="upload", accepted=True).count() == 1
    # kept in the reviewers' words: when it came, what the rule is, and that the candidate was told to wait
    kept, code = GateReceipt.objects.values_list("refusal", "refusal_code").get(step="upload", accepted=False)
    assert code == "too_soon"
    assert re.fullmatch(r"Too soon: sent (under 1|\d) s after the previous upload, where this link takes one every "
                        r"10 s; not stored, and the candidate was told to wait \d+ s and upload again\.", kept), kept
    assert leftovers(media_root) == []
    if how == "gate":
        assert r.json()["code"] == "too_soon"
    elif how == "htmx":
        assert "<html" not in text and text.strip().startswith('<section class="card" id="upload-form"')
        assert 'class="errors" id="upload-errors" role="alert"' in text
    else:
        assert "<html" in text and 'class="errors" id="upload-errors" role="alert"' in text

    # Once the interval has passed, the next upload is taken.
    Submission.objects.update(uploaded_at=timezone.now() - timedelta(seconds=11))
    assert upload_as(client, started, how).status_code in (201, 302, 200)
    assert Submission.objects.count() == 2


@pytest.mark.parametrize("how", ["browser", "htmx", "gate"])
def test_past_the_total_limit_uploads_are_refused_with_429_and_no_retry_after(client, started, media_root,
                                                                               settings, how):
    settings.UPLOAD_INTERVAL_S = 0
    settings.UPLOAD_MAX_COUNT = 2
    for _ in range(2):
        assert upload_as(client, started, "gate").status_code == 201
    r = upload_as(client, started, how)
    assert r.status_code == 429 and "Retry-After" not in r
    text = message_of(r)
    assert "This link has taken 2 uploads, the most it accepts" in text
    assert "write to the person who invited you" in text
    assert Submission.objects.count() == 2 and leftovers(media_root) == []


def test_refused_files_do_not_count_against_the_limits(client, started, media_root, settings):
    settings.UPLOAD_MAX_COUNT = 1
    assert "This file is not a zip" in upload_as(client, started, "browser", b"not a zip").content.decode()
    assert upload_as(client, started, "gate").status_code == 201


def test_limits_are_checked_again_under_the_lock(started, media_root, settings, tmp_path):
    # Two uploads that both passed the view's early check: the second must still be refused.
    from sessions_app import actions
    from sessions_app.uploads import IncomingArchive

    settings.UPLOAD_INTERVAL_S = 10

    def incoming(name: str) -> IncomingArchive:
        path = tmp_path / name
        data = honest_zip()
        path.write_bytes(data)
        return IncomingArchive(path=path, sha256=sha(data), size=len(data), original_name=name)

    actions.do_accept_upload(started, incoming("a.zip"))
    second = incoming("b.zip")
    with pytest.raises(actions.SessionRefused) as refused:
        actions.do_accept_upload(started, second)
    assert refused.value.code == "too_soon" and refused.value.retry_after is not None
    assert not second.path.exists() and Submission.objects.count() == 1


def test_zero_turns_the_limits_off(client, started, media_root, settings):
    settings.UPLOAD_INTERVAL_S = 0
    settings.UPLOAD_MAX_COUNT = 0
    for _ in range(3):
        assert upload_as(client, started, "gate").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_two_uploads_at_the_same_moment_cannot_both_pass_the_interval(started, media_root, settings, tmp_path):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from sessions_app import actions
    from sessions_app.uploads import IncomingArchive

    settings.UPLOAD_INTERVAL_S = 10
    barrier = threading.Barrier(2)

    def upload(name: str) -> str:
        path = tmp_path / name
        path.write_bytes(honest_zip(prefix=f"{name}/"))
        incoming = IncomingArchive(path=path, sha256=sha(path.read_bytes()), size=path.stat().st_size,
                                   original_name=name)
        barrier.wait()
        try:
            actions.do_accept_upload(started, incoming)
            return "stored"
        except actions.SessionRefused as exc:
            return exc.code
        finally:
            connection.close()

    with patch("grading.tasks.enqueue_grading", return_value=True), ThreadPoolExecutor(2) as pool:
        results = sorted(pool.map(upload, ["a", "b"]))
    assert results == ["stored", "too_soon"]
    assert Submission.objects.count() == 1 and Submission.objects.get().is_latest


def test_a_zip_that_cannot_be_unpacked_is_said_so_in_the_answer_itself(started, media_root, tmp_path):
    # why in the answer: the worker's verdict comes when the grading ahead of it ends, a time the
    # candidate's own code can stretch; this one comes from the bytes alone, as the upload arrives.
    from grading.tests.zips import make_zip

    data = make_zip(tmp_path / "link.zip", {"w/invoices.py": b"x = 1\n"}, symlinks={"w/link": "/etc/passwd"}).read_bytes()
    r = Client(enforce_csrf_checks=True).post(url("upload", started), {"archive": archive(data)}, headers=GATE)
    body = r.json()
    assert r.status_code == 201 and body["status"] == "rejected" and "symbolic link" in body["refusal"]
    assert "It cannot be graded: " + body["refusal"] in body["message"]
    submission = Submission.objects.get()
    assert submission.unpack_refusal == body["refusal"] and submission.status == Submission.Status.RECEIVED
    assert not any(p.name.startswith("check-") for p in (media_root / "uploads" / ".incoming").iterdir())


# --- in a bucket shared by several hosts (TAKEHOME_STORAGE=s3) ------------------------------------------------


def test_with_a_bucket_the_upload_goes_to_it_and_leaves_nothing_on_this_disk(client, started, media_root, s3_bucket,
                                                                            settings):
    from shared import stored

    settings.UPLOAD_INTERVAL_S = 0
    data = honest_zip()
    with patch("grading.tasks.enqueue_grading", return_value=True):
        r = client.post(url("upload", started), {"archive": archive(data)}, headers=GATE)
    assert r.status_code == 201, r.content
    submission = Submission.objects.get()
    assert stored.names(stored.UPLOADS) == [submission.archive.name] == [f"uploads/{sha(data)[:2]}/{sha(data)}.zip"]
    with stored.open(submission.archive.name) as handle:
        assert handle.read() == data
    assert [p for p in media_root.rglob("*") if p.is_file()] == []  # received here, stored there

    # the same bytes again: stored once
    with patch("grading.tasks.enqueue_grading", return_value=True):
        assert client.post(url("upload", started), {"archive": archive(data)}, headers=GATE).status_code == 201
    assert Submission.objects.count() == 2 and len(stored.names(stored.UPLOADS)) == 1


def test_with_a_bucket_that_does_not_answer_the_upload_is_503_and_nothing_is_kept(client, started, media_root,
                                                                                  s3_bucket, settings):
    from conftest import free_port
    from shared.stored import s3_storage

    settings.STORAGES = {**settings.STORAGES, "default": s3_storage(
        bucket=s3_bucket.name, endpoint_url=f"http://127.0.0.1:{free_port()}", access_key="k", secret_key="s")}
    settings.RETRY_AFTER_FAULT_S = 60
    with patch("grading.tasks.enqueue_grading", return_value=True) as enqueue:
        r = client.post(url("upload", started), {"archive": archive(honest_zip())}, headers=GATE)
    assert r.status_code == 503 and r["Retry-After"] == "60"
    assert r.json()["code"] == "unavailable" and r.json()["message"].startswith(
        "The server cannot save anything right now, so your upload was not stored. Try again in 60 seconds")
    assert enqueue.call_count == 0
    assert_nothing_stored(started, media_root)
