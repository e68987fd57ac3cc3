"""The hosted workspace (grading/engine/sandbox/shell.py) through the real sandbox: tmux in bubblewrap, real caps.

No mocks: each test types into a real tmux client on a real pty and reads what
the shell printed, or reads what the kernel did. Tests that need root, a
writable cgroup and tmpfs mounts skip on a developer's machine without them
and fail under CI=true.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import free_port, require
from grading.engine.archive import Limits
from grading.engine.sandbox.cgroups import _mounts, _read_keys, detect
from grading.engine.sandbox.processes import _parent_pid, _uid_processes
from grading.engine.sandbox.shell import (
    Workspace,
    WorkspaceLimits,
    WorkspaceTooBig,
    WorkspaceUnavailable,
    _cgroups,
    _is_mounted,
    freeze,
    open_workspace,
    release,
    shell_running,
    snapshot_files,
    spawn_client,
    start_shell,
    stop_shell,
    thaw,
)
from shared import pytest_slots

pytestmark = pytest.mark.slow

# Our own uids, apart from every other pool (shared/pytest_slots.py).
UID_BASE = pytest_slots.uids("workspace")
LIMITS = WorkspaceLimits(disk_bytes=8 << 20, inodes=400, memory_bytes=128 << 20, processes=40, tmp_bytes=16 << 20)
SEED = {
    "test_refund.py": b"def test_refund():\n    assert 1 + 1 == 3\n",
    "src/app.py": b"VALUE = 1\n",
    "bombs/forks.py": b"""\
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as exc:
    print(f"FORKS={n} ERRNO={exc.errno}")
""",
    "bombs/memory.py": b"""\
held = []
while True:
    held.append(b"\\x01" * (16 << 20))
    print("HELD", len(held) * 16, "MiB", flush=True)
""",
    "bombs/disk.py": b"""\
import os


def fill(path, label):
    total = 0
    try:
        with open(path, "wb") as fh:
            while True:
                fh.write(b"x" * (1 << 20))
                fh.flush()
                total += 1 << 20
    except OSError as exc:
        print(f"{label}={total} ERRNO={exc.errno}")
    os.remove(path)


fill("big.bin", "BYTES")
os.mkdir("many")
n = 0
try:
    while True:
        open(f"many/{n}", "w").close()
        n += 1
except OSError as exc:
    print(f"FILES={n} ERRNO={exc.errno}")
