"""The pipeline: a stored submission graded through the real sandbox, its evidence saved."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from pathlib import Path
from unittest.mock import patch

import pytest
from django.core.files import File
from django.utils import timezone

from grading import lifecycle, pipeline, tasks
from grading.engine.core import grade_archive
from grading.engine.sandbox import SandboxUnavailable
from grading.models import Evidence, GradingRun, InvalidTransition
from sessions_app.models import GateReceipt, ModelExchange, Submission

from . import corpus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("use_test_sandbox")]



def submit(invitation, path: Path, **fields) -> Submission:
    # why named by content, as the upload view names them: the storage replaces a file of the same name
    # whole, so two different zips under one name would be one
    name = f"{hashlib.sha256(path.read_bytes()).hexdigest()}.zip"  # under the field's uploads/
    with path.open("rb") as fh:
        return Submission.objects.create(
            invitation=invitation, archive=File(fh, name=name), sha256="0" * 64,
            size=path.stat().st_size, **fields,
        )


def last_error(submission) -> str:
    """What operators read: the error on the submission's last run."""
    return submission.runs.order_by("-attempt").first().error


def test_a_submission_is_graded_once_and_its_evidence_saved(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    assert pipeline.grade_submission(submission.pk, task_id="t-1", worker="w1@host") == "graded"
    submission.refresh_from_db()
    assert submission.status == "graded"
    run = submission.runs.get()
    assert (run.attempt, run.outcome, run.task_id, run.worker) == (1, "graded", "t-1", "w1@host")
    assert run.pid == os.getpid() and run.finished_at >= run.started_at and run.error == ""
    evidence = Evidence.objects.get(submission=submission).data
    assert evidence["archive"]["accepted"] is True
    assert all(run["as_expected"] for run in evidence["runs"].values())

    # Graded again once finished (a message delivered twice): nothing changes, no second run.
    first = Evidence.objects.get().created_at
    assert pipeline.grade_submission(submission.pk) == "graded"
    assert Evidence.objects.get().created_at == first
    assert Submission.objects.get().runs.count() == 1


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
    timeline = Evidence.objects.get().data["timeline"]
    receipt_events = [e["name"] for e in timeline["events"] if e["source"] == "server receipt"]
    # The refused step is on the timeline too, named as such, and listed with its reason.
    assert receipt_events == ["receipt: red", "receipt: model", "receipt: green", "receipt: green (refused)"]
    assert [(r["step"], r["accepted"], r["refusal"]) for r in timeline["receipts"]] == [
        ("red", True, None), ("model", True, None), ("green", True, None), ("green", False, "still red")]


def test_the_model_windows_exchanges_up_to_the_upload_reach_the_evidence(invitation, media_root, tmp_path,
                                                                         settings):
    settings.MODEL_URL, settings.MODEL_NAME = "http://127.0.0.1:8650/v1", "qwen"
    files = corpus.honest_files()
    t0 = corpus.T0
    ModelExchange.objects.create(invitation=invitation, at=t0 + timedelta(minutes=3), model="qwen",
                                 messages=[{"role": "user", "content": files["artifacts/prompt.txt"].decode()}],
                                 reply="Something else entirely.", tokens_in=40, tokens_out=5, latency_s=42.5)
    ModelExchange.objects.create(invitation=invitation, at=t0 + timedelta(minutes=20), reply="after the upload")
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", files),
                        uploaded_at=t0 + timedelta(minutes=10))
    assert pipeline.grade_submission(submission.pk) == "graded"
    model = Evidence.objects.get().data["model"]
    assert (model["policy"], model["configured"]) == ("provided", True)
    assert [(e["reply"], e["latency_s"], e["tokens_in"]) for e in model["exchanges"]] == [
        ("Something else entirely.", 42.5, 40)]
    assert model["prompt_matches"]["result"] == "matches"
    assert model["reply_matches"]["result"] == "differs" and "+" in model["reply_matches"]["diff"]


