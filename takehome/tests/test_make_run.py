"""`make run` with real processes: whatever dies is restarted, Ctrl-C stops everything.

Each test starts `make -o setup run` (the set-up is done already) in a session of
its own, as a terminal would, on a port in 8310-8319, with a temporary
TAKEHOME_VAR_DIR (the private Redis, the logs and supervisord's control socket
live there) and the test database. It kills programs through supervisord's own
view of them (the control socket), and reads every process of the session from
/proc to prove that nothing is left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from conftest import ROOT, _wait_for, database_url, free_port, require
from grading.models import GradingRun
from sessions_app.actions import do_start_session
from sessions_app.gate.gate import multipart
from sessions_app.models import Submission
from sessions_app.tests.test_end_to_end import slow_zip
from shared.models import WorkerHeartbeat
from takehome.actions import do_load_sample_packet, sample_packet_dirs
from takehome.tests.factories import InvitationFactory, mark_checked

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
UP_WAIT_S = 120  # generous: a loaded 2-core machine starts Django four times over
PROGRAMS = ("redis", "worker", "beat", "workspaces", "web")
HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy



def session_pids(session: int) -> set[int]:
    """Every live process of a session, from /proc (zombies are already dead)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(fields[3]) == session and fields[0] != "Z":
            found.add(int(entry.name))
    return found


