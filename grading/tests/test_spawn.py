"""bwrap started under the run's uid by the worker itself (grading/engine/sandbox/spawn.py), and setpriv where it cannot be."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import HANG_GUARD_S, _wait_for, require
from grading.engine import sandbox as sandbox_module
from grading.engine.sandbox import Sandbox, SandboxLimits, spawn
from grading.engine.sandbox.processes import _parent_pid, _uid_processes
from shared import pytest_slots

ROOT = Path(__file__).resolve().parents[2]
UID_BASE = pytest_slots.uids("spawn")
LIMITS = SandboxLimits(wall_s=15, cpu_s=4, address_space_bytes=512 << 20, nproc=32,
                       file_size_bytes=8 << 20, tmpfs_bytes=32 << 20, output_bytes=64 << 10)
STATUS_KEYS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs")


@pytest.fixture(autouse=True)
def root_only():
    require(os.geteuid() == 0, "the sandbox's uids are taken by root")
    yield
    left = [p for uid in range(UID_BASE, UID_BASE + 4) for p in _uid_processes(uid)]
    assert left == [], "a process of the pool outlived its run"


def status_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as fh:
        fields = dict(line.split(":", 1) for line in fh.read().splitlines() if ":" in line)
    return {k: " ".join(fields[k].split()) for k in (*STATUS_KEYS, "CapBnd")}


def probe_process(ancestor: int) -> int | None:
    """The pid of the python running probe.py under ``ancestor`` (another test's sandbox may run one too), once
    it is ready for the signal that ends it."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
            if b"probe.py" in argv and b"python" in argv[0] and catches_sigusr1(int(entry.name)):
                pid: int | None = int(entry.name)
                while pid and pid > 1:
                    pid = _parent_pid(pid)
                    if pid == ancestor:
                        return int(entry.name)
        except (OSError, ValueError):
            continue  # ended meanwhile
    return None


def catches_sigusr1(pid: int) -> bool:
    """Whether the process has its handler for SIGUSR1 in place (its status's SigCgt mask)."""
    with open(f"/proc/{pid}/status") as fh:
        caught = next(line for line in fh if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) & 1 << (signal.SIGUSR1 - 1))


def outside_and_inside(runner_dir, scratch_dir) -> tuple[int, dict, dict, object]:
    """Run one sandbox; read bwrap's own status outside (the process the worker started) while it runs."""
    sb = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, slots=4, limits=LIMITS)
    launched = []
    real_launch = Sandbox._launch

    def launch(self, *args, **kwargs):
        proc, child = real_launch(self, *args, **kwargs)
        launched.append((proc, child))
        return proc, child

    # why a signal: the probe stays until the test has read both statuses, however slow the machine
    probe = {"probe.py": b"import signal, sys\nsignal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))\n"
                         b"print('inside', open('/proc/self/status').read().count('\\n'), flush=True)\n"
                         b"while True:\n    signal.pause()\n"}
    got = {}
    Sandbox._launch = launch
    try:
        thread = threading.Thread(target=lambda: got.setdefault("r", sb.run(probe, ("python", "probe.py"))))
        thread.start()
        _wait_for(lambda: launched, HANG_GUARD_S, "the sandbox's start", interval=0.01)
        proc, child = launched[0]
        probe_pid = _wait_for(lambda: probe_process(proc.pid), HANG_GUARD_S, "the probe in the sandbox", interval=0.01)
        outside = status_of(proc.pid)
        inside = status_of(child)
        os.kill(probe_pid, signal.SIGUSR1)
        thread.join()
    finally:
        Sandbox._launch = real_launch
    uid = int(outside["Uid"].split()[0])
    return uid, outside, inside, got["r"]


