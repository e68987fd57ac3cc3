"""The hosted session's server-side gate over the real workspace sandbox: captures through the real grading
sandbox, submit through grading, the `gate` command over a real unix socket, typed into a real shell, and the
sweep (idle stop, deadline freeze) with its real effects.

The workspaces are grading.engine.sandbox.shell's own: a size-capped tmpfs per invitation, a tmux shell in bubblewrap
under a uid of our test range. Tests that open one need root, a writable cgroup and tmux; they are marked
slow, and under CI=true a missing part is a failure.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conftest import HANG_GUARD_S, _wait_for, require
from grading.engine.sandbox import shell
from grading.tests.test_workspace import Term
from sessions_app import actions
from sessions_app.hosted import gate_host, workspaces
from sessions_app.models import GateReceipt, Submission, Workspace
from shared import pytest_slots

from .conftest import url
from .helpers import HONEST_TEST, fix_invoices, gate_host_in_a_thread

GATE = Path(__file__).resolve().parents[2] / "grading" / "engine" / "sandbox" / "sandboxed" / "bin" / "gate"
PROMPT = b"invoices.py uses abs() on cents; refunds are negative. Propose a minimal patch.\n"
# Our own uids, apart from every other pool (shared/pytest_slots.py).
UID_BASE, SLOTS = pytest_slots.uids("workspace_gate"), 6


@pytest.fixture
def ws_settings(settings):
    """Workspaces under a folder the sandbox uids can traverse, with uids of this module's range only."""
    settings.WORKSPACES_DIR = Path(settings.GRADING_SCRATCH_DIR) / "gate-tests" / "ws"
    settings.WORKSPACE_UID_BASE, settings.WORKSPACE_SLOTS = UID_BASE, SLOTS
    settings.WORKSPACE_DISK_MB, settings.WORKSPACE_MEMORY_MB, settings.WORKSPACE_PROCESSES = 8, 256, 64
    yield settings
    # why: a test without a real workspace may still leave a lock file there (real_workspaces unmounts first)
    shutil.rmtree(settings.WORKSPACES_DIR, ignore_errors=True)


def _clean_up(folder: Path) -> None:
    """End every process and cgroup of our uid range, unmount every workspace under ``folder``, remove it."""
    for uid in range(UID_BASE, UID_BASE + SLOTS):
        shell.stop_shell(shell.Workspace(folder / "none", uid, folder))
    for point, _, _ in shell._mounts():
        if point.startswith(f"{folder.resolve()}/"):
            shell._umount(Path(point))
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def real_workspaces(ws_settings):
    """grading.engine.sandbox.shell for real; every workspace, shell and cgroup of the test is gone after it."""
    require(os.geteuid() == 0, "a workspace mounts a tmpfs: run the tests as root")
    require(shell.detect("auto", "bwrap").mode in ("cgroup1", "cgroup2"), "no writable cgroup here")
    require(shutil.which("tmux") is not None, "tmux is missing (apt-get install tmux)")
    folder = Path(ws_settings.WORKSPACES_DIR)
    _clean_up(folder)
    yield shell
    _clean_up(folder)
    for uid in range(UID_BASE, UID_BASE + SLOTS):
        assert shell._uid_processes(uid) == [], f"a process of uid {uid} outlived the test"


@dataclass
class Hosted:
    invitation: object
    ws: shell.Workspace

    @property
    def home(self) -> Path:
        return self.ws.home

    def write(self, path: str, data: bytes) -> None:
        """Write into the mounted workspace, owned by its uid, as the candidate's own files are."""
        shell._write_files(self.home, iter([(path, data, 0o644)]), self.ws.uid)

    def failing_test(self) -> None:
        self.write("test_invoices.py", HONEST_TEST)

    def fix(self) -> None:
        self.write("invoices.py", fix_invoices((self.home / "invoices.py").read_bytes()))


@pytest.fixture
def hosted(started, real_workspaces, media_root):
    return Hosted(started, workspaces.ensure_open(started))


def receipts(invitation, step):
    return list(GateReceipt.objects.filter(invitation=invitation, step=step).order_by("pk"))


# --- the workspace row -------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.django_db
def test_opening_seeds_the_fixture_and_gives_each_open_workspace_its_own_uid(hosted, settings):
    from takehome.tests.factories import InvitationFactory

    assert (hosted.home / "invoices.py").read_bytes() == hosted.invitation.packet_version.files_of("fixture")[
        "invoices.py"]
    row = Workspace.objects.get(invitation=hosted.invitation)
    assert row.uid == settings.WORKSPACE_UID_BASE
    other = InvitationFactory(packet_version=hosted.invitation.packet_version)
    assert workspaces.workspace_row(other).uid == settings.WORKSPACE_UID_BASE + 1
    Workspace.objects.filter(pk=row.pk).update(closed=True)  # a closed workspace gives its uid back
    third = InvitationFactory(packet_version=hosted.invitation.packet_version)
    assert workspaces.workspace_row(third).uid == settings.WORKSPACE_UID_BASE
    # the files on the workspace's own tmpfs, the candidate's uid's; its shell running
    assert shell._is_mounted(hosted.home) and (hosted.home / "invoices.py").stat().st_uid == row.uid
    assert shell.shell_running(hosted.ws) and hosted.ws.uid == row.uid