def test_a_refused_archive_keeps_the_model_windows_record(invitation, media_root, tmp_path):
    ModelExchange.objects.create(invitation=invitation, reply="Use Decimal.")
    bad = tmp_path / "s.zip"
    bad.write_bytes(b"PK\x03\x04 truncated nonsense")
    assert pipeline.grade_submission(submit(invitation, bad).pk) == "rejected"
    model = Evidence.objects.get().data["model"]
    assert model["policy"] == "own" and model["configured"] is False
    assert [e["reply"] for e in model["exchanges"]] == ["Use Decimal."]


def sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_every_receipt_up_to_the_upload_reaches_the_evidence(invitation, media_root, tmp_path, settings):
    """What gate.py sends (log, hashes, clock) for an honest run, a refusal, and the invitation's deadline."""
    from grading.engine.spec import sample_spec

    settings.GRADING_MIN_RED_TO_GREEN_S = 60
    spec = sample_spec()
    files = corpus.honest_files()
    t0 = corpus.T0  # the honest zip's own times: red.log at +1 min, the stamp at +3, green.log at +7
    invitation.started_at, invitation.deadline = t0, t0 + timedelta(minutes=90)
    invitation.save()
    at_red = {**spec.fixture, "artifacts/red.log": files["artifacts/red.log"]}
    steps = [
        ("red", 1, files["artifacts/red.log"].decode(), at_red, True, ""),
        ("model", 2, "", at_red, False, "Write artifacts/prompt.txt first."),
        ("model", 3, files["artifacts/prompt.txt"].decode(), at_red, True, ""),
        ("green", 7, files["artifacts/green.log"].decode(), files, True, ""),
    ]
    for step, minutes, log, tree, accepted, refusal in steps:
        at = t0 + timedelta(minutes=minutes)
        GateReceipt.objects.create(invitation=invitation, step=step, received_at=at, accepted=accepted,
                                   refusal=refusal, log_text=log, local_time=at.isoformat(),
                                   tree_hashes={p: sha(d) for p, d in tree.items()})
    later = GateReceipt.objects.create(invitation=invitation, step="red", received_at=t0 + timedelta(minutes=20))
    files["artifacts/receipts.jsonl"] = b'{"local_time": "x", "step": "red", "why": "--offline", "witnessed": false}\n'
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", files),
                        uploaded_at=t0 + timedelta(minutes=10))
    assert pipeline.grade_submission(submission.pk) == "graded"
    timeline = Evidence.objects.get().data["timeline"]
    assert timeline["receipts_known"] is True
    assert timeline["deadline"] == invitation.deadline.isoformat() and timeline["min_red_to_green_s"] == 60
    rows = timeline["receipts"]
    assert [(r["step"], r["accepted"]) for r in rows] == [("red", True), ("model", False), ("model", True),
                                                        ("green", True)]
    assert later.pk not in [r["id"] for r in rows]  # after the upload: not this upload's story
    assert {c["text"] for c in rows[0]["checks"]} == {"its log is artifacts/red.log",
                                                      "it ran on the packet's original invoices.py (the bug)"}
    assert rows[3]["checks"] == [{"ok": True, "text": "the uploaded files are the ones it hashed"}]
    assert timeline["problems"] == [] and timeline["ok"] is True
    assert any("refused the 'model' step once" in n for n in timeline["notes"])
    assert [(line["step"], line["witnessed"], line["why"]) for line in timeline["gate_log"]] == [
        ("red", False, "--offline")]


def test_three_plain_posts_no_longer_look_like_the_ideal(invitation, media_root, tmp_path):
    now = timezone.now()
    invitation.started_at, invitation.deadline = now - timedelta(hours=2), now - timedelta(hours=1)
    invitation.save()
    made_up = {"invoices.py": "0" * 64, "test_invoices.py": "1" * 64}
    red_log = corpus.red_log().decode()
    for i, (step, log) in enumerate((("red", red_log), ("model", "x"), ("green", "1 passed in 0.01s"))):
        GateReceipt.objects.create(invitation=invitation, step=step, log_text=log, tree_hashes=made_up,
                                   received_at=now - timedelta(minutes=10) + timedelta(milliseconds=100 * i))
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()), uploaded_at=now)
    pipeline.grade_submission(submission.pk)
    timeline = Evidence.objects.get().data["timeline"]
    assert timeline["ok"] is False
    problems = "\n".join(timeline["problems"])
    for words in ("red to green took 0.2 s", "hashed invoices.py differently from the packet's original",
                  "files changed after the green receipt", "after the deadline"):
        assert words in problems


