"""Workers that die mid-grading, with real `celery worker` processes, Redis and the sandbox.

A run's heartbeat stops when its worker dies: the sweep of another worker
sends the submission again; a submission whose worker dies at every attempt
stops after MAX_ATTEMPTS with the reason; an operator's regrade replaces the
evidence and keeps the reviews (and the reviewers the first grading assigned).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from conftest import Worker, _wait_for, require
from grading import lifecycle
from grading.models import Assignment, Evidence, GradingRun, Review
from grading.tasks import build_packet_runners, sweep_submissions
from grading.tests.reviewing import score
from sessions_app.actions import do_start_session
from sessions_app.models import Submission
from sessions_app.tests.conftest import url
from sessions_app.tests.helpers import honest_zip, runner_python, slow_zip
from shared import pytest_slots
from takehome.tests.factories import InvitationFactory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
WAIT_S = 90
ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


@pytest.fixture
def started(media_root, sample_packet):
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    return invitation


@pytest.fixture
def worker_env(worker_env):
    # why: the scripted candidates go from red to green in seconds, which is not what is tested here.
    return {**worker_env, "TAKEHOME_MIN_RED_TO_GREEN_S": "0"}


def upload(client, invitation, data: bytes) -> int:
    r = client.post(url("upload", invitation), {"archive": SimpleUploadedFile("w.zip", data)},
                    headers={"X-Takehome-Client": "gate"})
    assert r.status_code == 201, r.content
    return r.json()["submission"]


def wait_for_status(submission_id: int, statuses, worker: Worker, what: str) -> Submission:
    try:
        return _wait_for(lambda: Submission.objects.filter(pk=submission_id, status__in=statuses).first(),
                         WAIT_S, what, interval=0.05)
    except AssertionError:
        raise AssertionError(f"{what}; worker log:\n" + worker.output()[-6000:])


def outcomes(submission_id: int) -> list[str]:
    return list(GradingRun.objects.filter(submission_id=submission_id).order_by("attempt")
                .values_list("outcome", flat=True))


def test_a_run_whose_heartbeat_stopped_is_sent_again_by_the_sweep_of_another_worker(client, started, worker_env,
                                                                                     tmp_path, settings):
    env = {**worker_env, "TAKEHOME_GRADING_HEARTBEAT_S": "1", "TAKEHOME_GRADING_LOST_AFTER_S": "3"}
    settings.GRADING_HEARTBEAT_S, settings.GRADING_LOST_AFTER_S = 1, 3  # the sweep below runs here
    dying = Worker(env, tmp_path / "dying.log", name="dying")
    other = Worker(env, tmp_path / "other.log", name="other")
    dying.start()
    try:
        submission_id = upload(client, started, slow_zip())
        wait_for_status(submission_id, ["grading"], dying, "the worker to start grading")
        run = GradingRun.objects.get(submission_id=submission_id)
        # The worker's process notes it is alive while the candidate's tests run.
        _wait_for(lambda: GradingRun.objects.filter(pk=run.pk, heartbeat_at__gt=run.started_at).exists(), 30,
                  "a heartbeat")
        dying.kill()
        _wait_for(lambda: lifecycle.lost_runs().filter(pk=run.pk).exists(), 30, "the heartbeat to be 3 s old")
        other.start()  # its sweep at start, or the one below, finds the run lost
        assert sweep_submissions() in (0, 1)
        submission = wait_for_status(submission_id, Submission.FINISHED, other, "the submission to be graded")
        assert submission.status == "graded" and outcomes(submission_id) == ["lost", "graded"]
        lost, graded = GradingRun.objects.filter(submission_id=submission_id).order_by("attempt")
        assert lost.worker.startswith("dying@") and graded.worker.startswith("other@")
        assert Evidence.objects.filter(submission_id=submission_id).count() == 1
    finally:
        dying.kill()
        other.stop()


def test_a_submission_whose_worker_dies_at_every_attempt_stops_with_the_reason(client, started, worker_env,
                                                                               tmp_path):
    submission_id = upload(client, started, slow_zip())  # no worker yet: the message waits in Redis
    earlier = timezone.now() - timezone.timedelta(hours=1)
    for attempt in range(1, lifecycle.MAX_ATTEMPTS):  # the worker died during each attempt so far
        GradingRun.objects.create(submission_id=submission_id, attempt=attempt, worker="gone@host", outcome="lost",
                                  started_at=earlier, heartbeat_at=earlier, finished_at=earlier)
    first = Worker(worker_env, tmp_path / "worker-1.log")
    again = Worker(worker_env, tmp_path / "worker-2.log")
    first.start()
    try:
        wait_for_status(submission_id, ["grading"], first, "the last attempt to start")
        first.kill()
        again.start()
        submission = wait_for_status(submission_id, Submission.FINISHED, again, "the submission to be given up")
        assert submission.status == "error" and outcomes(submission_id) == ["lost"] * 5 + ["error"]
        reason = GradingRun.objects.get(submission_id=submission_id, attempt=lifecycle.MAX_ATTEMPTS).error
        assert f"gave up after {lifecycle.MAX_ATTEMPTS} attempts: the worker died during each of them" in reason
        assert not Evidence.objects.filter(submission_id=submission_id).exists()
    finally:
        first.kill()
        again.stop()


def taken(worker: Worker) -> list[str]:
    """The names of the grading tasks the worker took, in the order it took them."""
    return re.findall(r"Task grading\.tasks\.(\w+)\[\S+\] received", worker.output())


def test_a_grading_sent_after_the_environments_build_is_taken_before_it(client, started, worker_env, tmp_path):
    """A worker's start sends the build of the packets' environments, which may take minutes; a grading sent
    after it (the one the worker's death cut off, sent again by the sweep when the broker did not take the
    first send in time) must not wait for all of it."""
    build_packet_runners.delay()  # no worker yet: both messages wait in Redis, the build first
    submission_id = upload(client, started, honest_zip())
    worker = Worker(worker_env, tmp_path / "worker.log")
    worker.start()
    try:
        wait_for_status(submission_id, ["graded"], worker, "the submission to be graded")
        _wait_for(lambda: "build_packet_runners" in taken(worker), WAIT_S, "the build to be taken")
    finally:
        worker.stop()
    assert taken(worker).index("grade_submission") < taken(worker).index("build_packet_runners"), \
        worker.output()[-6000:]


def test_regrade_replaces_the_evidence_and_keeps_the_reviews(client, started, celery_worker_proc, reviewer):
    from django.core.management import call_command

    submission_id = upload(client, started, honest_zip())
    wait_for_status(submission_id, ["graded"], celery_worker_proc, "the submission to be graded")
    first = Evidence.objects.get(submission_id=submission_id).created_at
    # the worker assigned the packet's one reviewer as grading ended, in the same transaction
    assert list(Assignment.objects.filter(submission_id=submission_id).values_list("reviewer", flat=True)) == [
        reviewer.pk]
    score(Submission.objects.get(pk=submission_id), reviewer, ALL_PASS)

    call_command("regrade", str(submission_id))
    _wait_for(lambda: outcomes(submission_id) == ["graded", "graded"], WAIT_S, "the second grading")
    assert Submission.objects.get(pk=submission_id).status == "graded"
    assert Evidence.objects.get(submission_id=submission_id).created_at > first
    assert Review.objects.get(submission_id=submission_id).is_submitted
    assert Assignment.objects.filter(submission_id=submission_id).count() == 1  # graded again: nobody more


def sandbox_leftovers(pids: set[int]) -> list[Path]:
    """The cgroups and tmpfs mount folders named as owned by one of ``pids`` (see grading.engine.sandbox.cgroups.owned_name)."""
    found = []
    for parent in [*Path("/sys/fs/cgroup").glob("*/takehome"), Path("/sys/fs/cgroup/takehome"),
                   *Path("/dev/shm").glob("takehome-mounts-*")]:
        try:
            children = list(parent.iterdir())
        except OSError:
            continue
        found += [p for p in children if p.name.startswith("run-") and int(p.name.split("-")[2]) in pids]
    return found


@pytest.mark.parametrize("how", ["worker", "group", "killed"],
                         ids=["TERM to the worker", "TERM to its process group", "a pool process killed first"])
def test_a_worker_that_stops_leaves_no_cgroup_or_mount_of_its_warm_sandboxes(started, worker_env, tmp_path, how):
    # As `make run` stops it (supervisord's TERM to the worker alone; Ctrl-C's INT, which pool
    # processes ignore, is the same): its pool processes end their warm sandboxes, as they do on
    # TERM to the whole group. What a pool process killed outright left (its warm sandboxes'
    # cgroups and mounts), the worker removes once its pool has stopped. Before, each warm sandbox
    # left its folders behind until the next start.
    # why uids of its own: in the suite, warm pools of the tests' own process may hold every slot of
    # the shared range, and a warm sandbox only starts on a free uid (it never asks one back)
    worker = Worker({**worker_env, "TAKEHOME_SANDBOX_UID_BASE": str(pytest_slots.uids("worker_faults")),
                     "TAKEHOME_SANDBOX_SLOTS": "8"}, tmp_path / "worker.log")
    worker.start()
    try:
        pool = _wait_for(lambda: {int(p) for p in subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(worker.proc.pid)], capture_output=True, text=True).stdout.split()}
            & {int(p.name.split("-")[2]) for p in sandbox_leftovers(set(range(1 << 22)))}, WAIT_S,
            "the pool's warm sandboxes")
        assert sandbox_leftovers(pool)
        if how == "killed":
            for pid in pool:
                os.kill(pid, signal.SIGKILL)
            _wait_for(lambda: all(not Path(f"/proc/{pid}").exists() for pid in pool), 30, "the pool process's end")
        (os.killpg if how == "group" else os.kill)(worker.proc.pid, signal.SIGTERM)
        assert worker.proc.wait(60) == 0, worker.output()[-4000:]
    finally:
        worker.kill()
    assert sandbox_leftovers(pool) == [], worker.output()[-4000:]
    if how == "killed":
        # The worker looked once its pool had stopped. What it found is not this test's to say: any worker
        # on the machine removes what a dead process left (at its start, at each sweep), and in a parallel
        # suite another test's may come first; clean_stale's own tests show what it removes.
        said = ("removed what this worker's sandbox runs left: ", "this worker's sandbox runs left nothing to remove")
        assert any(line in worker.output().split("Warm shutdown", 1)[1] for line in said), worker.output()[-4000:]
    else:
        assert "left behind" not in worker.output().split("Warm shutdown", 1)[1]