@pytest.mark.django_db
def test_no_free_uid_is_a_clear_refusal(started, ws_settings, settings):
    from takehome.tests.factories import InvitationFactory

    settings.WORKSPACE_SLOTS = 1
    workspaces.workspace_row(started)
    with pytest.raises(workspaces.WorkspaceFull, match="in use"):
        workspaces.workspace_row(InvitationFactory(packet_version=started.packet_version))


@pytest.mark.django_db
def test_touch_moves_last_seen_at_most_once_a_minute(started, ws_settings):
    workspaces.workspace_row(started)
    old = timezone.now() - timedelta(hours=1)
    Workspace.objects.filter(invitation=started).update(last_seen_at=old)
    workspaces._touched.pop(started.pk, None)
    workspaces.touch(started)
    seen = Workspace.objects.get(invitation=started).last_seen_at
    assert seen > old
    Workspace.objects.filter(invitation=started).update(last_seen_at=old)
    workspaces.touch(started.pk)  # within the minute: no write
    assert Workspace.objects.get(invitation=started).last_seen_at == old


# --- captures through the real sandbox ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.django_db
def test_red_on_the_sample_fixture_is_accepted_as_it_comes(hosted, ready):
    red = actions.do_capture(hosted.invitation, "red")
    assert red.accepted and red.captured_by == "server"
    assert "FAILED test_invoices.py::test_charges_only" in red.log_text
    assert "Red captured" in actions.capture_words(red, "python -m pytest -q")


@pytest.mark.slow
@pytest.mark.django_db
def test_red_green_and_submit_are_captured_by_the_server_and_graded_so(hosted, ready, client, reviewer):
    from grading import pipeline
    from grading.models import Evidence

    hosted.failing_test()
    red = actions.do_capture(hosted.invitation, "red")
    assert red.accepted, red.refusal
    assert red.captured_by == "server"
    assert "1 failed" in red.log_text and "test_refunds_are_negative_cents" in red.log_text
    assert red.tree_hashes["test_invoices.py"] == actions._file_hashes({"x": HONEST_TEST})["x"]

    hosted.write("artifacts/prompt.txt", PROMPT)
    model = actions.do_capture(hosted.invitation, "model")
    assert model.accepted and model.log_text == PROMPT.decode()

    hosted.fix()
    hosted.write("artifacts/red.log", b"my own red log, which the server replaces\n")
    hosted.write("artifacts/refuse.md", b"The model offered to drop the refund rows; that changes revenue.\n")
    hosted.write("artifacts/model.md", b"Remove abs() from the sum.\n")
    green = actions.do_capture(hosted.invitation, "green")
    assert green.accepted, green.refusal
    assert green.captured_by == "server" and "1 passed" in green.log_text

    result = actions.do_submit_workspace(hosted.invitation)
    submission = result.submission
    assert submission.via == "hosted"
    assert pipeline.grade_submission(submission.pk) == "graded"
    evidence = Evidence.objects.get(submission=submission).data
    assert evidence["red_log"]["captured_by"] == "server"
    assert evidence["red_log"]["genuine"] is True
    assert evidence["texts"]["refuse.md"].startswith("The model offered")
    rows = {r["step"]: r for r in evidence["timeline"]["receipts"]}
    assert rows["red"]["captured_by"] == "server"
    assert [c["text"] for c in rows["red"]["checks"]] == [
        "its log is artifacts/red.log", "it ran on the packet's original invoices.py (the bug)"]
    assert not any("receipts.jsonl" in note for note in evidence["timeline"]["notes"])  # no gate.py, no log
    client.force_login(reviewer)
    page = client.get(f"/review/{submission.pk}/").content.decode()
    assert 'data-captured-by="server"' in page and "Captured by the server" in page


@pytest.mark.slow
@pytest.mark.django_db
def test_a_red_that_shows_no_failure_is_refused_and_kept(hosted, ready):
    hosted.write("test_invoices.py", b"def test_nothing_yet():\n    assert True\n")
    with_refusal = actions.do_capture(hosted.invitation, "red")
    assert not with_refusal.accepted
    assert "no failure" in with_refusal.refusal
    assert with_refusal.captured_by == "server" and "1 passed" in with_refusal.log_text


