#!/usr/bin/env python
"""Capacity of hosted sessions: N candidates typing in their terminals at once, against the real stack.

Standalone, like bench/load.py. In a temporary folder it sets up what `make run`
serves for the terminal: a migrated SQLite database, a private redis-server on a
unix socket (the channel layer), and daphne serving takehome.asgi on 127.0.0.1.
It loads the sample packet in `both` mode, invites and starts N candidates whose
workspaces take uids from --uid-base (64000, a range no test uses), and opens N
real WebSockets to /t/<token>/terminal at once.

Each session types at a human pace (one character every 100-200 ms): short
commands, and now and then `python -m pytest -q` in its shell, so the shells do
real work while the others type. For every character typed it measures the
echo latency: from sending the character to seeing it come back in the output.

Each session also opens the editor as the workspace page does: it loads the page
(the session's CSRF cookie and token, as a browser gets them), lists the files,
reads a source file, creates artifacts/notes.md, and then saves it through the
editor's save endpoint every --save-every seconds (the text it read as the base,
as the editor sends it), measuring each save's latency. A save is lost when it
did not answer 200 with the sha256 of the text sent, or when the file read back
at the end is not the last text saved.

It prints the echo latency p50/p95/max over all sessions, the memory per session
(the workspace cgroup's memory usage, or the resident memory of the workspace
uid's processes where there is no cgroup) and daphne's growth in resident memory
per session, all with the editor's requests made; then the save latency
p50/p95/max ("save p95: X ms"). The last line is "echo p95: X ms (target: under
50 ms)". Exit status 1 when a session could not open, a character's echo never
came, or a save was lost.

Everything it started ends on the way out, Ctrl-C included: the sockets, the
shells, the workspaces' mounts and cgroups, daphne, redis and the folder.

    .venv/bin/python bench/sessions.py [--sessions 20] [--duration 60] [--tests-every 30]
        [--save-every 10] [--port 8600] [--uid-base 64000] [--keep]
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import http.cookiejar
import json
import os
import random
import shutil
import signal
import statistics
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# why: run as a script, this folder comes first on sys.path, and bench/grading.py
# would shadow the grading package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from bench import load  # noqa: E402
from bench.load import Servers, answers, runner_dir, start_redis, wait_for  # noqa: E402
from grading.engine.runner import RunnerUnavailable, ensure_runner  # noqa: E402

ECHO_TIMEOUT_S = 10.0  # a character not echoed by then counts as lost
COMMAND_TIMEOUT_S = 180.0  # a command (the tests included) that has not finished by then counts as stuck
TARGET_MS = 50.0
SAVE_TIMEOUT_S = 30.0  # a save not answered by then counts as lost
NOTES = "artifacts/notes.md"  # the file each session's editor saves
WORDS = ["alpha", "bravo", "delta", "kilo", "lima", "oscar", "sierra", "tango", "whisky", "zulu"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="concurrent terminals (default 20)")
    parser.add_argument("--duration", type=float, default=60.0,
                        help="seconds each session types for once all are open (default 60)")
    parser.add_argument("--tests-every", type=float, default=30.0,
                        help="seconds between a session's runs of `python -m pytest -q` (default 30)")
    parser.add_argument("--save-every", type=float, default=10.0,
                        help="seconds between a session's saves from the editor (default 10)")
    parser.add_argument("--port", type=int, default=8600, help="daphne's port on 127.0.0.1 (default 8600)")
    parser.add_argument("--uid-base", type=int, default=64000,
                        help="the workspaces' first uid (default 64000, clear of the tests' and grading's)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, database)")
    args = parser.parse_args(argv)
    if (args.sessions < 1 or args.duration <= 0 or args.tests_every <= 0 or args.save_every <= 0
            or not 1024 <= args.port < 65536):
        parser.error("--sessions at least 1, --duration, --tests-every and --save-every above 0, "
                     "--port from 1024 to 65535")
    return args


def configure(folder: Path, args: argparse.Namespace, broker: str) -> dict:
    """The environment of this process and of daphne: bench/load.py's, with the workspaces' settings."""
    env = load.configure(folder, argparse.Namespace(database_url="", port=args.port), broker)
    env.pop("TAKEHOME_CHANNEL_LAYER", None)  # why: the terminals' channel layer is the real one, on Redis
    env.update({
        "TAKEHOME_WORKSPACES_DIR": str(folder / "workspaces"),
        "TAKEHOME_WORKSPACE_UID_BASE": str(args.uid_base),
        "TAKEHOME_WORKSPACE_SLOTS": str(args.sessions),
    })
    return env


def make_invitations(count: int) -> list:
    """The sample packet, offered in both modes, and ``count`` candidates who pressed Start."""
    from django.core.management import call_command

    from sessions_app.actions import do_start_session
    from takehome.actions import InviteRow, do_check_version_now, do_invite_candidates, do_load_sample_packet
    from takehome.models import PacketVersion

    call_command("migrate", verbosity=0)
    packet, _ = do_load_sample_packet()
    version = packet.latest_version()
    if version.work_mode != PacketVersion.WorkMode.BOTH:
        PacketVersion.objects.filter(pk=version.pk).update(work_mode=PacketVersion.WorkMode.BOTH)
        version.refresh_from_db()
    if version.refusal_to_invite():  # a fresh database: the packet checks itself first
        do_check_version_now(version)
    rows = [InviteRow(line=i + 1, name=f"Session Candidate {i:03d}", email=f"session{i}@example.com")
            for i in range(count)]
    invitations = [new.invitation for new in do_invite_candidates(version, rows, send=False)]
    for invitation in invitations:
        do_start_session(invitation)
    return invitations


# --- one candidate at the keyboard ---------------------------------------------------------


class Editor:
    """The workspace page's editor, over HTTP as the page's script calls it (static/sessions_app/editor.js)."""

    def __init__(self, page: str, origin: str):
        self.page, self.origin = page, origin  # the workspace page's URL; the editor's endpoints are under it
        self.latencies: list[float] = []  # ms, one per save answered
        self.saves = 0
        self.lost = 0  # saves not answered 200 with the text's sha256, or not on disk at the end
        self.read_ms = 0.0  # the page's first look: the tree and a file read
        self.base = ""  # the sha256 of what is on disk, as the editor last read or saved it
        self.text = ""
        self._csrf = ""
        self._opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def _call(self, path: str, body: dict | None = None) -> tuple[int, dict | str]:
        """GET (no body) or POST JSON to ``path`` under the page; (status, the JSON answer or the page's text)."""
        headers = {"Accept": "application/json", "Origin": self.origin, "Referer": self.page}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers.update({"Content-Type": "application/json", "X-CSRFToken": self._csrf})
        request = urllib.request.Request(self.page + path, data=data, headers=headers)
        try:
            with self._opener.open(request, timeout=SAVE_TIMEOUT_S) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        if path == "":
            return status, raw.decode("utf-8", "replace")
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, {"message": raw[:200].decode("utf-8", "replace")}

    def open(self) -> None:
        """Load the page (its CSRF cookie and token), list the files, read one, and create the notes it saves."""
        status, page = self._call("")
        if status != 200:
            raise RuntimeError(f"the workspace page answered {status}")
        # why the page's token: the editor sends the one the page carries (<body hx-headers>), as a browser does
        marker = '"X-CSRFToken": "'
        if marker not in page:
            raise RuntimeError("the workspace page carries no CSRF token")
        self._csrf = page.split(marker, 1)[1].split('"', 1)[0]
        started = time.perf_counter()
        status, tree = self._call("/files")
        if status != 200:
            raise RuntimeError(f"the file list answered {status}: {tree}")
        sources = [e["path"] for e in tree["entries"] if e["kind"] == "file" and e["path"].endswith(".py")]
        status, found = self._call("/files/read?" + urllib.parse.urlencode({"path": (sources or [NOTES])[0]}))
        if status != 200:
            raise RuntimeError(f"reading a file answered {status}: {found}")
        self.read_ms = (time.perf_counter() - started) * 1000
        status, made = self._call("/files/create", {"path": NOTES})
        if status == 200:
            self.base = hashlib.sha256(b"").hexdigest()
        else:  # there already (a workspace used before): the editor opens it first
            status, found = self._call("/files/read?" + urllib.parse.urlencode({"path": NOTES}))
            if status != 200:
                raise RuntimeError(f"{NOTES} could neither be created nor read: {made}")
            self.base = found["sha256"]

    def save(self, text: str) -> None:
        """Save ``text`` as the notes, naming the sha256 last read or saved; a save not answered as sent is lost."""
        self.saves += 1
        sent = time.perf_counter()
        try:
            status, answer = self._call("/files/save", {"path": NOTES, "text": text, "base": self.base})
        except OSError:
            self.lost += 1
            return
        self.latencies.append((time.perf_counter() - sent) * 1000)
        expected = hashlib.sha256(text.encode()).hexdigest()
        if status != 200 or answer.get("sha256") != expected:
            self.lost += 1
            return
        self.base, self.text = expected, text

    def check(self) -> None:
        """The notes read back: a last save that is not on disk counts as lost."""
        if not self.text:
            return
        try:
            status, found = self._call("/files/read?" + urllib.parse.urlencode({"path": NOTES}))
        except OSError:
            status, found = 0, {}
        if status != 200 or found.get("sha256") != self.base:
            self.lost += 1


class Session:
    """One terminal over a real WebSocket: a reader thread collects output, the typist waits on it."""

    def __init__(self, number: int, url: str, origin: str, page: str = ""):
        self.number, self.url, self.origin = number, url, origin
        self.editor = Editor(page, origin) if page else None
        self.latencies: list[float] = []  # ms, one per character typed
        self.lost = 0  # characters whose echo never came
        self.stuck = 0  # commands that did not finish
        self.tests_run = 0
        self.error = ""
        self.ws = None
        self._cond = threading.Condition()
        self._output: list[str] = []  # every frame received
        self._received: list[float] = []  # perf_counter when each frame came, taken by the reader
        self._closed = False

    def open(self, ready_s: float = 120) -> None:
        """Connect, and wait (``ready_s``; 0: not at all) until the server says the shell is attached."""
        import websocket

        self.ws = websocket.create_connection(self.url, origin=self.origin, timeout=30,
                                              enable_multithread=True)
        threading.Thread(target=self._read, daemon=True, name=f"session-{self.number}").start()
        # why: the server accepts at once and says {"ready": true} once the shell is attached, as the page waits
        if ready_s and self._wait_for('{"ready": true}', 0, ready_s) is None:
            raise RuntimeError(self.error or f"the shell was not ready within {ready_s:g} s")

    def _read(self) -> None:
        import websocket

        try:
            while True:
                frame = self.ws.recv()
                if isinstance(frame, bytes):
                    frame = frame.decode("utf-8", "replace")
                if frame.startswith('{"close"'):
                    try:
                        self.error = self.error or json.loads(frame)["close"]["reason"]
                    except (ValueError, KeyError, TypeError):
                        pass
                received = time.perf_counter()
                with self._cond:
                    self._output.append(frame)
                    self._received.append(received)
                    self._cond.notify_all()
        except (websocket.WebSocketException, OSError):
            pass
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def _wait_for(self, needle: str, start: int, timeout: float) -> int | None:
        """The index of the first frame from ``start`` on whose text holds ``needle``, or None on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(start, len(self._output)):
                    if needle in self._output[i]:
                        return i
                # why look across frames: a command's output may be split between two
                if needle in "".join(self._output[start:]):
                    return len(self._output) - 1
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return None
                self._cond.wait(left)

    def _mark(self) -> int:
        with self._cond:
            return len(self._output)

    def type_line(self, line: str, done: str, timeout: float = COMMAND_TIMEOUT_S) -> bool:
        """Type ``line`` a character at a time, then Enter, and wait for ``done`` in what follows."""
        for char in line:
            gap = random.uniform(0.1, 0.2)
            mark = self._mark()
            sent = time.perf_counter()
            self.ws.send(char)
            # why the reader's time, not ours: the typist's own wake-up is not the server's delay
            if (found := self._wait_for(char, mark, ECHO_TIMEOUT_S)) is None:
                self.lost += 1
                if self._closed:
                    return False
            else:
                self.latencies.append((self._received[found] - sent) * 1000)
            time.sleep(max(0.0, gap - (time.perf_counter() - sent)))
        mark = self._mark()
        self.ws.send("\r")
        if self._wait_for(done, mark, timeout) is None:
            self.stuck += 1
            return False
        return True

    def work(self, until: float, tests_every: float, save_every: float = 10.0) -> None:
        """Commands at a human pace until ``until``; the tests every ``tests_every`` seconds, first at a random
        point; with the editor open beside the terminal, a save every ``save_every`` seconds between commands."""
        next_tests = time.monotonic() + random.uniform(0, tests_every)
        next_save = time.monotonic() + random.uniform(0, save_every)
        n = 0
        try:
            if self.editor is not None:
                self.editor.open()
            # why the arithmetic: what is awaited ("ok-21") appears only once the shell ran
            # the line, never in the echo of the characters typed ("ok-$((3*7))").
            self.type_line("clear; echo ready-$((6*7))", "ready-42", timeout=60)
            while time.monotonic() < until and not self._closed:
                n += 1
                if time.monotonic() >= next_tests:
                    if self.type_line("python -m pytest -q; echo tests-done-$((5*5))", "tests-done-25"):
                        self.tests_run += 1
                    next_tests = time.monotonic() + tests_every
                else:
                    word = random.choice(WORDS)
                    self.type_line(f"echo {word} {n}-$(({n}*3))", f"{n}-{n * 3}", timeout=30)
                if self.editor is not None and time.monotonic() >= next_save:
                    self.editor.save(f"# Notes\n\nSession {self.number}, line {n}.\n" * (1 + n % 40))
                    next_save = time.monotonic() + save_every
                time.sleep(random.uniform(0.3, 1.0))  # a pause to read, as a person does
            if self.editor is not None:
                self.editor.check()
        except Exception as exc:  # noqa: BLE001 - any failure is this session's, reported with the others
            self.error = self.error or f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        # why not ws.close(): it reads the server's close frame under the frame lock that the reader
        # thread holds while it waits in recv with no timeout, so a server slow to answer (a loaded
        # machine) held the clean-up there, Ctrl-C included. The close frame is sent, then the socket
        # is shut down, which wakes the reader.
        if self.ws is None:
            return
        for step in (self.ws.send_close, self.ws.abort, self.ws.shutdown):
            try:
                step()
            except Exception:  # noqa: BLE001 - closing on the way out, whatever state it is in
                pass


# --- memory --------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def uid_rss(uid: int) -> int:
    """The resident memory of every process of ``uid`` (an approximation: shared pages count for each)."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                total += rss_bytes(int(name))
        except OSError:
            pass
    return total


def workspace_memory(ws) -> tuple[int, str]:
    """(bytes, how measured) of one workspace: its memory cgroup's usage, else its uid's processes' RSS."""
    from grading.engine.sandbox import shell

    for path in shell._cgroups(ws, create=False)[:1]:
        for name in ("memory.current", "memory.usage_in_bytes"):
            try:
                return int((path / name).read_text()), "cgroup"
            except (OSError, ValueError):
                continue
    return uid_rss(ws.uid), "RSS of its uid"


def workspace_peak(ws) -> int:
    """The highest memory use of the workspace's cgroup since it was made (0 without a cgroup that keeps it)."""
    from grading.engine.sandbox import shell

    for path in shell._cgroups(ws, create=False)[:1]:
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            try:
                return int((path / name).read_text())
            except (OSError, ValueError):
                continue
    return 0


def daphne_rss(servers: Servers) -> int:
    """daphne's own resident memory (its children, each terminal's sandboxed tmux client, count as the session's)."""
    return rss_bytes(servers.procs["web"].pid)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of the process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def shell_latencies(path: Path) -> list[float]:
    """From a recording: ms from each typed character ("i") to the next output holding it ("o").

    The part of the echo spent behind the pty (tmux, the shell and back, and daphne's
    turn to read it); the rest of the echo is the socket, daphne's receive and the client.
    """
    from grading.engine.asciicast import read_events

    try:
        _, events = read_events(path)
    except (OSError, ValueError):
        return []
    found, pending = [], None
    for event in events:
        if event.code == "i" and len(event.data) == 1 and event.data.isprintable():
            pending = event
        elif event.code == "o" and pending is not None and pending.data in event.data:
            found.append((event.time - pending.time) * 1000)
            pending = None
    return found


# --- the run -------------------------------------------------------------------------------


def percentile(values: list[float], q: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def run_sessions(args: argparse.Namespace, invitations: list, servers: Servers, workspaces: list) -> dict:
    origin = f"http://127.0.0.1:{args.port}"
    sessions = [Session(i, f"ws://127.0.0.1:{args.port}/t/{inv.link_token()}/terminal?cols=100&rows=30", origin,
                        page=f"{origin}/t/{inv.link_token()}/workspace")
                for i, inv in enumerate(invitations)]
    before = daphne_rss(servers)
    daphne_pid = servers.procs["web"].pid
    cpu_before = cpu_seconds(daphne_pid)
    opened = time.monotonic()
    try:
        for session in sessions:
            try:
                session.open()
            except Exception as exc:  # noqa: BLE001 - a session that cannot open is a failure to report
                session.error = f"could not open: {type(exc).__name__}: {exc}"
        open_s = time.monotonic() - opened
        until = time.monotonic() + args.duration
        threads = [threading.Thread(target=s.work, args=(until, args.tests_every, args.save_every), daemon=True)
                   for s in sessions if s.ws is not None]
        for thread in threads:
            thread.start()
        samples: list[int] = []
        how = ""
        peak_daphne = before
        while any(t.is_alive() for t in threads):
            servers.check_running()
            for ws in workspaces:
                used, how = workspace_memory(ws)
                if used:
                    samples.append(used)
            peak_daphne = max(peak_daphne, daphne_rss(servers))
            for thread in threads:
                thread.join(timeout=2.0 / max(len(threads), 1))
        peaks = [workspace_peak(ws) for ws in workspaces]
        shell = [ms for ws in workspaces for ms in shell_latencies(Path(ws.folder) / "session.cast")]
        daphne_cpu = cpu_seconds(daphne_pid) - cpu_before
        wall = time.monotonic() - opened
    finally:
        for session in sessions:
            session.close()
    return {"sessions": sessions, "open_s": open_s, "memory": samples, "memory_how": how, "peaks": peaks,
            "daphne_before": before, "daphne_peak": peak_daphne,
            "daphne_cpu": daphne_cpu, "shell": shell, "wall": wall, "load_end": os.getloadavg()[0]}


def report(args: argparse.Namespace, result: dict) -> int:
    sessions = result["sessions"]
    latencies = [ms for s in sessions for ms in s.latencies]
    lost = sum(s.lost for s in sessions)
    stuck = sum(s.stuck for s in sessions)
    failed = [s for s in sessions if s.error or s.ws is None]
    print(f"sessions: {len(sessions)} opened in {result['open_s']:.1f} s; characters typed: "
          f"{len(latencies) + lost}; echoes lost: {lost}; commands stuck: {stuck}; "
          f"test runs: {sum(s.tests_run for s in sessions)}")
    for session in failed:
        print(f"  session {session.number}: {session.error or 'failed'}")
    mib = 1 << 20
    if result["memory"]:
        print(f"memory per session ({result['memory_how']}): mean {statistics.mean(result['memory']) / mib:.1f} MiB, "
              f"max {max(result['memory']) / mib:.1f} MiB (sampled every 2 s)")
    if any(result["peaks"]):
        print(f"memory per session, the cgroup's peak (a test run included): mean "
              f"{statistics.mean(result['peaks']) / mib:.1f} MiB, max {max(result['peaks']) / mib:.1f} MiB")
    growth = max(0, result["daphne_peak"] - result["daphne_before"])
    print(f"daphne: {result['daphne_before'] / mib:.1f} MiB before the sessions, peak "
          f"{result['daphne_peak'] / mib:.1f} MiB; {growth / len(sessions) / mib:.2f} MiB per session; CPU "
          f"{result['daphne_cpu']:.1f} s in {result['wall']:.0f} s ({100 * result['daphne_cpu'] / result['wall']:.0f}% "
          f"of a core); load average {result['load_end']:.1f} at the end")
    editors = [s.editor for s in sessions if s.editor is not None]
    saves = [ms for e in editors for ms in e.latencies]
    saves_lost = sum(e.lost for e in editors)
    if editors:
        opened = [e.read_ms for e in editors if e.read_ms]
        print(f"editor: open in {len(opened)} of {len(editors)} sessions (the file list and a file read: p50 "
              f"{statistics.median(opened) if opened else 0:.1f} ms); saves: {sum(e.saves for e in editors)}; "
              f"saves lost: {saves_lost}")
        if saves:
            print(f"save latency: p50 {statistics.median(saves):.1f} ms, p95 {percentile(saves, 95):.1f} ms, "
                  f"max {max(saves):.1f} ms over {len(saves)} saves")
            print(f"save p95: {percentile(saves, 95):.1f} ms")
        else:
            print("save p95: none (no save was answered)")
    if not latencies:
        print("echo p95: none (no character was echoed)")
        return 1
    p95 = percentile(latencies, 95)
    print(f"keystroke echo latency: p50 {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms, "
          f"max {max(latencies):.1f} ms over {len(latencies)} characters")
    if result["shell"]:
        shell = result["shell"]
        print(f"  of which behind the pty (the recording's input to its output: tmux, the shell, daphne's read): "
              f"p50 {statistics.median(shell):.1f} ms, p95 {percentile(shell, 95):.1f} ms")
    print(f"echo p95: {p95:.1f} ms (target: under {TARGET_MS:.0f} ms)")
    return 1 if failed or lost or stuck or saves_lost else 0


# --- cleaning up ---------------------------------------------------------------------------


def close_workspaces(workspaces: list) -> None:
    """Every workspace's processes ended, its files unmounted, its cgroups removed.

    Each step is tried whatever the one before did (a shell that could not be stopped still has its
    files unmounted), and every layer of the files is unmounted; what is left is said on stderr.
    """
    from grading.engine.sandbox import shell

    for ws in workspaces:
        try:
            shell.stop_shell(ws)
        except Exception as exc:  # noqa: BLE001 - unmount it and clean the others; say what is left
            print(f"sessions: could not stop the shell of {ws.folder}: {exc!r}", file=sys.stderr)
        for _ in range(5):
            try:
                if not shell._is_mounted(ws.home):
                    break
                shell._umount(ws.home)
            except Exception as exc:  # noqa: BLE001
                print(f"sessions: could not unmount {ws.home}: {exc!r}", file=sys.stderr)
                break


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def check_tools() -> Path:
    try:
        import websocket  # noqa: F401
    except ImportError:
        raise SystemExit("sessions: websocket-client is not installed here: .venv/bin/pip install -r requirements.txt")
    if shutil.which("redis-server") is None:
        raise SystemExit("sessions: redis-server is missing (apt-get install redis-server)")
    try:
        return ensure_runner(runner_dir())
    except RunnerUnavailable as exc:
        raise SystemExit(f"sessions: the sandbox's runner is not ready ({exc}); run `make setup` first")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runner = check_tools()
    folder = load.scratch_folder("th-sess-")
    servers = Servers(folder)
    workspaces: list = []
    # why SIGINT too: a program started in the background by a non-interactive shell inherits SIGINT
    # ignored, and Python then leaves it so: Ctrl-C sent to such a run did nothing and its shells ran
    # on to the end of --duration
    signal.signal(signal.SIGINT, servers.deferring(_interrupted))
    signal.signal(signal.SIGTERM, servers.deferring(_interrupted))
    # why: a run that does not stop on Ctrl-C can be asked where each thread is (kill -USR1 <pid>)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        broker = start_redis(servers, folder)
        servers.env = env = configure(folder, args, broker)
        os.environ.update(env)
        import django

        django.setup()
        invitations = make_invitations(args.sessions)
        from sessions_app.hosted.workspaces import workspace_for

        workspaces = [workspace_for(inv) for inv in invitations]
        servers.start("web", [sys.executable, "-m", "daphne", "takehome.asgi:application", "--bind", "127.0.0.1",
                              "--port", str(args.port)])
        wait_for(lambda: answers(f"http://127.0.0.1:{args.port}/accounts/login/"), 60, "daphne to answer", servers)
        print(f"sessions: {args.sessions} terminals for {args.duration:g} s, the tests every {args.tests_every:g} s "
              f"and a save from the editor every {args.save_every:g} s in each; daphne on 127.0.0.1:{args.port}, workspace uids from {args.uid_base}; runner {runner}; "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        result = run_sessions(args, invitations, servers, workspaces)
        return report(args, result)
    except KeyboardInterrupt:
        print("sessions: interrupted; cleaning up", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # why: a second Ctrl-C must not leave shells behind
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        servers.stop()
        close_workspaces(workspaces)
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
