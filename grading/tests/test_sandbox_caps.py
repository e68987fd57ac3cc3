"""Caps on a sandboxed run as a whole, against real bubblewrap and real cgroups.

No mocks: hostile trees run in bwrap and the assertions read what the kernel
did (processes killed, forks refused, files created). Tests that need a
writable cgroup and per-run tmpfs mounts skip on a developer's machine without
them and fail under CI=true, so a green CI run means they ran.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import HANG_GUARD_S, _wait_for, require
from grading.engine.sandbox import Sandbox, SandboxLimits, SandboxUnavailable
from grading.engine.sandbox.cgroups import RunBudget, RunCaps, _mounts, detect
from grading.engine.sandbox.processes import _uid_processes
from grading.engine.sandbox.warm import close_warm_sandboxes
from grading.tests.test_sandbox import FORK_BOMB, make_tree
from shared import pytest_slots

SAMPLE = Path(__file__).resolve().parents[2] / "takehome" / "sample_packets" / "refund-sum"
PYTEST = ("python", "-m", "pytest", "-q", "-s")
UID_BASE = pytest_slots.uids("sandbox_caps")
LIMITS = SandboxLimits(wall_s=20, cpu_s=10, address_space_bytes=512 << 20, nproc=32,
                       tmpfs_bytes=32 << 20, memory_bytes=256 << 20)


def sandbox(runner_dir, scratch_dir, caps="auto", tmpfs="auto", **limits) -> Sandbox:
    return Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=replace(LIMITS, **limits),
                   caps=caps, tmpfs=tmpfs)


@pytest.fixture
def capped(runner_dir, scratch_dir) -> Sandbox:
    """The sandbox with the caps this machine detects; they must be a cgroup and per-run mounts."""
    sb = sandbox(runner_dir, scratch_dir)
    caps = sb.caps_in_force()
    require(caps.mode in ("cgroup1", "cgroup2"), f"no writable cgroup here: {'; '.join(caps.why)}")
    require(caps.tmpfs == "mount", f"cannot mount a tmpfs per run here: {'; '.join(caps.why)}")
    return sb


def ours(name: str) -> bool:
    """A cgroup or mount folder made by this test process."""
    return re.match(rf"^(run|probe)-\d+-{os.getpid()}-", name) is not None


@pytest.fixture(autouse=True)
def no_leftovers(runner_dir, scratch_dir):
    caps = sandbox(runner_dir, scratch_dir).caps_in_force()

    def cgroups() -> set[Path]:
        return {p for parent in caps.parents for p in parent.iterdir() if p.is_dir() and ours(p.name)}

    def mounted() -> set[str]:
        mounts = caps.mount_dir
        folders = {str(p) for p in mounts.iterdir() if ours(p.name)} if mounts.exists() else set()
        return folders | {m for m, _, _ in _mounts() if m.startswith(f"{mounts}/")
                          and ours(Path(m).relative_to(mounts).parts[0])}

    # why the warm sandboxes ended first: an earlier test in this process may have left its session's pool
    # refilling in a thread, whose new sandbox's cgroup and mounts would appear while this test runs and
    # live, rightly, as long as the process does (closing waits for a start under way).
    close_warm_sandboxes()
    before_cgroups, before_mounts = cgroups(), mounted()
    yield
    assert [p for u in range(UID_BASE, UID_BASE + 8) for p in _uid_processes(u)] == [], "a process outlived its run"
    assert cgroups() - before_cgroups == set(), "a run's cgroup was not removed"
    assert mounted() - before_mounts == set(), "a run's mounts remain, or its tmpfs is still mounted"


# -- memory ------------------------------------------------------------------------


def holders(children: int, mib: int) -> dict[str, str]:
    """A test whose children each try to hold ``mib`` MiB at the same time, then say so and wait."""
    return {"test_hold.py": f"""
        import os, time
        def test_hold_at_once():
            kids = []
            for i in range({children}):
                pid = os.fork()
                if pid == 0:
                    hog = bytearray({mib} << 20)
                    for j in range(0, len(hog), 4096):
                        hog[j] = 1          # touch every page: resident, not just mapped
                    print("HELD", i, flush=True)
                    time.sleep(3)
                    os._exit(0)
                kids.append(pid)
            codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids]
            print("CODES", codes, flush=True)
            assert codes == [0] * {children}
    """}


def test_four_children_cannot_together_hold_more_than_the_runs_memory_cap(capped, tmp_path):
    # Each child stays far below its own address-space limit (512 MiB); only the
    # run's cap (256 MiB for all) can stop them.
    r = capped.run(make_tree(tmp_path, holders(4, 100)), PYTEST)
    codes = [int(c) for c in re.search(r"CODES \[([-\d, ]+)\]", r.log).group(1).split(",")]
    assert codes.count(-signal.SIGKILL) >= 2 and codes.count(0) <= 2, r.log
    assert r.outcome == "killed", r
    note = next(n for n in r.notes if "memory cap" in n)
    assert "256 MiB across all its processes" in note, r.notes
    peak = int(re.search(r"peak (\d+) MiB", note).group(1))
    assert peak <= 256, note
    assert f"[sandbox: {note}]" in r.log  # the run's log says it too


def test_the_same_children_pass_under_a_cap_that_holds_them_all(runner_dir, scratch_dir, capped, tmp_path):
    roomy = sandbox(runner_dir, scratch_dir, memory_bytes=768 << 20)
    r = roomy.run(make_tree(tmp_path, holders(4, 100)), PYTEST)
    assert (r.outcome, r.log.count("HELD")) == ("passed", 4), r.log
    assert not any("cap" in n for n in r.notes), r.notes


def test_two_runs_at_once_each_get_their_own_cap(capped, tmp_path):
    # Two runs of two 80 MiB children fit 256 MiB each, not one 256 MiB together.
    tree = make_tree(tmp_path, holders(2, 80))
    results = [None, None]

    def go(i):
        results[i] = capped.run(tree, PYTEST)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.outcome for r in results] == ["passed", "passed"], [r.log for r in results]


# -- processes ----------------------------------------------------------------------

def test_a_fork_bomb_stops_at_the_runs_process_cap(capped, tmp_path):
    r = capped.run(make_tree(tmp_path, FORK_BOMB), PYTEST)
    assert r.outcome != "timeout", r.log  # stopped by the cap, not at the run's time limit
    forked = int(r.log.split("FORKED ")[1].split()[0])
    # bwrap, its shell and pytest count too: the children stop just short of the cap
    assert LIMITS.nproc - 6 <= forked < LIMITS.nproc, r.log
    assert any(n.startswith(f"reached the run's process cap ({LIMITS.nproc} processes)") for n in r.notes), r.notes


# -- tmpfs inodes -----------------------------------------------------------------

FILE_FLOOD = {"test_flood.py": """
    import errno, os
    def flood(folder):
        n = 0
        try:
            while n < 300000:
                open(os.path.join(folder, "f%d" % n), "w").close()
                n += 1
        except OSError as exc:
            return n, errno.errorcode[exc.errno]
        return n, "none"
    def test_flood():
        results = {d: flood(d) for d in ("/tmp", "/tree", "/dev/shm")}
        for name in os.listdir("/tmp"):      # make room, so pytest can write its report
            if name.startswith("f"):
                os.unlink(os.path.join("/tmp", name))
        print("FLOOD", results, flush=True)
