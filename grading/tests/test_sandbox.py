"""The sandbox against real bubblewrap: normal runs, then hostile code.

No mocks: every case runs a generated tree in bwrap and asserts containment on
the host (marker files, listening sockets, the host's environment, leftover
processes). Without bwrap these tests skip locally but fail under CI=true, so
a green CI run means they ran.
"""

from __future__ import annotations

import ast
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import require
from grading.engine import sandbox as sandbox_module
from grading.engine.runner import ensure_runner, runner_python
from grading.engine.sandbox import (
    STARTED_MARKER,
    Sandbox,
    SandboxLimits,
    SandboxUnavailable,
    _sandboxed_copy,
    clean_stale_scratch,
    close_warm_sandboxes,
    spawn,
    wait_for_warm,
)
from grading.engine.sandbox.processes import _Fds, _uid_processes
from grading.engine.sandbox.warm import _warm_pool
from shared import pytest_slots

VAR = Path(__file__).resolve().parents[2] / "var"
PYTEST = ("python", "-m", "pytest", "-q")
# A pool of our own, apart from the default one a worker on this machine may be using.
UID_BASE = pytest_slots.uids("sandbox")
LIMITS = SandboxLimits(
    wall_s=15, cpu_s=4, address_space_bytes=512 << 20, nproc=32,
    file_size_bytes=8 << 20, tmpfs_bytes=32 << 20, output_bytes=64 << 10,
)


@pytest.fixture
def sandbox(runner_dir, scratch_dir, settings) -> Sandbox:
    """The tests' sandbox; its pytest runs go through warm sandboxes unless TAKEHOME_WARM_SANDBOXES=0."""
    sb = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=LIMITS,
                 warm=2 if settings.GRADING_WARM_SANDBOXES else 0)
    wait_for_warm(sb)
    return sb


def make_tree(root: Path, files: dict[str, str]) -> Path:
    """Write a tree under pytest's tmp_path (mode 0700): Sandbox.run stages its own copy."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def pool_processes(sb: Sandbox | None = None) -> list[int]:
    """Live processes of the pool's uids, but those of warm sandboxes still waiting for a run."""
    base, slots = (sb.uid_base, sb.slots) if sb else (UID_BASE, 8)
    if not (sb and sb.warm):
        return [p for uid in range(base, base + slots) for p in _uid_processes(uid)]
    pool = _warm_pool(sb)
    # why under the pool's starting lock: the pool refills itself in a thread after a run, and a warm sandbox
    # half started (its processes there, not yet in ready) is no leftover; no start begins while this looks
    with pool.starting:
        waiting = {w.uid for w in pool.ready}
        return [p for uid in range(base, base + slots) if uid not in waiting for p in _uid_processes(uid)]


@pytest.fixture(autouse=True)
def no_leftovers(scratch_dir):
    yield
    close_warm_sandboxes()
    assert pool_processes() == [], "a sandboxed process outlived its run"
    runs = scratch_dir / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], "a run folder was not removed"


# -- normal runs -------------------------------------------------------------

