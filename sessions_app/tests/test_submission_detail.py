"""GET /t/<token>/uploads/<pk>: the receipt page of one upload."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from grading.models import GradingRun
from sessions_app.models import Submission
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

from .conftest import url
from .helpers import honest_zip, sha

pytestmark = pytest.mark.django_db


@pytest.fixture
def submission(client, started, media_root):
    client.post(url("upload", started), {"archive": SimpleUploadedFile("w.zip", honest_zip())})
    return Submission.objects.get()


def test_the_receipt_shows_the_hash_and_the_servers_time(client, started, submission):
    r = client.get(url("submission-detail", started, pk=submission.pk))
    html = r.content.decode()
    assert r.status_code == 200
    # why the stored file's bytes: a zip built again a second later holds other entry times
    assert sha(Path(submission.archive.path).read_bytes()) in html
    assert submission.uploaded_at.strftime("%Y-%m-%d %H:%M:%S") in html
    assert "latest upload" in html


@pytest.mark.parametrize("status", ["queued", "grading", "graded", "superseded", "error", "rejected"])
def test_the_status_part_never_moves_with_grading(client, started, submission, status):
    # why: when the page changed would say how long grading took, which the candidate's code can stretch.
    page = url("submission-detail", started, pk=submission.pk)
    before = client.get(page, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in before and 'id="submission-status"' in before and "hx-trigger" not in before
    assert "received, will be reviewed" in before
    Submission.objects.filter(pk=submission.pk).update(status=status, reject_reason="the worker's words")
    assert client.get(page, headers={"HX-Request": "true"}).content.decode() == before


def test_another_candidates_token_cannot_see_the_upload(client, started, submission, sample_packet):
    other = InvitationFactory(packet_version=sample_packet.latest_version())
    r = client.get(url("submission-detail", other, pk=submission.pk))
    assert r.status_code == 404 and "This link is not valid" in r.content.decode()


def test_an_error_is_never_shown_to_the_candidate(client, started, submission):
    Submission.objects.filter(pk=submission.pk).update(status="error")
    GradingRun.objects.create(submission=submission, attempt=1, outcome="error", error="Traceback: /srv/secret")
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "/srv/secret" not in html and "received, will be reviewed" in html


def test_a_refused_upload_says_which_upload_reviewers_see_instead(client, started, submission):
    Submission.objects.filter(pk=submission.pk).update(status="graded")
    refused = Submission.objects.create(invitation=started, archive="uploads/b.zip", sha256="b" * 64, size=3,
                                        is_latest=False, status="rejected", reject_reason="symbolic link",
                                        unpack_refusal="symbolic link")
    note = client.get(url("submission-detail", started, pk=refused.pk)).content.decode()
    note = note.split('id="review-note"')[1].split("Check the hash")[0]
    assert "This upload was not accepted, so it does not replace your upload of" in note
    assert submission.uploaded_at.strftime("%Y-%m-%d %H:%M:%S") in note
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "This is your latest upload that could be unpacked: it is the one reviewers will see." in html


def test_a_refused_upload_says_so_in_its_heading_not_only_in_its_status(client, started, submission):
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "<h1>Upload received</h1>" in html and "refused" not in html.split("<h1>")[1].split("</p>")[0]
    Submission.objects.filter(pk=submission.pk).update(unpack_refusal="symbolic link")
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    head = html.split("<h1>")[1].split("</p>")[0]
    assert "Upload received, not accepted" in head and "This upload was refused" in head
    assert "<title>Upload not accepted" in html


def test_an_older_upload_says_a_newer_one_replaced_it_whatever_grading_did(client, started, submission):
    Submission.objects.create(invitation=started, archive="uploads/b.zip", sha256="b" * 64, size=3)
    Submission.objects.filter(pk=submission.pk).update(status="superseded", is_latest=False)
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "A newer upload replaced this one for review." in html
    assert "not graded" not in html and "hx-trigger" not in html


def test_the_upload_message_makes_no_promise_the_page_outlives(client, started, media_root):
    # The message is shown once and never updated: grading's state belongs to the polled part only.
    r = client.post(url("upload", started), {"archive": SimpleUploadedFile("w.zip", honest_zip())}, follow=True)
    flash = r.content.decode().split('<ul class="messages">')[1].split("</ul>")[0]
    assert "Upload received and stored" in flash and "graded" not in flash


@pytest.mark.parametrize("before, words", [(timedelta(seconds=90), "2 minutes after your deadline"),
                                           (timedelta(seconds=20), "1 minute after your deadline")])
def test_an_upload_inside_the_grace_period_tells_the_candidate_it_came_late(client, started, media_root, settings,
                                                                           before, words):
    settings.UPLOAD_GRACE_S = 300
    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - before)
    client.post(url("upload", started), {"archive": SimpleUploadedFile("w.zip", honest_zip())})
    submission = Submission.objects.get()
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    note = html.split('id="receipt-late"')[1].split("</p>")[0]
    assert words in note and "within the grace period" in note and "Reviewers see it marked late" in note
    started.refresh_from_db()
    assert started.deadline.strftime("%Y-%m-%d %H:%M:%S UTC") in note


def test_an_upload_before_the_deadline_says_nothing_of_lateness(client, started, submission):
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert 'id="receipt-late"' not in html and "grace period" not in html


def test_an_upload_a_newer_one_replaced_says_so_on_its_receipt_and_in_the_list(client, started, submission, settings):
    settings.UPLOAD_INTERVAL_S = 0
    client.post(url("upload", started), {"archive": SimpleUploadedFile("w2.zip", honest_zip(prefix="again/"))})
    newer = Submission.objects.exclude(pk=submission.pk).get()
    old_receipt = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "received, replaced by a newer upload" in old_receipt and "will be reviewed" not in old_receipt
    assert "received, will be reviewed" in client.get(url("submission-detail", started, pk=newer.pk)).content.decode()
    page = client.get(url("landing", started)).content.decode()
    rows = {pk: page.split(f'data-submission="{pk}"')[1].split("</tr>")[0] for pk in (submission.pk, newer.pk)}
    assert "replaced by a newer upload" in rows[submission.pk] and "will be reviewed" in rows[newer.pk]
