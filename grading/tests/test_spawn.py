"""bwrap started under the run's uid by the worker itself (grading/spawn.py), and setpriv where it cannot be."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from conftest import require
from grading import sandbox as sandbox_module
from grading import spawn
from grading.sandbox import Sandbox, SandboxLimits, _uid_processes

UID_BASE = 62140  # a pool of its own, apart from the other sandbox tests'
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


def outside_and_inside(runner_dir, scratch_dir) -> tuple[int, dict, dict, object]:
    """Run one sandbox; read bwrap's own status outside (the process the worker started) while it runs."""
    sb = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, slots=4, limits=LIMITS)
    launched = []
    real_launch = Sandbox._launch

    def launch(self, *args, **kwargs):
        proc, child = real_launch(self, *args, **kwargs)
        launched.append((proc, child))
        return proc, child

    probe = {"probe.py": b"import time\nprint('inside', open('/proc/self/status').read().count('\\n'))\n"
                         b"time.sleep(1.5)\n"}
    got = {}
    Sandbox._launch = launch
    try:
        thread = threading.Thread(target=lambda: got.setdefault("r", sb.run(probe, ("python", "probe.py"))))
        thread.start()
        deadline = time.monotonic() + 10
        while not launched and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        proc, child = launched[0]
        outside = status_of(proc.pid)
        inside = status_of(child)
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
    # no_new_privs (bwrap's own); its bounding set is root's, which no_new_privs leaves nothing to use for.
    assert {k: outside[k] for k in STATUS_KEYS} == unprivileged(uid), outside
    # the sandbox's pid 1: the same, and an empty bounding set
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


def test_it_is_not_used_where_it_cannot_be_sure(monkeypatch):
    spawn._unavailable.cache_clear()
    try:
        monkeypatch.setattr(spawn.platform, "machine", lambda: "sparc64")
        assert "system call numbers" in spawn.unavailable()
        spawn._unavailable.cache_clear()
        monkeypatch.setattr(spawn.platform, "machine", lambda: "x86_64")
        monkeypatch.setattr(spawn, "_inheritable_caps", lambda: 1 << 21)
        assert "inheritable capabilities" in spawn.unavailable()
        spawn._unavailable.cache_clear()
        monkeypatch.setattr(spawn.os, "getresuid", lambda: (1000, 1000, 1000))
        assert spawn.unavailable() == "the worker is not root"
    finally:
        spawn._unavailable.cache_clear()