PASSING = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": f"""
        import os
        from calc import add
        def test_add():
            assert add(1, 2) == 3
        def test_runs_unprivileged():
            assert {UID_BASE} <= os.getuid() < {UID_BASE + 8} and os.getcwd() == "/tree"
    """,
}


def test_passing_tree(sandbox, tmp_path):
    r = sandbox.run(make_tree(tmp_path, PASSING), PYTEST)
    assert (r.outcome, r.exit_code, r.passed, r.failed) == ("passed", 0, 2, 0), r.log
    assert {t.nodeid for t in r.tests} == {"test_calc.py::test_add", "test_calc.py::test_runs_unprivileged"}
    assert r.notes == ()


def test_failing_tree_counts(sandbox, tmp_path):
    tree = make_tree(tmp_path, {**PASSING, "test_more.py": """
        class TestMore:
            def test_one(self): assert 1 == 2
            def test_two(self): assert 1 == 3
    """})
    r = sandbox.run(tree, PYTEST)
    assert (r.outcome, r.exit_code, r.passed, r.failed, r.errors) == ("failed", 1, 2, 2, 0), r.log
    assert "test_more.py::TestMore::test_one" in {t.nodeid for t in r.tests if t.outcome == "failed"}
    assert "2 failed, 2 passed" in r.log


def test_a_tree_given_as_files_runs_without_any_copy_on_the_workers_disk(sandbox, scratch_dir, monkeypatch):
    files = {name: textwrap.dedent(text).encode() for name, text in PASSING.items()}
    files["pkg/deep/data.txt"] = b"x"
    files["test_layout.py"] = (b"import os, stat\n"
                               b"def test_layout():\n"
                               b"    assert open('pkg/deep/data.txt').read() == 'x'\n"
                               b"    assert stat.S_IMODE(os.stat('calc.py').st_mode) == 0o644\n"
                               b"    assert os.stat('calc.py').st_uid == os.getuid()\n"
                               b"    assert not os.path.exists('/src')\n"
                               b"    import sys; assert sys.stdin.read() == ''\n")
    sandbox.run(files, ("true",))  # the helpers' copy under the scratch folder is made once, before
    written: list[str] = []
    watching = [True]

    def audit(event, args):
        # every file opened for writing and every folder made, anywhere on the host, by this process
        # why absolute paths only: a cold run's tree is written through folder descriptors
        # (relative names) into the run's own tmpfs, which is mounted by its absolute path.
        if watching[0] and (event == "open" and isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR)
                            or event == "os.mkdir" and not os.path.exists(args[0])) \
                and isinstance(args[0], (str, bytes, os.PathLike)) and os.path.isabs(os.fsdecode(args[0])):
            written.append(os.fsdecode(args[0]))

    sys.addaudithook(audit)
    try:
        r = sandbox.run(files, (*PYTEST, "-s"))
    finally:
        watching[0] = False
    assert (r.outcome, r.passed) == ("passed", 3), r.log
    assert [w for w in written if not w.startswith(("/sys/fs/cgroup", "/run/lock", "/dev/shm"))] == [], written


class Spawns:
    """The programs this thread starts while watching (an audit hook: it sees every subprocess.Popen)."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []
        self.watching = False
        self.thread = threading.get_ident()
        sys.addaudithook(self._audit)

    def _audit(self, event, args):
        if self.watching and event == "subprocess.Popen" and threading.get_ident() == self.thread:
            self.argvs.append([os.fsdecode(a) for a in args[1]])

    def __enter__(self) -> Spawns:
        self.watching = True
        # why also this: where the worker starts bwrap under the run's uid itself, one thread of its
        # own makes the Popen (grading/engine/sandbox/spawn.py); what this thread asked it for is recorded here.
        self.popen_as = spawn.popen_as

        def popen_as(uid, gid, argv, **kwargs):
            if self.watching and threading.get_ident() == self.thread:
                self.argvs.append([os.fsdecode(a) for a in argv])
            return self.popen_as(uid, gid, argv, **kwargs)

        spawn.popen_as = popen_as
        return self

    def __exit__(self, *exc) -> None:
        self.watching = False
        spawn.popen_as = self.popen_as


def test_a_tree_too_big_for_the_sandboxs_tmpfs_is_reported_as_such(runner_dir, scratch_dir):
    sb = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=replace(LIMITS, tmpfs_bytes=4 << 20))
    files = {f"blob{i}.bin": os.urandom(1 << 20) for i in range(6)}
    files["test_never.py"] = b"def test_never():\n    pass\n"
    with Spawns() as spawns:
        r = sb.run(files, PYTEST)
    assert r.exit_code == 125 and r.passed == 0, r.log
    assert any("too large for its tmpfs" in n for n in r.notes), r.notes
    assert any(n.startswith("/tree is full") for n in r.notes), r.notes
    if sb.caps_in_force().tmpfs == "mount":
        # the worker wrote the tree into the run's tmpfs itself while the sandbox started, and stopped
        # there: the sandbox was ended at its gate, before anything of the run's
        assert_ended_at_the_gate(spawns.argvs)
        assert "No space left on device" in r.log, r.log


def assert_ended_at_the_gate(argvs: list[list[str]]) -> None:
    """One sandbox at most was started for a run whose tree was refused (its result, 125, was not watched)."""
    assert len(argvs) <= 1, argvs


def test_a_tree_with_more_files_than_the_tmpfs_inode_cap_is_reported_as_such(runner_dir, scratch_dir):
    sb = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=replace(LIMITS, tmpfs_inodes=300))
    require(sb.caps_in_force().tmpfs == "mount", "no per-run tmpfs mounts here: the inode cap is not in force")
    files = {f"f{i}.txt": b"" for i in range(400)}
    files["test_never.py"] = b"def test_never():\n    pass\n"
    with Spawns() as spawns:
        r = sb.run(files, PYTEST)
    assert r.exit_code == 125 and r.passed == 0, r.log
    assert any("too large for its tmpfs" in n for n in r.notes), r.notes
    assert any(n.startswith("/tree ran out of inodes") for n in r.notes), r.notes
    assert_ended_at_the_gate(spawns.argvs)


LISTING = "find /tree -mindepth 1 | sort | while read -r p; do stat -c '%u:%g %a %F %n' \"$p\"; done; id -u"


def _listing(sb: Sandbox, tree) -> list[str]:
    r = sb.run(tree, ("sh", "-c", LISTING))
    assert r.exit_code == 0, r.log
    # (tar's own warnings, such as the leading "/" it strips, are no part of the tree)
    *lines, uid = [line for line in r.log.strip().splitlines() if not line.startswith("tar: ")]
    return [line.replace(f"{uid}:{uid} ", "UID ") for line in lines]