"""}


def test_300000_files_hit_the_inode_cap_of_each_tmpfs(capped, tmp_path):
    r = capped.run(make_tree(tmp_path, FILE_FLOOD), PYTEST)
    results = ast.literal_eval(r.log.split("FLOOD ", 1)[1].split("\n", 1)[0])
    for folder, (count, error) in results.items():
        assert error == "ENOSPC" and count < LIMITS.tmpfs_inodes, (folder, count, error)
    assert r.outcome == "passed", r.log[-3000:]
    # /tmp was emptied again; the others are still full when the run ends, and the notes say so
    full = [n for n in r.notes if "ran out of inodes" in n]
    assert any(n.startswith("/tree ran out of inodes") for n in full), r.notes
    assert any(n.startswith("/dev/shm ran out of inodes") for n in full), r.notes
    assert not any(n.startswith("/tmp") for n in full), r.notes


# -- the fallback ------------------------------------------------------------------

LIMITS_PROBE = {"test_zz_limits.py": """
    def test_limits_in_force():
        limits = {}
        for line in open("/proc/self/limits"):
            if line.startswith(("Max address space", "Max processes")):
                name, soft = line[:26].strip(), line[26:].split()[0]
                limits[name] = int(soft)
        print("LIMITS", limits["Max address space"], limits["Max processes"], flush=True)
