"""Run a command over a copy of a tree inside bubblewrap, and report what happened.

Plain Python, no Django. Read docs/security.md, "The grading sandbox" (what was
measured on these machines) before changing anything here: each measure below
answers an attack that succeeded without it. A failure of *our* side raises
:class:`SandboxUnavailable` (retryable); whatever the candidate's code does is
a :class:`RunResult`, never an exception.

The tree of a run is never copied on the worker's disk. Where the worker
mounts the run's capped tmpfs mounts itself (mount mode, grading/engine/sandbox/cgroups.py),
it writes a cold run's tree straight into the one for ``/tree`` while the
sandbox starts, before its gate opens (``write_tree_into``: owned by the
run's uid, never through a link); otherwise, and for a warm sandbox, the tree goes in as a tar in memory
(a memfd or a pipe on the sandbox's stdin, see ``tree_stream``) and is
unpacked there into ``/tree``. On the host side, under ``scratch_dir`` (mode 0711)::

    sandboxed-<hash>/         a copy of grading/engine/sandbox/sandboxed/, bound read-only at
                              /opt/takehome (<hash>: of its content; kept)

and, in /dev/shm/takehome-mounts-<hash of scratch_dir>/ (or ``scratch_dir/mounts``
where /dev/shm is no tmpfs)::

    run-<owner>-<random>/N-tmp    the run's tmpfs mounts (see grading/engine/sandbox/cgroups.py)

and ``/run/lock/takehome-sandbox/uid-<N>.lock``, flocked for the whole run.

Warm sandboxes (``Sandbox.warm``, docs/architecture.md, "Warm sandboxes"): each process keeps a few
sandboxes launched exactly as a cold run's, whose starter
(``sandboxed/takehome_starter.py``) has imported pytest and waits for one
run's arguments and tree on its stdin; each serves one run and exits. While
waiting they hold their uid and caps; a cold run that finds no free uid
touches ``/run/lock/takehome-sandbox/wanted`` and the pools give one back.
Each run is also capped as a whole (memory and processes by a cgroup of its
own, tmpfs inodes by mounts of its own, or rlimits where neither can be had):
see :mod:`grading.engine.sandbox.cgroups`.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

from . import spawn
from .cgroups import (
    Caps,
    CapsUnavailable,
    RunBudget,
    RunCaps,
    clean_stale,
    detect,
    mount_dir_for,
    owned_name,
    owner_gone,
    work_dir_for,
)
from .layout import (
    BWRAP,
    JUNIT_IN_SANDBOX,
    LOCK_DIR,
    PRLIMIT,
    PROXY_SERVER,
    PYTEST_BOOT,
    RUNNER_IN_SANDBOX,
    SANDBOXED_IN_SANDBOX,
    SETPRIV,
    STARTED_MARKER,
)
from .processes import (
    _CappedBuffer,
    _child_pid,
    _close,
    _ended,
    _Fds,
    _kill_group,
    _kill_uid,
    _Launch,
    _output,
    _setpriv,
    _Watched,
)
from .results import (
    _XPASS_RE,
    JUNIT_MAX_BYTES,
    JUNIT_MAX_ELEMENTS,
    RunResult,
    SandboxUnavailable,
    TestCase,
    counts_from_text,
    decide_outcome,
    parse_junit,
    run_counts,
)
from .trees import TreeRefused, _tree_arg, _TreesRefused, _write_tree, tree_stream, write_tree_into
from .warm import (
    WARM_STARTER,
    _send,
    _want_slot,
    _Warm,
    _warm_pool,
    close_warm_sandboxes,
    start_warm_sandboxes,
    wait_for_warm,
    warm_eligible,
)

logger = logging.getLogger(__name__)

# What the rest of the engine uses, gathered here from the modules that hold it: results (what a run came to),
# trees (a tree into a run), processes (a run's processes), warm (warm sandboxes), layout (where things are).
__all__ = [
    "BWRAP",
    "CALL_LIMIT_S",
    "JUNIT_IN_SANDBOX",
    "JUNIT_MAX_ELEMENTS",
    "PROXY_SERVER",
    "SANDBOXED_DIR",
    "STARTED_MARKER",
    "WARM_STARTER",
    "RunResult",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "TestCase",
    "TreeRefused",
    "clean_stale_scratch",
    "close_warm_sandboxes",
    "counts_from_text",
    "decide_outcome",
    "flock_free",
    "interpreter_binds",
    "is_pytest",
    "parse_junit",
    "pytest_command",
    "run_counts",
    "start_warm_sandboxes",
    "tree_stream",
    "wait_for_warm",
    "warm_eligible",
    "write_tree_into",
]

# Our own code that runs inside the sandbox (the witness plugin, both sides of
# the hidden tests' process boundary). What is bound read-only is a copy of it
# under the scratch folder (see _sandboxed_copy), not this folder itself.
SANDBOXED_DIR = Path(__file__).resolve().with_name("sandboxed")
SERVER_GRACE_S = 1.0
# Each call of the hidden tests into the candidate's code (see run_across_boundary): an honest call
# takes milliseconds; a tight clock makes one that sleeps to signal fail its test (docs/evidence.md).
CALL_LIMIT_S = 2.0
CALL_MARGIN_S = 1.0  # what the trusted side allows beyond it for the fork and the reply's way back
SLOT_WAIT_S = 30.0


K = TypeVar("K")


def flock_free(candidates: Iterable[tuple[K, Path]], count: int) -> list[tuple[K, TextIO]] | None:
    """The first ``count`` of ``(key, lock file path)`` whose file nobody holds, each as ``(key, open file)``
    flocked until it is closed (or the process ends), or None with nothing held. Safe across processes."""
    held: list[tuple[K, TextIO]] = []
    for key, path in candidates:
        fh = open(path, "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        held.append((key, fh))
        if len(held) == count:
            return held
    for _, lock in held:
        lock.close()
    return None


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 60
    cpu_s: int = 30
    address_space_bytes: int = 1 << 30
    nproc: int = 64
    file_size_bytes: int = 64 << 20
    nofile: int = 256
    tmpfs_bytes: int = 256 << 20
    output_bytes: int = 256 << 10
    # The run as a whole (grading/engine/sandbox/cgroups.py): all its processes together, and
    # files per tmpfs. ``nproc`` above is the run's process cap.
    memory_bytes: int = 1 << 30
    tmpfs_inodes: int = 16384
    # Without a cgroup: processes per run, each with memory_bytes // this of address space.
    fallback_processes: int = 8


def is_pytest(command: Sequence[str]) -> bool:
    cmd = list(command)
    return bool(cmd) and (
        os.path.basename(cmd[0]) in ("pytest", "py.test")
        or cmd[1:3] == ["-m", "pytest"]
        or cmd[1:4] == ["-P", "-c", PYTEST_BOOT]
    )


def pytest_command(command: Sequence[str]) -> tuple[str, ...]:
    """``command`` plus the arguments the sandbox needs when it runs pytest; others unchanged."""
    if not is_pytest(command):
        return tuple(command)
    command = list(command)
    if command[1:3] == ["-m", "pytest"]:
        # why -P: ``python -m`` puts the working folder (the candidate's tree)
        # first on sys.path before pytest is imported, so a file named
        # pytest.py replaced pytest itself and reported a pass it never ran.
        command[1:3] = ["-P", "-c", PYTEST_BOOT]
    # each option beside its value, as pytest reads them
    # fmt: off
    extra = [
        f"--junitxml={JUNIT_IN_SANDBOX}",
        "-o", "junit_family=xunit1",  # xunit1 adds file= so node ids can be rebuilt
        "-p", "no:cacheprovider",
        # why: the witness reports what each test really raised (grading.engine.integrity).
        "-p", "takehome_witness",
        # why: the grader's canary tests (--takehome-canary) run whatever the
        # candidate's configuration collects or deselects (sandboxed/takehome_canary.py).
        "-p", "takehome_canary",
        # why: every run that executes candidate code holds canary tests that
        # fail; -x or --maxfail in the candidate's configuration must not stop
        # the run at a canary before the real tests ran.
        "--maxfail=0",
        "--basetemp=/tmp/pytest",
    ]
    # fmt: on
    if not any(a.startswith("-r") for a in command[1:]):
        extra.append("-rfEX")  # the default 'fE' plus XPASS lines, which JUnit XML hides
    return (*command, *extra)


def _sandboxed_files(folder: Path) -> list[Path]:
    """The regular files of ``folder`` the sandbox needs, sorted (no caches, no links)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.relative_to(folder).parts
    )