def test_a_cold_run_gets_the_same_tree_whether_the_worker_writes_it_or_tar_unpacks_it(runner_dir, scratch_dir,
                                                                                      tmp_path):
    mounting = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=LIMITS)
    require(mounting.caps_in_force().tmpfs == "mount", "the worker may not mount a tmpfs here (run as root)")
    unpacking = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=LIMITS, tmpfs="bwrap")
    folder = make_tree(tmp_path / "t", {"calc.py": "x = 1\n", "pkg/deep/data.txt": "d", "pkg/__init__.py": ""})
    (folder / "run.sh").write_text("echo hi\n")
    (folder / "run.sh").chmod(0o750)
    (folder / "empty").mkdir()
    (folder / "shadow").symlink_to("/etc/shadow")
    (folder / "pkg" / "up").symlink_to("..")
    os.mkfifo(folder / "fifo")
    files = {"a/b/c.txt": b"c", "/lead.txt": b"l", "top.py": b""}
    for tree in (folder, files):
        with Spawns() as spawns:
            written = _listing(mounting, tree)
        # in mount mode the sandbox runs no tar and reads nothing on its stdin
        script = next(a for argv in spawns.argvs for a in argv if "ulimit -v" in a)
        assert "tar " not in script, script
        assert written == _listing(unpacking, tree), written
    assert written == ["UID 755 directory /tree/a", "UID 755 directory /tree/a/b", "UID 644 regular file /tree/a/b/c.txt",
                       "UID 644 regular file /tree/lead.txt", "UID 644 regular empty file /tree/top.py"]
    assert "UID 750 regular file /tree/run.sh" not in _listing(mounting, folder)
    assert "UID 755 regular file /tree/run.sh" in _listing(mounting, folder)
    assert "UID 777 symbolic link /tree/shadow" in _listing(mounting, folder)


def test_the_workers_tree_writer_never_writes_outside_its_folder(tmp_path):
    require(os.geteuid() == 0, "the worker writes the tree as root (chown)")
    from tarfile import DIRTYPE, REGTYPE, SYMTYPE

    from grading.engine.sandbox import TreeRefused, write_tree_into
    from grading.engine.sandbox.trees import _write_entries

    outside = tmp_path / "outside"
    outside.mkdir()
    uid = UID_BASE + 9
    hostile = {
        "a link, then a file through it": [(SYMTYPE, "a", 0o777, str(outside)), (REGTYPE, "a/passwd", 0o644, b"x")],
        "a link, then a folder through it": [(SYMTYPE, "a", 0o777, str(outside)), (DIRTYPE, "a/d", 0o755, b"")],
        "a link, then a file two folders below it": [(SYMTYPE, "a", 0o777, str(outside)),
                                                     (REGTYPE, "a/b/passwd", 0o644, b"x")],
        "a link, then a file over it": [(SYMTYPE, "passwd", 0o777, str(outside / "passwd")),
                                        (REGTYPE, "passwd", 0o644, b"x")],
        "a link, then a link over it": [(SYMTYPE, "a", 0o777, str(outside)), (SYMTYPE, "a", 0o777, "/")],
        "dot dot": [(REGTYPE, "../outside/passwd", 0o644, b"x")],
        "dot dot further down": [(REGTYPE, "x/../../outside/passwd", 0o644, b"x")],
        "a name with NUL": [(REGTYPE, "pass\0wd", 0o644, b"x")],
    }
    for shape, entries in hostile.items():
        root = tmp_path / shape.replace(" ", "-")
        root.mkdir(mode=0o700)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(TreeRefused):
                _write_entries(fd, entries, uid)
        finally:
            os.close(fd)
        assert list(outside.iterdir()) == [], shape
    # an absolute name stays inside, as tar strips its leading "/"; a mapping's names go the same way
    root = tmp_path / "absolute"
    root.mkdir(mode=0o700)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_tree_into(fd, {f"{outside}/passwd": b"x", "/etc/passwd": b"y"}, uid)
        with pytest.raises(TreeRefused):
            write_tree_into(fd, {"../passwd": b"z"}, uid)
    finally:
        os.close(fd)
    assert list(outside.iterdir()) == [] and not (tmp_path / "passwd").exists()
    made = root / outside.relative_to("/") / "passwd"
    assert made.read_bytes() == b"x" and (root / "etc" / "passwd").read_bytes() == b"y"
    for path in (made, *made.parents):
        if path == root:
            break
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (uid, uid), path
        assert oct(st.st_mode & 0o7777) == (oct(0o644) if path == made else oct(0o755)), path


def test_collection_error(sandbox, tmp_path):
    r = sandbox.run(make_tree(tmp_path, {"test_broken.py": "def test_x(:\n"}), PYTEST)
    assert (r.outcome, r.exit_code, r.errors) == ("error", 2, 1), r.log


def test_no_tests(sandbox, tmp_path):
    r = sandbox.run(make_tree(tmp_path, {"calc.py": "x = 1\n"}), PYTEST)
    assert (r.outcome, r.exit_code) == ("no_tests", 5)