@pytest.mark.slow
@pytest.mark.django_db
def test_green_first_is_refused_without_running_the_tests(hosted, monkeypatch):
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("the sandbox ran for a refused step"))
    receipt = actions.do_capture(hosted.invitation, "green")
    assert not receipt.accepted
    assert "skip, not a pass" in receipt.refusal
    words = actions.capture_words(receipt, "python -m pytest -q")
    assert "a pass: capture model (the button, or `gate model` in the terminal) first." in words
    assert "python gate.py" not in words


@pytest.mark.slow
@pytest.mark.django_db
def test_a_capture_marks_the_recording(hosted, monkeypatch):
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("green first must not run"))
    cast = workspaces.cast_path(hosted.invitation)
    started_at = time.time() - 5
    cast.write_text(json.dumps({"version": 2, "width": 80, "height": 24, "timestamp": started_at}) + "\n"
                    + json.dumps([1.0, "o", "$ "]) + "\n")
    actions.do_capture(hosted.invitation, "green")
    t, kind, label = json.loads(cast.read_text().splitlines()[-1])
    assert (kind, label) == ("m", "green refused") and 4 <= t <= 60


@pytest.mark.slow
@pytest.mark.django_db
def test_a_green_that_still_fails_is_refused(hosted, ready):
    hosted.failing_test()
    assert actions.do_capture(hosted.invitation, "red").accepted
    hosted.write("artifacts/prompt.txt", PROMPT)
    assert actions.do_capture(hosted.invitation, "model").accepted
    green = actions.do_capture(hosted.invitation, "green")  # not fixed
    assert not green.accepted and "still red" in green.refusal


# A conftest.py that turns each failure into a pass, and one that turns each pass into a failure.
FAILURES_PASS = (b"import pytest\n\n\n@pytest.hookimpl(wrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                 b"    report = yield\n    if report.when == 'call' and report.failed:\n"
                 b"        report.outcome, report.longrepr = 'passed', None\n    return report\n")
PASSES_FAIL = (b"import pytest\n\n\n@pytest.hookimpl(wrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
               b"    report = yield\n    if report.when == 'call' and report.passed:\n"
               b"        report.outcome, report.longrepr = 'failed', 'AssertionError: assert 1700 == 1300'\n"
               b"    return report\n")


@pytest.mark.slow
@pytest.mark.django_db
def test_a_capture_is_judged_as_any_rerun_and_a_rewritten_report_is_refused(hosted, ready):
    hosted.failing_test()
    red = actions.do_capture(hosted.invitation, "red")
    assert red.accepted, red.refusal
    # The canaries ran and failed, and the log (the candidate's red log) shows none of them.
    assert len(red.integrity["canaries"]) == 3 and red.integrity["canaries_failed"] == 3, red.integrity
    assert red.integrity["tampered"] == [] and red.integrity["unconfirmed"] == []
    shown = [c for c in red.integrity["canaries"] if re.search(rf"\b{c.split('::')[-1]}\b", red.log_text)]
    assert "1 failed" in red.log_text and shown == [], red.log_text
    hosted.write("artifacts/prompt.txt", PROMPT)
    assert actions.do_capture(hosted.invitation, "model").accepted

    hosted.write("conftest.py", FAILURES_PASS)  # the code is not fixed
    green = actions.do_capture(hosted.invitation, "green")
    assert not green.accepted and green.captured_by == "server"
    assert "does not hold up" in green.refusal
    assert green.integrity["tampered"], green.integrity
    words = actions.capture_words(green, "python -m pytest -q")
    assert words.startswith("Green not captured:") and "every test passed" not in words
    assert not GateReceipt.objects.filter(invitation=hosted.invitation, step="green", accepted=True).exists()


@pytest.mark.slow
@pytest.mark.django_db
def test_a_red_made_by_rewriting_passes_into_failures_is_refused(hosted, ready):
    hosted.fix()  # fixed before red, and a conftest that makes the passing test fail
    hosted.failing_test()
    hosted.write("conftest.py", PASSES_FAIL)
    red = actions.do_capture(hosted.invitation, "red")
    assert not red.accepted and "does not hold up" in red.refusal, (red.refusal, red.log_text)
    assert "1 failed" in red.log_text  # what its text said: a red, by itself
    assert red.integrity["tampered"]