"""}


def sample_tree(root: Path, solved: bool) -> Path:
    """The sample packet's fixture with its own test, or its solution with the hidden
    reference tests; plus a test that prints the limits in force."""
    files = {p.name: p.read_text() for p in (SAMPLE / "fixture").iterdir()}
    if solved:
        del files["test_invoices.py"]
        files["invoices.py"] = (SAMPLE / "solution" / "invoices.py").read_text()
        files.update({p.name: p.read_text() for p in (SAMPLE / "reference_tests").iterdir()})
    return make_tree(root, {**files, **LIMITS_PROBE})


def test_the_rlimit_fallback_fits_the_budget_and_still_runs_the_sample_packet(runner_dir, scratch_dir, tmp_path):
    sb = sandbox(runner_dir, scratch_dir, caps="rlimit", tmpfs="bwrap", memory_bytes=1 << 30,
                 address_space_bytes=1 << 30, nproc=64)
    assert sb.describe_caps().startswith("per-process rlimits only: at most 8 processes x 128 MiB")
    original = sb.run(sample_tree(tmp_path / "original", solved=False), PYTEST)
    solved = sb.run(sample_tree(tmp_path / "solved", solved=True), PYTEST)
    # the sample's bug still shows, and its fix still passes, under the fallback's limits
    assert (original.outcome, original.failed) == ("failed", 1), original.log
    assert "test_invoices.py::test_charges_only" in {t.nodeid for t in original.tests if t.outcome == "failed"}
    assert (solved.outcome, solved.passed) == ("passed", 4), solved.log
    address_space, processes = map(int, solved.log.split("LIMITS ")[1].split()[:2])
    assert (address_space, processes) == (128 << 20, 8)
    assert address_space * processes <= 1 << 30


def test_a_memory_bomb_under_the_fallback_stops_at_its_share(runner_dir, scratch_dir, tmp_path):
    sb = sandbox(runner_dir, scratch_dir, caps="rlimit", tmpfs="bwrap", memory_bytes=1 << 30,
                 address_space_bytes=1 << 30, nproc=64)
    tree = make_tree(tmp_path, {"test_mem.py": """
        def test_mem():
            hog = []
            while True:
                hog.append(bytearray(16 << 20))
    """})
    r = sb.run(tree, PYTEST)
    assert r.outcome == "killed" and "hit the memory limit (128 MiB): MemoryError" in r.notes, r


# -- modes and leftovers ----------------------------------------------------------


def test_a_forced_mode_this_machine_lacks_is_refused_with_the_reason(runner_dir, scratch_dir, capped, tmp_path):
    lacking = {"cgroup1": "cgroup2", "cgroup2": "cgroup1"}[capped.caps_in_force().mode]
    with pytest.raises(SandboxUnavailable, match=f"sandbox caps {lacking}/auto: "):
        sandbox(runner_dir, scratch_dir, caps=lacking).run(tmp_path, ("true",))


def _owner_of_a_run(caps, budget, with_process: bool = False) -> tuple[int, str]:
    """A forked process that starts a run (a tmpfs mount, and a process in its cgroup if asked), then
    waits to be killed, leaving it all behind; its pid and the run's name."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            run = RunCaps(caps, budget).__enter__()
            run.tmpfs("/tmp", 1 << 20, UID_BASE)
            if with_process:
                sleeper = subprocess.Popen(run.wrap(["sleep", "600"]), start_new_session=True)
                while str(sleeper.pid) not in (run.cgroups[0] / "cgroup.procs").read_text().split():
                    time.sleep(0.01)  # the prefix has not written its pid yet
            os.write(w, run.name.encode())
            time.sleep(600)
        finally:
            os._exit(1)
    os.close(w)
    name = os.read(r, 200).decode()
    os.close(r)
    return pid, name


def test_stale_cgroups_and_mounts_of_a_dead_worker_are_removed(capped, tmp_path):
    caps = capped.caps_in_force()
    pid, name = _owner_of_a_run(caps, capped.budget(), with_process=True)  # a "worker"
    with RunCaps(caps, capped.budget()) as live:  # a run of a live process, left alone
        live.tmpfs("/tmp", 1 << 20, UID_BASE)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        stale = [parent / name for parent in caps.parents]
        sleeper = [int(p) for p in (stale[0] / "cgroup.procs").read_text().split()]
        assert len(sleeper) == 1 and all(p.is_dir() for p in stale)
        assert any(m.startswith(str(caps.mount_dir / name)) for m, _, _ in _mounts())

        capped.clean_stale()

        # why the end state, not what this call says it removed: every sandbox's clean-up sweeps the same
        # folders, and a test process beside this one may have swept this run first
        assert not any(p.exists() for p in stale) and not (caps.mount_dir / name).exists()
        assert not any(m.startswith(str(caps.mount_dir / name)) for m, _, _ in _mounts())
        assert process_state(sleeper[0]) in (None, "Z")  # killed (a zombie until its new parent reaps it)
        assert all((parent / live.name).is_dir() for parent in caps.parents)