fill("/tmp/big.bin", "TMP")
""",
}


@pytest.fixture
def make_ws(runner_dir, tmp_path_factory):
    require(os.geteuid() == 0, "the workspace mounts a tmpfs: run the tests as root")
    require(detect("auto", "bwrap").mode in ("cgroup1", "cgroup2"), "no writable cgroup here")
    require(shutil.which("tmux") is not None, "tmux is missing (apt-get install tmux)")
    from django.conf import settings

    base = Path(settings.GRADING_SCRATCH_DIR) / "workspace-tests"
    made: list[Workspace] = []

    def make(limits: WorkspaceLimits = LIMITS, seed=SEED, uid: int | None = None, name: str = "") -> Workspace:
        uid = UID_BASE + len(made) if uid is None else uid
        ws = Workspace(base / (name or f"inv-{uid}"), uid, runner_dir, limits)
        for p in _uid_processes(uid):
            os.kill(p, 9)
        if ws.folder.exists():
            release(ws)
            shutil.rmtree(ws.folder)
        made.append(ws)
        open_workspace(ws, seed)
        return ws

    make.base = base
    yield make
    for ws in made:
        stop_shell(ws)
        release(ws)
        assert _uid_processes(ws.uid) == [], "a process of the workspace outlived stop_shell"
        assert _cgroups(ws, create=False) == [], "the workspace's cgroup was not removed"
        shutil.rmtree(ws.folder, ignore_errors=True)


class Term:
    """A client on a pty, as the terminal page would drive it."""

    def __init__(self, ws: Workspace, cols: int = 200, rows: int = 50) -> None:
        self.client = spawn_client(ws, cols, rows)
        self.seen = ""

    def read_until(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            if m := re.search(pattern, self.seen):
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{pattern!r} never appeared; the terminal showed:\n{self.seen[-3000:]}")
            ready, _, _ = select.select([self.client.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    data = os.read(self.client.fd, 1 << 16)
                except (BlockingIOError, OSError):
                    continue
                # drop the escape sequences tmux draws with; keep the text
                self.seen += re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-B]|\x1b[=>]", " ", data.decode(
                    "utf-8", "replace"))

    def run(self, command: str, pattern: str, timeout: float = 60) -> re.Match:
        """Type ``command`` and wait for ``pattern`` in what follows (not in the typed line itself)."""
        self.read_until(r"candidate:/workspace\$")
        self.seen = ""
        os.write(self.client.fd, command.encode() + b"\r")
        return self.read_until(pattern, timeout)

    def close(self) -> None:
        if os.environ.get("WS_DEBUG"):
            print("SEEN<<", self.seen[-1500:], ">>")
        self.client.close()


@pytest.fixture
def term():
    opened: list[Term] = []

    def open_term(ws: Workspace, **size) -> Term:
        opened.append(Term(ws, **size))
        return opened[-1]

    yield open_term
    for t in opened:
        t.close()


def test_pytest_output_and_the_scrollback_after_reattaching(make_ws, term):
    ws = make_ws()
    first = term(ws)
    first.run("python -m pytest -q test_refund.py", r"1 failed")
    first.run("seq 1 200", r"\b200\b")  # pushes pytest's output off the screen
    first.close()
    assert shell_running(ws), "closing a client must leave the shell running"
    second = term(ws)
    m = second.run("echo SCROLL=$(tmux capture-pane -p -S - | grep -c 'assert 1 [+] 1 == 3')", r"SCROLL=(\d+)")
    assert int(m.group(1)) >= 1, "the first client's output is not in the scrollback"


def test_nano_and_vim_edit_a_file(make_ws, term):
    ws = make_ws()
    t = term(ws, cols=100, rows=30)
    t.run("nano notes.txt", r"GNU nano")
    os.write(t.client.fd, b"from nano")
    time.sleep(0.2)
    os.write(t.client.fd, b"\x13")  # ^S: save, with no prompt for the name
    # why the file, not "Wrote 1 line" on the screen: tmux redraws only the cells that changed, so the
    # status line's words may arrive split by cursor moves, differently by how the redraws were batched
    notes = ws.home / "notes.txt"
    deadline = time.monotonic() + 60
    while not (notes.exists() and notes.read_text() == "from nano\n"):
        assert time.monotonic() < deadline, f"nano never wrote notes.txt; the terminal showed:\n{t.seen[-3000:]}"
        time.sleep(0.05)
    t.seen = ""
    os.write(t.client.fd, b"\x18")  # ^X: exit, back to the prompt
    t.run("vim -u NONE -c 'normal! Afrom vim' -c wq notes.txt; echo RC=$?", r"RC=(\d+)")
    assert (ws.home / "notes.txt").read_text() == "from nanofrom vim\n"


def test_our_commands_under_sandboxed_bin_run_from_the_path(make_ws, term, tmp_path, monkeypatch):
    import grading.engine.sandbox as sandbox_module

    ours = tmp_path / "sandboxed"
    shutil.copytree(sandbox_module.SANDBOXED_DIR, ours, ignore=shutil.ignore_patterns("__pycache__"))
    (ours / "bin").mkdir(exist_ok=True)
    # a content of its own each run, so that the copy is made now, not found from an earlier run
    (ours / "bin" / "hello-takehome").write_text(f"#!/bin/sh\n# {time.time_ns()}\necho HELLO=$((40+2))\n")
    os.chmod(ours / "bin" / "hello-takehome", 0o755)
    monkeypatch.setattr(sandbox_module, "SANDBOXED_DIR", ours)
    ws = make_ws()
    t = term(ws)
    t.run("hello-takehome", r"HELLO=42")
    for copy in make_ws.base.glob("sandboxed-*"):
        if (copy / "bin" / "hello-takehome").exists():
            shutil.rmtree(copy)


def test_shell_survives_the_process_that_started_it(make_ws):
    ws = make_ws()
    code = ("import sys; from pathlib import Path; from grading.engine.sandbox.shell import *; "
            f"start_shell(Workspace(Path({str(ws.folder)!r}), {ws.uid}, Path({str(ws.runner_dir)!r}), "
            f"WorkspaceLimits(**{LIMITS.__dict__!r})))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, cwd=Path(__file__).parents[2])
    time.sleep(0.3)  # a shell that dies of its starter's exit (a hang-up) has had time to
    assert shell_running(ws)


def test_resize_reaches_the_shell(make_ws, term):
    ws = make_ws()
    t = term(ws, cols=100, rows=30)
    t.client.resize(132, 43)
    # the shell waits for the size to arrive (client, tmux server, pty), however long that takes under load
    m = t.run("until [ \"$(stty size)\" = '43 132' ]; do sleep 0.05; done; echo SIZE=$(stty size | tr ' ' x)",
              r"SIZE=(\d+x\d+)")
    assert m.group(1) == "43x132"


def test_no_network_no_dns_only_the_gate_socket(make_ws, term):
    ws = make_ws()
    gate = socket.socket(socket.AF_UNIX)
    gate.bind(str(ws.part("gate") / "gate.sock"))
    os.chmod(ws.part("gate") / "gate.sock", 0o666)
    gate.listen(1)
    port = free_port()
    tcp = socket.create_server(("127.0.0.1", port))
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"takehome-test-abstract-{os.getpid()}"
    abstract.bind("\0" + abstract_name)
    abstract.listen(1)
    host_sock_dir = ws.folder.parent / "host-socket"
    host_sock_dir.mkdir(mode=0o755, exist_ok=True)
    host_sock = socket.socket(socket.AF_UNIX)
    host_sock.bind(str(host_sock_dir / "s.sock"))
    os.chmod(host_sock_dir / "s.sock", 0o666)
    host_sock.listen(1)
    try:
        t = term(ws)
        probe = ("import socket\n"
                 "def try_(family, addr):\n"
                 "    s = socket.socket(family); s.settimeout(2)\n"
                 "    try:\n"
                 "        s.connect(addr); return 'open'\n"
                 "    except OSError as e:\n"
                 "        return type(e).__name__\n"
                 f"print('TCP=' + try_(socket.AF_INET, ('127.0.0.1', {port})))\n"
                 f"print('ABSTRACT=' + try_(socket.AF_UNIX, '\\0{abstract_name}'))\n"
                 f"print('HOSTSOCK=' + try_(socket.AF_UNIX, {str(host_sock_dir / 's.sock')!r}))\n"
                 "print('GATE=' + try_(socket.AF_UNIX, '/run/takehome/gate.sock'))\n"
                 "try:\n"
                 "    socket.getaddrinfo('example.com', 80); print('DNS=resolved')\n"
                 "except OSError as e:\n"
                 "    print('DNS=' + type(e).__name__)\n")
        (ws.home / "probe.py").write_text(probe)
        m = t.run("python probe.py", r"DNS=(\w+)")
        out = t.seen
        assert "TCP=open" not in out and re.search(r"TCP=\w+", out)
        assert "ABSTRACT=open" not in out and "HOSTSOCK=open" not in out
        assert "GATE=open" in out, out[-2000:]
        assert m.group(1) != "resolved"
    finally:
        for s in (gate, tcp, abstract, host_sock):
            s.close()
        shutil.rmtree(host_sock_dir, ignore_errors=True)


def test_neither_workspace_sees_the_other_nor_the_host(make_ws, term):
    one, two = make_ws(), make_ws()
    t1, t2 = term(one), term(two)
    t1.run("sleep 4321 & echo STARTED", r"STARTED")
    (one.home / "secret.txt").write_text("mine")
    # why -L on the uid: another uid would show as nobody (65534) here, so any
    # process not of this workspace's own uid counts
    m = t2.run(f"echo OTHER=$(ls {one.home} {one.folder} 2>&1 | grep -c secret) "
               f"FOREIGN=$(grep -L 'Uid:[[:space:]]*{two.uid}' /proc/[0-9]*/status 2>/dev/null | wc -l) "
               "SLEEP=$(grep -al 'slee[p].4321' /proc/[0-9]*/cmdline 2>/dev/null | wc -l) "
               "SHADOW=$(test -e /etc/shadow && echo yes || echo no) "
               f"PROJECT=$(test -e {Path(__file__).parents[2]} && echo yes || echo no) "
               "HOSTPID1=$(tr '\\0' ' ' </proc/1/cmdline | cut -c1-40 | tr ' ' _)END",
               r"OTHER=(\d+) FOREIGN=(\d+) SLEEP=(\d+) SHADOW=(\w+) PROJECT=(\w+) HOSTPID1=(\S*)END")
    assert m.groups()[:5] == ("0", "0", "0", "no", "no"), t2.seen[-2000:]
    assert "tmux" in m.group(6), f"/proc/1 inside is not the sandbox's own: {m.group(6)}"
    # the sleeper is there for its own workspace, so the probe can see what it looks for
    m = t1.run("echo SLEEP=$(grep -al 'slee[p].4321' /proc/[0-9]*/cmdline 2>/dev/null | wc -l)", r"SLEEP=(\d+)")
    assert m.group(1) == "1"


def test_fork_bomb_stops_at_the_cap_and_the_other_shell_answers(make_ws, term):
    one, two = make_ws(), make_ws()
    t1, t2 = term(one), term(two)
    m = t1.run("python bombs/forks.py", r"FORKS=(\d+) ERRNO=(\d+)", timeout=120)
    assert int(m.group(1)) < LIMITS.processes and m.group(2) == "11"  # EAGAIN
    # the cap that refused them is the workspace's cgroup, not the rlimit behind it
    pids = next(c for c in _cgroups(one, create=False) if (c / "pids.events").exists())
    assert _read_keys(pids / "pids.events").get("max", 0) > 0
    t2.run("echo ALIVE=$((6*7))", r"ALIVE=42", timeout=60)


def test_without_a_cgroup_rlimits_stop_the_bombs(make_ws, term, monkeypatch):
    import grading.engine.sandbox.shell as shell_module

    monkeypatch.setattr(shell_module, "CAPS_MODE", "rlimit")
    limits = replace(LIMITS, memory_bytes=512 << 20)
    ws = make_ws(limits)
    t = term(ws)
    assert _cgroups(ws, create=False) == []
    m = t.run("python bombs/forks.py", r"FORKS=(\d+) ERRNO=(\d+)", timeout=120)
    processes = limits.memory_bytes // shell_module.FALLBACK_PROCESS_BYTES
    assert int(m.group(1)) < processes and m.group(2) == "11"
    t.run("sleep 3.2; echo AFTER=$((6*7))", r"AFTER=42", timeout=60)  # the shell lives on once they end
    m = t.run("python bombs/memory.py; echo RC=$?", r"RC=(\d+)", timeout=120)
    assert "MemoryError" in t.seen and m.group(1) == "1"
    held = [int(n) for n in re.findall(r"HELD (\d+) MiB", t.seen)]
    assert max(held, default=0) <= (limits.memory_bytes // processes) >> 20


def test_memory_bomb_is_killed_by_the_cap(make_ws, term):
    ws = make_ws()
    t = term(ws)
    m = t.run("python bombs/memory.py; echo RC=$?", r"RC=(\d+)", timeout=120)
    assert m.group(1) == "137", t.seen[-1500:]
    held = [int(n) for n in re.findall(r"HELD (\d+) MiB", t.seen)]
    assert held and max(held) <= LIMITS.memory_bytes >> 20


def test_disk_bomb_hits_the_size_and_inode_caps(make_ws, term):
    ws = make_ws()
    t = term(ws)
    t.run("python bombs/disk.py", r"TMP=\d+ ERRNO=\d+", timeout=120)
    size = re.search(r"BYTES=(\d+) ERRNO=(\d+)", t.seen)
    files = re.search(r"FILES=(\d+) ERRNO=(\d+)", t.seen)
    assert size.group(2) == "28" and int(size.group(1)) <= LIMITS.disk_bytes
    assert files.group(2) == "28" and int(files.group(1)) < LIMITS.inodes
    tmp = re.search(r"TMP=(\d+) ERRNO=(\d+)", t.seen)
    assert tmp.group(2) == "28" and int(tmp.group(1)) <= LIMITS.tmp_bytes


def test_snapshot_reads_regular_files_only_and_never_follows_links(make_ws):
    ws = make_ws()
    os.symlink("/etc/passwd", ws.home / "leak.txt")
    os.symlink("/etc", ws.home / "etc-link")
    os.mkfifo(ws.home / "pipe")
    (ws.home / "__pycache__").mkdir()
    (ws.home / "__pycache__" / "x.pyc").write_bytes(b"junk")
    files = snapshot_files(ws)
    assert files["src/app.py"] == b"VALUE = 1\n"
    assert set(files) == set(SEED)
    assert not any(b"root:" in data for data in files.values())


def test_snapshot_over_the_archive_limits_says_what_to_do(make_ws):
    ws = make_ws()
    with pytest.raises(WorkspaceTooBig, match="more than 3 files and folders"):
        snapshot_files(ws, Limits(max_entries=3))
    assert len(snapshot_files(ws, Limits(max_entries=len(SEED) + 2))) == len(SEED)  # + src/, bombs/
    (ws.home / "big.bin").write_bytes(b"x" * 4096)
    with pytest.raises(WorkspaceTooBig, match="add up to more than"):
        snapshot_files(ws, Limits(max_total_bytes=4096))
    os.mkdir(os.path.join(os.fsencode(ws.home), b"bad-\xff"))
    with pytest.raises(WorkspaceTooBig, match="not valid UTF-8; rename it"):
        snapshot_files(ws)
    os.rmdir(os.path.join(os.fsencode(ws.home), b"bad-\xff"))
    with pytest.raises(WorkspaceTooBig, match="big.bin is larger than"):
        snapshot_files(ws, Limits(max_file_bytes=1024))


def test_freeze_makes_writes_fail(make_ws, term):
    ws = make_ws()
    t = term(ws)
    t.run("echo one > notes.txt; echo RC=$?", r"RC=0")
    t.close()
    freeze(ws)
    assert not shell_running(ws)
    t = term(ws)
    m = t.run("echo two > notes.txt; echo RC=$?", r"RC=(\d+)")
    assert m.group(1) != "0" and "Read-only file system" in t.seen
    assert (ws.home / "notes.txt").read_text() == "one\n"
    t.close()
    # released (idle) and opened again, it stays read-only
    release(ws)
    open_workspace(ws, {})
    assert (ws.home / "notes.txt").read_text() == "one\n"
    with pytest.raises(OSError, match="Read-only file system"):
        (ws.home / "later.txt").write_text("x")


def test_thaw_opens_the_frozen_files_writable_under_the_uid_given_next(make_ws):
    ws = make_ws()
    (ws.home / "notes.txt").write_text("before the deadline\n")
    freeze(ws)
    thaw(ws)  # the deadline was moved later: saved, unmounted, the mark gone
    assert not ws.part("frozen").exists() and not _is_mounted(ws.home)
    # the frozen workspace gave its uid back: it opens again under the one it is given now
    moved = replace(ws, uid=ws.uid + 1)
    open_workspace(moved, {})
    assert (moved.home / "notes.txt").read_text() == "before the deadline\n"
    assert (moved.home / "notes.txt").stat().st_uid == moved.uid and (moved.home / "src").stat().st_uid == moved.uid
    (moved.home / "after.txt").write_text("in the extra time\n")  # writable again
    release(moved)


def test_exit_ends_the_shell_and_the_next_start_is_fresh(make_ws, term):
    ws = make_ws()
    t = term(ws)
    t.run("export MARK=old; exit", r"$", timeout=2)
    deadline = time.monotonic() + 30
    while shell_running(ws) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not shell_running(ws), "the shell's exit did not end its sandbox"
    t = term(ws)
    m = t.run("echo MARK=${MARK:-fresh}", r"MARK=(\w+)")
    assert m.group(1) == "fresh"


def test_a_removed_tmux_socket_is_made_again(make_ws, term):
    ws = make_ws()
    t = term(ws)
    t.run("export MARK=same; rm /run/tmux/sock; echo GONE=$(ls /run/tmux | wc -l)", r"GONE=0")
    t.close()
    t = term(ws)
    m = t.run("echo MARK=${MARK:-fresh}", r"MARK=(\w+)")
    assert m.group(1) == "same", "the same shell, reached again"


def test_stop_shell_leaves_no_process_of_the_uid(make_ws, term):
    ws = make_ws()
    t = term(ws)
    t.run("(setsid sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 & echo STARTED", r"STARTED")
    assert len(_uid_processes(ws.uid)) >= 4
    stop_shell(ws)
    assert _uid_processes(ws.uid) == []
    assert not shell_running(ws)
    stop_shell(ws)  # idempotent


def test_release_saves_and_the_next_open_restores(make_ws, term):
    ws = make_ws()
    t = term(ws)
    t.run("mkdir -p work/empty && printf 'kept\\n' > work/notes.txt && chmod +x work/notes.txt; echo RC=$?",
          r"RC=0")
    t.close()
    with open(os.path.join(os.fsencode(ws.home), b"odd-\xff.txt"), "wb") as fh:
        fh.write(b"a name that is not UTF-8")
    release(ws)
    assert not _is_mounted(ws.home) and ws.part("saved.tar").is_file()
    open_workspace(ws, {"other.py": b""})
    assert (ws.home / "work" / "notes.txt").read_text() == "kept\n"
    assert os.path.exists(os.path.join(os.fsencode(ws.home), b"odd-\xff.txt"))
    assert os.stat(ws.home / "work" / "notes.txt").st_mode & 0o100
    assert (ws.home / "work" / "empty").is_dir()
    assert not (ws.home / "other.py").exists()
    assert os.stat(ws.home / "work" / "notes.txt").st_uid == ws.uid


def test_the_caps_are_the_workspaces_own(make_ws):
    ws = make_ws(replace(LIMITS, disk_bytes=4 << 20, inodes=100, cpu_cores=0.5))
    st = os.statvfs(ws.home)
    assert st.f_blocks * st.f_frsize == 4 << 20 and st.f_files == 100
    assert os.stat(ws.home).st_uid == ws.uid and os.stat(ws.home).st_mode & 0o777 == 0o700
    start_shell(ws)
    cgroups = _cgroups(ws, create=False)
    pid = int(ws.part("shell.pid").read_text().split()[0])
    for cgroup in cgroups:
        assert pid in [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    values = {f.name: f.read_text().split()[0] for c in cgroups for f in c.iterdir()
              if f.name in ("memory.limit_in_bytes", "memory.max", "pids.max", "cpu.cfs_quota_us", "cpu.max")}
    assert values.get("memory.limit_in_bytes", values.get("memory.max")) == str(LIMITS.memory_bytes)
    assert values["pids.max"] == str(LIMITS.processes)
    if "cpu.cfs_quota_us" in values:
        assert values["cpu.cfs_quota_us"] == "50000"


def test_opening_from_many_threads_at_once_mounts_once(make_ws):
    from concurrent.futures import ThreadPoolExecutor

    ws = make_ws()
    release(ws)

    def open_and_start() -> None:
        open_workspace(ws, SEED)
        start_shell(ws)

    with ThreadPoolExecutor(6) as pool:
        for future in [pool.submit(open_and_start) for _ in range(6)]:
            future.result()  # raises what the thread raised
    home = str(ws.home.resolve())
    assert [p for p, _, _ in _mounts() if p == home] == [home]
    assert len(tmux_servers(ws.uid)) == 1, "one shell, one tmux server"


def tmux_servers(uid: int) -> list[int]:
    """The uid's tmux processes whose parent is not tmux: servers, not a server's child between fork and exec.

    why the parent: tmux forks to start a pane's shell, and until that child execs the shell it is named
    tmux too; on a loaded machine it can still be so when the test looks.
    """
    def tmux(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/comm").read_text().startswith("tmux")
        except OSError:  # ended since it was listed
            return False

    return [p for p in _uid_processes(uid) if tmux(p) and not tmux(_parent_pid(p) or 0)]


@pytest.mark.parametrize("point", ["home", "tmux"])
def test_an_opening_beside_another_request_leaves_the_mounts_the_uids(make_ws, monkeypatch, point):
    """The candidate opens the workspace in two tabs. The second request looks at a mount point just
    before the first mounts there (home/ as the first opens the workspace, tmux/ as it starts the shell)
    and acts on what it saw after: the mount must stay the uid's and the shell must start. Before, the
    second chowned the fresh tmpfs to root (or rmtree'd it) and the shell exited 1."""
    from grading.engine.sandbox import shell

    ws = make_ws()
    if point == "home":
        release(ws)
    path = ws.part(point)
    looked, mounted = threading.Event(), threading.Event()
    real_is_mounted, real_mount, real_locked = shell._is_mounted, shell._mount_tmpfs, shell._locked
    errors: list[BaseException] = []

    def open_second() -> None:
        try:
            open_workspace(ws, SEED)
        except BaseException as exc:
            errors.append(exc)

    second = threading.Thread(target=open_second, name="second")

    def is_mounted(where: Path) -> bool:  # the second's look at the mount point, acted on after the mount
        seen = real_is_mounted(where)
        if threading.current_thread() is second and where == path:
            looked.set()
            assert mounted.wait(60), "the first request never mounted"
        return seen

    def locked(where: Workspace):  # or the second waits for the lock, having looked at nothing yet
        if threading.current_thread() is second:
            looked.set()
        return real_locked(where)

    def mount_tmpfs(where: Path, *args) -> None:
        if where != path or threading.current_thread() is second:
            return real_mount(where, *args)
        second.start()  # why here: the first holds the lock now
        assert looked.wait(60), "the second request never came"
        real_mount(where, *args)
        mounted.set()

    monkeypatch.setattr(shell, "_is_mounted", is_mounted)
    monkeypatch.setattr(shell, "_locked", locked)
    monkeypatch.setattr(shell, "_mount_tmpfs", mount_tmpfs)
    try:
        if point == "home":
            open_workspace(ws, SEED)
        start_shell(ws)
    finally:
        if second.ident is not None:
            second.join()
    assert errors == []
    assert os.stat(path).st_uid == ws.uid, f"{point}/ is not the uid's"
    assert shell_running(ws)


def test_where_no_tmpfs_can_be_mounted_the_workspace_does_not_open(make_ws):
    # root without CAP_SYS_ADMIN, as in a container that may not mount
    ws = make_ws()
    release(ws)
    code = ("from pathlib import Path; from grading.engine.sandbox.shell import *\n"
            f"ws = Workspace(Path({str(ws.folder)!r}), {ws.uid}, Path({str(ws.runner_dir)!r}))\n"
            "try:\n    open_workspace(ws, {})\nexcept WorkspaceUnavailable as exc:\n    print('REFUSED', exc)\n")
    out = subprocess.run(["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=30, cwd=Path(__file__).parents[2])
    assert "REFUSED cannot mount the workspace's tmpfs" in out.stdout, out.stdout + out.stderr
    assert "must run as root, with permission to mount" in out.stdout
    assert not _is_mounted(ws.home)


def test_a_seed_that_leaves_the_workspace_is_refused(make_ws):
    with pytest.raises(WorkspaceUnavailable, match="not a plain relative path"):
        make_ws(seed={"../escape.py": b"x"})
    ws = Workspace(make_ws.base / f"inv-{UID_BASE}", UID_BASE, Path("/nonexistent"), LIMITS)
    assert not _is_mounted(ws.home)
    assert not (ws.folder / "escape.py").exists()


# A walk of the whole file system from inside the shell: every folder it can create a file in and
# every regular file it can open for writing, by the mount it is on (as /proc/self/mountinfo says).
WALK = """\
import json, os, stat
mounts = {}
for line in open("/proc/self/mountinfo"):
    left, _, right = line.partition(" - ")
    f, r = left.split(), right.split()
    mounts[f[4]] = {"root": f[3], "fstype": r[0], "options": r[2]}
def mount_of(path):
    while path not in mounts:
        path = os.path.dirname(path)
    return path
found = {}
for top, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ("/proc", "/sys")]
    probe = os.path.join(top, ".probe-%d" % os.getpid())
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)
        found.setdefault(mount_of(top), []).append(top)
    except OSError:
        pass
    for name in files:
        path = os.path.join(top, name)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                found.setdefault(mount_of(path), []).append(path)
        except OSError:
            pass
json.dump({point: {**mounts[point], "paths": sorted(paths)[:5]} for point, paths in found.items()},
          open("/workspace/walk.json", "w"))
"""


def _options(text: str) -> dict[str, str]:
    return dict(o.partition("=")[::2] for o in text.split(","))


def test_nothing_outside_the_capped_filesystems_is_writable(make_ws, term):
    import json

    ws = make_ws()
    (ws.home / "walk.py").write_text(WALK)
    t = term(ws)
    t.run("python walk.py; echo WALKED=$?", r"WALKED=(\d+)", timeout=120)
    writable = json.loads((ws.home / "walk.json").read_text())
    assert set(writable) == {"/workspace", "/run/tmux", "/tmp", "/dev/shm"}, writable
    for point, mount in writable.items():  # each a whole tmpfs, never a folder of the host's disk
        assert mount["fstype"] == "tmpfs" and mount["root"] == "/", (point, mount)
    # why sizes in KiB: the kernel shows a tmpfs's size so, rounded to its pages
    caps = {"/workspace": (LIMITS.disk_bytes, LIMITS.inodes), "/run/tmux": (LIMITS.run_bytes, LIMITS.run_inodes),
            "/tmp": (LIMITS.tmp_bytes, None), "/dev/shm": (LIMITS.shm_bytes, None)}
    for point, mount in writable.items():
        size, inodes = caps[point]
        options = _options(mount["options"])
        assert "size" in options and int(options["size"].rstrip("k")) << 10 <= size, (point, mount)
        if inodes is not None:  # the two that outlive a sandbox: their file count is capped too
            assert int(options.get("nr_inodes", 1 << 62)) <= inodes, (point, mount)
    # and the caps hold: tmux's folder takes no large file and no heap of small ones
    m = t.run("head -c 2M /dev/zero > /run/tmux/big; echo RC=$? SIZE=$(du -k /run/tmux/big | cut -f1); "
              "rm -f /run/tmux/big; n=0; while : 2>/dev/null > /run/tmux/f$n; do n=$((n+1)); "
              "[ $n -gt 1000 ] && break; done; echo FILES=$n", r"RC=(\d+) SIZE=(\d+)\s+FILES=(\d+)")
    assert m.group(1) != "0" and int(m.group(2)) << 10 <= LIMITS.run_bytes
    assert int(m.group(3)) < LIMITS.run_inodes
    t.close()
    stop_shell(ws)
    tmux = ws.part("tmux")
    assert not _is_mounted(tmux) and os.listdir(tmux) == [], "tmux's folder outlived the shell"
    assert os.stat(tmux).st_uid == 0 and os.stat(tmux).st_mode & 0o777 == 0o700


def _owned_by(folder: Path, uid: int) -> list[str]:
    found = []
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            if os.lstat(os.path.join(top, name)).st_uid == uid:
                found.append(os.path.join(top, name))
    return found


def test_a_new_holder_of_the_uid_finds_nothing_of_the_last_one(make_ws, term):
    first = make_ws()
    t = term(first)
    t.run("for d in /run/tmux /tmp /dev/shm /workspace $HOME; do echo mine > $d/left-behind; done; "
          "(setsid sleep 4321 &); echo WROTE=$(ls /run/tmux | wc -l)", r"WROTE=2")
    t.close()
    # revoked: the sweep freezes the workspace and saves its files (gate_host.sweep)
    freeze(first)
    release(first)
    assert _uid_processes(first.uid) == []
    assert not [p for p, _, _ in _mounts() if p.startswith(str(first.folder.resolve()))]
    assert _owned_by(first.folder, first.uid) == [], "the host's disk keeps files of the uid"
    # the next workspace given the same uid
    second = make_ws(uid=first.uid, name=f"next-{first.uid}", seed={"mine.py": b""})
    t = term(second)
    m = t.run("echo LEFT=$(find / -path /proc -prune -o -name 'left-behind*' -print 2>/dev/null | wc -l) "
              # bwrap's own folders and links of the sandbox's root are the uid's too: files only
              "OWN=$(find / -path /proc -prune -o -type f -user $(id -u) -print 2>/dev/null | grep -v -c "
              "'^/workspace/mine.py$') "
              "SLEEP=$(grep -al 'slee[p].4321' /proc/[0-9]*/cmdline 2>/dev/null | wc -l) RUN=$(ls /run/tmux)END",
              r"LEFT=(\d+) OWN=(\d+) SLEEP=(\d+) RUN=(\S*)END")
    assert m.groups() == ("0", "0", "0", "sock"), t.seen[-2000:]


def test_sparse_files_and_hard_links_are_saved_as_the_tmpfs_holds_them(make_ws, term):
    """Three 30 MiB sparse files and a file under three names hold little of the 8 MiB tmpfs: all are saved."""
    ws = make_ws()
    t = term(ws)
    t.run("truncate -s 30M s1 s2 s3 && printf tail | dd of=s2 bs=1 seek=20000000 conv=notrunc status=none && "
          "head -c 2M /dev/urandom > big && ln big big2 && mkdir d && ln big d/big3 && ln -s big link && "
          "echo RC=$?", r"RC=0")
    t.close()
    before = (ws.home / "big").read_bytes()
    report = release(ws)
    assert report.left_out == () and report.kept >= 8
    assert not _is_mounted(ws.home)
    # stored sparsely and once: far less than the 96 MiB the names add up to
    assert ws.part("saved.tar").stat().st_size < 3 << 20
    open_workspace(ws, {})
    for name in ("s1", "s2", "s3"):
        st = os.stat(ws.home / name)
        assert st.st_size == 30 << 20 and st.st_blocks * 512 <= 64 << 10, (name, st)  # holes stayed holes
    with open(ws.home / "s2", "rb") as fh:
        fh.seek(20000000 - 2)
        assert fh.read(8) == b"\0\0tail\0\0"
    st = os.stat(ws.home / "big")
    assert st.st_nlink == 3 and os.stat(ws.home / "big2").st_ino == os.stat(ws.home / "d" / "big3").st_ino == st.st_ino
    assert (ws.home / "big").read_bytes() == before and st.st_uid == ws.uid
    assert os.readlink(ws.home / "link") == "big"
    assert (ws.home / "src" / "app.py").read_bytes() == SEED["src/app.py"]


def test_a_second_opening_that_looked_before_the_first_made_the_folders_goes_on(make_ws, monkeypatch):
    """Two requests open one workspace at once (the terminal and the editor's file list): the one that found no
    home/ folder before the other made it must not fail with "File exists"."""
    from grading.engine.sandbox import shell

    ws = make_ws()
    made = {ws.folder / name for name in ("home", "tmux", "gate", "etc")}
    real_is_dir = Path.is_dir
    # what the second saw: none of them yet (the first made them after its look)
    monkeypatch.setattr(Path, "is_dir", lambda self: False if self in made else real_is_dir(self))
    shell._prepare_folder(ws)  # raised FileExistsError before
