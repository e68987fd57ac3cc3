"""The grading lifecycle's rules: one module writes status, the sweep never doubles a pending message,
scratch folders of dead runs go, `manage.py regrade` and the admin for operators."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from unittest.mock import patch

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from conftest import ROOT, require
from grading import lifecycle
from grading.engine.sandbox import clean_stale_scratch
from grading.engine.sandbox.cgroups import owned_name, work_dir_for
from grading.models import GradingRun
from grading.tasks import sweep_submissions
from grading.tests.reviewing import make_submission
from sessions_app.models import Submission
from sessions_app.tests.conftest import url
from sessions_app.tests.helpers import honest_zip
from takehome.tests.writers import Watched, field_writes, writes_outside

# --- only grading/lifecycle.py writes the lifecycle's columns ----------------------------------------

SUBMISSION_FIELDS = {"status", "status_changed_at", "grading_sent_at", "grading_task_id", "grading_sent_by"}
RUN_FIELDS = {"outcome", "attempt", "worker", "pid", "heartbeat_at", "finished_at", "message_sent_at"}
# A packet's self-check (takehome.models.PacketCheck) has a status of its own: its model and the
# `check` variables that hold one are not a submission or a grading run.
GRADING = Watched(frozenset({"Submission", "GradingRun"}), frozenset(SUBMISSION_FIELDS | RUN_FIELDS),
                  others=frozenset({"PacketCheck", "check"}))
ALLOWED = {"grading/lifecycle.py": GRADING.fields, "grading/models.py": frozenset(RUN_FIELDS)}


def lifecycle_writes(source: str) -> set[str]:
    """The lifecycle fields a piece of source writes: in ORM writes, model constructors and attribute assignments."""
    return {name for _, name in field_writes(source, GRADING)}


@pytest.mark.parametrize("source, written", [
    ("Submission.objects.filter(pk=1).update(status='queued')", {"status"}),
    ("Submission.objects.create(invitation=i, status='graded', status_changed_at=now)", {"status", "status_changed_at"}),
    ("submission.status = 'error'", {"status"}),
    ("s.status, s.status_changed_at = wanted, now", {"status", "status_changed_at"}),
    ("submission.save(update_fields=['status'])", {"status"}),
    ("Submission(invitation=i, status='queued')", {"status"}),
    ("Submission.objects.update_or_create(pk=1, defaults={'grading_sent_at': now})", {"grading_sent_at"}),
    ("GradingRun.objects.filter(pk=1).update(heartbeat_at=now, outcome='lost')", {"heartbeat_at", "outcome"}),
    ("run.worker = 'w@host'", {"worker"}),
    ("class Submission:\n    def f(self):\n        self.status = 'x'", {"status"}),
    # Reads and look-alikes are not writes.
    ("Submission.objects.filter(status='queued', status_changed_at__lt=now)", set()),
    ("Submission.objects.exclude(status__in=REFUSED).filter(Q(status='error'))", set()),
    ("JsonResponse({'message': m}, status=409); render(request, 't.html', status=404)", set()),
    ("Submission.objects.values_list('status', flat=True).get(pk=1)", set()),
    ("Invitation.objects.filter(pk=1).update(submitted_at=now)", set()),
    ("if submission.status == 'error': pass", set()),
    # A packet's self-check is another model with a status of its own.
    ("PacketCheck.objects.filter(pk=1).update(status='queued', started_at=None)", set()),
    ("check.status, check.error = s, e; check.finished_at = now; check.save(update_fields=['status'])", set()),
    ("PacketCheck.objects.filter(pk=1).update(status='x'); Submission.objects.filter(pk=1).update(status='x')",
     {"status"}),
    ("class Problem(Exception):\n    def __init__(self, status):\n        self.status = status", set()),
])
def test_the_write_finder_tells_writes_from_reads(source, written):
    assert lifecycle_writes(source) == written


def test_only_grading_lifecycle_writes_the_submissions_status_and_runs():
    offenders = writes_outside(GRADING, ALLOWED)
    assert offenders == [], ("change status, attempts, worker, heartbeat and error only through "
                             "grading/lifecycle.py:\n" + "\n".join(offenders))


@pytest.mark.django_db
def test_the_candidate_side_asks_grading_for_one_thing_through_its_signal():
    """sessions_app imports nothing of grading's Django side (.importlinter): an upload sends
    sessions_app.signals.submission_stored, and the desk answers with request_grading alone (the API's
    webhooks listen too, and answer nothing: they act once the upload commits)."""
    from sessions_app.signals import submission_stored

    stored = object()
    with patch("grading.lifecycle.request_grading", return_value="requested") as request:
        answers = submission_stored.send(sender=Submission, submission=stored)
    request.assert_called_once_with(stored)
    assert [answer for _, answer in answers if answer is not None] == ["requested"]


# --- scratch folders of dead runs -------------------------------------------------------------------

MAKE_FOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from grading.engine.sandbox.cgroups import owned_name, work_dir_for
    folder = Path(sys.argv[2]) / owned_name(sys.argv[3])
    folder.mkdir()
    (folder / "tree.py").write_text("x = 1")
    print(folder.name, flush=True)
    time.sleep(float(sys.argv[4]))
""")