def test_infrastructure_failures_are_retried_then_recorded(invitation, media_root, tmp_path, monkeypatch, settings):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))

    def broken(*args, **kwargs):
        raise SandboxUnavailable("bwrap is missing: install it with 'apt-get install bubblewrap'")

    monkeypatch.setattr(pipeline, "grade_archive", broken)
    with pytest.raises(Exception) as raised:  # Celery's Retry
        tasks.grade_submission.apply(args=(submission.pk,), throw=True)
    assert "Retry" in type(raised.value).__name__
    submission.refresh_from_db()
    assert submission.status == "queued" and submission.grading_sent_at is not None  # the retry is pending
    assert list(submission.runs.values_list("outcome", flat=True)) == ["retried"]
    # Celery's retry keeps the task's id, and waits out its countdown on a worker: the sweep gives it that long.
    assert submission.grading_task_id == submission.runs.get().task_id != ""
    assert submission.grading_sent_by == Submission.Sender.RETRY

    # Retries exhausted: the error is kept for operators.
    result = tasks.grade_submission.apply(args=(submission.pk,), retries=3)
    assert result.get() == "error"
    submission.refresh_from_db()
    assert submission.status == "error" and "apt-get install bubblewrap" in last_error(submission)
    assert list(submission.runs.values_list("outcome", flat=True)) == ["retried", "error"]


def test_the_sweep_sends_only_what_has_no_message_pending(invitation, media_root, tmp_path, settings):
    path = corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files())
    now = timezone.now()
    old = now - timedelta(hours=2)
    never_sent = submit(invitation, path, status="received", status_changed_at=old)
    presumed_lost = submit(invitation, path, status="queued", status_changed_at=old, grading_sent_at=old)
    # Queued long ago, but its message was sent again a minute ago: it is still pending.
    pending = submit(invitation, path, status="queued", status_changed_at=old,
                     grading_sent_at=now - timedelta(minutes=1))
    just_received = submit(invitation, path, status="received")
    done = submit(invitation, path, status="graded", status_changed_at=old)
    found = set(lifecycle.due_for_sending().values_list("pk", flat=True))
    assert found == {never_sent.pk, presumed_lost.pk}
    assert not {pending.pk, just_received.pk, done.pk} & found


def test_a_sent_message_restarts_the_clock(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()),
                        status="queued", status_changed_at=timezone.now() - timedelta(hours=2),
                        grading_sent_at=timezone.now() - timedelta(hours=2))
    assert list(lifecycle.due_for_sending()) == [submission]
    lifecycle.message_sent(submission.pk, "sent-again", Submission.Sender.SWEEP)
    assert not lifecycle.due_for_sending().exists()
    submission.refresh_from_db()
    assert submission.status == "queued" and submission.status_changed_at < timezone.now() - timedelta(hours=1)


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
    from grading.engine.core import empty_evidence

    evidence = empty_evidence("x")
    evidence["archive"].update(accepted=True, reason=None)
    evidence["texts"] = {"notes.md": "nul\x00 and \ud800 lone"}
    pipeline.record_evidence(pipeline.claim(submission.pk), evidence, 1.0)
    assert Evidence.objects.get().data["texts"]["notes.md"] == "nul\ufffd and \ufffd lone"


def test_a_deleted_archive_is_an_error_at_once_not_a_retry_loop(invitation, media_root, tmp_path):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    Path(submission.archive.path).unlink()
    result = tasks.grade_submission.apply(args=(submission.pk,))
    assert result.get() == "error"
    submission.refresh_from_db()
    assert submission.status == "error" and "missing from storage" in last_error(submission)
    assert submission.runs.count() == 1 and not Evidence.objects.exists()  # one attempt, no retry loop


