"""The candidate's whole path with a real server, a real worker, Redis and the sandbox.

Each test runs the downloaded gate.py (or Chromium) as a candidate would, and
waits for the submission to be graded by a `celery worker` subprocess, with
the server's gate receipts in its evidence timeline. Two tests break things
on the way: the worker is SIGKILLed mid-grading (and restarted), the broker is
stopped during an upload; nothing is lost.
"""

from __future__ import annotations

import base64
import io
import re
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conftest import Worker, _wait_for, screenshot, within_hang_guard
from grading.engine.sandbox.cgroups import owner_gone, work_dir_for
from grading.models import Evidence, GradingRun
from grading.tasks import sweep_submissions
from sessions_app.actions import do_start_session
from sessions_app.models import Submission
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

from .conftest import url
from .helpers import (
    apply_fix,
    do_honest_work,
    download_tree,
    honest_zip,
    receipts_jsonl,
    received_long_ago,
    run_gate,
    slow_zip,
    write_refusal,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
GRADING_WAIT_S = 90


@pytest.fixture
def worker_env(worker_env):
    # why: these candidates are scripts that go from red to green in about two seconds, which the
    # grader names as too fast for a person (TAKEHOME_MIN_RED_TO_GREEN_S); the path is what is tested here.
    return {**worker_env, "TAKEHOME_MIN_RED_TO_GREEN_S": "0"}


@pytest.fixture
def candidate(ready, live_server, settings, sample_packet):
    settings.SITE_URL = live_server.url  # the personalised gate talks to this server
    return InvitationFactory(packet_version=sample_packet.latest_version())


def work_through_the_gate(tree: Path) -> None:
    """red, prompt, model, fix with a test named for refunds, green, refuse.md: an honest candidate."""
    for step, before in (("red", None), ("model", do_honest_work), ("green", apply_fix)):
        if before:
            before(tree)
        result = run_gate(tree, step)
        assert result.returncode == 0, f"gate.py {step}: {result.stdout}{result.stderr}"
        assert "Witnessed by the server" in result.stdout
    write_refusal(tree)


def wait_graded(submission_id: int, worker: Worker, timeout: float = GRADING_WAIT_S) -> Submission:
    try:
        return _wait_for(
            lambda: Submission.objects.filter(pk=submission_id, status__in=Submission.FINISHED).first(),
            timeout, f"submission {submission_id} to be graded", interval=0.25)
    except AssertionError:
        raise AssertionError("worker log:\n" + worker.output()[-6000:])


def assert_graded_with_receipts(submission: Submission, steps=("red", "model", "green", "upload"),
                                problems=()) -> dict:
    assert submission.status == Submission.Status.GRADED, submission.reject_reason or last_run(submission.pk).error
    evidence = Evidence.objects.get(submission=submission).data
    names = [e["name"] for e in evidence["timeline"]["events"] if e["source"] == "server receipt"]
    assert names == [f"receipt: {s}" for s in steps]
    found = evidence["timeline"]["problems"]
    assert len(found) == len(problems) and all(p.startswith(w) for p, w in zip(found, problems)), found
    assert evidence["red_log"]["genuine"], evidence["red_log"]
    return evidence


def zip_folder(tree: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(tree.rglob("*")):
            parts = path.relative_to(tree).parts
            if path.is_file() and not {"__pycache__", ".pytest_cache"} & set(parts):
                zf.write(path, f"{tree.name}/{path.relative_to(tree).as_posix()}")
    return buffer.getvalue()


def test_gate_py_from_red_to_submit_is_graded_with_its_receipts(candidate, client, live_server, celery_worker_proc,
                                                                tmp_path):
    assert client.post(url("start", candidate), {"confirm": "yes"}).status_code == 302
    tree = download_tree(live_server.url, candidate.raw_token, tmp_path)
    work_through_the_gate(tree)

    result = run_gate(tree, "submit")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "It will be reviewed." in result.stdout
    submission = Submission.objects.get(invitation=candidate)
    assert submission.via == "gate" and submission.sha256 in result.stdout

    evidence = assert_graded_with_receipts(wait_graded(submission.pk, celery_worker_proc))
    kept = evidence["archive"]["kept"]
    assert "artifacts/receipts.jsonl" in kept and "invoices.py" in kept
    assert "gate.py" not in kept  # it holds the link; the diff should show only the candidate's work
    assert not [k for k in kept if "__pycache__" in k or ".pytest_cache" in k]
    assert all(run["as_expected"] for run in evidence["runs"].values()), evidence["runs"]
    assert [x["witnessed"] for x in receipts_jsonl(tree)] == [True, True, True]
    status = run_gate(tree, "status")
    assert "received  (reviewed)" in status.stdout and "graded" not in status.stdout  # see test_grading_unseen


@pytest.mark.browser
def test_browser_upload_is_graded_and_the_page_says_only_received(candidate, live_server, celery_worker_proc, page,
                                                              tmp_path):
    page.goto(f"{live_server.url}{url('landing', candidate)}")
    page.get_by_role("heading", name="Refunds in the invoice total").wait_for()
    page.click("#start-button")
    page.locator("#deadline-if-now").wait_for()  # the question first, with the deadline it will set
    assert Invitation.objects.get(pk=candidate.pk).started_at is None
    page.click("#confirm-start")
    page.locator("#countdown").wait_for()
    assert "min" in page.locator("#countdown").inner_text()
    screenshot(page, "candidate-landing")

    tree = download_tree(live_server.url, candidate.raw_token, tmp_path / "dl")
    work_through_the_gate(tree)
    archive = tmp_path / "my-work.zip"
    archive.write_bytes(zip_folder(tree))

    # Drag and drop, as a candidate drops the zip on the page.
    dropped = page.evaluate_handle(
        """(b64) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], "my-work.zip", {type: "application/zip"}));
            return transfer;
        }""", base64.b64encode(archive.read_bytes()).decode())
    page.dispatch_event("#dropzone", "drop", {"dataTransfer": dropped})
    assert "my-work.zip" in page.locator("#chosen").inner_text()
    page.click("#upload-button")
    page.locator("#receipt-sha256").wait_for()
    submission = Submission.objects.get(invitation=candidate)
    assert page.locator("#receipt-sha256").inner_text() == submission.sha256
    wait_graded(submission.pk, celery_worker_proc)
    page.reload()
    assert page.locator("#submission-status").inner_text() == "received, will be reviewed"
    page.goto(f"{live_server.url}{url('landing', candidate)}")
    assert "received, will be reviewed" in page.locator("#upload-list").inner_text()
    screenshot(page, "candidate-uploaded")
    assert_graded_with_receipts(Submission.objects.get(pk=submission.pk))


def last_run(submission_id: int) -> GradingRun:
    return GradingRun.objects.filter(submission_id=submission_id).order_by("-attempt").first()


def test_a_worker_killed_while_grading_is_graded_again_at_its_restart(ready, client, worker_env, tmp_path,
                                                                     sample_packet, settings):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    # why so long: only the restarted worker itself may take the run back, at once, not the sweep.
    env = {**worker_env, "TAKEHOME_GRADING_LOST_AFTER_S": "3600"}
    first = Worker(env, tmp_path / "worker-1.log")
    again = Worker(env, tmp_path / "worker-2.log")  # the same name: the process manager restarting it
    first.start()
    try:
        r = client.post(url("upload", invitation), {"archive": SimpleUploadedFile("w.zip", slow_zip())},
                        headers={"X-Takehome-Client": "gate"})
        assert r.status_code == 201
        submission_id = r.json()["submission"]
        try:
            _wait_for(lambda: Submission.objects.filter(pk=submission_id, status="grading").exists(), 60,
                      "the worker to start grading", interval=0.05)
        except AssertionError:
            raise AssertionError("worker log:\n" + first.output()[-6000:])
        killed = last_run(submission_id)
        # the unpacked upload lives in the work folder: a tmpfs where /dev/shm has room, else scratch
        scratch = Path(settings.GRADING_SCRATCH_DIR)
        folders = (scratch, work_dir_for(scratch, make=False))
        left = _wait_for(lambda: [p for f in folders for p in f.glob(f"grade-*-{killed.pid}-*")], 30,
                         "the grading's unpacked upload")
        first.kill()  # SIGKILL to the whole process group, mid-run
        # why: the killed pool process may still be ending when the restarted worker looks (its folder is then
        # rightly kept); a restart by a process manager comes later than this test's
        _wait_for(lambda: owner_gone(left[0].name), 30, "the killed pool process's end")
        assert Submission.objects.get(pk=submission_id).status == "grading"
        again.start()  # finds its own run still marked running: sends it again at once
        submission = wait_graded(submission_id, again)
        assert submission.status == "graded"
        assert list(submission.runs.values_list("outcome", flat=True)) == ["lost", "graded"]
        lost = submission.runs.get(attempt=1)
        assert lost.worker == killed.worker and "died during this attempt" in lost.error
        assert Evidence.objects.filter(submission=submission).count() == 1
        assert not [p for p in left if p.exists()], "the killed run's scratch folder is still there"
    finally:
        first.kill()
        again.stop()


def test_an_upload_while_the_broker_is_down_is_graded_once_it_is_back(ready, client, worker_env, tmp_path,
                                                                      sample_packet, stoppable_broker):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    worker = Worker({**worker_env, "TAKEHOME_STALE_RECEIVED_S": "1"}, tmp_path / "worker.log")
    worker.start()
    try:
        stoppable_broker.stop()
        # An upload that hangs on the dead broker must fail this test, not hang it. The
        # guard is not a measurement (a loaded machine is slow, not wrong): the send's own bound is
        # TAKEHOME_BROKER_SEND_TIMEOUT_S (grading/tests/test_publish.py), and the answer comes with the
        # broker still down, so nothing of it waited for the broker to come back.
        r = within_hang_guard(client.post, url("upload", invitation),
                              {"archive": SimpleUploadedFile("w.zip", honest_zip())},
                              headers={"X-Takehome-Client": "gate"})
        assert r.status_code == 201 and "It will be reviewed." in r.json()["message"]
        submission_id = r.json()["submission"]
        assert Submission.objects.get(pk=submission_id).status == "received"

        stoppable_broker.start()
        received_long_ago(submission_id)
        sweep_submissions.delay()  # what beat sends every minute
        submission = wait_graded(submission_id, worker)
        # Uploaded without ever running the gate: the evidence says so.
        assert_graded_with_receipts(submission, steps=("upload",), problems=(
            "server receipts: the server witnessed no gate step (no red, model or green receipt)",))
        assert list(submission.runs.values_list("outcome", flat=True)) == ["graded"], "graded once"
    finally:
        worker.stop()


def symlink_zip(tmp_path: Path) -> bytes:
    """Honest work, plus a symbolic link: the worker refuses it when unpacking."""
    from grading.tests.zips import make_zip

    with zipfile.ZipFile(io.BytesIO(honest_zip())) as zf:
        files = {info.filename: zf.read(info) for info in zf.infolist()}
    return make_zip(tmp_path / "with-link.zip", files, symlinks={"refund-sum/link": "/etc/passwd"}).read_bytes()


def post_zip(client, invitation, data: bytes, name: str = "w.zip") -> int:
    r = client.post(url("upload", invitation), {"archive": SimpleUploadedFile(name, data)},
                    headers={"X-Takehome-Client": "gate"})
    assert r.status_code == 201, r.content
    return r.json()["submission"]


def queue_ids(reviewer_client) -> list[int]:
    import re

    html = reviewer_client.get("/review/?show=all").content.decode()
    return [int(x) for x in re.findall(r'data-submission="(\d+)"', html)]


def test_a_refused_upload_after_a_graded_one_leaves_the_graded_one_under_review(
        ready, client, reviewer, sample_packet, celery_worker_proc, tmp_path, settings):
    from django.test import Client

    settings.UPLOAD_INTERVAL_S = 0
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    desk = Client()
    desk.force_login(reviewer)

    good = wait_graded(post_zip(client, invitation, honest_zip()), celery_worker_proc)
    assert good.status == "graded" and queue_ids(desk) == [good.pk]
    bad = wait_graded(post_zip(client, invitation, symlink_zip(tmp_path)), celery_worker_proc)
    assert bad.status == "rejected" and "symbolic link" in bad.reject_reason

    assert queue_ids(desk) == [good.pk]
    page = desk.get(f"/review/{good.pk}/").content.decode()
    history = page.split('id="upload-history"')[1].split("</section>")[0]
    assert page.index('id="upload-history"') < page.index('data-section="red-log"')
    assert "refused: The archive holds a symbolic link (refund-sum/link)" in history
    assert "The archive was refused" not in page and 'data-section="diff"' in page
    good.refresh_from_db()
    assert list(good.runs.values_list("outcome", flat=True)) == ["graded"] and good.is_latest  # graded once, under review again
    landing = re.sub(r"<[^>]+>", "", client.get(url("landing", invitation)).content.decode())  # words only
    assert f"Reviewers will see your upload received at {good.uploaded_at:%H:%M:%S}" in landing
    assert "was not accepted, so it does not replace it" in landing


def test_superseded_uploads_are_not_graded_unless_the_newer_one_is_refused(
        ready, client, worker_env, sample_packet, tmp_path, settings):
    settings.UPLOAD_INTERVAL_S = 0
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    # Three uploads in a row before any worker runs: the first two are superseded at once.
    first = post_zip(client, invitation, honest_zip(), "first.zip")
    second = post_zip(client, invitation, honest_zip("second/"), "second.zip")
    refused = post_zip(client, invitation, symlink_zip(tmp_path), "third.zip")
    assert dict(Submission.objects.values_list("pk", "status")) == {
        first: "superseded", second: "superseded", refused: "queued"}

    worker = Worker(worker_env, tmp_path / "worker.log")
    worker.start()
    try:
        # The third is refused, so the second is the latest accepted work: the worker grades it after all.
        assert wait_graded(refused, worker).status == "rejected"
        assert wait_graded(second, worker).status == "graded"
    finally:
        worker.stop()
    kept = Submission.objects.get(pk=first)
    assert kept.status == "superseded" and kept.runs.count() == 0  # never reached the sandbox
    assert not Evidence.objects.filter(submission_id=first).exists()
    assert list(Submission.objects.latest_per_invitation().values_list("pk", flat=True)) == [second]