def folder_of_a_process(parent: Path, kind: str, linger: float) -> tuple[Path, subprocess.Popen]:
    """A scratch folder made by another process, named after it; that process lives ``linger`` seconds."""
    proc = subprocess.Popen([sys.executable, "-c", MAKE_FOLDER, str(ROOT), str(parent), kind, str(linger)],
                            stdout=subprocess.PIPE, text=True)
    return parent / proc.stdout.readline().strip(), proc


def test_scratch_folders_of_dead_processes_go_and_live_ones_stay(tmp_path):
    require(Path("/proc/self/stat").exists(), "needs /proc")
    runs = tmp_path / "runs"
    runs.mkdir()
    dead_grading, proc = folder_of_a_process(tmp_path, "grade", 0)
    dead_run, other = folder_of_a_process(runs, "sandbox", 0)
    proc.wait(10), other.wait(10)
    live, sleeper = folder_of_a_process(tmp_path, "grade", 60)
    mine = tmp_path / owned_name("grade")
    mine.mkdir()
    not_ours = tmp_path / "tests"
    not_ours.mkdir()
    try:
        removed = clean_stale_scratch(tmp_path)
        assert sorted(removed) == sorted([str(dead_grading), str(dead_run)])
        assert not dead_grading.exists() and not dead_run.exists()
        assert live.exists() and mine.exists() and not_ours.exists() and runs.exists()
    finally:
        sleeper.kill()
        sleeper.wait(10)
    assert clean_stale_scratch(tmp_path) == [str(live)]  # its process is gone now


def test_a_dead_gradings_upload_unpacked_in_memory_goes_too(tmp_path):
    require(Path("/proc/self/stat").exists(), "needs /proc")
    work = work_dir_for(tmp_path)
    require(str(work).startswith("/dev/shm/"), "needs /dev/shm as a tmpfs")
    try:
        dead_grading, proc = folder_of_a_process(work, "grade", 0)
        proc.wait(10)
        mine = work / owned_name("grade")
        mine.mkdir()
        assert clean_stale_scratch(tmp_path) == [str(dead_grading)]
        assert not dead_grading.exists() and mine.exists()
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- the sweep never doubles a pending message ---------------------------------------------------------


def redis_client(broker_url: str):
    import redis

    if broker_url.startswith("redis+socket://"):
        return redis.Redis(unix_socket_path=broker_url[len("redis+socket://"):])
    return redis.Redis.from_url(broker_url)


