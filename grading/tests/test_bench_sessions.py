"""bench/sessions.py runs end to end with two terminals and their editors, and leaves nothing behind, Ctrl-C included.

No timed asserts: the figures depend on the machine; what is checked is that
every character typed came back, the tests ran in the shells, every save from
the editor reached the disk, and the shells, mounts and servers are gone
afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import free_port, require
from shared import pytest_slots

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "sessions.py"


def load_module():
    spec = importlib.util.spec_from_file_location("bench_sessions", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def requirements() -> None:
    require(os.geteuid() == 0, "the workspaces mount a tmpfs: run the tests as root")
    require(shutil.which("tmux") is not None, "tmux is missing (apt-get install tmux)")
    require(shutil.which("redis-server") is not None, "redis-server is not installed (apt-get install redis-server)")


@pytest.fixture
def scratch():
    """The folder the bench makes its own in (its TMPDIR): short, for the Redis socket's path, and this test's
    alone, so that what is left under it is this run's (another suite's bench may be running beside it)."""
    folder = Path(tempfile.mkdtemp(prefix="tbs-", dir="/tmp"))
    folder.chmod(0o711)  # the workspaces' uids pass through it
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def bench_env(runner_dir, scratch: Path) -> dict:
    return {**os.environ, "TAKEHOME_RUNNER_DIR": str(runner_dir), "TMPDIR": str(scratch)}


def _mounts_under(scratch: Path) -> list[str]:
    return [line for line in Path("/proc/self/mounts").read_text().splitlines() if f" {scratch}/" in line]


def leftovers(uid_base: int, count: int, scratch: Path) -> list[str]:
    """Live processes of the bench's workspace uids and mounts under its folders that are still there."""
    found = [f"process {pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()!r}"
             for uid in range(uid_base, uid_base + count) for pid in _uid_pids(uid)]
    return found + _mounts_under(scratch)