def test_stale_mounts_of_a_dead_process_under_another_scratch_folder_are_removed_too(capped, tmp_path):
    """A scratch folder used once (a test run's, a benchmark's) has no worker to sweep it later.

    Its runs' mounts stayed in the host's mount table, and bubblewrap reads
    that table again for every bind of every start: each start got slower.
    """
    caps = capped.caps_in_force()
    require(caps.mount_dir is not None and str(caps.mount_dir).startswith("/dev/shm/"),
            "per-run tmpfs mounts in /dev/shm (root, a tmpfs /dev/shm)")
    other = detect("auto", "auto", Path("/dev/shm") / f"takehome-mounts-test{os.getpid()}x{time.monotonic_ns()}")
    assert other.mount_dir is not None and other.mount_dir != caps.mount_dir
    pid, name = _owner_of_a_run(other, capped.budget())  # a process of another installation
    try:
        with RunCaps(other, capped.budget()) as live:  # a live run there is left alone
            live.tmpfs("/tmp", 1 << 20, UID_BASE)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            stale = other.mount_dir / name
            assert any(m.startswith(str(stale)) for m, _, _ in _mounts())

            capped.clean_stale()

            # why not "in what this call removed": every sandbox's clean-up sweeps the other folders too, and
            # a test process beside this one may have swept it first; either way the same code removed it
            assert not stale.exists()
            assert not any(m.startswith(str(stale)) for m, _, _ in _mounts())
            assert any(m.startswith(str(other.mount_dir / live.name)) for m, _, _ in _mounts())
    finally:
        other.mount_dir.rmdir()  # empty by now: each run removes its own folder


def process_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(line.split()[1] for line in fh if line.startswith("State:"))
    except FileNotFoundError:
        return None


def test_detection_is_cached_and_says_which_caps_are_in_force(capped):
    caps = capped.caps_in_force()
    assert detect("auto", "auto", caps.mount_dir) is caps
    text = capped.describe_caps()
    assert text.startswith(f"cgroup v{caps.mode[-1]}: 256 MiB memory and 32 processes per run")
    assert "tmpfs capped at 16384 inodes by per-run mounts" in text


def test_the_budget_refuses_nonsense():
    with pytest.raises(ValueError):
        RunBudget(memory_bytes=0)


def test_the_worker_builds_its_sandbox_from_the_cap_settings(settings):
    from shared.sandboxes import sandbox_from_settings

    settings.GRADING_SANDBOX_MEMORY_MB = 512
    settings.GRADING_SANDBOX_PROCESSES = 40
    settings.GRADING_SANDBOX_TMPFS_INODES = 5000
    settings.GRADING_SANDBOX_FALLBACK_PROCESSES = 5
    settings.GRADING_SANDBOX_CAPS, settings.GRADING_SANDBOX_TMPFS = "rlimit", "bwrap"
    sb = sandbox_from_settings()
    assert sb.budget() == RunBudget(memory_bytes=512 << 20, processes=40, tmpfs_inodes=5000,
                                    fallback_processes=5, address_space_bytes=1 << 30)
    assert (sb.caps, sb.tmpfs) == ("rlimit", "bwrap")
    assert sb.describe_caps().startswith("per-process rlimits only: at most 5 processes x 102 MiB")


def test_a_cgroup_that_could_not_be_capped_is_not_left_made(capped, monkeypatch):
    # why: join and wrap make the run's cgroups when they are missing; one made but left without its
    # limits (the write of pids.max failed) must not count as made, or a process would join it uncapped
    from grading.engine.sandbox import cgroups
    real_write = cgroups._write

    def failing_write(path, text):
        if path.name == "pids.max":
            raise OSError(28, "No space left on device (test)")
        real_write(path, text)

    run = RunCaps(capped.caps_in_force(), capped.budget(), defer_cgroups=True)
    monkeypatch.setattr(cgroups, "_write", failing_write)
    with pytest.raises(cgroups.CapsUnavailable):
        run.ensure_cgroups()
    assert run.cgroups == []
    with pytest.raises(cgroups.CapsUnavailable):
        run.join((os.getpid(),))  # tries again, and still refuses: never a cgroup without its caps
    assert run.cgroups == []
    monkeypatch.undo()
    run.close()


def test_a_name_whose_owner_ended_but_is_not_yet_reaped_is_gone():
    import subprocess as sp

    from grading.engine.sandbox import cgroups

    child = sp.Popen(["true"])
    _wait_for(lambda: cgroups._zombie(child.pid), HANG_GUARD_S, "the child to end", interval=0.01)
    name = f"run-{cgroups._pidns()}-{child.pid}-{cgroups._start_time(child.pid)}-00000000"
    assert cgroups.owner_gone(name)  # a zombie: its entry and start time are still there
    child.wait()
    assert cgroups.owner_gone(name)
    mine = f"run-{cgroups._pidns()}-{os.getpid()}-{cgroups._start_time(os.getpid())}-00000000"
    assert not cgroups.owner_gone(mine)
