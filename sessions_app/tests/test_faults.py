"""Uploads under faults, through a live server and real multipart requests.

A database that is busy past its timeout or refuses writes, and a disk that
is full (under the uploads, or under the SQLite database itself), answer 503
with Retry-After in the form the client reads, and leave nothing half-stored:
no submission, no receipt, no file. A broker that stalls
never holds the answer. Forty candidates uploading at once while a real worker
grades are all stored, the busy answers retried as a client would.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.db import connection, connections

from conftest import HANG_GUARD_S, Worker, _wait_for, require
from grading.models import Evidence, GradingRun
from grading.tasks import sweep_submissions
from sessions_app.actions import do_open_invitation, do_start_session, stored_name
from sessions_app.models import GateReceipt, Submission
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

from .conftest import url
from .helpers import honest_zip, received_long_ago, sha, zip_bytes

pytestmark = pytest.mark.django_db(transaction=True)
GRADING_WAIT_S = 120


@dataclass
class Answer:
    status: int
    headers: dict
    text: str

    def json(self) -> dict:
        return json.loads(self.text)


def post_upload(base_url: str, invitation, data: bytes, timeout: float = 60) -> Answer:
    """POST a zip to the upload endpoint as gate.py does: multipart, the gate's header, JSON back."""
    boundary = "----faults-" + uuid.uuid4().hex
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; filename="work.zip"\r\n'
            "Content-Type: application/zip\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(base_url + url("upload", invitation), data=body, method="POST", headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}", "X-Takehome-Client": "gate",
        "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status, dict(response.headers), response.read().decode())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, dict(exc.headers), exc.read().decode())


def started_invitation(sample_packet) -> Invitation:
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    do_open_invitation(invitation)  # the page's first view writes; these tests look at uploads
    return invitation


def assert_nothing_stored(media_root: Path) -> None:
    assert not Submission.objects.exists()
    assert not GateReceipt.objects.filter(step=GateReceipt.Step.UPLOAD).exists()
    assert [p for p in media_root.rglob("*") if p.is_file()] == []


# --- making the database refuse the live server's writes ------------------------------


@contextmanager
def server_db_options(**changes):
    """Change the options every new connection opens with: the live server opens one per request."""
    options = connection.settings_dict["OPTIONS"]
    saved = dict(options)
    options.update(changes)
    try:
        yield
    finally:
        options.clear()
        options.update(saved)


def short_busy_timeout(seconds: float = 0.5):
    """The busy timeout (TAKEHOME_DB_BUSY_TIMEOUT_S) as settings.py sets it, shorter."""
    if connection.vendor == "sqlite":
        return server_db_options(timeout=seconds)
    options = connection.settings_dict["OPTIONS"].get("options", "")
    return server_db_options(options=f"{options} -c lock_timeout={int(seconds * 1000)}")


def writes_refused():
    """A database that refuses every write: SQLite's query_only, PostgreSQL's read-only transactions."""
    options = connection.settings_dict["OPTIONS"]
    if connection.vendor == "sqlite":
        return server_db_options(init_command=options.get("init_command", "") + "; PRAGMA query_only=1")
    return server_db_options(options=f"{options.get('options', '')} -c default_transaction_read_only=on")


@contextmanager
def write_lock_held():
    """Another connection holds the lock an upload needs: SQLite's write lock, or the invitations' rows."""
    other = connections.create_connection("default")
    other.ensure_connection()
    raw = other.connection
    try:
        if other.vendor == "sqlite":
            raw.execute("BEGIN IMMEDIATE")
        else:
            raw.execute("BEGIN")
            raw.execute(f"SELECT id FROM {Invitation._meta.db_table} FOR UPDATE")
    except Exception:
        other.close()  # why: no transaction began, so there is none to roll back
        raise
    try:
        yield
    finally:
        raw.execute("ROLLBACK")
        other.close()