def test_from_a_bucket_the_worker_grades_a_copy_in_its_own_scratch_and_removes_it(invitation, s3_bucket, tmp_path,
                                                                                   settings, monkeypatch):
    from shared import stored

    settings.GRADING_SCRATCH_DIR = Path(settings.GRADING_SCRATCH_DIR) / "bucket-copies"
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    assert stored.names(stored.UPLOADS) == [submission.archive.name]  # in the bucket, not on this disk
    given = []

    def spy(archive, *args, **kwargs):
        given.append((archive, archive.read_bytes()))
        return grade_archive(archive, *args, **kwargs)

    monkeypatch.setattr(pipeline, "grade_archive", spy)
    assert pipeline.grade_submission(submission.pk) == "graded"
    [(copy, data)] = given
    assert copy.is_relative_to(settings.GRADING_SCRATCH_DIR) and data == (tmp_path / "s.zip").read_bytes()
    assert not copy.exists() and not copy.parent.exists()


def test_an_archive_missing_from_the_bucket_is_an_error_at_once(invitation, s3_bucket, tmp_path):
    from shared import stored

    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    stored.delete(submission.archive.name)
    assert tasks.grade_submission.apply(args=(submission.pk,)).get() == "error"
    submission.refresh_from_db()
    assert f"missing from storage ({submission.archive.name})" in last_error(submission) and not Evidence.objects.exists()


def lose(run: GradingRun, minutes: int = 10) -> None:
    """The run's worker died: its heartbeat stopped ``minutes`` ago."""
    GradingRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=minutes))


def test_a_run_whose_heartbeat_stopped_is_lost_and_sent_again(invitation, media_root, tmp_path, settings,
                                                               django_capture_on_commit_callbacks):
    settings.GRADING_LOST_AFTER_S = 45
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    dead = pipeline.claim(submission.pk, "t-1", "w1@host")
    assert not lifecycle.lost_runs().exists()  # its heartbeat is fresh: a live worker is never taken over
    assert pipeline.claim(submission.pk, "t-2", "w2@host") is None
    lose(dead)
    with patch("grading.tasks.grade_submission.apply_async") as send, \
            django_capture_on_commit_callbacks(execute=True):
        assert lifecycle.recover_lost(lifecycle.lost_runs()) == 1
    (sent,) = send.call_args_list
    assert sent.args == ((submission.pk,),) and sent.kwargs["retry"] is False
    dead.refresh_from_db()
    assert dead.outcome == "lost" and "w1@host" in dead.error and "no heartbeat since" in dead.error
    submission.refresh_from_db()
    assert submission.status == "queued" and submission.grading_sent_at is not None
    assert not lifecycle.due_for_sending().exists()  # its new message is pending
    assert pipeline.grade_submission(submission.pk) == "graded"
    assert list(submission.runs.values_list("outcome", flat=True)) == ["lost", "graded"]


@pytest.mark.django_db(transaction=True)  # why: resume_own_runs closes the connections, as in a worker
def test_a_restarted_worker_sends_its_cut_off_grading_before_the_environments_build(invitation, media_root,
                                                                                      tmp_path):
    """A pool of one takes tasks in the order sent: the grading the worker's death cut off goes first, not
    after a build of the packets' environments that may take a minute or more."""
    from types import SimpleNamespace
    from unittest.mock import MagicMock

    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    pipeline.claim(submission.pk, "t-1", "w1@host")  # then the worker died
    sent = MagicMock()
    with patch("grading.tasks.grade_submission.apply_async", sent.grade), \
            patch("grading.tasks.build_packet_runners.delay", sent.build), \
            patch("grading.tasks.record_heartbeat.delay"), patch("grading.tasks.sweep_submissions.delay"), \
            patch("grading.tasks.ensure_runner"), patch("grading.tasks.pipeline.clean_stale_runs"):
        tasks.prepare_worker(sender=SimpleNamespace(hostname="w1@host"))
    assert [name for name, _, _ in sent.mock_calls] == ["grade", "build"]
    assert sent.grade.call_args.args == ((submission.pk,),)