@pytest.fixture
def queue(broker_url):
    """How many grading messages wait in the broker; the test's own are taken out afterwards.

    why read Redis here: the test plays the broker's part (a message waiting, one lost); the sweep never reads it.
    """
    require(broker_url is not None, "redis-server is not installed (apt-get install redis-server)")
    client = redis_client(broker_url)
    before = client.llen("celery")
    yield lambda: client.llen("celery") - before
    for _ in range(max(0, client.llen("celery") - before)):
        client.lpop("celery")  # why the left end: kombu pushes there and workers take from the right


@pytest.fixture
def lose(broker_url, queue):
    """Take a submission's grading message out of Redis, as a restart without its file loses it."""
    client = redis_client(broker_url)

    def lose(submission: Submission) -> None:
        submission.refresh_from_db()
        raw = next(raw for raw in client.lrange("celery", 0, -1)
                   if json.loads(raw)["headers"]["id"] == submission.grading_task_id)
        assert client.lrem("celery", 1, raw) == 1

    return lose


def test_the_sweep_sends_nothing_while_a_message_is_pending(
        client, started, media_root, queue, django_capture_on_commit_callbacks):
    from django.core.files.uploadedfile import SimpleUploadedFile

    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(url("upload", started), {"archive": SimpleUploadedFile("w.zip", honest_zip())},
                        headers={"X-Takehome-Client": "gate"})
    assert r.status_code == 201 and queue() == 1
    submission = Submission.objects.get()
    assert submission.status == "queued" and submission.grading_sent_at is not None
    assert submission.grading_sent_by == "upload" and submission.grading_task_id != ""

    assert sweep_submissions() == 0 and queue() == 1  # pending: nothing more piles up, minute after minute
    assert sweep_submissions() == 0 and queue() == 1


@pytest.fixture
def backlog(sample_packet, queue, settings):
    """Three uploads of three candidates, each sent for grading once, in turn, with no worker to take them."""
    from grading.tasks import enqueue_grading

    settings.GRADING_STALE_QUEUED_S, settings.GRADING_LOST_AFTER_S = 600, 45
    rows = [make_submission(sample_packet, name=f"Cand {i}", status="received") for i in range(3)]
    assert all(enqueue_grading(row.pk, by=Submission.Sender.UPLOAD) for row in rows) and queue() == 3
    return rows


def sent_ago(rows, minutes: float) -> None:
    """Their messages were sent that long ago, a minute apart in the order of ``rows``."""
    now = timezone.now()
    for i, row in enumerate(rows):
        Submission.objects.filter(pk=row.pk).update(
            status_changed_at=now - timedelta(hours=2), grading_sent_at=now - timedelta(minutes=minutes - i))


def grading_elsewhere(sample_packet, outcome: str = "running", **ago: timedelta) -> GradingRun:
    """A worker's run of another upload, its times that long ago (started_at=timedelta(...), ...)."""
    other = make_submission(sample_packet, name="Someone Else", status="grading")
    now = timezone.now()
    return GradingRun.objects.create(submission=other, attempt=1, worker="busy@host", outcome=outcome,
                                     **{name: now - value for name, value in ago.items()})


def test_a_backlog_behind_a_busy_worker_is_not_sent_again_however_old(backlog, queue, sample_packet):
    # One worker behind a thousand uploads: it grades what is ahead of them, and they wait their turn.
    grading_elsewhere(sample_packet, started_at=timedelta(minutes=5), heartbeat_at=timedelta(seconds=5))
    sent_ago(backlog, minutes=11)
    assert sweep_submissions() == 0 and queue() == 3
    sent_ago(backlog, minutes=120)
    assert sweep_submissions() == 0 and queue() == 3


def test_the_moment_between_two_long_runs_of_a_backlog_is_not_idleness(backlog, queue, sample_packet):
    # The worker ended a run a moment ago and is taking the next message: the queue still moves.
    grading_elsewhere(sample_packet, outcome="graded", started_at=timedelta(minutes=11),
                      finished_at=timedelta(seconds=1))
    sent_ago(backlog, minutes=30)
    assert sweep_submissions() == 0 and queue() == 3


