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


def test_the_status_partial_polls_until_graded(client, started, submission):
    r = client.get(url("submission-detail", started, pk=submission.pk), headers={"HX-Request": "true"})
    html = r.content.decode()
    assert "<html" not in html and 'id="submission-status"' in html and "every 2s" in html
    Submission.objects.filter(pk=submission.pk).update(status="graded")
    html = client.get(url("submission-detail", started, pk=submission.pk), headers={"HX-Request": "true"}).content.decode()
    assert "graded" in html and "hx-trigger" not in html


def test_another_candidates_token_cannot_see_the_upload(client, started, submission, sample_packet):
    other = InvitationFactory(packet_version=sample_packet.latest_version())
    r = client.get(url("submission-detail", other, pk=submission.pk))
    assert r.status_code == 404 and "This link is not valid" in r.content.decode()


def test_an_error_is_never_shown_to_the_candidate(client, started, submission):
    Submission.objects.filter(pk=submission.pk).update(status="error")
    GradingRun.objects.create(submission=submission, attempt=1, outcome="error", error="Traceback: /srv/secret")
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "/srv/secret" not in html and "problem on our side" in html


def test_a_refused_upload_says_which_upload_reviewers_see_instead(client, started, submission):
    Submission.objects.filter(pk=submission.pk).update(status="graded")
    refused = Submission.objects.create(invitation=started, archive="uploads/b.zip", sha256="b" * 64, size=3,
                                        is_latest=False, status="rejected", reject_reason="symbolic link")
    note = client.get(url("submission-detail", started, pk=refused.pk)).content.decode()
    note = note.split('id="review-note"')[1].split("Check the hash")[0]
    assert "This upload was not accepted, so it does not replace your upload of" in note
    assert submission.uploaded_at.strftime("%Y-%m-%d %H:%M:%S") in note
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "This is your latest accepted upload: it is the one reviewed." in html


def test_a_refused_upload_says_so_in_its_heading_not_only_in_its_status(client, started, submission):
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "<h1>Upload received</h1>" in html and "refused" not in html.split("<h1>")[1].split("</p>")[0]
    Submission.objects.filter(pk=submission.pk).update(status="rejected", reject_reason="symbolic link")
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    head = html.split("<h1>")[1].split("</p>")[0]
    assert "Upload received, not accepted" in head and "This upload was refused" in head
    assert "<title>Upload not accepted" in html


def test_a_superseded_upload_says_it_was_not_graded(client, started, submission):
    Submission.objects.filter(pk=submission.pk).update(status="superseded", is_latest=False)
    html = client.get(url("submission-detail", started, pk=submission.pk)).content.decode()
    assert "A newer upload arrived before this one was graded, so it was not graded" in html
    assert "replaced" in html and "hx-trigger" not in html  # finished: no polling


def test_the_polled_part_carries_the_note_so_it_follows_grading(client, started, submission):
    page = url("submission-detail", started, pk=submission.pk)
    html = client.get(page, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in html and 'id="grading-state"' in html
    assert "reviewers will see it once it is graded" in html
    Submission.objects.filter(pk=submission.pk).update(status="graded")
    html = client.get(page, headers={"HX-Request": "true"}).content.decode()
    assert "This is your latest accepted upload: it is the one reviewed." in html
    assert "once it is graded" not in html and "hx-trigger" not in html


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