def test_a_submission_that_kills_its_worker_every_time_is_given_up_with_the_reason(
        invitation, media_root, tmp_path, django_capture_on_commit_callbacks):
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    for attempt in range(1, lifecycle.MAX_ATTEMPTS + 1):
        run = pipeline.claim(submission.pk, f"t-{attempt}", "w1@host")
        assert run is not None and run.attempt == attempt
        lose(run)
        with patch("grading.tasks.grade_submission.apply_async"), django_capture_on_commit_callbacks(execute=True):
            lifecycle.recover_lost(lifecycle.lost_runs())
    submission.refresh_from_db()
    assert submission.status == "error" and submission.runs.count() == lifecycle.MAX_ATTEMPTS
    reason = last_error(submission)
    assert f"gave up after {lifecycle.MAX_ATTEMPTS} attempts: the worker died during each of them" in reason
    assert pipeline.claim(submission.pk) is None  # a late message changes nothing


def test_a_worker_finishing_after_its_run_was_taken_back_leaves_the_new_evidence(invitation, media_root, tmp_path):
    # The first worker stalled so long its run was presumed lost; a second one graded the submission.
    # When the first finishes after all, its evidence is rolled back with its refused ending.
    submission = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    slow = pipeline.claim(submission.pk, "t-1", "w1@host")
    lose(slow)
    assert pipeline.grade_submission(submission.pk, "t-2", "w2@host") == "graded"
    first = Evidence.objects.get().data
    other = {**first, "texts": {"notes.md": "from the slow worker"}}
    with pytest.raises(InvalidTransition):
        pipeline.record_evidence(slow, other, 1.0)
    assert Evidence.objects.get().data == first
    assert Submission.objects.get().status == "graded"
    assert list(submission.runs.values_list("outcome", flat=True)) == ["lost", "graded"]


def test_an_offline_candidate_on_windows_is_graded_without_a_problem(invitation, media_root, tmp_path):
    # Windows PowerShell 5.1's Compress-Archive (backslashes, DOS times) from a candidate whose gate never
    # reached the server: receipts.jsonl says so, line by line.
    from grading.tests import zips

    offline = b"".join(b'{"local_time": "2026-11-30T10:0%d:00+01:00", "step": "%s", "why": "--offline", '
                       b'"witnessed": false}\r\n' % (i, step) for i, step in enumerate((b"red", b"model", b"green")))
    files = corpus.honest_files(**{"artifacts/receipts.jsonl": offline})
    archive = zips.powershell_zip(tmp_path / "s.zip", files, corpus.T0.replace(tzinfo=None))
    submission = submit(invitation, archive, uploaded_at=corpus.T0 + timedelta(minutes=10))
    assert pipeline.grade_submission(submission.pk) == "graded"
    evidence = Evidence.objects.get().data
    assert evidence["archive"]["stripped_prefix"] == "project" and "artifacts/red.log" in evidence["archive"]["kept"]
    timeline = evidence["timeline"]
    assert timeline["problems"] == [] and timeline["ok"] is True
    assert [line["witnessed"] for line in timeline["gate_log"]] == [False, False, False]
    assert timeline["notes"] == ["The server witnessed no gate step; artifacts/receipts.jsonl records steps the gate "
                                 "ran without it (red: --offline; model: --offline; green: --offline). The order "
                                 "rests on the zip's times and the stamp alone."]


def test_what_dead_runs_left_is_said_in_one_counted_line():
    from grading.pipeline import leftovers_summary

    removed = ["/sys/fs/cgroup/memory/takehome/run-1-2-3-aa", "/sys/fs/cgroup/pids/takehome/run-1-2-3-aa",
               "/dev/shm/takehome-mounts-0123/run-1-2-3-aa", "/work/var/scratch/grade-1-2-3-bb"]
    assert leftovers_summary(removed) == "2 cgroups, 1 tmpfs mount folder and 1 scratch folder"
    assert leftovers_summary(removed[:1]) == "1 cgroup"
    assert leftovers_summary(removed[2:3] * 6) == "6 tmpfs mount folders"
