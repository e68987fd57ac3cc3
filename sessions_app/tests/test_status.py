"""GET /t/<token>/status: what the server witnessed and the time left, as JSON."""

import pytest

from grading.models import GradingRun
from sessions_app.models import GateReceipt, Submission

from .conftest import url

pytestmark = pytest.mark.django_db


def test_status_before_start(client, invitation):
    data = client.get(url("status", invitation)).json()
    assert data["phase"] == "not_started" and data["seconds_left"] is None
    assert data["receipts"] == [] and data["submissions"] == []


def test_status_lists_receipts_uploads_and_time_left(client, started):
    GateReceipt.objects.create(invitation=started, step="red", local_time="t")
    retried = Submission.objects.create(invitation=started, archive="uploads/aa/a.zip", sha256="a" * 64, size=3)
    GradingRun.objects.create(submission=retried, attempt=1, outcome="retried",
                              error="Traceback: secret operator detail")
    r = client.get(url("status", started))
    data = r.json()
    assert r["Content-Type"] == "application/json"
    assert data["phase"] == "running" and 89 * 60 < data["seconds_left"] <= 90 * 60
    assert [x["step"] for x in data["receipts"]] == ["red"]
    assert data["submissions"][0]["status"] == "received"
    assert "secret operator detail" not in r.content.decode()


def test_status_with_a_bad_token(client):
    r = client.get("/t/nope/status")
    assert r.status_code == 404 and r.json()["message"] == "This link is not valid."


def test_status_marks_the_upload_reviewers_see_and_why_one_was_refused(client, started):
    from datetime import timedelta

    from django.utils import timezone

    good = Submission.objects.create(invitation=started, archive="uploads/g.zip", sha256="a" * 64, size=3,
                                     status="graded", uploaded_at=timezone.now() - timedelta(minutes=5))
    Submission.objects.create(invitation=started, archive="uploads/b.zip", sha256="b" * 64, size=3, is_latest=False,
                              status="rejected", reject_reason="The archive holds a symbolic link (x).",
                              unpack_refusal="The archive holds a symbolic link (x).")
    newest, oldest = client.get(url("status", started)).json()["submissions"]
    assert (newest["reviewed"], newest["refusal"]) == (False, "The archive holds a symbolic link (x).")
    assert (oldest["id"], oldest["reviewed"], oldest["refusal"]) == (good.pk, True, "")


@pytest.mark.parametrize("status", ["queued", "grading", "graded", "superseded", "error", "rejected"])
def test_status_says_received_whatever_grading_did_and_whenever(client, started, status):
    # why: the moment the answer changed would tell how long the hidden tests took with the candidate's code.
    upload = Submission.objects.create(invitation=started, archive="uploads/a.zip", sha256="a" * 64, size=3)
    before = client.get(url("status", started)).json()
    Submission.objects.filter(pk=upload.pk).update(status=status, reject_reason="the worker's words",
                                                   is_latest=status not in Submission.REFUSED)
    after = client.get(url("status", started)).json()
    assert after["submissions"] == before["submissions"]
    assert after["submissions"][0]["status"] == "received" and after["submissions"][0]["reviewed"]


def test_when_no_upload_was_accepted_none_is_marked_reviewed(client, started, media_root, tmp_path):
    # why: reviewers see only that the refused upload was refused; "reviewed" on it told the candidate otherwise
    from grading.tests.zips import make_zip

    data = make_zip(tmp_path / "link.zip", {"w/invoices.py": b"x = 1\n"}, symlinks={"w/link": "/etc/passwd"}).read_bytes()
    gate = {"X-Takehome-Client": "gate", "Accept": "application/json"}
    assert client.post(url("upload", started), {"archive": _zip(data)}, headers=gate).status_code == 201
    (only,) = client.get(url("status", started)).json()["submissions"]
    assert only["status"] == "rejected" and "symbolic link" in only["refusal"]
    assert (only["reviewed"], only["is_latest"]) == (False, False)
    page = client.get(url("landing", started)).content.decode()
    assert "None of your uploads has been accepted" in page and ">for review</span>" not in page


def _zip(data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("work.zip", data, content_type="application/zip")