def test_skip_and_xfail_are_counted_and_not_passes(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_marks.py": """
        import pytest
        def test_real(): pass
        @pytest.mark.skip(reason="later")
        def test_skipped(): pass
        @pytest.mark.xfail
        def test_xfailed(): assert 0
        @pytest.mark.xfail
        def test_xpassed(): pass
    """})
    r = sandbox.run(tree, PYTEST)
    assert (r.outcome, r.passed, r.skipped, r.xfailed, r.xpassed) == ("passed", 1, 1, 1, 1), r.log
    assert {t.nodeid.split("::")[1]: t.outcome for t in r.tests} == {
        "test_real": "passed", "test_skipped": "skipped", "test_xfailed": "xfailed", "test_xpassed": "xpassed"}
    assert any("not a pass" in n for n in r.notes)


def test_only_skips_is_not_passed(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_s.py": "import pytest\npytestmark = pytest.mark.skip\ndef test_a(): pass\n"})
    r = sandbox.run(tree, PYTEST)
    assert (r.outcome, r.passed, r.skipped) == ("no_tests", 0, 1)


def test_plain_command_has_no_counts(sandbox, tmp_path):
    r = sandbox.run(tmp_path, ("true",))
    assert (r.outcome, r.exit_code, r.tests) == ("passed", 0, ())


def test_concurrent_runs_get_distinct_uids(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_uid.py": """
        import os, time
        def test_uid():
            time.sleep(0.5)
            print("UID=%d" % os.getuid())
    """})
    results = [None] * 4
    def work(i):
        results[i] = sandbox.run(tree, (*PYTEST, "-s"))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.outcome for r in results] == ["passed"] * 4
    uids = {line for r in results for line in r.log.splitlines() if line.startswith("UID=")}
    assert len(uids) == 4, uids


def test_missing_runner_says_how_to_build_it(scratch_dir, runner_dir, tmp_path):
    with pytest.raises(SandboxUnavailable, match="python -m grading.engine.runner"):
        Sandbox(tmp_path / "no-runner", scratch_dir).run(tmp_path, ("true",))


def test_a_runner_kept_under_tmp_is_not_hidden_by_the_sandboxes_tmp(runner_dir, scratch_dir, tmp_path):
    import shutil
    import tempfile

    copy = Path(tempfile.mkdtemp(prefix="th-runner-", dir="/tmp"))
    try:
        os.chmod(copy, 0o755)
        shutil.copytree(runner_dir, copy / "runner", symlinks=True)
        tree = make_tree(tmp_path / "tree", {"test_ok.py": "def test_ok():\n    assert True\n"})
        result = Sandbox(copy / "runner", scratch_dir, uid_base=UID_BASE, limits=LIMITS).run(tree, PYTEST)
        assert result.outcome == "passed", result.log
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def test_unreachable_scratch_is_refused_clearly(runner_dir, tmp_path):
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    with pytest.raises(SandboxUnavailable, match="traversable"):
        Sandbox(runner_dir, hidden / "scratch").run(tmp_path, ("true",))


def test_check_passes(sandbox):
    sandbox.check()


def test_ensure_runner_is_idempotent(runner_dir, monkeypatch):
    import grading.engine.runner as runner

    def no_build(staging):
        raise AssertionError("a current runner was built again")

    monkeypatch.setattr(runner, "_build_runner", no_build)
    assert ensure_runner(runner_dir) == runner_dir.resolve()
    assert runner_python(runner_dir).stat().st_mode & 0o005 == 0o005


# -- our side's failures are ours, never a red run ---------------------------------

@pytest.fixture
def private_sandboxed(tmp_path, monkeypatch) -> Path:
    """grading/engine/sandbox/sandboxed/ as in a checkout under a folder others cannot traverse (/root, mode 0700)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    copy = home / "checkout" / "grading" / "sandboxed"
    shutil.copytree(sandbox_module.SANDBOXED_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sandbox_module, "SANDBOXED_DIR", copy)
    return copy


def test_a_checkout_under_a_private_folder_grades_normally(sandbox, scratch_dir, private_sandboxed, tmp_path):
    tree = make_tree(tmp_path / "tree", PASSING)
    result = sandbox.run(tree, PYTEST)
    assert (result.outcome, result.passed) == ("passed", 2), result.log
    assert result.witness.strip(), "the witness plugin was not loaded"
    assert STARTED_MARKER not in result.log
    # What the sandbox reads is a copy in the scratch folder, readable by anyone, and nothing finds fault.
    copy = _sandboxed_copy(scratch_dir.resolve())
    assert copy.parent == scratch_dir.resolve() and copy.name.startswith("sandboxed-")
    assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in private_sandboxed.iterdir())
    assert copy.stat().st_mode & 0o777 == 0o755
    assert {p.stat().st_mode & 0o777 for p in copy.iterdir() if p.is_file()} == {0o644}
    assert {p.stat().st_mode & 0o777 for p in copy.iterdir() if p.is_dir()} <= {0o755}  # bin/, for `gate`
    assert [kind for kind, _ in sandbox.problems() if kind == "reach"] == []