class MakeRun:
    """`make run` in a session of its own, and supervisord's control socket."""

    def __init__(self, env: dict, var: Path, log: Path):
        self.env, self.var, self.log, self.proc = env, var, log, None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.env['TAKEHOME_PORT']}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "-o", "setup", "run"], cwd=ROOT, env=self.env,
            stdout=self.log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def supervisor(self):
        from supervisor import childutils

        url = f"unix://{self.var}/supervisor/supervisor.sock"
        return childutils.getRPCInterface({"SUPERVISOR_SERVER_URL": url}).supervisor

    def running_pid(self, name: str) -> int | None:
        try:
            info = self.supervisor().getProcessInfo(name)
        except Exception:  # no socket yet, or supervisord busy starting
            return None
        return info["pid"] if info["statename"] == "RUNNING" else None

    def wait_up(self, name: str, other_than: int | None = None) -> int:
        """The pid of `name` once make run says it is up (and it is not `other_than`); web, once it answers.

        why make run's word too: supervisord calls a program running once it has
        lived startsecs (5 s for the worker), and on a loaded machine it can still
        be starting then; killed before it said it was ready, make run rightly
        calls that a failed start, not a death. why web answering as well: its
        ready line comes as daphne listens, a moment before it answers.
        """
        try:
            pid = _wait_for(lambda: (pid := self.running_pid(name)) and pid != other_than and pid,
                            UP_WAIT_S, f"{name} to be up", interval=0.25)
            self.wait_said(f"{name} is up (pid {pid})")
            if name == "web":
                _wait_for(self.answers, UP_WAIT_S, "the web server to answer", interval=0.25)
            return pid
        except AssertionError:
            raise AssertionError(f"{name} is not up; make run said:\n{self.tail()}")

    def answers(self) -> bool:
        try:
            with HTTP.open(self.base_url + reverse("login"), timeout=10) as response:
                return response.status == 200
        except OSError:
            return False

    def kill_group(self, name: str) -> int:
        """SIGKILL a program and everything in its process group, as `kill -9 -PGID` would."""
        pid = self.wait_up(name)
        os.killpg(pid, signal.SIGKILL)
        return pid

    def wait_ended(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"make run still running after {timeout} s:\n{self.tail()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_said(self, message: str) -> None:
        """Wait for make run's own line `system | message` (its listener can be a moment behind supervisord)."""
        _wait_for(lambda: f"system | {message}\n" in self.output(), UP_WAIT_S, f"make run to say {message!r}",
                  interval=0.25)

    def tail(self) -> str:
        """The end of the output for a failure message, without the probes' access-log lines."""
        lines = [line for line in self.output().splitlines() if " GET /accounts/login/ " not in line]
        return "\n".join(lines[-80:])

    def stop(self) -> None:
        """Whatever a test left running: SIGTERM to the session's group, then SIGKILL to stragglers."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                pass
        for pid in session_pids(self.proc.pid):
            os.kill(pid, signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def make_run(transactional_db, settings):
    require(shutil.which("redis-server") is not None, "redis-server is not installed (apt-get install redis-server)")
    require(shutil.which("make") is not None, "make is not installed (apt-get install make)")
    # why /tmp and a short name: the Redis and supervisord sockets live here, under 108 bytes.
    var = Path(tempfile.mkdtemp(prefix="th-run-"))
    var.chmod(0o755)  # the sandbox's uids must reach var/scratch
    env = {
        **os.environ,
        "DEBUG": "true",
        "TAKEHOME_VAR_DIR": str(var),
        "TAKEHOME_PORT": str(free_port()),
        "DATABASE_URL": database_url(),
        "TAKEHOME_RUNNER_DIR": str(settings.GRADING_RUNNER_DIR),  # built once, not per test
        # why: each worker start builds the environment of every packet in use (business-days's, with pip); under
        # the temporary var each start of each test built it again. The run's own is built once and shared,
        # and no test here is about that build (test_worker_faults.py is).
        "TAKEHOME_RUNNERS_DIR": str(settings.GRADING_RUNNERS_DIR),
        "TAKEHOME_WORKER_CONCURRENCY": "1",
        # why: the slow submission goes from red to green in seconds, which the grader would name.
        "TAKEHOME_MIN_RED_TO_GREEN_S": "0",
    }
    for name in ("CELERY_BROKER_URL", "SITE_URL", "TAKEHOME_MEDIA_ROOT", "TAKEHOME_SCRATCH_DIR"):
        env.pop(name, None)  # make run's own: the private Redis, everything under its var
    # The sample packets loaded and checked, as a second `make run` finds them: these tests are about
    # supervision, and the self-check that a first start runs (both packets, in the sandbox) is
    # test_self_check.py's and test_readme_commands.py's.
    for folder in sample_packet_dirs():
        packet, _ = do_load_sample_packet(send_check=False, folder=folder)
        mark_checked(packet.latest_version())
    run = MakeRun(env, var, var.parent / f"{var.name}.log")
    yield run
    run.stop()
    shutil.rmtree(var, ignore_errors=True)
    run.log.unlink(missing_ok=True)


class WebProbe:
    """GETs a page every 0.2 s in a thread; keeps every answer that is not a 200."""

    def __init__(self, url: str):
        self.url, self.answers, self.failures = url, 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with HTTP.open(self.url, timeout=30) as response:
                    response.read()
                self.answers += 1
            except Exception as exc:  # an HTTP error or a refused connection, as a person would see it
                self.failures.append(f"{time.strftime('%H:%M:%S')} {exc!r}")
            self._stop.wait(0.2)

    def __enter__(self) -> WebProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)

    def wait_answers(self, more: int) -> None:
        """Let the page answer `more` times again, so 'throughout' includes after the restart."""
        wanted = self.answers + more
        _wait_for(lambda: self.answers >= wanted or self.failures, 60, f"{more} more answers from {self.url}")


def wait_heartbeat(hostname: str, after) -> None:
    """The worker wrote its heartbeat after `after`: it is connected to Redis and the database."""
    _wait_for(lambda: WorkerHeartbeat.objects.filter(hostname=hostname, seen_at__gt=after).exists(),
              UP_WAIT_S, f"a heartbeat from {hostname}", interval=0.25)


def websocket_frames(port: int, path: str, origin: str) -> tuple[str, list[tuple[int, bytes]]]:
    """Open a WebSocket by hand and read what the server sends until it closes: (status line, [(opcode, payload)])."""
    import base64

    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\r\n")
    frames = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request.encode())
        stream = conn.makefile("rb")
        status = stream.readline().decode().strip()
        while stream.readline() not in (b"\r\n", b""):
            pass
        while status.startswith("HTTP/1.1 101"):
            head = stream.read(2)
            if len(head) < 2:
                break
            size = head[1] & 0x7F  # a server's frames are not masked
            if size == 126:
                size = int.from_bytes(stream.read(2), "big")
            elif size == 127:
                size = int.from_bytes(stream.read(8), "big")
            frames.append((head[0] & 0x0F, stream.read(size)))
            if frames[-1][0] == 8:  # close
                break
    return status, frames


def check_terminals_websocket_and_its_origin(make_run: MakeRun) -> None:
    port = int(make_run.env["TAKEHOME_PORT"])
    status, frames = websocket_frames(port, "/t/not-a-real-token/terminal", f"http://127.0.0.1:{port}")
    assert status.startswith("HTTP/1.1 101"), status
    said, closed = frames
    assert json.loads(said[1]) == {"close": {"code": 4401, "reason": "This link is not valid."}}
    assert closed[0] == 8 and int.from_bytes(closed[1][:2], "big") == 4401
    status, frames = websocket_frames(port, "/t/not-a-real-token/terminal", "https://evil.example")
    assert status.startswith("HTTP/1.1 403"), status


def ctrl_c(run: MakeRun) -> None:
    os.killpg(run.proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the whole foreground group


def sigterm_to_supervisord(run: MakeRun) -> None:
    os.kill(run.supervisor().getPID(), signal.SIGTERM)


def make_status(run: MakeRun) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "status"], cwd=ROOT, env=run.env, capture_output=True,
                          text=True, timeout=60)


def everything_up(make_run: MakeRun) -> dict[str, int]:
    """Start make run and wait for each program; their pids."""
    make_run.start()
    pids = {name: make_run.wait_up(name) for name in PROGRAMS}
    assert "Traceback" not in make_run.output(), make_run.tail()  # a clean start
    return pids


def check_status_shows_each_program_running(make_run: MakeRun, pids: dict[str, int]) -> None:
    status = make_status(make_run)
    assert status.returncode == 0, status.stdout + status.stderr
    for name, pid in pids.items():
        assert re.search(rf"^{name} +RUNNING +pid {pid}, uptime \d+:\d\d:\d\d$", status.stdout, re.M), status.stdout


def check_a_killed_worker_is_restarted_while_the_web_server_keeps_answering(make_run: MakeRun) -> None:
    with WebProbe(make_run.base_url + reverse("login")) as web:
        web.wait_answers(3)
        killed_at = timezone.now()
        old = make_run.kill_group("worker")
        new = make_run.wait_up("worker", other_than=old)
        wait_heartbeat(socket.gethostname(), after=killed_at)  # the new worker says so as it starts
        web.wait_answers(3)
    assert not web.failures, "\n".join(web.failures) + "\n" + make_run.tail()
    assert new != old
    make_run.wait_said(f"worker died (pid {old}); restarting it")


def check_killed_redis_and_beat_are_restarted_and_the_worker_finds_redis_again(make_run: MakeRun) -> None:
    from shared.tasks import record_heartbeat
    from takehome.celery import app

    with WebProbe(make_run.base_url + reverse("login")) as web:
        for name in ("redis", "beat"):
            old = make_run.kill_group(name)
            assert make_run.wait_up(name, other_than=old) != old
        # A task through the restarted Redis reaches the worker, which reconnected by itself.
        broker = f"redis+socket://{make_run.var}/redis/redis.sock"
        sent_at = timezone.now()
        with app.connection_for_write(broker) as connection:
            record_heartbeat.apply_async(args=["after-redis-died"], connection=connection)
        try:
            wait_heartbeat("after-redis-died", after=sent_at)
        except AssertionError as exc:
            # why the output: the worker's own lines (labelled worker) say whether it reconnected at all
            raise AssertionError(f"{exc}; make run said:\n{make_run.tail()}") from None
        web.wait_answers(3)
    assert not web.failures, "\n".join(web.failures) + "\n" + make_run.tail()


def check_stopping_leaves_no_process_behind_and_no_error(make_run: MakeRun, stop) -> None:
    everything = session_pids(make_run.proc.pid)
    assert len(everything) >= 8  # make, the launcher, supervisord, its listener, five programs, their children

    # why only what comes after the stop: a program killed earlier in the same run (Redis) has the others
    # log the lost connection, tracebacks and all, which is no error of stopping
    before = len(make_run.output())
    stop(make_run)
    status = make_run.wait_ended()
    output = make_run.output()
    assert session_pids(make_run.proc.pid) == set(), output[-4000:]
    assert not {pid for pid in everything if Path(f"/proc/{pid}").exists()}
    # make prints "Error N" when the recipe fails; it stays quiet when the run ends as asked.
    # On Ctrl-C make itself ends by the signal, as every program does (the shell's $? is 130).
    stopping = output[before:]
    assert not re.search(r"make(\[\d+\])?: \*\*\*", stopping) and "Traceback" not in stopping, stopping[-4000:]
    assert status in (0, -signal.SIGINT), output[-4000:]
    assert output.rstrip().endswith("Everything stopped."), output[-4000:]
    # The log-in line names the port the web server listened on.
    assert f"Log in at {make_run.base_url}/ with:" in output


def post_json(run: MakeRun, path: str, body: str) -> tuple[int, dict]:
    request = urllib.request.Request(run.base_url + path, data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json", "X-Takehome-Client": "gate"})
    try:
        with HTTP.open(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def check_candidates_get_the_model_the_environment_names(make_run: MakeRun, invitation, upstream) -> None:
    from sessions_app.tests.helpers import RED_LOG, receipt

    token = invitation.raw_token
    red = reverse("sessions_app:gate-step", kwargs={"token": token, "step": "red"})
    assert post_json(make_run, red, receipt(RED_LOG))[0] == 201
    chat = reverse("sessions_app:model-chat", kwargs={"token": token})
    status, reply = post_json(make_run, chat, json.dumps({"messages": [{"role": "user", "content": "Why?"}]}))
    assert status == 200, f"{reply}\n{make_run.tail()}"
    assert [got["body"]["model"] for got in upstream.got] == ["qwen2.5-coder:7b"]


def test_one_make_run_gives_the_model_restarts_whatever_dies_and_sigterm_stops_it_cleanly(make_run, sample_packet):
    """What only observes or kills a program shares one make run (each start is Django four times over).

    It is docs/operations.md's `TAKEHOME_MODEL_URL=... TAKEHOME_MODEL_NAME=... make run`, a fake upstream standing
    in for Ollama; at the end SIGTERM to supervisord (as a service manager stops it) stops everything, leaving
    nothing. Ctrl-C's stop is the fault test's below.
    """
    from sessions_app.tests.conftest import serve_on

    invitation = InvitationFactory(packet_version=sample_packet.latest_version())  # its policy: the default
    do_start_session(invitation)
    upstream = serve_on()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        make_run.env.update(TAKEHOME_MODEL_URL=upstream.base_url, TAKEHOME_MODEL_NAME="qwen2.5-coder:7b")
        pids = everything_up(make_run)
        check_candidates_get_the_model_the_environment_names(make_run, invitation, upstream)
    finally:
        upstream.shutdown()
        upstream.server_close()
    check_status_shows_each_program_running(make_run, pids)
    check_terminals_websocket_and_its_origin(make_run)
    check_a_killed_worker_is_restarted_while_the_web_server_keeps_answering(make_run)
    check_killed_redis_and_beat_are_restarted_and_the_worker_finds_redis_again(make_run)
    check_stopping_leaves_no_process_behind_and_no_error(make_run, sigterm_to_supervisord)
    status = make_status(make_run)
    assert status.returncode == 0 and not status.stderr, status.stdout + status.stderr
    assert status.stdout == (f"make run is not running here: no supervisord answers on "
                             f"{make_run.var}/supervisor/supervisor.sock.\nStart it with: make run\n")


def test_a_port_in_use_stops_make_run_with_the_reason(make_run):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", int(make_run.env["TAKEHOME_PORT"])))
        taken.listen()
        make_run.start()
        status = make_run.wait_ended()
    output = make_run.output()
    assert status == 2, output  # make's own status for a recipe that failed
    assert f"Something already answers on 127.0.0.1:{make_run.env['TAKEHOME_PORT']}" in output
    assert "TAKEHOME_PORT=8001 make run" in output
    assert session_pids(make_run.proc.pid) == set()


def test_a_program_that_never_starts_is_given_up_on_and_everything_stops(make_run):
    # Bound but not listening: nothing answers, so the launcher's check passes, yet daphne
    # cannot bind. It exits at once, each time before supervisord calls it up.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", int(make_run.env["TAKEHOME_PORT"])))
        make_run.start()
        # why so long: a guard against restarting for ever, not a guess; four failed starts of daphne took
        # 30 s each with two suites on two cores
        status = make_run.wait_ended(timeout=600)
    output = make_run.output()
    assert status == 2, output[-4000:]
    assert "system | web exited before it was up (try 1); starting it again" in output
    assert "system | web could not be started: stopping everything" in output
    assert "make run stopped: web could not be started" in output
    assert f"{make_run.var}/log/web.log" in output
    assert "Address already in use" in output  # daphne's own words, labelled web
    assert session_pids(make_run.proc.pid) == set()


# --- the fault test ------------------------------------------------------------------


def submission_status(submission_id: int) -> str:
    return Submission.objects.get(pk=submission_id).status


def outcomes(submission_id: int) -> list[str]:
    """How each of the submission's grading runs ended, in order: what says it was graded once."""
    return list(GradingRun.objects.filter(submission_id=submission_id).order_by("attempt")
                .values_list("outcome", flat=True))


def upload_over_http(run: MakeRun, invitation, data: bytes) -> int:
    """POST a zip to the upload endpoint as gate.py does; returns the submission's id."""
    body, content_type = multipart("archive", "work.zip", data)
    url = run.base_url + reverse("sessions_app:upload", kwargs={"token": invitation.raw_token})
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": content_type, "X-Takehome-Client": "gate"})
    with HTTP.open(request, timeout=60) as response:
        assert response.status == 201
        return json.load(response)["submission"]


@pytest.fixture
def grading_under_make_run(make_run, sample_packet) -> int:
    """make run, grading a submission whose own tests take a few seconds; its id."""
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    make_run.start()
    for name in PROGRAMS:
        make_run.wait_up(name)
    submission_id = upload_over_http(make_run, invitation, slow_zip())
    _wait_for(lambda: submission_status(submission_id) == "grading", UP_WAIT_S,
              "the worker to start grading", interval=0.05)
    return submission_id


def test_a_worker_killed_mid_grading_is_graded_once_and_ctrl_c_mid_grading_lets_it_finish(make_run,
                                                                                         grading_under_make_run,
                                                                                         sample_packet):
    """The issue's fault test (a worker killed mid-grading), then Ctrl-C while the restarted worker grades
    the next upload: Celery's warm shutdown finishes that grading before anything stops."""
    submission_id = grading_under_make_run
    with WebProbe(make_run.base_url + reverse("login")) as web:
        killed = make_run.kill_group("worker")
        killed_at = time.monotonic()
        make_run.wait_up("worker", other_than=killed)
        try:
            # The issue's own bound: graded within two minutes of the kill.
            _wait_for(lambda: submission_status(submission_id) in Submission.FINISHED,
                      120 - (time.monotonic() - killed_at), "the submission to be graded", interval=0.25)
        except AssertionError:
            raise AssertionError(f"still {submission_status(submission_id)!r} two minutes after the kill; "
                                 f"make run said:\n{make_run.tail()}")
        web.wait_answers(3)
    assert not web.failures, "\n".join(web.failures)
    assert submission_status(submission_id) == "graded"
    # Graded once: the killed run is lost, one more run graded it, and no duplicate message graded it again.
    assert outcomes(submission_id) == ["lost", "graded"], make_run.tail()

    # Ctrl-C while grading: Celery's warm shutdown, the worker's processes finish the grading before they stop.
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    second = upload_over_http(make_run, invitation, slow_zip())
    _wait_for(lambda: submission_status(second) == "grading", UP_WAIT_S, "the worker to start grading",
              interval=0.05)
    check_stopping_leaves_no_process_behind_and_no_error(make_run, ctrl_c)
    assert submission_status(second) == "graded", make_run.tail()
    assert outcomes(second) == ["graded"], make_run.tail()  # the one run, finished