@contextmanager
def slow_writer(hold_s: float = 1.5, pause_s: float = 0.5):
    """Another connection's long write transactions, over and over, as a heavy commit elsewhere would."""
    stop = threading.Event()

    def write_slowly() -> None:
        while not stop.is_set():
            try:
                with write_lock_held():
                    stop.wait(hold_s)
            except connection.Database.OperationalError:
                pass  # why: the uploads held the lock past this writer's busy timeout; it takes it next round
            stop.wait(pause_s)

    thread = threading.Thread(target=write_slowly)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# --- a database that cannot take the write ----------------------------------------------


def test_a_busy_database_answers_503_with_retry_after_and_stores_nothing(live_server, sample_packet, media_root,
                                                                         settings):
    settings.RETRY_AFTER_BUSY_S = 7
    invitation = started_invitation(sample_packet)
    work = honest_zip()
    with short_busy_timeout(), write_lock_held():
        answer = post_upload(live_server.url, invitation, work)
        # Reading goes on meanwhile: no page takes the write lock.
        assert requests.get(live_server.url + url("landing", invitation), timeout=30).status_code == 200
        assert requests.get(live_server.url + url("status", invitation), timeout=30).status_code == 200
    assert answer.status == 503, answer.text
    assert answer.headers["Retry-After"] == "7"
    body = answer.json()
    assert body["code"] == "busy" and body["stored"] is False and body["retry_after"] == 7
    assert body["message"] == ("The server is busy right now, so your upload was not stored. "
                               "Try again in 7 seconds.")
    assert_nothing_stored(media_root)

    # The same upload, sent again once the lock is gone, is stored.
    again = post_upload(live_server.url, invitation, work)
    assert again.status == 201, again.text
    assert Submission.objects.get().sha256 == sha(work)


def test_a_database_that_refuses_writes_answers_503_and_stores_nothing(live_server, sample_packet, media_root,
                                                                       settings):
    settings.RETRY_AFTER_FAULT_S = 90
    invitation = started_invitation(sample_packet)
    with writes_refused():
        answer = post_upload(live_server.url, invitation, honest_zip())
    assert answer.status == 503, answer.text
    assert answer.headers["Retry-After"] == "90"
    assert answer.json()["code"] == "unavailable"
    assert "The server cannot save anything right now, so your upload was not stored" in answer.json()["message"]
    assert_nothing_stored(media_root)


def test_a_browser_gets_a_page_and_htmx_a_notice_when_the_database_is_busy(live_server, sample_packet, media_root,
                                                                           settings):
    settings.RETRY_AFTER_BUSY_S = 3
    invitation = started_invitation(sample_packet)
    browser = requests.Session()
    landing = live_server.url + url("landing", invitation)
    assert browser.get(landing, timeout=30).status_code == 200  # sets the CSRF cookie, as a visit does
    token = browser.cookies["csrftoken"]
    files = {"archive": ("work.zip", honest_zip(), "application/zip")}
    with short_busy_timeout(), write_lock_held():
        page = browser.post(live_server.url + url("upload", invitation), files=files,
                            data={"csrfmiddlewaretoken": token}, timeout=30)
        notice = browser.post(live_server.url + url("upload", invitation), files=files,
                              headers={"HX-Request": "true", "X-CSRFToken": token}, timeout=30)
    assert page.status_code == 503 and page.headers["Retry-After"] == "3"
    assert "<html" in page.text and "your upload was not stored. Try again in 3 seconds." in page.text
    assert notice.status_code == 503 and notice.headers["Retry-After"] == "3"
    assert "<html" not in notice.text and "your upload was not stored" in notice.text
    # base.html's #server-busy takes the notice; the upload form stays as it was.
    assert notice.headers["HX-Retarget"] == "#server-busy" and notice.headers["HX-Reswap"] == "innerHTML"
    assert 'id="server-busy"' in browser.get(landing, timeout=30).text
    assert_nothing_stored(media_root)