def test_the_copy_of_our_sandboxed_code_is_made_once_per_content_and_kept(private_sandboxed, tmp_path):
    import threading

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    made: list[Path] = []
    threads = [threading.Thread(target=lambda: made.append(_sandboxed_copy(scratch))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 8 and len(set(made)) == 1
    assert [p.name for p in scratch.iterdir()] == [made[0].name]  # no temporary folder left behind
    for path in private_sandboxed.rglob("*"):
        if path.is_file():
            copied = made[0] / path.relative_to(private_sandboxed)
            assert copied.read_bytes() == path.read_bytes()
            # the `gate` command of hosted sessions stays a command; the rest is only read
            assert os.access(copied, os.X_OK) == bool(path.stat().st_mode & 0o100)
    assert clean_stale_scratch(scratch) == [] and made[0].is_dir()
    (private_sandboxed / "takehome_witness.py").write_text("# changed\n")
    changed = _sandboxed_copy(scratch)
    assert changed != made[0] and (changed / "takehome_witness.py").read_text() == "# changed\n"


def test_a_sandbox_bwrap_cannot_set_up_is_our_failure_not_a_failed_run(sandbox, monkeypatch, tmp_path):
    # bwrap reports the child's pid before it binds anything: a bind whose source is gone fails after that.
    monkeypatch.setattr(sandbox_module, "_sandboxed_copy", lambda scratch: scratch / "sandboxed-gone")
    close_warm_sandboxes()  # why: those were set up before the copy went
    tree = make_tree(tmp_path / "tree", PASSING)
    with pytest.raises(SandboxUnavailable, match="bwrap could not set up the sandbox .*sandboxed-gone"):
        sandbox.run(tree, PYTEST)
    with pytest.raises(SandboxUnavailable):
        sandbox.check()


def test_a_run_that_prints_a_bwrap_error_and_our_start_line_is_an_ordinary_failed_run(sandbox, tmp_path):
    tree = make_tree(tmp_path / "tree", {"test_fake.py": f"""
        import os
        def test_fake():
            os.write(2, b"{STARTED_MARKER}\\nbwrap: Can't find source path /opt/x: Permission denied\\n")
            os._exit(1)
    """})
    result = sandbox.run(tree, (*PYTEST, "-s"))
    assert (result.outcome, result.exit_code) == ("failed", 1), result.log
    assert "bwrap: Can't find source path /opt/x" in result.log
    assert result.log.count(STARTED_MARKER) == 1  # the run's own copy is kept as printed; ours is not


# -- hostile code ---------------------------------------------------------------

def test_no_network(sandbox, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    tree = make_tree(tmp_path, {"test_net.py": f"""
        import socket
        def test_connect():
            socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"pwned")
        def test_resolve():
            socket.getaddrinfo("example.com", 443)
    """})
    r = sandbox.run(tree, PYTEST)
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing ever connected to the host's listener
    listener.close()
    assert (r.outcome, r.failed, r.passed) == ("failed", 2, 0), r.log
    assert "gaierror" in r.log


def test_cannot_read_shadow_or_passwd(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_etc.py": """
        import os
        def test_shadow(): print(open("/etc/shadow").read())
        def test_passwd(): print(open("/etc/passwd").read())
        def test_etc_listing(): assert os.listdir("/etc") == ["ld.so.cache"]
    """})
    r = sandbox.run(tree, PYTEST)
    assert (r.failed, r.passed) == (2, 1), r.log
    assert r.log.count("FileNotFoundError") >= 2 and "root:" not in r.log


def test_worker_environment_does_not_leak(sandbox, tmp_path, monkeypatch):
    secret = "s3cr3t-" + secrets.token_hex(8)
    monkeypatch.setenv("TAKEHOME_TEST_SECRET", secret)
    tree = make_tree(tmp_path, {"test_env.py": """
        import glob, os
        def test_dump():
            seen = [repr(dict(os.environ))]
            for path in glob.glob("/proc/*/environ"):
                try:
                    seen.append(path + " " + open(path, "rb").read().decode(errors="replace"))
                except OSError as exc:
                    seen.append(path + " " + repr(exc))
            print("\\n".join(seen))
            assert False, "dumped"
    """})
    r = sandbox.run(tree, PYTEST)
    assert "/proc/1/environ" in r.log and "PYTHONDONTWRITEBYTECODE" in r.log, r.log
    assert secret not in r.log and "TAKEHOME_TEST_SECRET" not in r.log


FORK_BOMB = {"test_bomb.py": """
    import os, time
    def test_bomb():
        children = 0
        while children < 10000:
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children += 1
        print("FORKED", children, flush=True)
        assert children >= 10000
"""}


def test_fork_bomb_is_contained(sandbox, tmp_path):
    tree = make_tree(tmp_path, FORK_BOMB)
    r = sandbox.run(tree, (*PYTEST, "-s"))
    assert r.outcome == "failed", r.log  # ended by the cap, not at the run's time limit
    forked = int(r.log.split("FORKED ")[1].split()[0])
    assert 0 < forked < LIMITS.nproc


def test_memory_bomb_is_killed(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_mem.py": """
        def test_mem():
            hog = []
            while True:
                hog.append(bytearray(64 << 20))
    """})
    r = sandbox.run(tree, PYTEST)
    assert r.outcome == "killed", r.log
    assert any("memory limit" in n for n in r.notes)


def test_endless_loop_hits_cpu_limit(runner_dir, scratch_dir, tmp_path):
    # why a wall limit far above the CPU limit: on a busy machine the loop gets a share of a core, and the
    # CPU limit must still come first
    limits = replace(LIMITS, cpu_s=2, wall_s=300)
    sb = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=limits)
    tree = make_tree(tmp_path, {"test_loop.py": "def test_loop():\n    while True:\n        pass\n"})
    r = sb.run(tree, PYTEST)
    assert (r.outcome, r.exit_code) == ("killed", 137), r.log
    assert any("CPU limit" in n for n in r.notes)
    assert r.duration_s < limits.wall_s


def test_sleeper_hits_wall_clock_and_group_is_killed(runner_dir, scratch_dir, tmp_path):
    sb = Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, limits=replace(LIMITS, wall_s=3))
    tree = make_tree(tmp_path, {"test_sleep.py": "import time\ndef test_sleep():\n    time.sleep(600)\n"})
    r = sb.run(tree, PYTEST)
    assert (r.outcome, r.exit_code) == ("timeout", None)
    assert r.duration_s >= 3  # not before the limit; after it, the outcome says the run was ended
    assert pool_processes(sb) == []


def test_disk_filler_stops_inside_the_sandbox(sandbox, tmp_path, scratch_dir):
    tree = make_tree(tmp_path, {"test_fill.py": """
        import errno, os
        def fill(folder, file_mib):
            n = 0
            try:
                while True:
                    with open(os.path.join(folder, "fill%d" % n), "wb") as fh:
                        for _ in range(file_mib):
                            fh.write(b"x" * (1 << 20))
                    n += 1
            except OSError as exc:
                return errno.errorcode[exc.errno]
        def test_fill():
            big = fill("/tmp", 64)          # one file past the file-size limit
            for f in os.listdir("/tmp"):
                if f.startswith("fill"):
                    os.unlink(os.path.join("/tmp", f))
            print("RESULTS", big, fill("/tree", 4), fill("/tmp", 4), fill("/dev/shm", 4))
    """})
    r = sandbox.run(tree, (*PYTEST, "-s"))
    results = r.log.split("RESULTS ")[1].split()[:4]
    assert results == ["EFBIG", "ENOSPC", "ENOSPC", "ENOSPC"], r.log
    # a full /tmp can also stop pytest writing its report: a result either way
    assert r.outcome in ("passed", "failed")
    assert sum(f.stat().st_size for f in scratch_dir.rglob("*") if f.is_file()) < 1 << 20


def test_writes_outside_never_reach_the_host(sandbox, tmp_path, scratch_dir, runner_dir):
    marker = "marker-" + secrets.token_hex(6)
    targets = [scratch_dir, scratch_dir / "runs", VAR, Path("/work"), Path("/tmp"), runner_dir,
               runner_dir / "bin", Path("/src"), Path("/usr"), Path("/etc"), Path("/")]
    tree = make_tree(tmp_path, {"test_escape.py": f"""
        import os
        TARGETS = {[str(t) for t in targets]!r}
        def test_escape():
            written = []
            for folder in TARGETS:
                try:
                    os.makedirs(folder, exist_ok=True)
                    with open(os.path.join(folder, "{marker}"), "w") as fh:
                        fh.write("x")
                    written.append(folder)
                except OSError:
                    pass
            with open("/tree/{marker}", "w") as fh:
                fh.write("inside the copy is fine")
            print("WRITTEN", written)
    """})
    r = sandbox.run(tree, (*PYTEST, "-s"))
    assert r.outcome == "passed", r.log
    # Only the sandbox's own tmpfs /tmp can take it (with any target that lies
    # under /tmp on the host, recreated there); nothing reached the host.
    written = ast.literal_eval(r.log.split("WRITTEN ", 1)[1].split("\n", 1)[0])
    assert "/tmp" in written and all(w == "/tmp" or w.startswith("/tmp/") for w in written), r.log
    for folder in [*targets, tmp_path]:
        assert not (folder / marker).exists(), folder


def test_grandchild_ignoring_sigterm_is_gone_after_the_run(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_orphan.py": """
        import subprocess, sys
        def test_spawn():
            subprocess.Popen(
                [sys.executable, "-c",
                 "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    """})
    r = sandbox.run(tree, PYTEST)
    assert r.outcome == "passed", r.log  # not held until the time limit by what was left running
    assert pool_processes(sandbox) == []


def test_huge_output_is_capped(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_loud.py": """
        import sys
        def test_loud():
            line = "spam " * 200 + "\\n"
            for _ in range(50000):   # 50 MB
                sys.stdout.write(line)
    """})
    r = sandbox.run(tree, (*PYTEST, "-s"))
    assert r.outcome == "passed", r.log[-2000:]
    assert len(r.log.encode()) < LIMITS.output_bytes + 200
    assert "[output truncated" in r.log and "1 passed" in r.log  # the tail is kept
    assert any("truncated" in n for n in r.notes)


def test_interrupted_caller_kills_the_sandbox_and_cleans_up(sandbox, tmp_path):
    class SoftTimeLimit(Exception):
        pass

    def interrupt(signum, frame):
        raise SoftTimeLimit()

    tree = make_tree(tmp_path, {"test_sleep.py": "import time\ndef test_sleep():\n    time.sleep(600)\n"})
    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(SoftTimeLimit):
            sandbox.run(tree, PYTEST)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # no_leftovers checks that no process survived and the run folder is gone


# -- a pass must be earned: pytest itself cannot be replaced or skipped ------------

FAILING = {"test_calc.py": "def test_add():\n    assert 1 + 1 == 3\n"}


def test_a_pytest_py_in_the_tree_cannot_stand_in_for_pytest(sandbox, tmp_path):
    # `python -m pytest` used to put the tree first on sys.path before importing pytest.
    tree = make_tree(tmp_path, {**FAILING, "pytest.py": "print('1 passed in 0.01s')\nraise SystemExit(0)\n",
                                "_pytest/__init__.py": "raise SystemExit(0)\n"})
    r = sandbox.run(tree, PYTEST)
    assert (r.outcome, r.failed) == ("failed", 1), r.log


def test_a_stdlib_module_pytest_imports_cannot_be_shadowed(sandbox, tmp_path):
    # pytest's own plugins import xml.etree (junitxml), pdb, ...: loaded before the tree is on sys.path.
    tree = make_tree(tmp_path, {**FAILING, "xml/__init__.py": "import os\nos._exit(0)\n"})
    r = sandbox.run(tree, PYTEST)
    assert (r.outcome, r.failed) == ("failed", 1), r.log


def test_an_entry_point_plugin_shipped_in_the_tree_is_not_loaded(sandbox, tmp_path):
    tree = make_tree(tmp_path, {
        **FAILING,
        "cheat.py": """
            import pytest
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_makereport(item, call):
                outcome = yield
                outcome.get_result().outcome = "passed"
        """,
        "cheat-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: cheat\nVersion: 1.0\n",
        "cheat-1.0.dist-info/entry_points.txt": "[pytest11]\ncheat = cheat\n",
    })
    r = sandbox.run(tree, PYTEST)
    assert (r.outcome, r.failed) == ("failed", 1), r.log


def test_exit_0_before_any_test_ran_is_not_a_pass(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"calc.py": "import os\nos._exit(0)\n",
                                "test_calc.py": "import calc\n\ndef test_add():\n    assert 1 + 1 == 3\n"})
    r = sandbox.run(tree, PYTEST)
    assert r.exit_code == 0 and r.outcome != "passed", r
    assert any("JUnit report" in n for n in r.notes)


def test_collect_only_is_not_a_pass(sandbox, tmp_path):
    tree = make_tree(tmp_path, {**FAILING, "pytest.ini": "[pytest]\naddopts = --co\n"})
    r = sandbox.run(tree, PYTEST)
    assert r.exit_code == 0 and r.outcome == "no_tests", r


def test_a_junit_report_that_is_not_utf8_cannot_smuggle_a_doctype():
    from grading.engine.sandbox import parse_junit

    doc = ('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE t [<!ENTITY a "test_ok">]>'
           '<testsuites><testsuite><testcase classname="x" name="&a;"/></testsuite></testsuites>')
    for data in (doc.encode("utf-16"), doc.replace("DOCTYPE", "doctype").encode()):
        with pytest.raises(ValueError):
            parse_junit(data)


def test_a_double_forked_setsid_daemon_is_gone_after_the_run(sandbox, tmp_path):
    tree = make_tree(tmp_path, {"test_daemon.py": """
        import os, time
        def test_daemon():
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.closerange(0, 256)
                    time.sleep(600)
                os._exit(0)
            os.wait()
    """})
    r = sandbox.run(tree, PYTEST)
    assert r.outcome == "passed", r.log  # not held until the time limit by what was left running
    assert pool_processes(sandbox) == []


def test_two_runs_at_once_cannot_see_each_others_trees(sandbox, tmp_path):
    probe = """
        import os
        def test_look():
            seen = []
            for top in ("/", "/tmp", "/src", "/tree", "/proc"):
                try:
                    seen += [os.path.join(top, n) for n in os.listdir(top)]
                except OSError:
                    pass
            assert not [s for s in seen if "SECRET-OF-{other}" in s], seen
            import time; time.sleep(1)
    """
    trees = [make_tree(tmp_path / n, {f"SECRET-OF-{n}.txt": "x", "test_look.py": probe.format(other=o)})
             for n, o in (("a", "b"), ("b", "a"))]
    results = [None, None]

    def go(i):
        results[i] = sandbox.run(trees[i], PYTEST)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.outcome for r in results] == ["passed", "passed"], [r.log for r in results]


PRIVILEGES_PROBE = {"probe.py": b"""
import os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
print("STATUS", {k: status[k].strip() for k in ("NoNewPrivs", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")})
limits = {}
for line in open("/proc/self/limits").read().splitlines()[1:]:
    name, soft, hard = line[:26].strip(), line[26:47].strip(), line[47:68].strip()
    limits[name] = (soft, hard)
print("LIMITS", {k: limits[k] for k in ("Max cpu time", "Max file size", "Max processes", "Max open files",
                                        "Max address space", "Max core file size")})
print("ENV1", sorted(v.split("=")[0] for v in open("/proc/1/environ").read().split("\\0") if v))
"""}


def test_a_run_has_no_privileges_its_limits_and_a_cleared_environment(sandbox, tmp_path, monkeypatch):
    # The limits are set by the sandbox's own wrapper and the environment is
    # emptied by the spawn (no env, prlimit or setpriv-made environment): all three
    # hold for the run's processes, and bwrap's no_new_privs and dropped caps too.
    monkeypatch.setenv("TAKEHOME_TEST_SECRET", "x")
    r = sandbox.run(PRIVILEGES_PROBE, ("python", "probe.py"))
    assert r.exit_code == 0, r.log
    status = ast.literal_eval(r.log.split("STATUS ")[1].splitlines()[0])
    assert status == {"NoNewPrivs": "1", **{k: "0" * 16 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}}
    limits = ast.literal_eval(r.log.split("LIMITS ")[1].splitlines()[0])
    address_space, nproc = sandbox.run_caps().rlimits()
    expected = {"Max cpu time": LIMITS.cpu_s, "Max file size": LIMITS.file_size_bytes, "Max processes": nproc,
                "Max open files": LIMITS.nofile, "Max address space": address_space, "Max core file size": 0}
    assert limits == {k: (str(v), str(v)) for k, v in expected.items()}, limits
    env1 = ast.literal_eval(r.log.split("ENV1 ")[1].splitlines()[0])
    assert "TAKEHOME_TEST_SECRET" not in env1 and "PATH" in env1, env1


def test_a_sandbox_whose_gate_stays_shut_runs_nothing(sandbox, tmp_path):
    # The wrapper waits until the worker has put it into the run's cgroup; a worker
    # that dies (or gives up) first closes the gate unopened, and nothing of the run starts.
    runner, _, sandboxed = sandbox._prepare()
    uid = UID_BASE + 7
    gate_r, gate_w = os.pipe()
    os.fchown(gate_r, uid, uid)
    os.close(gate_w)
    fds = _Fds.open(uid)
    with sandbox.run_caps() as caps:
        argv = sandbox._argv(uid, runner, sandboxed, ("sh", "-c", "echo RAN"), fds, {}, caps, gate_r)
        tree = sandbox_module.tree_stream({})
        try:
            done = subprocess.run(argv, env={}, stdin=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  pass_fds=(*fds.child_ends(), gate_r), timeout=30)
        finally:
            for fd in (tree, gate_r):
                os.close(fd)
            fds.close_all()
    assert done.returncode == 126 and STARTED_MARKER in done.stdout.decode(), done
    assert b"RAN" not in done.stdout


def test_a_runs_tmpfs_mounts_leave_the_hosts_mount_table_once_the_sandbox_holds_them(sandbox, tmp_path):
    # why: every sandbox start copies the host's mount table, and bubblewrap reads it
    # for each bind it makes; live runs' mounts there made every other start slower.
    from grading.engine.sandbox.cgroups import _mounts, mount_dir_for

    require(sandbox.caps_in_force().tmpfs == "mount", "the worker may not mount a tmpfs here (run as root)")
    mounts = str(mount_dir_for(sandbox.scratch_dir)) + "/"
    seen: list[list[str]] = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen.append([m for m, _, _ in _mounts() if m.startswith(mounts) and f"-{os.getpid()}-" in m])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        r = sandbox.run({"fill.sh": b"i=0; while [ $i -lt 40 ]; do : > /tmp/f$i; i=$((i+1)); done; sleep 1.5\n"},
                        ("sh", "fill.sh"))
    finally:
        done.set()
        watcher.join()
    assert r.exit_code == 0, r.log
    assert len(seen) > 10 and not any(seen[len(seen) // 4:]), seen