def test_a_lost_message_is_sent_again_once_past_the_threshold_and_not_within_it(backlog, queue, lose):
    lost = backlog[0]
    lose(lost)  # Redis lost it (a restart without its file); nothing else waits, and nothing has been graded since
    Submission.objects.filter(pk__in=[r.pk for r in backlog[1:]]).update(status="graded")
    old_id = lost.grading_task_id
    sent_ago([lost], minutes=9)
    assert sweep_submissions() == 0 and queue() == 2  # within TAKEHOME_STALE_QUEUED_S: it may still be on its way
    sent_ago([lost], minutes=11)
    assert sweep_submissions() == 1 and queue() == 3
    lost.refresh_from_db()
    assert lost.grading_task_id != old_id and lost.grading_sent_by == "sweep"
    assert sweep_submissions() == 0 and queue() == 3  # its new message restarted the clock


def start(submission: Submission, minutes_ago: float) -> GradingRun:
    """A worker took the submission's last message from the queue and started it, that long ago."""
    submission.refresh_from_db()
    run = lifecycle.start_run(submission.pk, task_id=submission.grading_task_id, worker="w1@host")
    GradingRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=minutes_ago),
                                                heartbeat_at=timezone.now())
    return run


def test_a_message_lost_while_workers_are_busy_is_sent_again_once_one_sent_after_it_started(
        backlog, queue, lose):
    first, second, third = backlog
    lose(first)
    sent_ago(backlog, minutes=5)  # a minute apart: first, second, third
    sent_second = Submission.objects.get(pk=second.pk).grading_sent_at
    run = start(second, minutes_ago=0.25)
    assert run.message_sent_at == sent_second  # the run keeps when its message was sent
    # Sent a minute before the one a worker started 15 s ago: it may be starting on another worker.
    assert sweep_submissions() == 0
    GradingRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=1))
    # The queue is first in, first out: second was taken, so first was too, and no worker started it.
    assert sweep_submissions() == 1 and queue() == 3  # first again; third waits its turn behind it
    assert Submission.objects.get(pk=first.pk).grading_sent_by == "sweep"
    assert Submission.objects.get(pk=third.pk).grading_sent_by == "upload"


def test_a_retry_waiting_out_its_countdown_is_not_overtaken(backlog, queue, settings):
    from shared.tasks import RETRY_LONGEST_S

    first, second, third = backlog
    Submission.objects.filter(pk=third.pk).update(status="graded")
    run = start(first, minutes_ago=6)
    assert lifecycle.retry_later(run, "the sandbox could not start")  # Celery's retry: held on a worker
    retried = Submission.objects.get(pk=first.pk)
    assert (retried.status, retried.grading_sent_by, retried.grading_task_id) == ("queued", "retry", run.task_id)
    assert GradingRun.objects.get(pk=run.pk).message_sent_at is not None  # its first message came through the queue
    sent_ago([first], minutes=5)
    sent_ago([second], minutes=3)
    start(second, minutes_ago=2)  # sent and started after the retry was sent
    assert lifecycle.queue_passed() > Submission.objects.get(pk=first.pk).grading_sent_at
    assert sweep_submissions() == 0 and queue() == 3

    # Idle for longer than the threshold, yet not sent before the longest countdown has passed.
    settings.GRADING_STALE_QUEUED_S = 60
    GradingRun.objects.update(outcome="graded", finished_at=timezone.now() - timedelta(minutes=30))
    for age in (RETRY_LONGEST_S - 30, RETRY_LONGEST_S + 30):
        Submission.objects.filter(pk=first.pk).update(grading_sent_at=timezone.now() - timedelta(seconds=age))
        assert list(lifecycle.due_for_sending()) == ([retried] if age > RETRY_LONGEST_S else [])