@pytest.mark.slow
@pytest.mark.django_db
def test_after_the_deadline_a_capture_is_refused(hosted, monkeypatch, settings):
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("the sandbox ran after the deadline"))
    type(hosted.invitation).objects.filter(pk=hosted.invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 60))
    hosted.invitation.refresh_from_db()
    with pytest.raises(actions.SessionRefused, match="Time is up") as refused:
        actions.do_capture(hosted.invitation, "red")
    assert refused.value.code == "deadline"
    kept = refused.value.receipt  # kept as refused, as a late gate step is
    assert kept is not None and not kept.accepted and kept.captured_by == "server"
    with pytest.raises(actions.SessionRefused, match="Time is up"):
        actions.do_submit_workspace(hosted.invitation)
    assert not Submission.objects.filter(invitation=hosted.invitation).exists()


@pytest.mark.django_db
def test_before_start_a_capture_is_refused(invitation, ws_settings):
    with pytest.raises(actions.SessionRefused, match="not started"):
        actions.do_capture(invitation, "red")


@pytest.mark.django_db
def test_a_capture_without_a_workspace_says_to_open_it(started, ws_settings, media_root):
    with pytest.raises(actions.SessionRefused, match="open the workspace page first"):
        actions.do_capture(started, "red")
    with pytest.raises(actions.SessionRefused, match="open the workspace page first"):
        actions.do_submit_workspace(started)
    assert not Workspace.objects.exists() and not workspaces.folder_for(started).exists()


@pytest.mark.django_db
def test_a_second_capture_while_one_runs_is_refused(started, ws_settings, monkeypatch):
    workspaces.workspace_row(started)  # the lock is refused before the workspace is read
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("two sandboxes over one workspace"))
    with actions._capture_lock(started):
        with pytest.raises(actions.SessionRefused, match="already running") as refused:
            actions.do_capture(started, "red")
    assert refused.value.code == "busy"
    assert not receipts(started, "red")


@pytest.mark.slow
@pytest.mark.django_db
def test_a_workspace_too_big_is_refused_in_words(hosted, monkeypatch):
    from grading.engine.archive import Limits

    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("a workspace too big was run"))
    shell._write_files(hosted.home, ((f"many/{n}", b"", 0o644) for n in range(Limits().max_entries)), hosted.ws.uid)
    with pytest.raises(actions.SessionRefused, match=f"more than {Limits().max_entries} files"):
        actions.do_capture(hosted.invitation, "red")
    assert not receipts(hosted.invitation, "red")


@pytest.mark.slow
@pytest.mark.django_db
def test_a_workspace_the_server_cannot_read_is_refused_in_words_and_nothing_is_kept(hosted, monkeypatch):
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("an unreadable workspace was run"))
    shell.release(hosted.ws)
    hosted.ws.part("saved.tar").write_bytes(b"not a tar file")
    with pytest.raises(actions.SessionRefused, match="could not read your workspace") as refused:
        actions.do_capture(hosted.invitation, "red")
    assert refused.value.code == "unavailable" and not receipts(hosted.invitation, "red")
    with pytest.raises(actions.SessionRefused, match="could not read your workspace"):
        actions.do_submit_workspace(hosted.invitation)
    assert not Submission.objects.filter(invitation=hosted.invitation).exists()


@pytest.mark.slow
@pytest.mark.django_db
def test_the_submitted_zip_carries_the_servers_logs_not_the_candidates(hosted):
    import io
    import zipfile

    GateReceipt.objects.create(invitation=hosted.invitation, step="red", log_text="the server's red\n",
                               captured_by="server")
    GateReceipt.objects.create(invitation=hosted.invitation, step="red", log_text="gate.py's red\n",
                               captured_by="candidate")  # a candidate-sent log never goes in
    hosted.write("artifacts/red.log", b"forged\n")
    hosted.write("artifacts/green.log", b"forged green\n")
    hosted.write("artifacts/model_allowed.at", b"1.0")
    hosted.write("artifacts/notes.md", b"my notes\n")
    data = actions.hosted_archive(hosted.invitation, shell.snapshot_files(hosted.ws))
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = {n.split("/", 1)[1]: n for n in zf.namelist()}
        assert zf.read(names["artifacts/red.log"]) == b"the server's red\n"
        assert "artifacts/green.log" not in names  # no green captured: the candidate's is left out
        assert "artifacts/model_allowed.at" not in names
        assert zf.read(names["artifacts/notes.md"]) == b"my notes\n"
        assert len({i.date_time for i in zf.infolist()}) == 1


def test_server_capture_is_the_accepted_server_receipt_with_that_log():
    from grading.engine.checks.receipts import server_capture
    from grading.engine.checks.timeline import Receipt

    now = timezone.now()
    server = Receipt(step="red", at=now, log_text="1 failed in 0.1s\n", captured_by="server", id=7)
    candidate = Receipt(step="red", at=now, log_text="1 failed in 0.2s\n", id=8)
    refused = Receipt(step="red", at=now, log_text="2 failed\n", captured_by="server", accepted=False, id=9)
    assert server_capture("1 failed in 0.1s\r\n", [server, candidate]).id == 7
    assert server_capture("1 failed in 0.2s\n", [server, candidate]) is None
    assert server_capture("2 failed\n", [refused]) is None
    assert server_capture(None, [server]) is None


