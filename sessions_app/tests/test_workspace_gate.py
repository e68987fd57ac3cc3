"""The hosted session's server-side gate: captures through the real grading sandbox, submit through
grading, the `gate` command over a real unix socket, and the sweep (idle stop, deadline freeze).

The workspace itself (mounts, the shell) is grading.workspace, part A of step 10. Until it is merged
these tests put FolderWorkspaces in its place: the workspace's files in a plain folder, the shell
calls only noted. STAND-IN: the lead swaps it for the real grading.workspace at merge.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from sessions_app import actions, gate_host, workspaces
from sessions_app.models import GateReceipt, Submission, Workspace

from .conftest import url
from .helpers import HONEST_TEST, fix_invoices

GATE = Path(__file__).resolve().parents[2] / "grading" / "sandboxed" / "bin" / "gate"
PROMPT = b"invoices.py uses abs() on cents; refunds are negative. Propose a minimal patch.\n"


# --- STAND-IN for grading.workspace (part A): the files in a plain folder, the shell calls noted ----------

class FolderWorkspaces:
    """grading.workspace's interface over a plain folder (<folder>/home), for these tests only."""

    class WorkspaceUnavailable(Exception):
        pass

    class WorkspaceTooBig(Exception):
        pass

    @dataclass(frozen=True)
    class WorkspaceLimits:
        disk_bytes: int = 64 << 20
        inodes: int = 20000
        memory_bytes: int = 512 << 20
        processes: int = 128
        cpu_cores: float = 1.0
        file_size_bytes: int = 32 << 20
        nofile: int = 1024

    @dataclass(frozen=True)
    class Workspace:
        folder: Path
        uid: int
        runner_dir: Path
        limits: object = None

    def __init__(self):
        self.calls: list[tuple[str, int]] = []
        self.too_big = False

    def open_workspace(self, ws, seed) -> None:
        home = ws.folder / "home"
        if not home.exists():
            for path, data in seed.items():
                (home / path).parent.mkdir(parents=True, exist_ok=True)
                (home / path).write_bytes(data)
        self.calls.append(("open", ws.uid))

    def start_shell(self, ws) -> None:
        self.calls.append(("start_shell", ws.uid))

    def release(self, ws) -> None:
        self.calls.append(("release", ws.uid))

    def freeze(self, ws) -> None:
        self.calls.append(("freeze", ws.uid))

    def snapshot_files(self, ws) -> dict[str, bytes]:
        if self.too_big:
            raise self.WorkspaceTooBig("Your workspace holds more than 50 MB; remove large files, then try again.")
        home = ws.folder / "home"
        return {p.relative_to(home).as_posix(): p.read_bytes() for p in sorted(home.rglob("*"))
                if p.is_file() and "__pycache__" not in p.parts}


@dataclass
class Hosted:
    invitation: object
    backend: FolderWorkspaces
    ws: object = field(default=None)

    @property
    def home(self) -> Path:
        return self.ws.folder / "home"

    def write(self, path: str, data: bytes) -> None:
        (self.home / path).parent.mkdir(parents=True, exist_ok=True)
        (self.home / path).write_bytes(data)

    def failing_test(self) -> None:
        self.write("test_invoices.py", HONEST_TEST)

    def fix(self) -> None:
        self.write("invoices.py", fix_invoices((self.home / "invoices.py").read_bytes()))


@pytest.fixture
def backend(monkeypatch, settings, tmp_path):
    settings.WORKSPACES_DIR = tmp_path / "ws"
    stand_in = FolderWorkspaces()
    monkeypatch.setattr(workspaces, "backend", lambda: stand_in)
    return stand_in


@pytest.fixture
def hosted(started, backend, media_root):
    ws = workspaces.ensure_open(started)
    return Hosted(started, backend, ws)


def receipts(invitation, step):
    return list(GateReceipt.objects.filter(invitation=invitation, step=step).order_by("pk"))