def test_gate_py_waits_out_a_busy_server_and_then_stores_the_upload(live_server, sample_packet, media_root,
                                                                    settings, tmp_path):
    """gate.py submit meets 503s while another write holds the lock; it waits as told, says so, and succeeds."""
    from .helpers import download_tree, fill_artifacts

    settings.SITE_URL = live_server.url
    settings.RETRY_AFTER_BUSY_S = 1
    invitation = started_invitation(sample_packet)
    tree = download_tree(live_server.url, invitation.raw_token, tmp_path)
    fill_artifacts(tree)  # a complete folder: submit asks nothing before it sends
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "NO_PROXY": "*"}
    with short_busy_timeout(), ExitStack() as lock:
        lock.enter_context(write_lock_held())
        gate = subprocess.Popen(["python3", "gate.py", "submit"], cwd=tree, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        first_line = gate.stdout.readline()  # gate.py prints nothing before the server's first answer
        lock.close()
        output = first_line + gate.stdout.read()  # to the end: gate.py gives up within its own timeouts
        gate.wait(30)
    assert gate.returncode == 0, output
    assert first_line.startswith("The server is busy right now, so your upload was not stored."), output
    assert "Waiting 1 s, then sending again (try 2 of 5)" in output
    assert "Upload received and stored" in output
    assert Submission.objects.count() == 1


# --- a full disk ----------------------------------------------------------------------------


def assert_no_space(answer: Answer, retry_after: int) -> None:
    """The answer to an upload the full disk kept from being stored: 503, when to send it again, and why."""
    assert answer.status == 503, answer.text
    assert answer.headers["Retry-After"] == str(retry_after)
    assert answer.json()["code"] == "no_space"
    assert answer.json()["message"].startswith("The server has no room left to store files, so your upload was "
                                               f"not stored. Try again in {retry_after} seconds;")


@pytest.fixture
def small_disk(media_root):
    """MEDIA_ROOT on a 256 KB tmpfs: uploads are received and stored there."""
    require(os.geteuid() == 0, "mounting a small tmpfs for a full disk needs root")
    media_root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(media_root)], check=True)
    try:
        yield media_root
    finally:
        subprocess.run(["umount", "-l", str(media_root)], check=True)


def test_a_full_disk_answers_503_removes_the_part_file_and_keeps_what_was_stored(live_server, sample_packet,
                                                                                 small_disk, settings):
    settings.RETRY_AFTER_FAULT_S = 120
    invitation = started_invitation(sample_packet)
    first = post_upload(live_server.url, invitation, honest_zip())
    assert first.status == 201, first.text
    earlier = Submission.objects.get()
    settings.UPLOAD_INTERVAL_S = 0
    too_big = zip_bytes({"refund-sum/data.bin": os.urandom(400 * 1024)})  # random: deflate cannot shrink it

    answer = post_upload(live_server.url, invitation, too_big)

    assert_no_space(answer, retry_after=120)
    # Nothing half-stored, nothing earlier lost.
    assert list(Submission.objects.values_list("pk", flat=True)) == [earlier.pk]
    assert GateReceipt.objects.filter(step=GateReceipt.Step.UPLOAD).count() == 1
    assert [p.name for p in small_disk.rglob("*") if p.is_file()] == [Path(stored_name(earlier.sha256)).name]
    assert sha((small_disk / earlier.archive.name).read_bytes()) == earlier.sha256


def fill(disk: Path) -> Path:
    """Write a file on ``disk`` until no block is left; returns it (remove it to free the space)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:  # why unbuffered: a buffer left to flush would fail the close
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


@pytest.fixture
def database_on_small_disk(live_server, tmp_path):
    """The test database copied onto a tmpfs of its own with a little room to spare; the live server's
    connections (one per request) and the test's own open that copy until the test ends."""
    require(os.geteuid() == 0, "mounting a small tmpfs for a full disk needs root")
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: a database server's disk is not this test's to fill")
    disk = tmp_path / "db-disk"
    disk.mkdir()
    size_kb = (Path(connection.settings_dict["NAME"]).stat().st_size
               + Path(connection.settings_dict["NAME"] + "-wal").stat().st_size) // 1024 + 1024
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(disk)], check=True)
    original = connection.settings_dict["NAME"]
    try:
        copy = disk / "db.sqlite3"
        connection.ensure_connection()
        with sqlite3.connect(copy) as target:
            connection.connection.backup(target)  # why the backup API: the live database is in WAL mode
        connection.close()
        connection.settings_dict["NAME"] = str(copy)  # shared by every connection opened from now on
        connection.ensure_connection()  # why now: the WAL's shared-memory file is made while there is room
        yield disk
    finally:
        connection.close()
        connection.settings_dict["NAME"] = original
        subprocess.run(["umount", "-l", str(disk)], check=True)