# --- the buttons -----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.django_db
def test_the_capture_button_answers_htmx_with_the_panel_and_a_form_post_with_a_redirect(hosted, client,
                                                                                           monkeypatch):
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("green first must not run"))
    response = client.post(url("workspace-capture", hosted.invitation, step="green"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="workspace-gate"' in body and "Green not captured" in body and "capture model (the button" in body
    assert 'id="capture-red"' in body
    response = client.post(url("workspace-capture", hosted.invitation, step="green"))
    assert response.status_code == 302
    page = client.get(response.url, follow=True).content.decode()
    assert "Green not captured" in page


@pytest.mark.django_db
def test_an_unknown_step_or_link_gets_words(started, ws_settings, client):
    workspaces.workspace_row(started)
    response = client.post(url("workspace-capture", started, step="blue"), HTTP_HX_REQUEST="true")
    assert "no step called" in response.content.decode()
    response = client.post("/t/not-a-token/workspace/submit")
    assert response.status_code == 404


@pytest.mark.django_db
def test_the_submit_button_refuses_after_the_deadline(started, ws_settings, client, settings):
    workspaces.workspace_row(started)  # the deadline is checked before the workspace is read
    type(started).objects.filter(pk=started.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 60))
    response = client.post(url("workspace-submit", started), HTTP_HX_REQUEST="true")
    assert "Time is up" in response.content.decode()


# --- the gate socket host ------------------------------------------------------------------------------------

@pytest.fixture
def host(transactional_db, ws_settings):
    """serve_workspaces' GateHost on its own event loop in a thread; the loop stops with the test."""
    with gate_host_in_a_thread() as host:
        yield host


def wait_for_socket(invitation) -> Path:
    path = gate_host.socket_path(invitation.pk)
    _wait_for(path.exists, HANG_GUARD_S, f"the gate socket at {path}", interval=0.05)
    return path


def send(path: Path, data: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(120)
        conn.connect(str(path))
        conn.sendall(data)
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
    return json.loads(reply)


def gate(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GATE), *args], env={"TAKEHOME_GATE_SOCKET": str(path)},
                          capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_the_socket_is_world_writable_in_a_folder_only_root_writes(host, real_workspaces, started):
    import stat

    workspaces.ensure_open(started)
    path = wait_for_socket(started)
    assert stat.S_ISSOCK(path.stat().st_mode) and stat.S_IMODE(path.stat().st_mode) == 0o666
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755


@pytest.mark.slow
def test_gate_status_answers_over_the_socket(host, real_workspaces, started):
    workspaces.ensure_open(started)
    path = wait_for_socket(started)
    done = gate(path, "status")
    assert done.returncode == 0, done.stderr
    assert "Time left" in done.stdout and "No step witnessed yet" in done.stdout


@pytest.mark.slow
def test_gate_red_over_the_socket_is_a_server_capture_of_the_sockets_invitation(host, real_workspaces, started,
                                                                                ready):
    from takehome.tests.factories import InvitationFactory

    other = InvitationFactory(packet_version=started.packet_version)
    actions.do_start_session(other)
    Hosted(started, workspaces.ensure_open(started)).failing_test()
    workspaces.ensure_open(other)
    path = wait_for_socket(started)
    # what the request says about whose it is counts for nothing: the socket decides
    reply = send(path, json.dumps({"command": "red", "invitation": other.pk,
                                   "token": other.raw_token}).encode() + b"\n")
    assert reply["ok"], reply
    assert "Red captured" in reply["message"]
    red = GateReceipt.objects.get(pk=reply["receipt"])
    assert red.invitation_id == started.pk and red.captured_by == "server" and red.accepted
    assert not GateReceipt.objects.filter(invitation=other).exists()
    done = gate(path, "green")  # before the model step: refused, in the terminal's words
    assert done.returncode == 1 and "gate model" in done.stderr


def test_the_gate_and_status_sockets_are_at_their_paths_only_once_they_listen_open_to_the_sandbox(
        settings, tmp_path, monkeypatch):
    """A client that connects as a socket appears is never refused (bound, not yet listening) nor denied
    (listening, not yet open to the sandbox's uid): at each step of making one, its path is not there yet."""
    import asyncio

    settings.WORKSPACES_DIR = tmp_path
    gate, status = gate_host.socket_path(7), gate_host.status_socket_path()
    making: list[Path] = []
    early: list[str] = []

    class Watched(socket.socket):
        listening = False

        def listen(self, *args):
            if not self.listening:  # asyncio listens again on a socket it is given: already done
                early.extend(f"{path.name} there at listen" for path in making if path.exists())
            self.listening = True
            return super().listen(*args)

    chmod = os.chmod

    def watched_chmod(target, mode, *args, **kwargs):
        early.extend(f"{path.name} there at a chmod" for path in making if path.exists())
        return chmod(target, mode, *args, **kwargs)

    async def make_both() -> None:
        host = gate_host.GateHost()
        monkeypatch.setattr(socket, "socket", Watched)
        monkeypatch.setattr(os, "chmod", watched_chmod)
        making[:] = [gate]
        await host.listen(7)
        making[:] = [status]
        server = await host.serve_status()
        monkeypatch.undo()
        assert server is not None
        for each in (*host.servers.values(), server):
            each.close()

    asyncio.run(make_both())
    assert early == []
    for path in (gate, status):
        assert oct(path.stat().st_mode & 0o777) == oct(0o666)


@pytest.mark.slow
def test_a_malformed_or_oversized_line_gets_an_error_and_the_host_goes_on(host, started):
    workspaces.workspace_row(started)  # the host listens for every open row
    path = wait_for_socket(started)
    assert "not one line of JSON" in send(path, b"red please\n")["error"]
    assert "Unknown command" in send(path, b'{"command": "rm -rf"}\n')["error"]
    assert "longer than 4096" in send(path, b"x" * 10000 + b"\n")["error"]
    assert send(path, b'{"command": "status"}\n')["ok"]


@pytest.mark.slow
def test_one_gate_command_at_a_time_per_workspace(host, started, monkeypatch):
    workspaces.workspace_row(started)  # the host listens for every open row
    path = wait_for_socket(started)
    release = threading.Event()

    def slow(invitation_id, command, anyway):
        release.wait(10)
        return {"ok": True, "message": "done"}

    monkeypatch.setattr(gate_host, "answer", slow)
    first: list[dict] = []
    thread = threading.Thread(target=lambda: first.append(send(path, b'{"command": "red"}\n')))
    thread.start()
    _wait_for(lambda: started.pk in host.busy, HANG_GUARD_S, "the first command to run", interval=0.02)
    assert "still running" in send(path, b'{"command": "status"}\n')["error"]
    release.set()
    thread.join(10)
    assert first == [{"ok": True, "message": "done"}]
    assert send(path, b'{"command": "status"}\n')["ok"]


def test_gate_without_a_socket_says_so(tmp_path):
    done = gate(tmp_path / "nothing.sock", "status")
    assert done.returncode == 3 and "cannot reach the server" in done.stderr
    assert gate(tmp_path / "nothing.sock", "dance").returncode == 2


@pytest.mark.slow
def test_a_closed_workspace_stops_listening(host, started):
    workspaces.workspace_row(started)  # the host listens for every open row
    path = wait_for_socket(started)
    Workspace.objects.filter(invitation=started).update(closed=True)
    _wait_for(lambda: not path.exists(), HANG_GUARD_S, "the closed workspace's socket to go", interval=0.05)


# --- the sweep ------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.django_db
def test_the_sweep_stops_idle_shells_and_freezes_workspaces_past_the_deadline(hosted, settings, ready):
    from takehome.tests.factories import InvitationFactory

    late = InvitationFactory(packet_version=hosted.invitation.packet_version)
    actions.do_start_session(late)
    late_ws = workspaces.ensure_open(late)
    busy = InvitationFactory(packet_version=hosted.invitation.packet_version)
    actions.do_start_session(busy)
    busy_ws = workspaces.ensure_open(busy)
    hosted.write("notes.md", b"written before the idle stop\n")
    idle_row = Workspace.objects.get(invitation=hosted.invitation)
    Workspace.objects.filter(pk=idle_row.pk).update(
        last_seen_at=timezone.now() - timedelta(minutes=settings.WORKSPACE_IDLE_MINUTES + 1))
    type(late).objects.filter(pk=late.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    done = gate_host.sweep()
    assert sorted(done) == sorted([f"stopped the idle shell of invitation {hosted.invitation.pk}",
                                   f"froze the workspace of invitation {late.pk}"])
    idle_row.refresh_from_db()
    assert idle_row.shell_stopped_at is not None and not idle_row.closed
    frozen = Workspace.objects.get(invitation=late)
    assert frozen.closed and frozen.frozen_at is not None
    # the idle shell ended, its files saved and its tmpfs given back; the frozen one likewise, for good
    assert not shell.shell_running(hosted.ws) and not shell._is_mounted(hosted.home)
    assert hosted.ws.part("saved.tar").is_file()
    assert not shell.shell_running(late_ws) and not shell._uid_processes(late_ws.uid)
    assert not shell._is_mounted(late_ws.home) and late_ws.part("frozen").exists()
    assert not Workspace.objects.get(invitation=busy).shell_stopped_at and shell.shell_running(busy_ws)
    assert gate_host.sweep() == []  # nothing twice
    # a capture reads the idle workspace's saved files, and starts no shell
    red = actions.do_capture(hosted.invitation, "red")
    assert red.accepted and red.tree_hashes["notes.md"] == actions._file_hashes({"x": b"written before the idle "
                                                                                     b"stop\n"})["x"]
    assert not shell.shell_running(hosted.ws)
    # the files it mounted again go back to disk at the next sweep, once
    assert gate_host.sweep() == [f"saved the files of invitation {hosted.invitation.pk} again"]
    assert not shell._is_mounted(hosted.home) and gate_host.sweep() == []
    # the next visit starts the idle shell again, with its files
    workspaces.ensure_open(hosted.invitation)
    idle_row.refresh_from_db()
    assert idle_row.shell_stopped_at is None and shell.shell_running(hosted.ws)
    assert (hosted.home / "notes.md").read_bytes() == b"written before the idle stop\n"
    # a visit to the frozen one shows its files read-only, and starts no shell
    late_ws = workspaces.ensure_open(late)
    assert (late_ws.home / "invoices.py").is_file() and not shell.shell_running(late_ws)
    with pytest.raises(OSError) as refused:
        (late_ws.home / "invoices.py").write_bytes(b"after the deadline\n")
    assert refused.value.errno == errno.EROFS
    # and its files still make a snapshot (what a reviewer or a late submit would read)
    assert "invoices.py" in shell.snapshot_files(late_ws)


@pytest.mark.slow
@pytest.mark.django_db
def test_a_workspace_released_when_idle_is_frozen_at_the_deadline_all_the_same(hosted, settings):
    hosted.write("notes.md", b"mine\n")
    Workspace.objects.filter(invitation=hosted.invitation).update(
        last_seen_at=timezone.now() - timedelta(minutes=settings.WORKSPACE_IDLE_MINUTES + 1))
    assert gate_host.sweep() == [f"stopped the idle shell of invitation {hosted.invitation.pk}"]
    assert not shell._is_mounted(hosted.home)
    type(hosted.invitation).objects.filter(pk=hosted.invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    done = gate_host.sweep()
    # notes.md changed the workspace since it was seeded: the deadline submits it (test_submit_at_deadline.py)
    submitted = Submission.objects.get(invitation=hosted.invitation, at_deadline=True)
    assert done == [f"froze the workspace of invitation {hosted.invitation.pk}",
                    f"submitted the workspace of invitation {hosted.invitation.pk} at the deadline "
                    f"(submission {submitted.pk})"]
    assert Workspace.objects.get(invitation=hosted.invitation).closed
    hosted.invitation.refresh_from_db()
    ws = workspaces.ensure_open(hosted.invitation)
    assert (ws.home / "notes.md").read_bytes() == b"mine\n" and not shell.shell_running(ws)
    with pytest.raises(OSError) as refused:
        (ws.home / "notes.md").write_bytes(b"late\n")
    assert refused.value.errno == errno.EROFS


@pytest.mark.slow
@pytest.mark.django_db
def test_one_workspace_the_sweep_cannot_stop_does_not_keep_the_others_running(hosted, settings, monkeypatch):
    from takehome.tests.factories import InvitationFactory

    late = InvitationFactory(packet_version=hosted.invitation.packet_version)
    actions.do_start_session(late)
    workspaces.ensure_open(late)
    type(late).objects.filter(pk=late.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    Workspace.objects.filter(invitation=hosted.invitation).update(
        last_seen_at=timezone.now() - timedelta(minutes=settings.WORKSPACE_IDLE_MINUTES + 1))

    def broken(ws):
        raise shell.WorkspaceUnavailable("umount failed")

    monkeypatch.setattr(shell, "freeze", broken)
    assert gate_host.sweep() == [f"stopped the idle shell of invitation {hosted.invitation.pk}"]
    assert not shell.shell_running(hosted.ws)
    assert not Workspace.objects.get(invitation=late).closed  # tried again at the next sweep


@pytest.mark.slow
@pytest.mark.django_db
def test_serve_workspaces_once_sweeps_and_a_second_host_is_refused(hosted, settings):
    import fcntl
    import io

    from django.core.management import CommandError, call_command

    Workspace.objects.filter(invitation=hosted.invitation).update(
        last_seen_at=timezone.now() - timedelta(minutes=settings.WORKSPACE_IDLE_MINUTES + 1))
    out = io.StringIO()
    call_command("serve_workspaces", "--once", stdout=out)
    assert f"stopped the idle shell of invitation {hosted.invitation.pk}" in out.getvalue()
    assert not shell.shell_running(hosted.ws)
    with (settings.WORKSPACES_DIR / "serve_workspaces.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CommandError, match="Another serve_workspaces"):
            call_command("serve_workspaces")
    with pytest.raises(CommandError, match="above 0"):
        call_command("serve_workspaces", "--sweep-every", "0")


# --- end to end: the gate typed into the real shell ------------------------------------------------------------

@pytest.mark.slow
def test_the_whole_gate_typed_into_the_shell_ends_in_a_hosted_submission_with_the_servers_logs(
        host, real_workspaces, started, ready, media_root):
    import zipfile

    ws = workspaces.ensure_open(started)
    wait_for_socket(started)
    # the copy of grading/engine/sandbox/sandboxed grading.engine.sandbox.shell keeps beside the workspaces is no workspace of the host's
    assert list(Path(ws.folder).parent.glob("sandboxed-*")) and set(host.servers) == {started.pk}
    term = Term(ws)
    try:
        # the candidate's test first: it expects the refund to lower the total, and fails
        term.run("sed -i 's/== 1500/== 1300/' test_invoices.py; gate red; echo RC=$?", r"RC=(\d+)", timeout=120)
        assert "Red captured" in term.seen and "RC=0" in term.seen, term.seen
        red = GateReceipt.objects.get(invitation=started, step="red")
        assert red.accepted and red.captured_by == "server" and "1 failed" in red.log_text
        assert "== 1300" in red.log_text  # the server ran the test as the shell had just edited it
        term.run("gate status", r"Time left")
        assert "red" in term.seen.lower(), term.seen

        term.run("gate green; echo RC=$?", r"RC=(\d+)", timeout=120)  # before the model step: refused
        assert "gate model" in term.seen and "RC=1" in term.seen, term.seen
        term.run(f"mkdir -p artifacts && printf '%s\\n' '{PROMPT.decode().strip()}' > artifacts/prompt.txt; "
                 "gate model; echo RC=$?", r"RC=(\d+)", timeout=60)
        assert "RC=0" in term.seen, term.seen
        assert GateReceipt.objects.get(invitation=started, step="model").log_text == PROMPT.decode()

        # the fix, typed; then what a candidate might forge: their own logs and stamp
        term.run("""sed -i 's/abs(int(row\\["cents"\\]))/int(row["cents"])/' invoices.py; """
                 "echo '1 failed (my own)' > artifacts/red.log; echo '9 passed' > artifacts/green.log; "
                 "echo 1.0 > artifacts/model_allowed.at; gate green; echo RC=$?", r"RC=(\d+)", timeout=120)
        assert "RC=0" in term.seen, term.seen
        green = GateReceipt.objects.get(invitation=started, step="green", accepted=True)
        assert green.captured_by == "server" and "1 passed" in green.log_text

        # nor can the shell replace or add to what reaches the server: the socket's folder is read-only
        term.run("rm -f /run/takehome/gate.sock; echo RM=$?; touch /run/takehome/x; echo TOUCH=$?", r"TOUCH=(\d+)")
        assert "RM=0" not in term.seen and "TOUCH=0" not in term.seen, term.seen
        term.run("gate submit; echo RC=$?", r"RC=(\d+)", timeout=120)  # no reply, no refusal: not yet
        assert "artifacts/refuse.md is missing" in term.seen and "RC=1" in term.seen, term.seen
        assert not Submission.objects.filter(invitation=started).exists()
        term.run("echo 'Remove abs().' > artifacts/model.md; echo 'Dropping the refund rows hides the bug.' "
                 "> artifacts/refuse.md; gate submit; echo RC=$?", r"RC=(\d+)", timeout=120)
        assert "Submitted" in term.seen and "RC=0" in term.seen, term.seen
    finally:
        term.close()
    submission = Submission.objects.get(invitation=started)
    assert submission.via == "hosted"
    with zipfile.ZipFile(submission.archive.path) as zf:
        names = {n.split("/", 1)[1]: n for n in zf.namelist()}
        # nothing the shell wrote reaches a receipt or the stamp: the zip holds the server's own
        assert zf.read(names["artifacts/red.log"]).decode() == red.log_text
        assert zf.read(names["artifacts/green.log"]).decode() == green.log_text
        assert zf.read(names["artifacts/model_allowed.at"]) != b"1.0\n"
        assert b"int(row[\"cents\"])" in zf.read(names["invoices.py"])
    steps = GateReceipt.objects.filter(invitation=started, step__in=["red", "model", "green"])
    assert {r.captured_by for r in steps} == {"server"}