# --- the workspace row -------------------------------------------------------------------------------------

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
    assert hosted.backend.calls[:2] == [("open", row.uid), ("start_shell", row.uid)]


@pytest.mark.django_db
def test_no_free_uid_is_a_clear_refusal(started, backend, settings):
    from takehome.tests.factories import InvitationFactory

    settings.WORKSPACE_SLOTS = 1
    workspaces.workspace_row(started)
    with pytest.raises(workspaces.WorkspaceFull, match="in use"):
        workspaces.workspace_row(InvitationFactory(packet_version=started.packet_version))


@pytest.mark.django_db
def test_touch_moves_last_seen_at_most_once_a_minute(hosted):
    old = timezone.now() - timedelta(hours=1)
    Workspace.objects.filter(invitation=hosted.invitation).update(last_seen_at=old)
    workspaces._touched.pop(hosted.invitation.pk, None)
    workspaces.touch(hosted.invitation)
    seen = Workspace.objects.get(invitation=hosted.invitation).last_seen_at
    assert seen > old
    Workspace.objects.filter(invitation=hosted.invitation).update(last_seen_at=old)
    workspaces.touch(hosted.invitation.pk)  # within the minute: no write
    assert Workspace.objects.get(invitation=hosted.invitation).last_seen_at == old


# --- captures through the real sandbox ----------------------------------------------------------------------

@pytest.mark.django_db
def test_red_on_the_sample_fixture_is_accepted_as_it_comes(hosted, ready):
    red = actions.do_capture(hosted.invitation, "red")
    assert red.accepted and red.captured_by == "server"
    assert "FAILED test_invoices.py::test_charges_only" in red.log_text
    assert "Red captured" in actions.capture_words(red, "python -m pytest -q")


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


@pytest.mark.django_db
def test_a_red_that_shows_no_failure_is_refused_and_kept(hosted, ready):
    hosted.write("test_invoices.py", b"def test_nothing_yet():\n    assert True\n")
    with_refusal = actions.do_capture(hosted.invitation, "red")
    assert not with_refusal.accepted
    assert "no failure" in with_refusal.refusal
    assert with_refusal.captured_by == "server" and "1 passed" in with_refusal.log_text


@pytest.mark.django_db
def test_green_first_is_refused_without_running_the_tests(hosted, monkeypatch):
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("the sandbox ran for a refused step"))
    receipt = actions.do_capture(hosted.invitation, "green")
    assert not receipt.accepted
    assert "skip, not a pass" in receipt.refusal
    words = actions.capture_words(receipt, "python -m pytest -q")
    assert "a pass: capture model (the button, or `gate model` in the terminal) first." in words
    assert "python gate.py" not in words


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


@pytest.mark.django_db
def test_a_green_that_still_fails_is_refused(hosted, ready):
    hosted.failing_test()
    assert actions.do_capture(hosted.invitation, "red").accepted
    hosted.write("artifacts/prompt.txt", PROMPT)
    assert actions.do_capture(hosted.invitation, "model").accepted
    green = actions.do_capture(hosted.invitation, "green")  # not fixed
    assert not green.accepted and "still red" in green.refusal


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
def test_before_start_a_capture_is_refused(invitation, backend):
    with pytest.raises(actions.SessionRefused, match="not started"):
        actions.do_capture(invitation, "red")


@pytest.mark.django_db
def test_a_capture_without_a_workspace_says_to_open_it(started, backend, media_root):
    with pytest.raises(actions.SessionRefused, match="open the workspace page first"):
        actions.do_capture(started, "red")
    with pytest.raises(actions.SessionRefused, match="open the workspace page first"):
        actions.do_submit_workspace(started)
    assert not Workspace.objects.exists() and not workspaces.folder_for(started).exists()