@pytest.mark.sqlite_only  # CI's PostgreSQL pass leaves it out (conftest.py)
def test_a_database_on_a_full_disk_answers_503_and_leaves_nothing_half_stored(live_server, sample_packet,
                                                                               media_root, settings,
                                                                               database_on_small_disk):
    settings.RETRY_AFTER_FAULT_S = 120
    invitation = started_invitation(sample_packet)
    filler = fill(database_on_small_disk)
    work = honest_zip()

    answer = post_upload(live_server.url, invitation, work)

    # The upload was received and moved into place (MEDIA_ROOT has room); the database's commit failed.
    assert_no_space(answer, retry_after=120)
    assert_nothing_stored(media_root)

    filler.unlink()  # an operator makes room
    again = post_upload(live_server.url, invitation, work)
    assert again.status == 201, again.text
    assert Submission.objects.get().sha256 == sha(work)
    assert (media_root / Submission.objects.get().archive.name).read_bytes() == work


# --- a broker that stalls --------------------------------------------------------------------


@pytest.mark.worker
def test_an_upload_while_the_broker_is_paused_is_answered_while_paused_and_graded_once_it_is_back(
        ready, live_server, worker_env, tmp_path, sample_packet, stoppable_broker):
    invitation = started_invitation(sample_packet)
    worker = Worker({**worker_env, "TAKEHOME_STALE_RECEIVED_S": "1", "TAKEHOME_MIN_RED_TO_GREEN_S": "0"},
                    tmp_path / "worker.log")
    worker.start()
    try:
        stoppable_broker.pause()  # SIGSTOP: connections are accepted, nothing is answered
        try:
            # Answered with the broker still paused: nothing of the answer waited for the broker. The
            # client's timeout is a guard against a hang, not a measurement; how long the send waits at
            # most is grading/tests/test_publish.py's.
            answer = post_upload(live_server.url, invitation, honest_zip(), timeout=HANG_GUARD_S)
        finally:
            stoppable_broker.resume()
        assert answer.status == 201, answer.text
        assert answer.json()["status"] == "received" and "It will be reviewed." in answer.json()["message"]

        received_long_ago(answer.json()["submission"])
        sweep_submissions.delay()  # what beat sends every minute
        try:
            graded = _wait_for(lambda: Submission.objects.filter(status=Submission.Status.GRADED).first(),
                               GRADING_WAIT_S, "the upload to be graded", interval=0.25)
        except AssertionError:
            raise AssertionError("worker log:\n" + worker.output()[-6000:])
        assert Evidence.objects.filter(submission=graded).count() == 1
        runs = list(GradingRun.objects.filter(submission=graded).values_list("outcome", flat=True))
        assert runs == [GradingRun.Outcome.GRADED], "graded once, however many messages arrived"
    finally:
        worker.stop()


@pytest.mark.worker
def test_gate_py_submit_gets_its_receipt_while_the_broker_is_paused(
        ready, live_server, worker_env, tmp_path, sample_packet, stoppable_broker, settings):
    from .helpers import download_tree, run_gate
    from .test_end_to_end import work_through_the_gate

    settings.SITE_URL = live_server.url  # the download's gate talks to this server
    invitation = started_invitation(sample_packet)
    tree = download_tree(live_server.url, invitation.raw_token, tmp_path / "dl")
    work_through_the_gate(tree)  # red, model and green witnessed while the broker answers
    stoppable_broker.pause()
    try:
        result = run_gate(tree, "submit")  # its receipt comes with the broker still paused (run_gate's timeout guards)
    finally:
        stoppable_broker.resume()
    assert result.returncode == 0, result.stdout + result.stderr
    submission = Submission.objects.get(invitation=invitation)
    assert submission.sha256 in result.stdout and "It will be reviewed." in result.stdout

    worker = Worker({**worker_env, "TAKEHOME_STALE_RECEIVED_S": "1", "TAKEHOME_MIN_RED_TO_GREEN_S": "0"},
                    tmp_path / "worker.log")
    worker.start()
    try:
        received_long_ago(submission.pk)
        sweep_submissions.delay()
        try:
            _wait_for(lambda: Submission.objects.filter(pk=submission.pk, status=Submission.Status.GRADED).first(),
                      GRADING_WAIT_S, "the upload to be graded", interval=0.25)
        except AssertionError:
            raise AssertionError("worker log:\n" + worker.output()[-6000:])
        runs = list(GradingRun.objects.filter(submission=submission).values_list("outcome", flat=True))
        assert runs == [GradingRun.Outcome.GRADED], "graded once, however many messages arrived"
    finally:
        worker.stop()