def test_a_run_from_a_retry_or_an_older_copy_says_nothing_of_the_queue(backlog):
    first, second, _ = backlog
    run = start(first, minutes_ago=1)
    lifecycle.retry_later(run, "the sandbox could not start")
    assert start(first, minutes_ago=0).message_sent_at is None  # the retry waited out its countdown on a worker
    old_copy = Submission.objects.get(pk=second.pk).grading_task_id
    Submission.objects.filter(pk=second.pk).update(grading_task_id="sent-again")
    assert lifecycle.start_run(second.pk, task_id=old_copy, worker="w1@host").message_sent_at is None


def test_a_send_the_broker_did_not_take_is_sent_again_at_the_next_sweep(sample_packet, queue):
    from grading.tasks import grade_submission
    from shared import publish

    # A stalled Redis ran the send after it had timed out: the upload reads received, and one message waits.
    submission = make_submission(sample_packet, status="received")
    assert publish.send(grade_submission, (submission.pk,), task_id="sent-late")
    lifecycle.message_not_taken(submission.pk, "sent-late", Submission.Sender.UPLOAD)
    assert list(lifecycle.due_for_sending()) == [submission]  # at once, not after TAKEHOME_STALE_RECEIVED_S
    assert sweep_submissions() == 1 and queue() == 2  # the copy is harmless: a finished upload is not graded again
    submission.refresh_from_db()
    assert (submission.status, submission.grading_sent_by) == ("queued", "sweep")
    assert sweep_submissions() == 0 and queue() == 2


def test_a_broker_that_is_down_costs_the_sweep_one_failed_send_not_one_per_upload(backlog, stoppable_broker,
                                                                                  settings, caplog):
    settings.BROKER_SEND_TIMEOUT_S = 0.5
    Submission.objects.filter(pk__in=[r.pk for r in backlog]).update(
        status="received", status_changed_at=timezone.now() - timedelta(hours=1), grading_sent_at=None)
    stoppable_broker.stop()
    with caplog.at_level("WARNING"):
        assert sweep_submissions() == 0
    assert caplog.text.count("the broker did not take grading.tasks.grade_submission") == 1
    tried = Submission.objects.get(pk=backlog[0].pk)
    assert (tried.grading_sent_at, tried.grading_sent_by) == (None, "sweep")  # the next pass sends it again


@pytest.fixture
def started(invitation):
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    return invitation


# --- manage.py regrade --------------------------------------------------------------------------------