@pytest.mark.django_db
def test_a_second_capture_while_one_runs_is_refused(hosted, monkeypatch):
    monkeypatch.setattr(actions, "_run_tests", lambda *a: pytest.fail("two sandboxes over one workspace"))
    with actions._capture_lock(hosted.invitation):
        with pytest.raises(actions.SessionRefused, match="already running") as refused:
            actions.do_capture(hosted.invitation, "red")
    assert refused.value.code == "busy"
    assert not receipts(hosted.invitation, "red")


@pytest.mark.django_db
def test_a_workspace_too_big_is_refused_in_words(hosted):
    hosted.backend.too_big = True
    with pytest.raises(actions.SessionRefused, match="more than 50 MB"):
        actions.do_capture(hosted.invitation, "red")


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
    data = actions.hosted_archive(hosted.invitation, hosted.backend.snapshot_files(hosted.ws))
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = {n.split("/", 1)[1]: n for n in zf.namelist()}
        assert zf.read(names["artifacts/red.log"]) == b"the server's red\n"
        assert "artifacts/green.log" not in names  # no green captured: the candidate's is left out
        assert "artifacts/model_allowed.at" not in names
        assert zf.read(names["artifacts/notes.md"]) == b"my notes\n"
        assert len({i.date_time for i in zf.infolist()}) == 1


def test_server_capture_is_the_accepted_server_receipt_with_that_log():
    from grading.checks.receipts import server_capture
    from grading.checks.timeline import Receipt

    now = timezone.now()
    server = Receipt(step="red", at=now, log_text="1 failed in 0.1s\n", captured_by="server", id=7)
    candidate = Receipt(step="red", at=now, log_text="1 failed in 0.2s\n", id=8)
    refused = Receipt(step="red", at=now, log_text="2 failed\n", captured_by="server", accepted=False, id=9)
    assert server_capture("1 failed in 0.1s\r\n", [server, candidate]).id == 7
    assert server_capture("1 failed in 0.2s\n", [server, candidate]) is None
    assert server_capture("2 failed\n", [refused]) is None
    assert server_capture(None, [server]) is None


# --- the buttons -----------------------------------------------------------------------------------------

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
def test_an_unknown_step_or_link_gets_words(hosted, client):
    response = client.post(url("workspace-capture", hosted.invitation, step="blue"), HTTP_HX_REQUEST="true")
    assert "no step called" in response.content.decode()
    response = client.post("/t/not-a-token/workspace/submit")
    assert response.status_code == 404


@pytest.mark.django_db
def test_the_submit_button_refuses_after_the_deadline(hosted, client, settings):
    type(hosted.invitation).objects.filter(pk=hosted.invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 60))
    response = client.post(url("workspace-submit", hosted.invitation), HTTP_HX_REQUEST="true")
    assert "Time is up" in response.content.decode()


# --- the gate socket host ------------------------------------------------------------------------------------

@pytest.fixture
def host(transactional_db, backend):
    """serve_workspaces' GateHost on its own event loop in a thread; the loop stops with the test."""
    host = gate_host.GateHost(sweep_every_s=3600, discover_every_s=0.1)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(host.run(stop),), daemon=True)
    thread.start()
    yield host
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    loop.close()


def wait_for_socket(invitation) -> Path:
    path = gate_host.socket_path(invitation.pk)
    deadline = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < deadline, f"no gate socket at {path}"
        time.sleep(0.05)
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


def test_the_socket_is_world_writable_in_a_folder_only_root_writes(host, started):
    import stat

    workspaces.ensure_open(started)
    path = wait_for_socket(started)
    assert stat.S_ISSOCK(path.stat().st_mode) and stat.S_IMODE(path.stat().st_mode) == 0o666
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755


def test_gate_status_answers_over_the_socket(host, started):
    workspaces.ensure_open(started)
    path = wait_for_socket(started)
    done = gate(path, "status")
    assert done.returncode == 0, done.stderr
    assert "Time left" in done.stdout and "No step witnessed yet" in done.stdout