def unprivileged(uid: int) -> dict[str, str]:
    return {"Uid": f"{uid} {uid} {uid} {uid}", "Gid": f"{uid} {uid} {uid} {uid}", "Groups": "",
            **{k: "0" * 16 for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")}, "NoNewPrivs": "1"}


def test_bwrap_started_by_the_worker_runs_as_the_runs_uid_with_no_privileges(runner_dir, scratch_dir, monkeypatch):
    require(spawn.unavailable() is None, f"the worker cannot start bwrap itself here: {spawn.unavailable()}")
    spawned = []
    real_popen_as = spawn.popen_as
    # (this run's only: warm sandboxes of other tests may be started meanwhile)
    monkeypatch.setattr(spawn, "popen_as", lambda uid, gid, argv, **kw: ("probe.py" in argv and spawned.append(
        argv[0])) or real_popen_as(uid, gid, argv, **kw))
    uid, outside, inside, result = outside_and_inside(runner_dir, scratch_dir)
    assert result.exit_code == 0, result.log
    assert spawned == [sandbox_module.BWRAP]  # no setpriv in front of it
    assert UID_BASE <= uid < UID_BASE + 4
    # bwrap outside the sandbox: the run's ids (real, effective, saved, fs), no groups, no capabilities,
    # no_new_privs and an empty bounding set, as setpriv left it; the sandbox's pid 1 the same
    assert outside == {**unprivileged(uid), "CapBnd": "0" * 16}, outside
    assert inside == {**unprivileged(uid), "CapBnd": "0" * 16}, inside


def test_where_the_worker_cannot_setpriv_starts_bwrap_as_before(runner_dir, scratch_dir, monkeypatch):
    monkeypatch.setattr(spawn, "unavailable", lambda: "not here (test)")
    spawned = []
    monkeypatch.setattr(spawn, "popen_as", lambda *a, **k: spawned.append(a) or pytest.fail("popen_as used"))
    uid, outside, inside, result = outside_and_inside(runner_dir, scratch_dir)
    assert result.exit_code == 0, result.log
    assert spawned == []
    assert outside == {**unprivileged(uid), "CapBnd": "0" * 16}, outside  # setpriv empties the bounding set
    assert inside == {**unprivileged(uid), "CapBnd": "0" * 16}, inside


def ids_of(uid: int) -> str:
    proc = spawn.popen_as(uid, uid, ["/usr/bin/id"], env={}, stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=10)
    return out.decode().strip()


def test_the_spawning_thread_takes_roots_ids_back_after_each_spawn():
    require(spawn.unavailable() is None, f"the worker cannot start processes under other uids here: "
                                         f"{spawn.unavailable()}")
    before = (os.getresuid(), os.getresgid(), os.getgroups())
    # Two uids one after the other: the second could not be taken (setgroups needs root's
    # capabilities) had the thread kept the first.
    assert ids_of(UID_BASE + 1) == f"uid={UID_BASE + 1} gid={UID_BASE + 1} groups={UID_BASE + 1}"
    assert ids_of(UID_BASE + 2) == f"uid={UID_BASE + 2} gid={UID_BASE + 2} groups={UID_BASE + 2}"
    # A program that cannot be started fails in the caller, and the thread is root's again after it.
    with pytest.raises(FileNotFoundError):
        spawn.popen_as(UID_BASE + 1, UID_BASE + 1, ["/nonexistent/program"], env={})
    assert ids_of(UID_BASE + 3) == f"uid={UID_BASE + 3} gid={UID_BASE + 3} groups={UID_BASE + 3}"
    assert spawn.unavailable() is None
    # The calling thread never changed, nor did any other.
    assert (os.getresuid(), os.getresgid(), os.getgroups()) == before
    plain = subprocess.run(["/usr/bin/id", "-u"], capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == str(os.getuid())


def test_a_forked_process_starts_its_own_spawning_thread():
    require(spawn.unavailable() is None, f"the worker cannot start processes under other uids here: "
                                         f"{spawn.unavailable()}")
    ids_of(UID_BASE + 1)  # the parent's thread exists; the child has no copy of it
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a Celery prefork worker process, say
        try:
            os.close(read_end)
            os.write(write_end, ids_of(UID_BASE + 2).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        said = fh.read().decode()
    assert os.waitpid(pid, 0)[1] == 0
    assert said == f"uid={UID_BASE + 2} gid={UID_BASE + 2} groups={UID_BASE + 2}"


def test_the_spawning_thread_holds_what_setpriv_dropped_for_good():
    # no_new_privs, an empty bounding set and no inheritable capabilities, set on itself once it started:
    # a setuid or file-capability program it starts gains nothing by its exec
    require(spawn.unavailable() is None, f"the worker cannot start processes under other uids here: "
                                         f"{spawn.unavailable()}")
    status = spawn._this_process_spawner().status
    assert {k: status[k] for k in spawn.HARDENED} == spawn.HARDENED, status
    assert spawn.thread_status()["NoNewPrivs"] == "0"  # the other threads keep theirs


def test_a_setuid_program_gains_nothing():
    require(spawn.unavailable() is None, f"the worker cannot start processes under other uids here: "
                                         f"{spawn.unavailable()}")
    folder = tempfile.mkdtemp(prefix="takehome-setuid-test-", dir="/tmp")  # why: one the uid can reach
    try:
        os.chmod(folder, 0o755)
        program = os.path.join(folder, "cat")
        shutil.copy("/usr/bin/cat", program)
        os.chmod(program, 0o4755)  # setuid root
        proc = spawn.popen_as(UID_BASE + 1, UID_BASE + 1, [program, "/proc/self/status"], env={},
                              stdout=subprocess.PIPE)
        out, _ = proc.communicate(timeout=10)
    finally:
        shutil.rmtree(folder)
    status = dict(line.split(":", 1) for line in out.decode().splitlines() if ":" in line)
    assert " ".join(status["Uid"].split()) == " ".join([str(UID_BASE + 1)] * 4), status["Uid"]
    assert status["CapEff"].strip() == status["CapPrm"].strip() == "0" * 16


def recorded_drop(monkeypatch, seen: list):
    """Each drop of ids the spawning thread makes, with whether garbage collection was on then, into ``seen``."""
    real = spawn._drop_ids

    def drop(uid, gid):
        seen.append((uid, gc.isenabled()))
        real(uid, gid)

    monkeypatch.setattr(spawn, "_drop_ids", drop)


class Interrupted(Exception):
    pass


class HeldDrop:
    """The spawning thread's drop of ids, held at its start until the test lets it go; ``events`` is the order in
    which the drop, the interruption and the release happened."""

    def __init__(self, monkeypatch, seen: list):
        self.entered, self.release, self.events = threading.Event(), threading.Event(), []
        real = spawn._drop_ids

        def drop(uid, gid):
            seen.append((uid, gc.isenabled()))
            self.entered.set()
            self.release.wait(HANG_GUARD_S)
            real(uid, gid)
            self.events.append(f"dropped to {uid}")

        monkeypatch.setattr(spawn, "_drop_ids", drop)


@contextmanager
def interrupted_when(ready, held: HeldDrop):
    """SIGALRM to this (the main) thread once ``ready()`` is true, raising Interrupted; the held drop is let go
    only after that. A helper thread sends it: the main thread is waiting inside popen_as."""
    main = threading.main_thread().ident

    def handler(signum, frame):
        held.events.append("interrupted")
        raise Interrupted()

    def interrupt():
        _wait_for(ready, HANG_GUARD_S, "the moment to interrupt", interval=0.01)
        signal.pthread_kill(main, signal.SIGALRM)
        _wait_for(lambda: "interrupted" in held.events, HANG_GUARD_S, "the interruption", interval=0.01)
        held.events.append("released")
        held.release.set()

    old = signal.signal(signal.SIGALRM, handler)
    helper = threading.Thread(target=interrupt)
    helper.start()
    try:
        yield
    finally:
        held.release.set()
        helper.join()
        signal.signal(signal.SIGALRM, old)


def test_a_caller_interrupted_while_its_process_starts_waits_for_it_and_ends_it(monkeypatch):
    # why: the caller's finally blocks close the pipes the spawn hands on; a spawn that ran after
    # them would start a sandbox on someone else's descriptors, and nobody would end it
    require(spawn.unavailable() is None, "the worker cannot start processes under other uids here")
    held = HeldDrop(monkeypatch, [])
    uid = UID_BASE + 2
    with interrupted_when(held.entered.is_set, held):  # the spawning thread has begun this caller's start
        with pytest.raises(Interrupted):
            spawn.popen_as(uid, uid, ["/bin/sleep", "30"], env={}, start_new_session=True)
        # it waited for the spawn it had asked for
        assert held.events == ["interrupted", "released", f"dropped to {uid}"]
    assert _uid_processes(uid) == []  # and ended what it started


def test_a_caller_interrupted_before_its_turn_withdraws_its_request(monkeypatch):
    require(spawn.unavailable() is None, "the worker cannot start processes under other uids here")
    seen = []
    held = HeldDrop(monkeypatch, seen)
    first = threading.Thread(target=lambda: spawn.popen_as(UID_BASE + 1, UID_BASE + 1, ["/usr/bin/true"],
                                                           env={}).wait())
    first.start()
    _wait_for(held.entered.is_set, HANG_GUARD_S, "the first start", interval=0.01)  # the thread is busy with it
    spawner = spawn._this_process_spawner()
    with interrupted_when(lambda: spawner.requests.qsize() > 0, held):  # this caller's request waits its turn
        with pytest.raises(Interrupted):
            spawn.popen_as(UID_BASE + 2, UID_BASE + 2, ["/bin/sleep", "30"], env={}, start_new_session=True)
    first.join()
    assert ids_of(UID_BASE + 3).startswith(f"uid={UID_BASE + 3} ")  # the thread went on past the withdrawn one
    assert [uid for uid, _ in seen if uid != UID_BASE + 3] == [UID_BASE + 1], seen  # never started
    assert _uid_processes(UID_BASE + 2) == []


def test_no_garbage_collection_while_the_thread_holds_the_runs_ids(monkeypatch):
    require(spawn.unavailable() is None, "the worker cannot start processes under other uids here")
    seen = []
    recorded_drop(monkeypatch, seen)
    assert gc.isenabled()
    ids_of(UID_BASE + 1)
    assert seen == [(UID_BASE + 1, False)]
    assert gc.isenabled()
    assert spawn._prctl(spawn.PR_GET_DUMPABLE) == 1  # the change of uid left the worker dumpable as it was


def test_it_is_not_used_where_it_cannot_be_sure(monkeypatch):
    monkeypatch.setattr(spawn.platform, "machine", lambda: "sparc64")
    assert "system call numbers" in spawn.unavailable()
    monkeypatch.setattr(spawn.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(spawn.ctypes, "sizeof", lambda _: 4)
    assert "32-bit" in spawn.unavailable()
    monkeypatch.undo()
    require(os.geteuid() == 0, "root only")
    monkeypatch.setattr(spawn.os, "getresuid", lambda: (1000, 1000, 1000))
    assert spawn.unavailable() == "the worker is not root"
    monkeypatch.undo()
    # a thread that could not harden itself is not used, and says why
    monkeypatch.setattr(spawn, "_spawner", None)

    def refuse():
        raise OSError(1, "not permitted (test)")

    monkeypatch.setattr(spawn, "_harden_this_thread", refuse)
    assert "could not drop what setpriv drops" in spawn.unavailable()


GREEN = """\
from gevent import monkey
monkey.patch_all()
import json
from grading.engine.sandbox import spawn
reason = spawn.unavailable()
status = spawn.thread_status()
try:
    spawn.popen_as(UID, UID, ["/usr/bin/true"], env={})
except OSError as exc:
    refused = str(exc)
else:
    refused = None
print(json.dumps({"reason": reason, "refused": refused, "after": spawn.thread_status(),
                  "before": {k: status[k] for k in ("NoNewPrivs", "CapBnd", "Uid")}}))
"""


def test_green_threads_are_never_used_to_spawn(tmp_path):
    # Under gevent (locust patches threading so) the spawning "thread" would be a green one on its
    # caller's OS thread: hardening it would harden the whole program, and the uid window would be
    # every green thread's. It is refused before it changes anything, and setpriv is used instead.
    require(importlib.util.find_spec("gevent") is not None, "gevent (locust's) is not installed")
    require(os.geteuid() == 0, "root only")
    done = subprocess.run([sys.executable, "-c", GREEN.replace("UID", str(UID_BASE + 1))], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert "not an OS thread of its own" in said["reason"], said
    assert said["refused"] == said["reason"]
    for seen in (said["before"], said["after"]):
        assert seen["NoNewPrivs"] == "0" and seen["CapBnd"] != "0" * 16 and seen["Uid"].split()[0] == "0", said