def regrade(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("regrade", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def finished(sample_packet):
    """A graded, a rejected and an errored submission of three candidates, and a fourth one still queued."""
    rows = {status: make_submission(sample_packet, name=f"Cand {status}", status=status)
            for status in ("graded", "rejected", "error", "queued")}
    GradingRun.objects.create(submission=rows["error"], attempt=1, outcome="error", error="Traceback: disk full")
    return rows


def test_regrade_sends_the_named_submissions_and_says_what_it_did(finished, queue, django_capture_on_commit_callbacks):
    graded, waiting = finished["graded"], finished["queued"]
    with django_capture_on_commit_callbacks(execute=True):
        out = regrade(str(graded.pk), str(waiting.pk))
    assert out.splitlines() == [f"submission {graded.pk}: graded, sent for grading again",
                                f"submission {waiting.pk}: already queued, nothing sent",
                                "1 of 2 sent for grading again."]
    graded.refresh_from_db()
    assert graded.status == "queued" and graded.grading_sent_at is not None and queue() == 1
    assert graded.evidence is not None  # kept until the new run replaces it


def test_regrade_says_clearly_when_an_id_is_unknown(finished, queue, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(CommandError) as raised:
        regrade("999999", str(finished["error"].pk))
    assert "No submission with id 999999" in str(raised.value)
    assert Submission.objects.get(pk=finished["error"].pk).status == "queued"  # the known one was still sent


def test_regrade_dry_run_lists_and_sends_nothing(finished, queue):
    out = regrade("--errored", "--dry-run")
    assert out.splitlines() == [f"submission {finished['error'].pk}: error, would be sent for grading again",
                                "1 of 1 would be sent for grading again."]
    assert Submission.objects.get(pk=finished["error"].pk).status == "error" and queue() == 0


def test_regrade_a_packet_version_takes_its_latest_uploads(finished, sample_packet, queue,
                                                           django_capture_on_commit_callbacks):
    from grading.tests.reviewing import upload_again

    newer = upload_again(finished["graded"])
    with django_capture_on_commit_callbacks(execute=True):
        out = regrade("--packet", sample_packet.slug)
    assert f"submission {finished['graded'].pk}:" not in out  # no longer the latest of its candidate
    assert f"submission {newer.pk}: graded, sent for grading again" in out
    assert out.splitlines()[-1] == "3 of 4 sent for grading again."  # the queued one waits already
    assert queue() == 3


@pytest.mark.parametrize("args, words", [
    ((), "Say which submissions"),
    (("--packet", "no-such-packet"), "No packet with slug 'no-such-packet'"),
    (("--packet", "refund-sum", "--packet-version", "99"), "has no version 99"),
    (("--packet-version", "1"), "--packet-version goes with --packet"),
])
def test_regrade_refuses_what_it_cannot_do_with_the_reason(sample_packet, args, words):
    with pytest.raises(CommandError) as raised:
        regrade(*args)
    assert words in str(raised.value)


# --- the admin ------------------------------------------------------------------------------------------


@pytest.fixture
def operator(client, django_user_model):
    admin = django_user_model.objects.create_superuser("ops", password="pw-ops")
    client.force_login(admin)
    return client


def test_the_admin_lists_submissions_with_their_attempts_and_filters_by_status(operator, finished):
    page = operator.get("/admin/sessions_app/submission/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Cand error" in html and "Grade again" in html and "attempts" in html
    errors = operator.get("/admin/sessions_app/submission/?status__exact=error").content.decode()
    assert "Cand error" in errors and "Cand graded" not in errors


def test_the_admin_shows_each_run_with_its_error(operator, finished):
    page = operator.get(f"/admin/sessions_app/submission/{finished['error'].pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Traceback: disk full" in html and 'name="_save"' not in html  # read-only


def test_grade_again_from_the_admin(operator, finished, queue, django_capture_on_commit_callbacks):
    chosen = [finished["error"].pk, finished["queued"].pk]
    with django_capture_on_commit_callbacks(execute=True):
        r = operator.post("/admin/sessions_app/submission/",
                          {"action": "grade_again", "_selected_action": chosen}, follow=True)
    assert r.status_code == 200
    assert "1 of 2 sent for grading again" in r.content.decode()
    assert Submission.objects.get(pk=finished["error"].pk).status == "queued" and queue() == 1


# --- claiming a submission ---------------------------------------------------------------------------------


def test_a_run_of_this_worker_whose_process_is_gone_is_taken_over_at_once(finished):
    from grading import lifecycle

    waiting = finished["queued"]
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    run = lifecycle.start_run(waiting.pk, worker="w1@host", pid=dead_pid)  # its heartbeat is fresh
    assert lifecycle.start_run(waiting.pk, worker="w2@host", pid=os.getpid()) is None  # another worker: may be alive
    taken = lifecycle.start_run(waiting.pk, worker="w1@host", pid=os.getpid())  # its pool process was killed
    assert taken is not None and taken.attempt == 2
    run.refresh_from_db()
    assert run.outcome == "lost" and f"(pid {dead_pid}) died" in run.error


def test_a_heartbeat_no_shorter_than_the_lost_limit_is_refused_with_the_reason():
    from takehome.tests.test_settings import manage

    result = manage("check", DEBUG="true", TAKEHOME_GRADING_HEARTBEAT_S="60", TAKEHOME_GRADING_LOST_AFTER_S="30")
    assert result.returncode != 0
    assert "TAKEHOME_GRADING_HEARTBEAT_S=60 must be at least 1 and below TAKEHOME_GRADING_LOST_AFTER_S=30" in result.stderr