# --- many candidates at once -------------------------------------------------------------------


def upload_until_stored(base_url: str, invitation, data: bytes) -> list[Answer]:
    """Send the upload as a patient client does: on 503 or 429 with Retry-After, wait and send it again."""
    answers = []
    # why 60: SQLite's busy wait is no queue; with another writer holding the lock three quarters of the
    # time, one client among forty may lose the race many times running before it wins.
    for _ in range(60):
        answer = post_upload(base_url, invitation, data)
        answers.append(answer)
        if answer.status not in (429, 503) or "Retry-After" not in answer.headers:
            break
        time.sleep(int(answer.headers["Retry-After"]))
    return answers


@pytest.mark.worker
def test_forty_candidates_uploading_at_once_while_the_database_is_busy_are_all_stored(
        ready, live_server, celery_worker_proc, sample_packet, settings):
    settings.RETRY_AFTER_BUSY_S = 1
    invitations = [started_invitation(sample_packet) for _ in range(40)]
    # Half send the same bytes (stored once), half their own.
    zips = [honest_zip() if i % 2 else zip_bytes({"refund-sum/mine.txt": str(i).encode(), "refund-sum/x.py": b"x"})
            for i in range(40)]
    # The worker is grading (and writing) while the others arrive.
    first = upload_until_stored(live_server.url, invitations[0], zips[0])
    assert first[-1].status == 201
    _wait_for(lambda: Submission.objects.exclude(status__in=("received", "queued")).exists(), GRADING_WAIT_S,
              "the worker to start grading", interval=0.1)

    # A busy timeout shorter than the slow writer's transactions: some uploads are answered 503 and sent again.
    # why a 1 s pause between its writes: with less, a client can lose the race for the lock dozens of
    # times running (neither SQLite nor PostgreSQL queues waiting writers fairly), which says nothing.
    with short_busy_timeout(1.0), slow_writer(hold_s=1.5, pause_s=1.0), ThreadPoolExecutor(12) as pool:
        runs = list(pool.map(lambda i: upload_until_stored(live_server.url, invitations[i], zips[i]), range(1, 40)))

    answers = [a for run in [first, *runs] for a in run]
    unexpected = [(a.status, a.text[:200]) for a in answers
                  if a.status != 201 and not (a.status in (429, 503) and "Retry-After" in a.headers)]
    assert unexpected == []
    assert [run[-1].status for run in runs] == [201] * 39
    assert Submission.objects.count() == 40
    assert sorted(Submission.objects.values_list("invitation_id", flat=True)) == sorted(i.pk for i in invitations)
    for submission in Submission.objects.all():
        assert Path(submission.archive.path).is_file()


def test_a_database_fault_while_cleaning_up_keeps_the_file_and_says_so(media_root, monkeypatch, caplog):
    """After a failed commit the upload's file is removed only when the database can say nobody uses it."""
    from django.db import DatabaseError

    from sessions_app import actions
    from shared import stored

    name = stored.upload_name("0" * 64)
    stored.save(name, b"zip")

    def busy(sha256):
        raise DatabaseError("database is locked")

    monkeypatch.setattr(actions, "_lock_content", busy)
    with caplog.at_level("WARNING", logger="sessions_app.actions"):
        actions._remove_unless_used(name, "0" * 64)
    assert stored.exists(name) and (media_root / name).read_bytes() == b"zip"
    assert "could not say whether a stored upload uses it" in caplog.text
