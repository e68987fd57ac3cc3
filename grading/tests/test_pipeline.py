"""The pipeline: a stored submission graded through the real sandbox, its evidence saved."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files import File
from django.utils import timezone

from grading import pipeline, tasks
from grading.models import Evidence
from grading.sandbox import SandboxUnavailable
from sessions_app.models import GateReceipt, Submission

from . import corpus

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def use_test_sandbox(settings, runner_dir, scratch_dir):
    settings.GRADING_RUNNER_DIR = runner_dir
    settings.GRADING_SCRATCH_DIR = scratch_dir
    settings.GRADING_RUN_WALL_S = 30


def submit(invitation, path: Path, **fields) -> Submission:
    with path.open("rb") as fh:
        return Submission.objects.create(
            invitation=invitation, archive=File(fh, name="s.zip"), sha256="0" * 64,
            size=path.stat().st_size, **fields,
        )


def test_a_submission_is_graded_and_its_evidence_saved(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    assert pipeline.grade_submission(submission.pk) == "graded"
    submission.refresh_from_db()
    assert submission.status == "graded" and submission.attempts == 1
    evidence = Evidence.objects.get(submission=submission).data
    assert evidence["archive"]["accepted"] is True
    assert all(run["as_expected"] for run in evidence["runs"].values())


def test_grading_a_finished_submission_again_changes_nothing(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    pipeline.grade_submission(submission.pk)
    first = Evidence.objects.get().created_at
    assert pipeline.grade_submission(submission.pk) == "graded"
    assert Evidence.objects.get().created_at == first
    assert Submission.objects.get().attempts == 1


def test_a_submission_left_half_graded_is_graded_from_the_start(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()),
                        status=Submission.Status.GRADING)
    assert pipeline.grade_submission(submission.pk) == "graded"
    assert Evidence.objects.count() == 1


def test_a_refused_archive_is_rejected_with_its_reason(invitation, media_root, tmp_path):
    bad = tmp_path / "s.zip"
    bad.write_bytes(b"PK\x03\x04 truncated nonsense")
    submission = submit(invitation, bad)
    assert pipeline.grade_submission(submission.pk) == "rejected"
    submission.refresh_from_db()
    assert "damaged" in submission.reject_reason or "not a zip" in submission.reject_reason
    assert Evidence.objects.get().data["archive"]["accepted"] is False


def test_the_servers_receipts_are_folded_into_the_timeline(invitation, media_root, tmp_path):
    now = timezone.now()
    for minutes, step in ((-30, "red"), (-20, "model"), (-10, "green")):
        GateReceipt.objects.create(invitation=invitation, step=step, received_at=now + timedelta(minutes=minutes))
    GateReceipt.objects.create(invitation=invitation, step="green", accepted=False, refusal="still red")
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    pipeline.grade_submission(submission.pk)
    events = Evidence.objects.get().data["timeline"]["events"]
    receipt_events = [e for e in events if "receipt" in (e["source"] + e["name"]).lower()]
    assert len(receipt_events) == 3


def test_infrastructure_failures_are_retried_then_recorded(invitation, media_root, tmp_path, monkeypatch, settings):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))

    def broken(*args, **kwargs):
        raise SandboxUnavailable("bwrap is missing: install it with 'apt-get install bubblewrap'")

    monkeypatch.setattr(pipeline, "grade_archive", broken)
    with pytest.raises(Exception) as raised:  # Celery's Retry
        tasks.grade_submission.apply(args=(submission.pk,), throw=True)
    assert "Retry" in type(raised.value).__name__
    submission.refresh_from_db()
    assert submission.status == "queued"

    # Retries exhausted: the error is kept for operators.
    result = tasks.grade_submission.apply(args=(submission.pk,), retries=3)
    assert result.get() == "error"
    submission.refresh_from_db()
    assert submission.status == "error" and "apt-get install bubblewrap" in submission.error


def test_the_sweep_finds_work_left_behind(invitation, media_root, tmp_path, settings):
    path = corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files())
    old = timezone.now() - timedelta(hours=2)
    stuck = [submit(invitation, path, status=status, status_changed_at=old)
             for status in ("received", "queued", "grading")]
    fresh = submit(invitation, path, status="queued")
    done = submit(invitation, path, status="graded", status_changed_at=old)
    found = set(pipeline.stale_submissions().values_list("pk", flat=True))
    assert found == {s.pk for s in stuck}
    assert fresh.pk not in found and done.pk not in found


def test_a_fresh_machine_without_a_scratch_folder_grades(invitation, media_root, tmp_path, settings):
    settings.GRADING_SCRATCH_DIR = Path(settings.GRADING_SCRATCH_DIR) / f"fresh-{tmp_path.name}"
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    try:
        assert pipeline.grade_submission(submission.pk) == "graded"
    finally:
        import shutil

        shutil.rmtree(settings.GRADING_SCRATCH_DIR, ignore_errors=True)


NOISY_TEST = (b"import sys\n\ndef test_noise():\n"
              b"    sys.stdout.write('before\\x00after')\n"
              b"    assert False\n")


def test_nul_bytes_in_candidate_output_are_stored(invitation, media_root, tmp_path):
    # PostgreSQL's jsonb refuses "\u0000": a candidate must not be able to make storing fail.
    files = corpus.honest_files(**{"test_noise.py": NOISY_TEST, "artifacts/notes.md": b"a\x00b"})
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", files))
    assert pipeline.grade_submission(submission.pk) == "graded"
    data = Evidence.objects.get(submission=submission).data
    assert "before\ufffdafter" in data["runs"]["submitted"]["log"]
    assert data["texts"]["notes.md"] == "a\ufffdb"


def test_record_evidence_cleans_what_it_stores(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()),
                        status=Submission.Status.GRADING)
    from grading.core import empty_evidence

    evidence = empty_evidence("x")
    evidence["archive"].update(accepted=True, reason=None)
    evidence["texts"] = {"notes.md": "nul\x00 and \ud800 lone"}
    pipeline.record_evidence(submission, evidence, 1.0)
    assert Evidence.objects.get().data["texts"]["notes.md"] == "nul\ufffd and \ufffd lone"


def test_a_deleted_archive_is_an_error_at_once_not_a_retry_loop(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    Path(submission.archive.path).unlink()
    result = tasks.grade_submission.apply(args=(submission.pk,))
    assert result.get() == "error"
    submission.refresh_from_db()
    assert submission.status == "error" and "missing from storage" in submission.error
    assert submission.attempts == 0 and not Evidence.objects.exists()


def test_a_submission_that_never_finishes_grading_is_given_up(invitation, media_root, tmp_path):
    # Each attempt killed its worker: the sweep would start it again for ever.
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()),
                        status=Submission.Status.GRADING, attempts=pipeline.MAX_ATTEMPTS)
    assert pipeline.grade_submission(submission.pk) == "error"
    submission.refresh_from_db()
    assert submission.status == "error" and f"after {pipeline.MAX_ATTEMPTS} attempts" in submission.error


def test_a_second_worker_finishing_later_leaves_the_first_evidence(invitation, media_root, tmp_path):
    # Two workers graded the same submission (a redelivered message): the first to finish wins,
    # the second's evidence is rolled back with its refused status change.
    from sessions_app.models import InvalidTransition

    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    late = Submission.objects.get(pk=submission.pk)
    late.mark_grading()
    assert pipeline.grade_submission(submission.pk) == "graded"
    first = Evidence.objects.get().data
    other = {**first, "texts": {"notes.md": "from the second worker"}}
    with pytest.raises(InvalidTransition):
        pipeline.record_evidence(late, other, 1.0)
    assert Evidence.objects.get().data == first
    assert Submission.objects.get().status == "graded"
