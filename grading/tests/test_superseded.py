"""Which upload is under review, and superseded uploads: the rules, through the real sandbox.

A refused upload (rejected, error) hands the review back to the latest
accepted one; an upload replaced before its grading starts is superseded and
never graded, unless the uploads that replaced it are all refused.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from unittest.mock import patch

import pytest
from django.utils import timezone

from grading import lifecycle, pipeline, tasks
from grading.models import Evidence, InvalidTransition
from sessions_app.models import Submission

from . import corpus
from .test_pipeline import submit
from .zips import make_zip

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("use_test_sandbox")]



def symlink_zip(path: Path) -> Path:
    """An honest tree plus one symbolic link: refused when unpacked."""
    return make_zip(path, corpus.honest_files(), symlinks={"notes-link": "/etc/passwd"})


def no_sandbox(*args, **kwargs):
    raise AssertionError("a superseded upload must not reach the sandbox")


def test_a_superseded_upload_is_not_graded(invitation, media_root, tmp_path, monkeypatch):
    older = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()),
                   status=Submission.Status.QUEUED, is_latest=False)
    assert lifecycle.supersede_waiting(invitation) == [older]
    monkeypatch.setattr(pipeline, "grade_archive", no_sandbox)
    assert pipeline.grade_submission(older.pk) == "superseded"
    assert tasks.grade_submission.apply(args=(older.pk,)).get() == "superseded"
    older.refresh_from_db()
    assert older.status == "superseded" and older.runs.count() == 0
    assert not Evidence.objects.exists()


def test_an_upload_being_graded_cannot_be_superseded(invitation, media_root, tmp_path):
    grading = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()),
                     status=Submission.Status.GRADING)
    assert lifecycle.supersede_waiting(invitation) == []
    # A stale copy of the row (read before a worker claimed it) loses the race too.
    stale = Submission.objects.get(pk=grading.pk)
    stale.status = Submission.Status.QUEUED
    with pytest.raises(InvalidTransition):
        lifecycle._move(stale, Submission.Status.SUPERSEDED, lifecycle.WAITING)
    assert Submission.objects.get(pk=grading.pk).status == "grading"


def test_when_the_newer_upload_is_refused_the_superseded_one_is_graded_after_all(
        invitation, media_root, tmp_path, django_capture_on_commit_callbacks):
    good = submit(invitation, corpus.zip_with_times(tmp_path / "good.zip", corpus.honest_files()),
                  status=Submission.Status.QUEUED, is_latest=False,
                  uploaded_at=timezone.now() - timedelta(seconds=30))
    lifecycle.supersede_waiting(invitation)
    bad = submit(invitation, symlink_zip(tmp_path / "bad.zip"), status=Submission.Status.QUEUED)

    with patch("grading.tasks.enqueue_grading", return_value=True) as enqueue, \
            django_capture_on_commit_callbacks(execute=True):
        assert pipeline.grade_submission(bad.pk) == "rejected"
    enqueue.assert_called_once_with(good.pk, by=Submission.Sender.REINSTATED)  # sent once the refusal was committed
    good.refresh_from_db()
    bad.refresh_from_db()
    assert (good.status, good.is_latest) == ("received", True)
    assert (bad.status, bad.is_latest) == ("rejected", False) and "symbolic link" in bad.reject_reason

    outcome = pipeline.grade_submission(good.pk)
    good.refresh_from_db()
    assert outcome == "graded", good.reject_reason
    assert Evidence.objects.get(submission=good).data["archive"]["accepted"] is True
    assert list(Submission.objects.latest_per_invitation().values_list("pk", flat=True)) == [good.pk]


def test_when_the_newer_upload_fails_on_our_side_the_superseded_one_is_graded_after_all(
        invitation, media_root, tmp_path, django_capture_on_commit_callbacks):
    path = corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files())
    good = submit(invitation, path, status=Submission.Status.QUEUED, is_latest=False,
                  uploaded_at=timezone.now() - timedelta(seconds=30))
    lifecycle.supersede_waiting(invitation)
    failing = submit(invitation, path, status=Submission.Status.GRADING)
    with patch("grading.tasks.enqueue_grading", return_value=True) as enqueue, \
            django_capture_on_commit_callbacks(execute=True):
        assert pipeline.record_failure(pipeline.claim(failing.pk), RuntimeError("disk full"), retry=False) is False
    enqueue.assert_called_once_with(good.pk, by=Submission.Sender.REINSTATED)
    good.refresh_from_db()
    assert (good.status, good.is_latest) == ("received", True)
    assert Submission.objects.get(pk=failing.pk).is_latest is False


def test_only_the_newest_superseded_upload_goes_back_and_a_lost_send_is_swept(
        invitation, media_root, tmp_path, django_capture_on_commit_callbacks):
    path = corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files())
    now = timezone.now()
    first, second = (submit(invitation, path, status=Submission.Status.QUEUED, is_latest=False,
                            uploaded_at=now - timedelta(seconds=s)) for s in (60, 30))
    lifecycle.supersede_waiting(invitation)
    bad = submit(invitation, symlink_zip(tmp_path / "bad.zip"), status=Submission.Status.GRADING)
    # The reinstated upload is sent after the commit; here that send never happens.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        lifecycle.finish_rejected(pipeline.claim(bad.pk), "The archive holds a symbolic link")
    assert len(callbacks) == 1
    assert Submission.objects.get(pk=first.pk).status == "superseded"
    reinstated = Submission.objects.get(pk=second.pk)
    assert (reinstated.status, reinstated.is_latest) == ("received", True)
    # The sweep sends a received upload once it is older than its threshold: nothing is left ungraded.
    assert not lifecycle.due_for_sending().exists()
    with patch("django.utils.timezone.now", return_value=now + timedelta(hours=1)):
        assert list(lifecycle.due_for_sending().values_list("pk", flat=True)) == [second.pk]


def test_a_refused_upload_after_a_graded_one_leaves_the_graded_one_under_review(invitation, media_root, tmp_path):
    good = submit(invitation, corpus.zip_with_times(tmp_path / "good.zip", corpus.honest_files()),
                  uploaded_at=timezone.now() - timedelta(minutes=5), is_latest=False)
    assert pipeline.grade_submission(good.pk) == "graded"
    bad = submit(invitation, symlink_zip(tmp_path / "bad.zip"))
    # Until it is unpacked, nothing is known against the newer upload: it is the one under review.
    assert list(Submission.objects.latest_per_invitation()) == [bad]
    assert pipeline.grade_submission(bad.pk) == "rejected"
    assert list(Submission.objects.latest_per_invitation()) == [good]
    assert Submission.objects.get(pk=good.pk).status == "graded"  # graded once, not again


def test_when_every_upload_is_refused_the_newest_stays_under_review(invitation, media_root, tmp_path):
    older = submit(invitation, symlink_zip(tmp_path / "a.zip"), uploaded_at=timezone.now() - timedelta(minutes=1),
                   is_latest=False)
    newer = submit(invitation, symlink_zip(tmp_path / "b.zip"))
    assert pipeline.grade_submission(older.pk) == "rejected"
    assert pipeline.grade_submission(newer.pk) == "rejected"
    assert list(Submission.objects.latest_per_invitation()) == [newer]