def _exec_mark(path: Path) -> bytes:
    """b"x" for a file its owner may run (a command of ours, such as the workspace's ``bin/gate``), else b""."""
    return b"x" if path.stat().st_mode & 0o100 else b""


_SANDBOXED_COPIES: dict[tuple[str, str], tuple[tuple, Path]] = {}


def _stat_mark(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode


def _sandboxed_copy(scratch: Path) -> Path:
    """A copy of SANDBOXED_DIR under ``scratch`` that the sandbox uid can reach; made once per content.

    why: bwrap runs as the sandbox uid, so a bind source must be reachable by
    that uid; a checkout under a folder others cannot traverse (/root, 0700)
    made every run fail at setup. ``scratch`` is 0711 and checked by _prepare.
    The copy is named by the hash of its content, written under a temporary
    name and renamed into place, so concurrent workers and threads either find
    a complete copy or make one; clean_stale_scratch never removes it (its
    name is no owner's).
    """
    source = Path(SANDBOXED_DIR)
    # why remembered: listing and hashing the files took 1 to 2 ms a run. What
    # was copied is checked by its folders' and files' sizes and mtimes: a file
    # written, added or removed changes one of them, and so makes a new copy.
    key = (str(source), str(scratch))
    if (known := _SANDBOXED_COPIES.get(key)) is not None:
        marks, final = known
        try:
            if all(_stat_mark(path) == mark for path, mark in marks) and os.path.isdir(final):
                return final
        except OSError:
            pass
    files = _sandboxed_files(source)
    folders = sorted({source, *(p.parent for p in files)}) + [p for p in source.rglob("*") if p.is_dir()]
    marks = tuple((path, _stat_mark(path)) for path in (*dict.fromkeys(folders), *files))
    digest = hashlib.sha256()
    for path in files:
        name = path.relative_to(source).as_posix().encode()
        data = path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)) + data + _exec_mark(path))
    final = scratch / f"sandboxed-{digest.hexdigest()[:16]}"
    if final.is_dir():
        _SANDBOXED_COPIES[key] = (marks, final)
        return final
    # why an owner's name: a worker killed mid-copy leaves it to clean_stale_scratch
    tmp = scratch / owned_name("sandbox")
    tmp.mkdir(mode=0o700)
    try:
        for path in files:
            target = tmp / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            os.chmod(target, 0o755 if _exec_mark(path) else 0o644)
        for folder in (tmp, *(p for p in tmp.rglob("*") if p.is_dir())):
            os.chmod(folder, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():  # not another worker's copy that got there first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _SANDBOXED_COPIES[key] = (marks, final)
    return final


def _split_marker(text: str) -> tuple[bool, str]:
    """Whether the wrapper's start line is in ``text``, and ``text`` without it.

    The first one found is the wrapper's own: nothing of the run's starts
    before it, so a copy printed by the run comes later and is kept as printed.
    """
    line = STARTED_MARKER + "\n"
    at = text.find(line)
    if at < 0:
        return False, text
    return True, text[:at] + text[at + len(line) :]


def clean_stale_scratch(scratch: Path) -> list[str]:
    """Remove the scratch folders of gradings and sandboxed runs whose process is gone; returns them.

    A worker killed mid-grading leaves its ``grade-<owner>`` folder (the
    unpacked upload, in ``work_dir_for(scratch)``); older versions also left
    ``runs/sandbox-<owner>`` folders. Folders of live processes, and any folder not named so, are left alone.
    """
    removed = []
    for folder in (scratch, scratch / "runs", work_dir_for(scratch, make=False)):
        try:
            stale = [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and owner_gone(p.name)]
        except OSError:
            continue
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def interpreter_binds(runner: Path) -> list[str]:
    """bwrap arguments that show the runner's base interpreter inside the sandbox, read-only.

    A runner built from Debian's python3 needs none (/usr is bound already);
    one built from an interpreter installed elsewhere (/opt/python3.12, say)
    needs that installation's prefix at the same path, or its python cannot
    start. Never the root or a top-level folder: only a prefix two levels deep.
    """
    cfg = Path(runner) / "pyvenv.cfg"
    try:
        mark = _stat_mark(cfg)
        if (known := _INTERPRETER_BINDS.get(str(cfg))) is not None and known[0] == mark:
            return list(known[1])  # why remembered: reading and resolving it was about 0.2 ms a run
        config = cfg.read_text()
    except OSError:
        return []
    binds = _interpreter_binds(config)
    _INTERPRETER_BINDS[str(cfg)] = (mark, tuple(binds))
    return binds


_INTERPRETER_BINDS: dict[str, tuple[tuple, tuple[str, ...]]] = {}


def _interpreter_binds(config: str) -> list[str]:
    home = next(
        (
            value.strip()
            for key, _, value in (line.partition("=") for line in config.splitlines())
            if key.strip() == "home"
        ),
        "",
    )
    if not home:
        return []
    prefix = Path(home).resolve().parent
    if prefix == Path("/usr") or Path("/usr") in prefix.parents or len(prefix.parts) < 3:
        return []
    return ["--ro-bind", str(prefix), str(prefix)]


_PREPARED: set[tuple[Path, Path]] = set()  # (runner, scratch) folders made and found reachable


@dataclass(frozen=True)
class Sandbox:
    runner_dir: Path
    scratch_dir: Path
    uid_base: int = 62000
    slots: int = 8
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    caps: str = "auto"  # auto | cgroup2 | cgroup1 | rlimit (see grading/engine/sandbox/cgroups.py)
    tmpfs: str = "auto"  # auto | mount | bwrap
    # Pre-started single-use sandboxes kept ready per process (0: every run cold), and how long one may wait.
    warm: int = 0
    warm_idle_s: float = 300.0

    def __post_init__(self) -> None:
        # why: uid 0 or a system uid would hand candidate code real privileges.
        if self.uid_base < 1000 or self.slots < 1:
            raise ValueError("uid_base must be >= 1000 and slots >= 1")

    # -- setup -------------------------------------------------------------

    def _missing_parts(self) -> list[str]:
        """The tools and the runner venv this machine lacks, each a sentence saying how to fix it."""
        missing = [
            f"{tool} is missing: install it with 'apt-get install {package}'; "
            "candidate code is never run without the sandbox"
            for tool, package in ((BWRAP, "bubblewrap"), (SETPRIV, "util-linux"), (PRLIMIT, "util-linux"))
            if not os.access(tool, os.X_OK)
        ]
        runner = Path(self.runner_dir).resolve()
        if not (runner / "bin" / "python").exists():
            missing.append(
                f"no runner venv at {runner}: build it with 'python manage.py build_runner' "
                f"(or 'python -m grading.engine.runner {runner}')"
            )
        return missing

    @staticmethod
    def _unreachable(path: Path) -> str | None:
        blocked = [p for p in path.parents if p.exists() and not p.stat().st_mode & 0o001]
        if blocked:
            return (
                f"the sandbox uid cannot reach {path}: {', '.join(map(str, blocked))} "
                "must be traversable by others (chmod o+x)"
            )
        return None

    def _prepare(self) -> tuple[Path, Path, Path]:
        missing = self._missing_parts()
        if missing:
            raise SandboxUnavailable(missing[0])
        runner = Path(self.runner_dir).resolve()
        scratch = Path(self.scratch_dir).resolve()
        # why remembered (while the folder is there): about 0.5 ms a run of mkdir, chmod and stat calls.
        if (runner, scratch) not in _PREPARED or not os.path.isdir(scratch / "runs"):
            for folder in (scratch, scratch / "runs"):
                folder.mkdir(parents=True, exist_ok=True)
                os.chmod(folder, 0o711)  # why: the sandbox uid may pass through, not list
            for path in (runner, scratch):
                if problem := self._unreachable(path):
                    raise SandboxUnavailable(problem)
            _PREPARED.add((runner, scratch))
        try:
            sandboxed = _sandboxed_copy(scratch)
        except OSError as exc:
            raise SandboxUnavailable(
                f"could not copy {SANDBOXED_DIR} into the scratch folder {scratch}: {exc}"
            ) from None
        return runner, scratch, sandboxed

    def problems(self) -> list[tuple[str, str]]:
        """Everything that keeps this machine from grading, as (kind, a sentence saying how to fix it); [] when ready.

        Reads only (nothing is created), for ``manage.py check``. Kinds: "tool",
        "runner" (the venv), "scratch" (cannot be created), "reach" (a folder
        the sandbox uid cannot traverse to), "caps" (the caps asked for).
        """
        found = [("runner" if text.startswith("no runner") else "tool", text) for text in self._missing_parts()]
        scratch = Path(self.scratch_dir).resolve()
        existing = next((p for p in (scratch, *scratch.parents) if p.exists()), None)
        if existing is None or not os.access(existing, os.W_OK | os.X_OK):
            found.append(
                (
                    "scratch",
                    f"the scratch folder {scratch} cannot be created: {existing} is not writable "
                    "(set TAKEHOME_SCRATCH_DIR to a folder this user may write)",
                )
            )
        for path in (Path(self.runner_dir).resolve(), scratch):
            if problem := self._unreachable(path):
                found.append(("reach", problem))
        try:
            self.caps_in_force()
        except SandboxUnavailable as exc:
            found.append(("caps", str(exc)))
        return found

    def caps_in_force(self) -> Caps:
        """The run-wide caps this machine enforces (detected once per process)."""
        try:
            return detect(self.caps, self.tmpfs, mount_dir_for(Path(self.scratch_dir)))
        except CapsUnavailable as exc:
            raise SandboxUnavailable(f"sandbox caps {self.caps}/{self.tmpfs}: {exc}") from None

    def budget(self) -> RunBudget:
        lim = self.limits
        return RunBudget(
            memory_bytes=lim.memory_bytes,
            processes=lim.nproc,
            tmpfs_inodes=lim.tmpfs_inodes,
            fallback_processes=lim.fallback_processes,
            address_space_bytes=lim.address_space_bytes,
        )

    def run_caps(self, defer_cgroups: bool = False) -> RunCaps:
        """The caps of one run, as a context manager: its own cgroup and tmpfs mounts.

        Every process the run launches takes ``caps.rlimits()`` for its limits
        and ``caps.tmpfs(...)`` for its writable mounts, and joins the cgroup
        before anything of the run's starts (``caps.join``, see _launch, or
        ``caps.wrap(argv)``); read ``caps.report()`` after the processes end,
        before the block does (see grading/engine/sandbox/cgroups.py).
        """
        return RunCaps(self.caps_in_force(), self.budget(), defer_cgroups)

    def describe_caps(self) -> str:
        """Which caps are in force, in one sentence (the worker's log, the packets page)."""
        return self.caps_in_force().describe(self.budget())

    def clean_stale(self) -> list[str]:
        """Remove cgroups and mounts left by runs whose worker died (call it at worker start)."""
        return clean_stale(self.caps_in_force())

    def check(self) -> None:
        """Raise SandboxUnavailable unless a trivial command runs in the sandbox."""
        with tempfile.TemporaryDirectory() as empty:
            result = self.run(Path(empty), ("true",))
        if result.exit_code != 0:
            raise SandboxUnavailable(f"a sandboxed 'true' exited {result.exit_code}: {result.log[-2000:]}")

    @contextmanager
    def _slots(self, count: int = 1) -> Iterator[list[int]]:
        """Claim ``count`` uids of the pool for the duration of a run (flock: safe across processes and threads)."""
        # why: RLIMIT_NPROC counts every process of a uid, and a uid shared by two
        # runs would let one see, signal or starve the other. Locks are named by
        # uid in one folder per machine, so two Sandboxes with different scratch
        # folders (tests beside a worker) still never share a uid.
        # why all or none: a run that holds one uid while waiting for a second
        # could wait on another run doing the same.
        if count > self.slots:
            raise SandboxUnavailable(f"a run needs {count} sandbox uids and the pool has {self.slots}")
        deadline = time.monotonic() + SLOT_WAIT_S
        while (held := self._try_slots(count)) is None:
            # why: idle warm sandboxes (this worker's or another's) hold uids; a
            # cold run that finds none free asks them to give one back.
            _want_slot(self.uid_base)
            if time.monotonic() > deadline:
                raise SandboxUnavailable(f"all {self.slots} sandbox uids stayed busy for {SLOT_WAIT_S:g} s")
            time.sleep(0.05)
        try:
            yield [uid for uid, _ in held]
        finally:
            for _, fh in held:
                fh.close()  # closing releases the lock

    def _try_slots(self, count: int) -> list[tuple[int, TextIO]] | None:
        """``count`` free uids of the pool, each with its flocked lock file, or None (nothing held then)."""
        LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        uids = range(self.uid_base, self.uid_base + self.slots)
        return flock_free(((uid, LOCK_DIR / f"uid-{uid}.lock") for uid in uids), count)

    def _argv(
        self,
        uid: int,
        runner: Path,
        sandboxed: Path,
        command: Sequence[str],
        fds: _Fds,
        env: Mapping[str, str],
        caps: RunCaps,
        gate_fd: int,
        warm: bool = False,
        tree_written: bool = False,
    ) -> list[str]:
        """The command line of one sandbox: setpriv, then bwrap, then our sh wrapper (pid 1 inside).

        setpriv is left out where the worker starts bwrap under the uid itself
        (grading/engine/sandbox/spawn.py, see _launch).

        It is started by :meth:`_launch`, with an empty environment, and held
        at the wrapper's gate until it is in the run's cgroup. ``tree_written``:
        the worker writes the tree into the run's /tree tmpfs itself, before
        the gate opens (see write_tree_into), so no tar arrives on stdin.
        """
        lim = self.limits
        status_fd, junit_fd = fds.status_w, fds.junit_w
        extra_env = [
            arg
            for name, value in {"TAKEHOME_WITNESS_FD": str(fds.witness_w), **env}.items()
            for arg in ("--setenv", name, value)
        ]
        address_space, nproc = caps.rlimits()
        # each option beside its values, as bwrap reads them
        # fmt: off
        return [
            # why: launched by root, bwrap ignores RLIMIT_NPROC entirely (400/400 forks);
            # an unprivileged uid with no caps and no_new_privs makes it hold. Where the
            # worker can start bwrap under the uid itself, _launch leaves setpriv out.
            *_setpriv(uid),
            BWRAP,
            # why: no network, own pid/ipc/uts/cgroup namespaces, no nested user
            # namespaces to regain capabilities, and no controlling terminal to
            # inject keystrokes into (TIOCSTI).
            "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session",
            # why: our sh wrapper is the namespace's pid 1: when it exits the kernel
            # kills everything left inside, and no bwrap init lingers as a zombie
            # counted against the uid's process limit.
            "--as-pid-1",
            # why: only the system and the runner, read-only; no /etc beyond the
            # loader cache, so no passwd, shadow, hosts or keys to read.
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
            "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
            # why a fixed path inside: a runner kept under /tmp on the host would
            # be hidden by the sandbox's own /tmp, and every run would "fail".
            "--ro-bind", str(runner), RUNNER_IN_SANDBOX,
            *interpreter_binds(runner),
            # why a copy under scratch: see _sandboxed_copy.
            "--ro-bind", str(sandboxed), SANDBOXED_IN_SANDBOX,
            "--proc", "/proc", "--dev", "/dev",
            # why: bwrap's /dev and /dev/shm are writable tmpfs with no size cap
            # (RAM); cap shm for multiprocessing and make /dev itself read-only.
            *caps.tmpfs("/dev/shm", min(lim.tmpfs_bytes, 64 << 20), uid),
            "--remount-ro", "/dev",
            # why: a writable host folder has no disk cap (600 MiB went through);
            # size-capped tmpfs for /tmp and for the working copy instead, and
            # inode-capped where the worker may mount (300,000 files went in).
            *caps.tmpfs("/tmp", lim.tmpfs_bytes, uid),
            *caps.tmpfs("/tree", lim.tmpfs_bytes, uid),
            # The JUnit report leaves through an inherited pipe rather than a
            # writable host folder, which would be a disk with no cap: the path
            # pytest is given is a link to that pipe, so pytest writes into it.
            # why not a file copied out after the run: that was one more process
            # (cat) in every run, about 1 ms.
            "--dir", str(Path(JUNIT_IN_SANDBOX).parent),
            "--symlink", f"/proc/self/fd/{junit_fd}", JUNIT_IN_SANDBOX,
            # why: without this the root tmpfs stays writable.
            "--remount-ro", "/",
            "--chdir", "/tree",
            "--setenv", "PATH", f"{RUNNER_IN_SANDBOX}/bin:/usr/bin:/bin",
            "--setenv", "HOME", "/tmp",
            "--setenv", "LANG", "C.UTF-8",
            "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            # why: pytest loads every "pytest11" entry point it finds on sys.path,
            # and the tree is on sys.path: a cheat-1.0.dist-info/entry_points.txt
            # in the upload loaded a report-rewriting plugin into every rerun.
            # The runner holds no plugin of its own; a packet that wants one
            # names it with -p in its test command.
            "--setenv", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1",
            # why: the witness plugin (-p takehome_witness) and the hidden tests'
            # proxy are imported from here, read-only.
            "--setenv", "PYTHONPATH", SANDBOXED_IN_SANDBOX,
            *extra_env,
            "--json-status-fd", str(status_fd),
            "/bin/sh", "-c",
            # The start line first, before anything of the run's (see _execute).
            f"printf '%s\\n' '{STARTED_MARKER}' >&2; "
            # The run's limits, set by the wrapper on itself (the shell's own
            # ulimit, -v in KiB, -f and -c in 512-byte blocks), so everything it
            # starts inherits them; core 0 so a crash dumps nothing.
            # why here, not prlimit before bwrap: that was one more process per
            # run, and the worker may not set them from outside (prlimit(2) on
            # another uid's process needs CAP_SYS_RESOURCE, which a container's
            # root may lack).
            f"ulimit -v {address_space // 1024} && ulimit -t {lim.cpu_s} && ulimit -p {nproc} && "
            f"ulimit -f {lim.file_size_bytes // 512} && ulimit -n {lim.nofile} && ulimit -c 0 || exit 126; "
            # The gate: nothing of the run's starts before the worker has put this
            # process into the run's cgroup (see _launch); a closed gate (the
            # worker died, or gave up) ends the sandbox here.
            # (dash redirects only fds 0 to 9, hence /proc/self/fd, as for the report.)
            f'IFS= read -r go </proc/self/fd/{gate_fd} && [ "$go" = go ] || exit 126; '
            # Without a host tmpfs of the worker's (bwrap mode) the tree arrives as a
            # tar on stdin (see tree_stream) and is unpacked into the capped tmpfs
            # (a tree too big for it exits 125); the run's own stdin is then
            # /dev/null, as it always was.
            # A warm sandbox's starter unpacks the tree itself once it arrives (see WARM_STARTER);
            # a tree the worker wrote into /tree already needs neither (stdin is /dev/null then).
            + ("" if warm or tree_written else "tar -x -p -f - -C /tree --no-same-owner || exit 125; exec </dev/null; ")
            # why not exec: the wrapper stays pid 1 (see --as-pid-1), so the run's
            # own processes never get pid 1's signal rules.
            + '"$@"; exit $?',
            "sh", *command,
        ]
        # fmt: on

    def _launch(
        self, argv_for, uid: int, caps: RunCaps, fds: _Fds, stdin: int, pass_fds: Sequence[int], while_starting=None
    ) -> tuple[subprocess.Popen, int | None]:
        """Start one sandbox (``argv_for(gate_fd)``), put it into the run's cgroup, then open its gate.

        Returns the process and the host pid of the sandbox's pid 1 (None where
        the worker did not need it: no cgroup).

        why not env, prlimit and an sh that joins the cgroup before bwrap, as
        before: each was a process started in every run (about 1 ms each). The
        environment is emptied by the spawn itself, the wrapper sets the limits
        (see _argv), and the worker writes the sandbox's first process into the
        run's cgroup while bwrap sets up the namespaces; the wrapper waits at
        its gate until then. Before that only bwrap's own code runs: bwrap
        outside (it only waits, and stays out of the cgroup) and the sandbox's
        pid 1, our wrapper; all the run's processes are forked by the wrapper
        afterwards, in the cgroup. ``--die-with-parent`` ends the sandbox if the
        worker dies first, and the gate then closes unopened: the wrapper exits,
        having run nothing.

        The run's cgroup (when ``caps`` defers it) is made, and then
        ``while_starting()`` is called, while setpriv and bwrap start (about
        3 ms before bwrap names its child): what the run needs before its gate
        opens but not before bwrap starts, such as its tree written into its
        /tree tmpfs, costs no time of its own. If either raises, the sandbox
        is ended, its gate unopened, and the exception goes on.
        """
        gate_r, gate_w = os.pipe()
        try:
            os.fchown(gate_r, uid, uid)  # so the wrapper can open it as /proc/self/fd/N
            try:
                argv = argv_for(gate_r)
                options: dict[str, Any] = dict(
                    # why an empty environment, not bwrap --clearenv: bwrap's own pid 1 would
                    # otherwise keep the worker's (SECRET_KEY...) in /proc/1/environ.
                    env={},
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    pass_fds=(*fds.child_ends(), *pass_fds, gate_r),
                    start_new_session=True,  # why: one group to kill, whatever the code spawns
                )
                prefix = _setpriv(uid)
                if argv[: len(prefix)] == prefix and spawn.unavailable() is None:
                    # bwrap started under the uid by the worker: no setpriv run (see grading/engine/sandbox/spawn.py)
                    proc = spawn.popen_as(uid, uid, argv[len(prefix) :], **options)
                else:
                    proc = subprocess.Popen(argv, **options)
            finally:
                _close(gate_r)
                fds.close_child_ends()  # why now: the status pipe must end if bwrap does
            child = None
            try:
                caps.ensure_cgroups()
                if while_starting is not None:
                    while_starting()
                if not caps.uses_cgroups:
                    os.write(gate_w, b"go\n")  # rlimit mode: no cgroup to join
                elif (child := _child_pid(fds, proc.pid)) is not None:
                    caps.join((child,))
                    os.write(gate_w, b"go\n")
            except (ProcessLookupError, BrokenPipeError):
                pass  # the sandbox ended during bwrap's set-up: _watch reports it as our failure
            except BaseException:
                _kill_group(proc)
                proc.wait()
                _output(proc).close()
                raise
            return proc, child
        finally:
            _close(gate_w)

    # -- the run -----------------------------------------------------------

    def run(self, tree: Path | Mapping[str, bytes], command: Sequence[str]) -> RunResult:
        """Run ``command`` (e.g. ``("python", "-m", "pytest", "-q")``) over a copy of ``tree``.

        ``tree`` is a folder or the files themselves, {posix path: bytes}.
        """
        command = pytest_command(command)
        if self.warm > 0 and warm_eligible(command):
            warm = _warm_pool(self).take()
            if warm is not None:
                return self._run_warm(warm, _tree_arg(tree), command)
        return self._run_group([_Launch(_tree_arg(tree), command)])[0]

    # -- warm sandboxes ----------------------------------------------------

    def _start_warm(self) -> _Warm | None:
        """A sandbox launched as a cold one is, its pytest imported, waiting for a tree; None if no uid is free."""
        runner, _scratch, sandboxed = self._prepare()
        held = self._try_slots(1)
        if held is None:
            return None
        ((uid, lock),) = held
        caps = fds = None
        stdin_r = stdin_w = ready_r = ready_w = -1
        try:
            caps = self.run_caps().__enter__()
            fds = _Fds.open(uid)
            stdin_r, stdin_w = os.pipe()
            ready_r, ready_w = os.pipe()
            os.set_blocking(ready_r, False)
            proc, child = self._launch(
                lambda gate: self._argv(
                    uid,
                    runner,
                    sandboxed,
                    WARM_STARTER,
                    fds,
                    {"TAKEHOME_READY_FD": str(ready_w)},
                    caps,
                    gate,
                    warm=True,
                ),
                uid,
                caps,
                fds,
                stdin_r,
                (ready_w,),
            )
        except BaseException:
            for fd in (stdin_r, stdin_w, ready_r, ready_w):
                if fd >= 0:
                    _close(fd)
            if fds is not None:
                fds.close_all()
            if caps is not None:
                caps.close()
            lock.close()
            raise
        _close(stdin_r)
        _close(ready_w)
        fds.close_child_ends()
        return _Warm(uid, lock, caps, fds, proc, stdin_w, ready_r, time.monotonic(), child)

    def _run_warm(self, warm: _Warm, tree: Path | Mapping[str, bytes], command: tuple[str, ...]) -> RunResult:
        """Hand ``tree`` and pytest's arguments to a warm sandbox, watch its one run as a cold one is watched."""
        try:
            args = json.dumps(list(command[4:])).encode()
            request = io.BytesIO()
            request.write(b"%010d\n" % len(args) + args)
            _write_tree(request, tree)
        except (OSError, ValueError) as exc:
            warm.end()
            raise SandboxUnavailable(f"could not read the tree into memory: {exc}") from None
        watched = _Watched(
            _Launch(tree, command), warm.fds, proc=warm.proc, log=_CappedBuffer(self.limits.output_bytes)
        )
        # why a thread: the tree may exceed the pipe's buffer, and the sandbox reads it while we watch.
        writer = threading.Thread(target=_send, args=(warm, request.getvalue()), daemon=True)
        start = time.monotonic()
        writer.start()
        try:
            return self._watch([watched], [warm.caps], start)[0]
        finally:
            writer.join()
            warm.end()

    def run_across_boundary(
        self,
        tree: Path | Mapping[str, bytes],
        command: Sequence[str],
        server_tree: Path | Mapping[str, bytes],
        call_timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run trusted tests over ``tree`` while the code they import lives in ``server_tree``.

        Two sandboxes, each under its own uid and in its own pid namespace,
        side by side: ``command`` (the packet's hidden tests, in a tree whose
        production modules are stand-ins, see ``sandboxed/takehome_proxy.py``)
        and the proxy server over the candidate's tree. Two pipes join them
        and nothing else: the trusted process never imports candidate code,
        and only plain data crosses. The result is the trusted run's, with
        what the candidate's side printed in ``server_log``.

        Every call has ``call_timeout_s`` (CALL_LIMIT_S), held by the trusted
        side's own clock: the candidate's side keeps it too and answers
        TimeoutError, but it runs candidate code, which can change or block
        anything there (its timer, its signals), so the trusted process gives up
        waiting CALL_MARGIN_S later whatever that side does, and then sends it
        nothing more. Importing the candidate's module, before any call has
        carried an input across, may take longer (a third of the wall clock, at
        most 20 s). ``env`` is added to the trusted side's environment only.
        """
        call_timeout = call_timeout_s or CALL_LIMIT_S
        import_timeout = max(call_timeout, min(20.0, self.limits.wall_s / 3))
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        trusted = _Launch(
            _tree_arg(tree),
            pytest_command(command),
            {
                **(env or {}),
                "TAKEHOME_PROXY_FDS": f"{reply_r},{request_w}",
                "TAKEHOME_PROXY_TIMEOUT_S": f"{call_timeout + CALL_MARGIN_S:g}",
                "TAKEHOME_PROXY_IMPORT_TIMEOUT_S": f"{import_timeout + 5:g}",
            },
            [reply_r, request_w],
        )
        server = _Launch(
            _tree_arg(server_tree),
            PROXY_SERVER,
            {
                "TAKEHOME_PROXY_FDS": f"{request_r},{reply_w}",
                "TAKEHOME_PROXY_CALL_TIMEOUT_S": f"{call_timeout:g}",
                "TAKEHOME_PROXY_IMPORT_TIMEOUT_S": f"{import_timeout:g}",
            },
            [request_r, reply_w],
        )
        result, companion = self._run_group([trusted, server])
        return replace(result, server_log=companion.log)

    def _run_group(self, launches: list[_Launch]) -> list[RunResult]:
        """Start every launch in a sandbox of its own, watch them together, clean up; first is primary."""
        try:
            return self._run_group_owned(launches)
        finally:
            for launch in launches:
                launch.release()

    def _run_group_owned(self, launches: list[_Launch]) -> list[RunResult]:
        runner, _scratch, sandboxed = self._prepare()
        with self._slots(len(launches)) as uids:
            trees: list[int | None] = []  # each launch's tar (a memfd), or None: written into its /tree
            roots: list[int | None] = []  # each launch's /tree tmpfs (mount mode), written while it starts
            caps: list[RunCaps] = []
            start = time.monotonic()
            try:
                # why caps per sandbox: each gets the whole budget under its own uid, so the
                # candidate's side of the boundary cannot starve the hidden tests' side.
                with ExitStack() as stack:
                    for _ in launches:
                        caps.append(stack.enter_context(self.run_caps(defer_cgroups=True)))
                    for uid, launch, run_caps in zip(uids, launches, caps):
                        roots.append(self._tree_root(uid, launch, run_caps, trees))

                    def write_trees() -> None:
                        refused = self._write_trees(roots, uids, launches)
                        if any(refused):
                            raise _TreesRefused(refused)

                    try:
                        return self._execute(uids, runner, sandboxed, trees, launches, caps, write_trees)
                    except _TreesRefused as exc:
                        return self._refused(exc.refused, launches, caps, start)
            except CapsUnavailable as exc:
                raise SandboxUnavailable(str(exc)) from None
            except OSError as exc:
                raise SandboxUnavailable(f"could not read the tree or put it into the sandbox: {exc}") from None
            finally:
                for fd in trees:
                    if fd is not None:
                        _close(fd)
                for uid, launch in zip(uids, launches):
                    if not _ended(launch.child_pid):
                        _kill_uid(uid)

    def _tree_root(self, uid: int, launch: _Launch, caps: RunCaps, trees: list[int | None]) -> int | None:
        """Where ``launch``'s tree goes: the fd of its /tree tmpfs to write into, or None (a tar, in ``trees``).

        Where the worker mounts the run's tmpfs mounts itself (mount mode), it
        writes the tree straight into the one for /tree, owned by the run's
        uid (see _write_trees): no tar is built, and the sandbox runs no tar.
        why: unpacking in the sandbox was one more program started in every
        cold run (GNU tar, 1.3 to 1.5 ms even for an empty tree). Otherwise
        (bwrap's own tmpfs, made inside the sandbox) the tree goes in as a tar
        on stdin, appended to ``trees``; None is appended in mount mode.
        """
        root = caps.tmpfs_root("/tree", self.limits.tmpfs_bytes, uid)
        trees.append(tree_stream(launch.tree) if root is None else None)
        return root

    @staticmethod
    def _write_trees(roots: list[int | None], uids: list[int], launches: list[_Launch]) -> list[str | None]:
        """Write each launch's tree into its /tree tmpfs (mount mode); why each one did not fit, or None.

        Called while the first sandbox starts, before any gate opens: a tree
        that does not fit leaves the whole run unrun (see _refused).
        """
        refused: list[str | None] = []
        for root, uid, launch in zip(roots, uids, launches):
            if root is None or any(refused):
                refused.append(None)
                continue
            try:
                write_tree_into(root, launch.tree, uid)
            except TreeRefused as exc:
                refused.append(str(exc))
            else:
                refused.append(None)
        return refused

    def _refused(
        self, refused: list[str | None], launches: list[_Launch], caps: list[RunCaps], start: float
    ) -> list[RunResult]:
        """The results of a run whose tree did not fit its sandbox's /tree: exit 125 as tar's was, nothing run."""
        duration = time.monotonic() - start
        results = []
        for why, launch, run_caps in zip(refused, launches, caps):
            text = (
                f"[sandbox: the tree could not be written into /tree: {why}]\n"
                if why
                else "[sandbox: not run: another sandbox of this run could not take its tree]\n"
            )
            results.append(self._result(125, b"", False, False, duration, text, 0, launch.command, run_caps))
        return results

    def _execute(
        self,
        uids: list[int],
        runner: Path,
        sandboxed: Path,
        trees: list[int | None],
        launches: list[_Launch],
        caps: list[RunCaps],
        write_trees=None,
    ) -> list[RunResult]:
        """Launch every sandbox of the run, then watch them; ``write_trees`` is called as the first one starts.

        why all trees while the first starts: none of the run's gates may open
        before every tree is in place (a tree refused leaves the whole run unrun).
        """
        lim = self.limits
        watched: list[_Watched] = []
        start = time.monotonic()
        try:
            for uid, launch in zip(uids, launches):
                watched.append(_Watched(launch, _Fds.open(uid), log=_CappedBuffer(lim.output_bytes)))
            for i, (w, uid, tree_fd, run_caps) in enumerate(zip(watched, uids, trees, caps)):
                # a tree the worker writes into /tree: the run's stdin is /dev/null, read-only as the wrapper's was
                stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC) if tree_fd is None else tree_fd
                try:
                    w.proc, w.launch.child_pid = self._launch(
                        lambda gate, w=w, uid=uid, run_caps=run_caps, written=tree_fd is None: self._argv(
                            uid,
                            runner,
                            sandboxed,
                            w.launch.command,
                            w.fds,
                            w.launch.env,
                            run_caps,
                            gate,
                            tree_written=written,
                        ),
                        uid,
                        run_caps,
                        w.fds,
                        stdin,
                        w.launch.pass_fds,
                        write_trees if i == 0 else None,
                    )
                finally:
                    if tree_fd is None:
                        _close(stdin)
            for launch in launches:
                launch.release()  # why: the other end sees EOF only when every copy is closed
        except BaseException:
            for w in watched:
                if w.proc is not None and w.proc.poll() is None:
                    _kill_group(w.proc)
                    w.proc.wait()
                w.fds.close_all()
                if w.proc is not None:
                    _output(w.proc).close()
            raise
        return self._watch(watched, caps, start)

    def _watch(self, watched: list[_Watched], caps: list[RunCaps], start: float) -> list[RunResult]:
        """Read what the launched processes send until they end or the wall clock runs out; their results."""
        lim = self.limits
        timed_out = False
        deadline = start + lim.wall_s
        try:
            sel = selectors.DefaultSelector()
            for i, w in enumerate(watched):
                sel.register(_output(w.launched).fileno(), selectors.EVENT_READ, (i, "log"))
                sel.register(w.fds.junit_r, selectors.EVENT_READ, (i, "junit"))
                sel.register(w.fds.status_r, selectors.EVENT_READ, (i, "status"))
                sel.register(w.fds.witness_r, selectors.EVENT_READ, (i, "witness"))
            open_streams = [4] * len(watched)
            grace_end = None
            while sel.get_map():
                now = time.monotonic()
                if now >= deadline:
                    timed_out = True
                    break
                if grace_end is None and open_streams[0] == 0:
                    # The primary is done: the others (the proxy server) get a moment to end by themselves.
                    grace_end = now + SERVER_GRACE_S
                if grace_end is not None and now >= grace_end:
                    for w in watched[1:]:
                        w.stopped = True
                        _kill_group(w.launched)
                    grace_end = float("inf")
                wait = min(deadline, grace_end or deadline) - now
                for key, _ in sel.select(max(0.01, wait)):
                    i, kind = key.data
                    data = os.read(key.fd, 1 << 16)
                    if not data:
                        sel.unregister(key.fd)
                        open_streams[i] -= 1
                    else:
                        watched[i].take(kind, data)
                        if kind == "log" and not watched[i].detached and STARTED_MARKER.encode() in watched[i].log.head:
                            # the wrapper runs, so bwrap has made all its binds (see RunCaps.detach_mounts)
                            watched[i].detached = True
                            caps[i].detach_mounts()
            sel.close()
            for w in watched:
                if not timed_out:
                    try:
                        w.launched.wait(timeout=max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        timed_out = True
        finally:
            for w in watched:
                if w.proc is not None and (timed_out or w.proc.poll() is None):
                    # why: also on a soft time limit or any other interruption of the
                    # caller: the sandbox must not run on after we stop watching it.
                    _kill_group(w.proc)
                    w.proc.wait()
                w.fds.close_all()
                if w.proc is not None:
                    _output(w.proc).close()
        duration = time.monotonic() - start
        results = []
        for i, w in enumerate(watched):
            exit_code = None if timed_out else w.launched.returncode
            started, text = _split_marker(w.log.text())
            if not started and not timed_out and not w.stopped:
                # why the wrapper's start line, not bwrap's "child-pid": bwrap reports
                # the child's pid before the child sets up its mounts, so a bind that
                # failed looked like a run that exited 1. Without the line the run
                # never reached our wrapper, so no code of the run's ran: bwrap
                # itself failed (our side), and its output says why.
                raise SandboxUnavailable(f"bwrap could not set up the sandbox (exit {exit_code}): {text[-2000:]}")
            results.append(
                self._result(
                    exit_code,
                    bytes(w.junit),
                    w.junit_too_big,
                    timed_out and i == 0,
                    duration,
                    text,
                    w.log.dropped,
                    w.launch.command,
                    caps[i],
                    bytes(w.witness),
                )
            )
        return results

    def _result(
        self,
        exit_code,
        junit,
        junit_too_big,
        timed_out,
        duration,
        text: str,
        dropped: int,
        command,
        caps: RunCaps,
        witness: bytes = b"",
    ) -> RunResult:
        capped = caps.report()  # while the run's cgroup and mounts still exist
        notes: list[str] = []
        tests: list[TestCase] = []
        report_ok = False
        if exit_code == 125:
            notes.append("unpacking the tree into the sandbox failed (too large for its tmpfs?)")
        try:
            if junit_too_big:
                raise ValueError(f"report larger than {JUNIT_MAX_BYTES >> 20} MiB")
            if not junit:
                raise ValueError("no JUnit report")
            tests = parse_junit(junit)
            report_ok = True
        except ValueError as exc:
            if is_pytest(command):
                notes.append(f"{exc}: counts unknown, read from pytest's text summary where it had one")
            counts = counts_from_text(text)
        else:
            xpass = set(_XPASS_RE.findall(text))
            tests = [TestCase(t.nodeid, "xpassed") if t.outcome == "passed" and t.nodeid in xpass else t for t in tests]
            by = [t.outcome for t in tests]
            counts = {
                ("errors" if k == "error" else k): by.count(k)
                for k in ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
            }
            # Non-strict XPASS is a plain pass in JUnit XML; without our -rX lines
            # (the command chose its own -r) only the text summary counts them.
            extra = min(counts_from_text(text)["xpassed"] - counts["xpassed"], counts["passed"])
            if extra > 0:
                counts["passed"] -= extra
                counts["xpassed"] += extra
        address_space, nproc = caps.rlimits()
        in_force = replace(self.limits, address_space_bytes=address_space, nproc=nproc)
        outcome, why = decide_outcome(
            exit_code,
            counts,
            bool(tests),
            timed_out,
            duration,
            in_force,
            text,
            pytest_run=is_pytest(command),
            report_ok=report_ok,
        )
        cap_notes = capped.notes(caps.budget)
        if capped.killed and not timed_out:
            # why: a process the memory cap ended did not finish; whatever
            # pytest said of the rest is not a result (and a SIGKILL is not the CPU limit)
            outcome, why = "killed", [n for n in why if not n.startswith("killed by")]
        if cap_notes:
            logger.warning("a sandboxed run hit its caps: %s", "; ".join(cap_notes))
            text += "".join(f"\n[sandbox: {n}]" for n in cap_notes)
        if dropped:
            why.append(f"output truncated: kept the first and last parts of {self.limits.output_bytes} bytes")
        return RunResult(
            outcome=outcome,
            exit_code=exit_code,
            duration_s=round(duration, 3),
            log=text,
            tests=tuple(tests),
            notes=tuple(cap_notes + notes + why),
            decided_by=tuple(why),
            witness=witness.decode("utf-8", "replace"),
            **run_counts(counts),
        )