def _clean_leftovers(uid_base: int, count: int, scratch: Path) -> None:
    for uid in range(uid_base, uid_base + count):
        for pid in _uid_pids(uid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for line in _mounts_under(scratch):
        subprocess.run(["umount", "-l", line.split()[1]], check=False)


def _end_with_servers(bench: subprocess.Popen) -> None:
    """Kill a benchmark still running, and the servers it started (each in a session of its own)."""
    if bench.poll() is not None:
        return
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1]) == bench.pid:
                os.killpg(int(name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
    bench.kill()
    bench.wait()


def _uid_pids(uid: int) -> list[int]:
    """Live processes of ``uid`` (an ended one that its parent has not yet reaped does not count)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if (os.stat(f"/proc/{name}").st_uid == uid
                        and Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"):
                    pids.append(int(name))
            except (OSError, IndexError):
                pass
    return pids


@pytest.mark.worker  # starts daphne and a redis-server
def test_sessions_bench_types_in_two_terminals_and_cleans_up(runner_dir, scratch):
    requirements()
    uid_base = pytest_slots.uids("bench_sessions")
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sessions", "2", "--duration", "12", "--tests-every", "5",
         "--save-every", "2", "--port", str(free_port()), "--uid-base", str(uid_base)],
        cwd=ROOT, env=bench_env(runner_dir, scratch), capture_output=True, text=True,
        timeout=300,  # a guard against a hang, not a measurement
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "sessions: 2 opened in" in out and "echoes lost: 0; commands stuck: 0" in out, out
    runs = int(out.split("test runs: ")[1].split()[0])
    assert runs >= 2, out  # each terminal ran the tests at least once
    assert "memory per session (" in out and "daphne: " in out, out
    assert "editor: open in 2 of 2 sessions" in out and "saves lost: 0" in out, out
    assert int(out.split("saves: ")[1].split(";")[0]) >= 2, out  # each editor saved at least once
    assert "\nsave p95: " in out, out
    assert out.strip().splitlines()[-1].startswith("echo p95: "), out
    assert leftovers(uid_base, 2, scratch) == [], done.stderr[-4000:]


@pytest.mark.worker
def test_ctrl_c_ends_the_shells_the_mounts_and_the_servers(runner_dir, scratch):
    requirements()
    uid_base = pytest_slots.uids("bench_sessions_shell")
    bench = subprocess.Popen(
        [sys.executable, str(BENCH), "--sessions", "1", "--duration", "120", "--port", str(free_port()),
         "--uid-base", str(uid_base)],
        cwd=ROOT, env=bench_env(runner_dir, scratch), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # why: started as a non-interactive shell starts a job in the background (`... &`), with SIGINT
        # ignored, which Python keeps; Ctrl-C must still end it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        line = bench.stdout.readline()  # printed once daphne answers, just before the terminals open
        assert line.startswith("sessions: 1 terminals"), line + bench.stderr.read()
        deadline = time.monotonic() + 60
        while not _uid_pids(uid_base) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _uid_pids(uid_base), "the workspace's shell never started"
        time.sleep(2)  # typing
        bench.send_signal(signal.SIGINT)
        try:
            # why this long: the clean-up may wait for a terminal's close (2 s) and each server's end (up
            # to 20 s each) on a loaded machine; a Ctrl-C that was not acted on at all ends the run at its
            # --duration, 120 s, with exit 0, and fails below rather than here
            out, err = bench.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            bench.send_signal(signal.SIGUSR1)  # where each of its threads is (faulthandler)
            time.sleep(1)
            _end_with_servers(bench)
            out, err = bench.communicate()
            _clean_leftovers(uid_base, 1, scratch)  # so that the next tests do not fail on this one's shell and mounts
            pytest.fail("the benchmark did not end after Ctrl-C; its threads:\n" + err[-6000:])
    finally:
        _end_with_servers(bench)
    assert bench.returncode == 130, out + err
    assert "interrupted; cleaning up" in err
    assert leftovers(uid_base, 1, scratch) == [], err[-4000:]


def test_the_report_fails_a_lost_echo_and_ends_with_the_p95(capsys):
    module = load_module()

    def session(number, latencies, lost=0):
        s = module.Session(number, "ws://unused", "http://unused")
        s.ws, s.latencies, s.lost = object(), latencies, lost
        return s

    result = {"open_s": 0.1, "memory": [3 << 20], "memory_how": "cgroup", "peaks": [24 << 20, 0],
              "daphne_before": 90 << 20, "daphne_peak": 100 << 20,
              "daphne_cpu": 3.0, "shell": [], "wall": 60.0, "load_end": 1.0}
    fine = [session(0, [float(n) for n in range(1, 101)]), session(1, [5.0])]
    assert module.report(None, {**result, "sessions": fine}) == 0
    out = capsys.readouterr().out
    assert "characters typed: 101; echoes lost: 0" in out
    assert "daphne: 90.0 MiB before the sessions, peak 100.0 MiB; 5.00 MiB per session; CPU 3.0 s in 60 s (5% of a core)" in out
    assert out.strip().splitlines()[-1] == "echo p95: 95.0 ms (target: under 50 ms)"

    assert module.report(None, {**result, "sessions": [session(0, [2.0, 3.0], lost=1)]}) == 1
    assert "echoes lost: 1" in capsys.readouterr().out

    with_editor = session(0, [2.0, 3.0])
    with_editor.editor = module.Editor("http://unused/t/x/workspace", "http://unused")
    with_editor.editor.saves, with_editor.editor.latencies, with_editor.editor.read_ms = 3, [10.0, 20.0, 30.0], 4.0
    assert module.report(None, {**result, "sessions": [with_editor]}) == 0
    out = capsys.readouterr().out
    assert "editor: open in 1 of 1 sessions (the file list and a file read: p50 4.0 ms); saves: 3; saves lost: 0" in out
    assert "save p95: 29.0 ms" in out and out.strip().splitlines()[-1].startswith("echo p95: ")
    with_editor.editor.lost = 1  # a save not answered as sent, or not on disk at the end
    assert module.report(None, {**result, "sessions": [with_editor]}) == 1
    assert "saves lost: 1" in capsys.readouterr().out


def test_the_channel_layers_redis_reads_outlast_its_blocking_wait():
    """redis-py 8 times a read out after 5 s by default, the very time channels_redis blocks
    waiting for a message: every idle terminal then closed after a few seconds (found by this bench)."""
    from channels_redis.core import RedisChannelLayer
    from django.conf import settings

    layer = settings.CHANNEL_LAYERS["default"]
    require("redis" in layer["BACKEND"].lower(), "TAKEHOME_CHANNEL_LAYER=memory: no Redis here")
    for host in layer["CONFIG"]["hosts"]:
        timeout = host.get("socket_timeout") if isinstance(host, dict) else 5
        assert timeout is None or timeout > RedisChannelLayer.brpop_timeout, host


def test_closing_a_session_does_not_wait_for_a_server_that_never_answers():
    """The clean-up after Ctrl-C closed each terminal with websocket-client's close(), which waits
    under the reader thread's frame lock for the server's close frame: a server slow to answer held
    it until the connection's 30 s timeout. A server that completes the handshake, then never
    writes again, stands in for it."""
    import base64
    import hashlib
    import socket
    import threading

    module = load_module()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    held = []

    def serve():
        try:
            conn, _ = listener.accept()
            held.append(conn)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            key = next(line.split(b":", 1)[1].strip() for line in request.split(b"\r\n")
                       if line.lower().startswith(b"sec-websocket-key:"))
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            while conn.recv(4096):  # reads what comes, answers nothing
                pass
        except OSError:
            pass  # why: the test ends by closing the sockets under this thread, which is still reading

    threading.Thread(target=serve, daemon=True).start()
    session = module.Session(0, f"ws://127.0.0.1:{port}/t/x/terminal", "http://127.0.0.1")
    try:
        session.open(ready_s=0)
        time.sleep(0.5)  # the reader is waiting in recv
        closer = threading.Thread(target=session.close, daemon=True)
        closer.start()
        closer.join(10)  # the connection's own timeout is 30 s
        assert not closer.is_alive(), "closing waited for the server's answer"
    finally:
        for conn in held:
            conn.close()
        listener.close()