def test_gate_red_over_the_socket_is_a_server_capture_of_the_sockets_invitation(host, started, ready):
    from takehome.tests.factories import InvitationFactory

    other = InvitationFactory(packet_version=started.packet_version)
    actions.do_start_session(other)
    ws = workspaces.ensure_open(started)
    workspaces.ensure_open(other)
    (ws.folder / "home" / "test_invoices.py").write_bytes(HONEST_TEST)
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


def test_a_malformed_or_oversized_line_gets_an_error_and_the_host_goes_on(host, started):
    workspaces.ensure_open(started)
    path = wait_for_socket(started)
    assert "not one line of JSON" in send(path, b"red please\n")["error"]
    assert "Unknown command" in send(path, b'{"command": "rm -rf"}\n')["error"]
    assert "longer than 4096" in send(path, b"x" * 10000 + b"\n")["error"]
    assert send(path, b'{"command": "status"}\n')["ok"]


def test_one_gate_command_at_a_time_per_workspace(host, started, monkeypatch):
    workspaces.ensure_open(started)
    path = wait_for_socket(started)
    release = threading.Event()

    def slow(invitation_id, command):
        release.wait(10)
        return {"ok": True, "message": "done"}

    monkeypatch.setattr(gate_host, "answer", slow)
    first: list[dict] = []
    thread = threading.Thread(target=lambda: first.append(send(path, b'{"command": "red"}\n')))
    thread.start()
    deadline = time.monotonic() + 10
    while started.pk not in host.busy:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert "still running" in send(path, b'{"command": "status"}\n')["error"]
    release.set()
    thread.join(10)
    assert first == [{"ok": True, "message": "done"}]
    assert send(path, b'{"command": "status"}\n')["ok"]


def test_gate_without_a_socket_says_so(tmp_path):
    done = gate(tmp_path / "nothing.sock", "status")
    assert done.returncode == 3 and "cannot reach the server" in done.stderr
    assert gate(tmp_path / "nothing.sock", "dance").returncode == 2


def test_a_closed_workspace_stops_listening(host, started):
    workspaces.ensure_open(started)
    path = wait_for_socket(started)
    Workspace.objects.filter(invitation=started).update(closed=True)
    deadline = time.monotonic() + 10
    while path.exists():
        assert time.monotonic() < deadline, "the socket of a closed workspace stayed"
        time.sleep(0.05)


# --- the sweep ------------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_sweep_stops_idle_shells_and_freezes_workspaces_past_the_deadline(hosted, settings):
    from takehome.tests.factories import InvitationFactory

    late = InvitationFactory(packet_version=hosted.invitation.packet_version)
    actions.do_start_session(late)
    workspaces.ensure_open(late)
    busy = InvitationFactory(packet_version=hosted.invitation.packet_version)
    actions.do_start_session(busy)
    workspaces.ensure_open(busy)
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
    assert ("release", idle_row.uid) in hosted.backend.calls and ("freeze", frozen.uid) in hosted.backend.calls
    assert not Workspace.objects.get(invitation=busy).shell_stopped_at
    assert gate_host.sweep() == []  # nothing twice
    # the next visit starts the idle shell again
    workspaces.ensure_open(hosted.invitation)
    idle_row.refresh_from_db()
    assert idle_row.shell_stopped_at is None


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
        raise hosted.backend.WorkspaceUnavailable("umount failed")

    monkeypatch.setattr(hosted.backend, "freeze", broken)
    assert gate_host.sweep() == [f"stopped the idle shell of invitation {hosted.invitation.pk}"]
    assert not Workspace.objects.get(invitation=late).closed  # tried again at the next sweep


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
    with (settings.WORKSPACES_DIR / "serve_workspaces.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CommandError, match="Another serve_workspaces"):
            call_command("serve_workspaces")
    with pytest.raises(CommandError, match="above 0"):
        call_command("serve_workspaces", "--sweep-every", "0")
