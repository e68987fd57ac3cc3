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

import atexit
import errno
import fcntl
import hashlib
import io
import json
import logging
import os
import re
import selectors
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, TextIO, TypedDict, TypeVar

import defusedxml.ElementTree as DefusedET
from defusedxml.common import DefusedXmlException

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

logger = logging.getLogger(__name__)

BWRAP, SETPRIV, PRLIMIT, ENV = "/usr/bin/bwrap", "/usr/bin/setpriv", "/usr/bin/prlimit", "/usr/bin/env"
JUNIT_IN_SANDBOX = "/tmp/.takehome/junit.xml"
RUNNER_IN_SANDBOX = "/opt/runner"
# Our own code that runs inside the sandbox (the witness plugin, both sides of
# the hidden tests' process boundary). What is bound read-only is a copy of it
# under the scratch folder (see _sandboxed_copy), not this folder itself.
SANDBOXED_DIR = Path(__file__).resolve().with_name("sandboxed")
SANDBOXED_IN_SANDBOX = "/opt/takehome"
# The first line our sh wrapper writes, before anything of the run's: a log that
# lacks it comes from a sandbox bwrap could not set up (see _execute).
STARTED_MARKER = "[takehome-sandbox: started]"
PROXY_SERVER = ("python", "-I", f"{SANDBOXED_IN_SANDBOX}/takehome_proxy_server.py")
WITNESS_MAX_BYTES = 8 << 20
SERVER_GRACE_S = 1.0
# Each call of the hidden tests into the candidate's code (see run_across_boundary): an honest call
# takes milliseconds; a tight clock makes one that sleeps to signal fail its test (docs/evidence.md).
CALL_LIMIT_S = 2.0
CALL_MARGIN_S = 1.0  # what the trusted side allows beyond it for the fork and the reply's way back
JUNIT_MAX_BYTES = 16 << 20
# pytest writes a handful of elements per test: this is tens of thousands of tests.
JUNIT_MAX_ELEMENTS = 200_000
SLOT_WAIT_S = 30.0
LOCK_DIR = Path("/run/lock/takehome-sandbox")


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


OUTCOMES = ("passed", "failed", "error", "timeout", "killed", "no_tests")


class SandboxUnavailable(Exception):
    """Our side failed (no bwrap, bwrap cannot start, no free uid): retry later, don't blame the candidate."""


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


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # not a pytest class, despite the name
    nodeid: str
    outcome: str  # passed|failed|error|skipped|xfailed|xpassed


@dataclass(frozen=True)
class RunResult:
    outcome: str  # one of OUTCOMES
    exit_code: int | None
    passed: int
    failed: int
    errors: int
    skipped: int
    xfailed: int
    xpassed: int
    duration_s: float
    log: str
    tests: tuple[TestCase, ...] = ()
    notes: tuple[str, ...] = ()
    decided_by: tuple[str, ...] = ()  # the notes of ``notes`` that explain the outcome (a re-decision replaces them)
    witness: str = ""  # the witness plugin's JSON lines (pytest runs), read by grading.engine.integrity
    server_log: str = ""  # what the candidate's side printed, for a run across the process boundary


class Counts(TypedDict):
    """A run's six counts, as RunResult's fields of the same names."""

    passed: int
    failed: int
    errors: int
    skipped: int
    xfailed: int
    xpassed: int


def run_counts(counts: Mapping[str, int]) -> Counts:
    """The six counts of ``counts`` (counted by outcome name), to be passed on as RunResult's fields."""
    return Counts(
        passed=counts["passed"],
        failed=counts["failed"],
        errors=counts["errors"],
        skipped=counts["skipped"],
        xfailed=counts["xfailed"],
        xpassed=counts["xpassed"],
    )


# Replaces ``-m pytest``: pytest, its built-in plugins and what they import
# are loaded before the tree's folder goes on sys.path, so a candidate's
# ``pytest.py``, ``_pytest/``, ``pluggy/`` or ``xml/`` cannot stand in for
# them; the folder is then put first, as ``-m`` does, for the tree's own code.
# why the witness too: ``-p takehome_witness`` is imported after the folder is
# first on sys.path, and a takehome_witness.py in the upload replaced it (the
# run passed with no witness line at all). The canary plugin likewise.
PYTEST_BOOT = (
    "import importlib, os, sys\n"
    "import pytest\n"
    "from _pytest.config import default_plugins\n"
    "for _name in default_plugins:\n"
    "    try:\n"
    "        importlib.import_module('_pytest.' + _name)\n"
    "    except ImportError:\n"
    "        pass\n"
    "import takehome_witness\n"
    "import takehome_canary\n"
    "sys.path.insert(0, os.getcwd())\n"
    "sys.exit(int(pytest.main()))\n"
)


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


class _CappedBuffer:
    """Keep the head and the tail of a stream, drop the middle past ``cap`` bytes."""

    def __init__(self, cap: int) -> None:
        self.tail_cap = cap // 4
        self.head_cap = cap - self.tail_cap
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def write(self, data: bytes) -> None:
        room = max(0, self.head_cap - len(self.head))
        self.head += data[:room]
        if data := data[room:]:
            self.tail += data
            if len(self.tail) > self.tail_cap:
                cut = len(self.tail) - self.tail_cap
                self.dropped += cut
                del self.tail[:cut]

    def text(self) -> str:
        middle = f"\n[output truncated: {self.dropped} bytes dropped]\n".encode() if self.dropped else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", "replace")


_TAR_BLOCK = 512


def _tar_header(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> bytes:
    """One POSIX ustar header block (GNU tar's long-name blocks first for a name or link over 100 bytes)."""
    raw, raw_link = name.encode("utf-8", "surrogateescape"), link.encode("utf-8", "surrogateescape")
    if len(raw) > 100 or len(raw_link) > 100:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.size, info.linkname, info.mtime = kind, mode, size, link, int(time.time())
        return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    # why by hand: tarfile's own header code took 0.14 s for 2,000 small files,
    # and a grading builds a tar for each of its eight or so runs.
    header = bytearray(_TAR_BLOCK)
    header[0 : len(raw)] = raw
    header[100:108] = b"%07o\0" % mode
    header[108:124] = b"0000000\0" * 2  # uid, gid: tar runs as the sandbox's uid with --no-same-owner
    header[124:136] = b"%011o\0" % size
    header[136:148] = b"%011o\0" % int(time.time())
    header[148:156] = b" " * 8  # the checksum counts its own field as spaces
    header[156:157] = kind
    header[157 : 157 + len(raw_link)] = raw_link
    header[257:265] = b"ustar\x0000"
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def _tar_file(out, name: str, mode: int, data: bytes) -> None:
    out.write(_tar_header(name, tarfile.REGTYPE, mode, len(data)))
    out.write(data)
    out.write(b"\0" * (-len(data) % _TAR_BLOCK))


def _dir_entries(src: Path, prefix: str) -> Iterator[tuple[bytes, str, int, bytes | str]]:
    # why: only directories, regular files and symlinks (added as links, never
    # followed on the host, so a link to /etc/shadow carries a link, not the file);
    # FIFOs and devices are skipped (opening a FIFO would hang the worker).
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        name = prefix + entry.name
        if entry.is_symlink():
            yield tarfile.SYMTYPE, name, 0o777, os.readlink(entry.path)
        elif entry.is_dir(follow_symlinks=False):
            yield tarfile.DIRTYPE, name, 0o755, b""
            yield from _dir_entries(Path(entry.path), name + "/")
        elif entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as fh:
                mode = 0o755 if os.fstat(fh.fileno()).st_mode & 0o100 else 0o644
                data = fh.read()
            yield tarfile.REGTYPE, name, mode, data


def _tree_entries(tree: Path | Mapping[str, bytes]) -> Iterator[tuple[bytes, str, int, bytes | str]]:
    """(kind, posix name, mode, data or link target) of each entry of ``tree``, parents before children.

    Directories 0755, files 0644 or 0755 (the owner's exec bit), symlinks as
    links; a mapping's files are 0644 and its folders are implied by the names.
    """
    if isinstance(tree, Mapping):
        for path, data in sorted(tree.items()):
            yield tarfile.REGTYPE, path, 0o644, data
    elif Path(tree).is_dir():
        yield from _dir_entries(Path(tree), "")


def _tree_arg(tree: Path | Mapping[str, bytes]) -> Path | Mapping[str, bytes]:
    return tree if isinstance(tree, Mapping) else Path(tree)


def _write_tree(out, tree: Path | Mapping[str, bytes]) -> None:
    for kind, name, mode, payload in _tree_entries(tree):
        if kind == tarfile.REGTYPE and isinstance(payload, bytes):
            _tar_file(out, name, mode, payload)
        else:
            link = payload if kind == tarfile.SYMTYPE and isinstance(payload, str) else ""
            out.write(_tar_header(name, kind, mode, link=link))
    out.write(b"\0" * (2 * _TAR_BLOCK))  # the end of the archive


class TreeRefused(Exception):
    """A tree that cannot be written into its run's /tree: too big for the tmpfs, or a name tar refuses too."""


class _TreesRefused(Exception):
    """A run's trees did not all fit their sandboxes: why, per launch (None for those that fit or were not tried)."""

    def __init__(self, refused: list[str | None]) -> None:
        super().__init__("a tree did not fit its sandbox")
        self.refused = refused


# The errors that are the tree's, not ours: out of space or inodes, and shapes
# tar fails on too (a name twice, a file where a folder is wanted, a link on the way).
_TREE_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EEXIST,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EMLINK,
    }
)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(parent: int, name: str, uid: int) -> int:
    """The folder ``name`` in ``parent`` (made, 0755 and ``uid``'s, if missing); never through a link."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        pass
    os.mkdir(name, 0o700, dir_fd=parent)
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    try:
        os.fchown(fd, uid, uid)
        os.fchmod(fd, 0o755)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_tree_into(root_fd: int, tree: Path | Mapping[str, bytes], uid: int) -> None:
    """Write ``tree`` (a folder, or {posix path: bytes}) into the folder open as ``root_fd``, owned by ``uid``.

    The same files, modes and links as ``tar -x -p --no-same-owner`` run by
    ``uid`` makes of ``tree_stream``'s tar: a leading "/" is dropped, a name
    with ".." is refused. The caller is root, writing into the run's own
    tmpfs before its sandbox starts: nothing is ever followed through a link.
    Each folder is opened from its parent's fd with O_NOFOLLOW, each entry is
    made in it by name (O_EXCL for files), so a link in the tree (``a`` to
    /etc, then ``a/passwd``) or a hostile name cannot reach outside
    ``root_fd``. Raises TreeRefused when the tree does not fit (ENOSPC: bytes
    or inodes) or has a shape tar fails on too; other OSErrors are ours.
    """
    _write_entries(root_fd, _tree_entries(tree), uid)


def _write_entries(root_fd: int, entries, uid: int) -> None:
    chain: list[tuple[str, int]] = []  # the folders open below root_fd, outermost first
    name = ""
    entries = iter(entries)
    try:
        while True:
            try:
                kind, name, mode, payload = next(entries)
            except StopIteration:
                break
            except OSError as exc:  # reading the tree (the worker's own folder) failed: ours, not the tree's
                raise SandboxUnavailable(f"could not read the tree: {exc}") from None
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if not parts or ".." in parts:
                raise TreeRefused(f"{name!r}: a name no tree may hold")
            *folders, leaf = parts
            keep = 0
            while keep < min(len(chain), len(folders)) and chain[keep][0] == folders[keep]:
                keep += 1
            while len(chain) > keep:
                os.close(chain.pop()[1])
            for folder in folders[keep:]:
                chain.append((folder, _open_dir(chain[-1][1] if chain else root_fd, folder, uid)))
            parent = chain[-1][1] if chain else root_fd
            if kind == tarfile.DIRTYPE:
                os.mkdir(leaf, 0o700, dir_fd=parent)  # why here: a name already there is refused (EEXIST)
                chain.append((leaf, _open_dir(parent, leaf, uid)))
                os.fchown(chain[-1][1], uid, uid)
                os.fchmod(chain[-1][1], mode)
            elif kind == tarfile.SYMTYPE:
                os.symlink(payload, leaf, dir_fd=parent)
                os.chown(leaf, uid, uid, dir_fd=parent, follow_symlinks=False)
            else:
                fd = os.open(
                    leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent
                )
                try:
                    os.fchown(fd, uid, uid)
                    os.fchmod(fd, mode)
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view) :]
                finally:
                    os.close(fd)
    except OSError as exc:
        if exc.errno in _TREE_ERRNOS:
            raise TreeRefused(f"{name}: {exc.strerror}") from None
        raise
    except ValueError as exc:  # a NUL in a name
        raise TreeRefused(f"{name!r}: {exc}") from None
    finally:
        for _, fd in chain:
            os.close(fd)


def tree_stream(tree: Path | Mapping[str, bytes]) -> int:
    """A tar of ``tree`` (a folder, or {posix path: bytes}) in memory, as a file descriptor read from its start.

    For a cold run in bwrap mode (see write_tree_into for mount mode).
    why: the sandbox's wrapper unpacks it straight into its own size- and
    inode-capped tmpfs /tree, so each file of a rerun is written once, in
    memory; no copy of the tree is made on the worker's disk. A memfd has no
    path: nothing outside this process and the sandbox it is passed to sees it.
    """
    fd = os.memfd_create("takehome-tree", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb", buffering=1 << 20) as out:
            _write_tree(out, tree)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    except BaseException:
        os.close(fd)
        raise


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


def _uid_processes(uid: int) -> list[int]:
    """Live (non-zombie) processes owned by ``uid``."""
    pids = []
    for name in os.listdir("/proc"):
        try:
            # a stat per pid is cheap; read the status only of the few that match
            if name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid:
                with open(f"/proc/{name}/status", "rb") as fh:
                    state = next(line for line in fh if line.startswith(b"State:")).split()[1]
                if state not in (b"Z", b"X"):  # a zombie runs nothing; its reaper clears it
                    pids.append(int(name))
        except (OSError, StopIteration):
            continue
    return pids


def _ended(child_pid: int | None) -> bool:
    """Whether the sandbox whose pid 1 had ``child_pid`` is wholly gone (False when unknown).

    why: its pid 1 ends only once the kernel has ended every other process of
    its pid namespace, so a pid 1 that is gone (or a zombie) leaves nothing of
    the run behind, and the sweep of all /proc (_kill_uid, 1 ms and more on a
    busy machine) is needed only while it is still there (killed, and still
    exiting) or unknown.
    """
    if child_pid is None:
        return False
    try:
        with open(f"/proc/{child_pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True
    except (OSError, IndexError):
        return False


KILL_WAIT_S = 10.0


def _kill_uid(uid: int) -> None:
    """SIGKILL every live process whose real uid is ``uid``."""
    # why: the slot's uid is ours alone while we hold its lock, so anything still
    # running as it is left over from this run; it must not outlive the run nor
    # count against the next run's process limit. The first guarantee is the
    # kernel's: when the namespace's pid 1 exits, everything inside is killed.
    # This sweep is the second (it misses a process made non-dumpable, whose
    # /proc entry root owns).
    # why a deadline of seconds, not a few tries: a killed process is not gone until the kernel has torn
    # it down, which on a loaded machine takes longer than 0.2 s, and the uid must not go back to the pool
    # (where the next run's process cap would count the dying one) while it is still there.
    deadline = time.monotonic() + KILL_WAIT_S
    pause = 0.005
    while pids := _uid_processes(uid):
        if time.monotonic() > deadline:
            logger.warning("uid %s still has processes %s %g s after SIGKILL", uid, pids, KILL_WAIT_S)
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


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


def _nodeid(case: ET.Element) -> str:
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    if file.endswith(".py"):
        module = file[:-3].replace("/", ".")
        rest = classname[len(module) + 1 :] if classname.startswith(module) else ""
        return "::".join(p for p in (file, *rest.split("."), name) if p)
    return "::".join(p for p in (classname, name) if p)


def parse_junit(data: bytes) -> list[TestCase]:
    """Test cases from pytest's JUnit XML; raises ValueError when it is not usable.

    The report is written inside the sandbox, where candidate code can
    replace it, so it is read as hostile: by defusedxml with no DTD, entity
    or external reference allowed (whatever the encoding hides them in), in
    strict UTF-8 as pytest writes it, as a stream that stops past
    ``JUNIT_MAX_ELEMENTS`` elements, so that a report of millions of tiny
    elements cannot fill the worker's memory (its bytes are capped by
    ``JUNIT_MAX_BYTES`` as they are read).
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("report is not UTF-8") from None
    cases = []
    elements = 0
    try:
        for event, element in DefusedET.iterparse(io.BytesIO(data), events=("start", "end"), forbid_dtd=True):
            if event == "start":
                elements += 1
                if elements > JUNIT_MAX_ELEMENTS:
                    raise ValueError(f"report holds more than {JUNIT_MAX_ELEMENTS} elements")
                continue
            if element.tag != "testcase":
                continue
            kinds = {child.tag: child.get("type") for child in element}
            # fmt: off
            outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                       else "passed" if "skipped" not in kinds
                       else "xfailed" if kinds["skipped"] == "pytest.xfail" else "skipped")
            # fmt: on
            cases.append(TestCase(_nodeid(element), outcome))
            element.clear()  # its captured output is read; keep only what the count needs
    except DefusedXmlException as exc:
        raise ValueError(f"report holds a DTD, an entity or an external reference ({type(exc).__name__})") from None
    except ET.ParseError as exc:
        raise ValueError(f"unreadable JUnit XML: {exc}") from None
    return cases


_SUMMARY_RE = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+).* in [\d.]+s", re.M)
_COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
_XPASS_RE = re.compile(r"^XPASS (\S+)", re.M)
_MEMORY_RE = re.compile(r"^E\s+MemoryError\b|^MemoryError\b", re.M)  # a traceback's last line, not any mention


def counts_from_text(log: str) -> dict[str, int]:
    """pytest's counts as its closing summary line prints them (zeros where it has none)."""
    counts = dict.fromkeys(("passed", "failed", "errors", "skipped", "xfailed", "xpassed"), 0)
    found = _SUMMARY_RE.findall(log)
    if found:
        for n, word in _COUNT_RE.findall(found[-1]):
            counts["errors" if word.startswith("error") else word] = int(n)
    return counts


def decide_outcome(
    exit_code, counts, tests_known, timed_out, duration, limits, log, pytest_run: bool = False, report_ok: bool = True
) -> tuple[str, list[str]]:
    """A run's outcome and the notes that explain it (docs/evidence.md, "How the outcome is decided")."""
    notes: list[str] = []
    if timed_out:
        return "timeout", [f"stopped at the wall-clock limit ({limits.wall_s:g} s)"]
    if exit_code is not None and (exit_code < 0 or exit_code > 128):
        sig = -exit_code if exit_code < 0 else exit_code - 128
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and duration >= limits.cpu_s * 0.9):
            notes.append(f"killed by the CPU limit ({limits.cpu_s} s)")
        else:
            notes.append(f"killed by {name} (a limit such as memory, or a crash)")
        return "killed", notes
    if exit_code not in (0, 5) and _MEMORY_RE.search(log):
        return "killed", [f"hit the memory limit ({limits.address_space_bytes >> 20} MiB): MemoryError"]
    if exit_code == 5:
        return "no_tests", ["pytest collected no tests (exit 5)"]
    if exit_code == 0:
        if pytest_run and not report_ok:
            # why: pytest always writes the report we ask for; a run that exits 0
            # without one had it suppressed (-p no:junitxml) or exited early
            # (os._exit(0) on import), and its text summary may be forged.
            return "error", ["exit 0 without pytest's JUnit report: the pass cannot be confirmed"]
        if tests_known and counts["passed"] == 0 and counts["xpassed"] == 0:
            return "no_tests", ["nothing passed: every test was skipped or xfailed"]
        if pytest_run and counts["passed"] == 0 and counts["xpassed"] == 0:
            # why: exit 0 with no test reported (--co, --collect-only, an early exit) is not a pass
            return "no_tests", ["pytest exited 0 but reported no test at all"]
        if skips := counts["skipped"] + counts["xfailed"]:
            notes.append(f"{skips} tests were skipped or xfailed: a skip or xfail is not a pass")
        if counts["xpassed"]:
            notes.append(f"{counts['xpassed']} tests marked xfail passed unexpectedly (xpassed)")
        return "passed", notes
    if exit_code == 1 and counts["failed"]:
        if counts["errors"]:
            notes.append(f"also {counts['errors']} errors")
        return "failed", notes
    if counts["errors"] or exit_code in (2, 3, 4):
        return "error", notes
    return "failed", notes


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _output(proc: subprocess.Popen) -> IO[bytes]:
    """The pipe of a sandbox's output (_launch starts every sandbox with stdout=PIPE)."""
    assert proc.stdout is not None
    return proc.stdout


def _setpriv(uid: int) -> list[str]:
    """setpriv's part of a sandbox's command line: the run's uid and gid, no groups, capabilities or new privileges."""
    return [
        SETPRIV,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
    ]


LAUNCH_WAIT_S = 10.0
_CHILD_PID_RE = re.compile(rb'"child-pid": (\d+)\D')


def _child_pid(fds: _Fds, bwrap_pid: int) -> int | None:
    """The host pid of the sandbox's first process, as bwrap reports it on its status pipe; None if it ended.

    bwrap writes it right after making the namespaces, before it sets them up.
    What it writes later on that pipe (the exit code) is left for the watcher.
    """
    seen = b""
    deadline = time.monotonic() + LAUNCH_WAIT_S
    with selectors.DefaultSelector() as sel:
        sel.register(fds.status_r, selectors.EVENT_READ)
        while not (found := _CHILD_PID_RE.search(seen)):
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxUnavailable(f"bwrap did not start its sandbox within {LAUNCH_WAIT_S:g} s")
            if not sel.select(left):
                continue
            data = os.read(fds.status_r, 4096)
            if not data:
                return None
            seen += data
    child = int(found.group(1))
    # why: only bwrap's own child may be capped and let go, never a process that reused its pid.
    try:
        with open(f"/proc/{child}/stat", "rb") as fh:
            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return child if ppid == bwrap_pid else None


@dataclass
class _Launch:
    """One sandboxed process of a run: its tree, its command, extra environment and inherited fds.

    The launch owns ``pass_fds`` (inherited under the same numbers): they are
    closed once, in the worker, right after the process starts, so that the
    other end of each pipe sees EOF as soon as the sandbox closes its copy.
    """

    tree: Path | Mapping[str, bytes]
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    pass_fds: list[int] = field(default_factory=list)
    child_pid: int | None = None  # once started: the host pid of the sandbox's pid 1

    def release(self) -> None:
        # why once: a closed number is soon reused by another thread's pipe.
        while self.pass_fds:
            _close(self.pass_fds.pop())


@dataclass
class _Fds:
    """The pipes every sandboxed process reports through: bwrap's status, the JUnit report, the witness."""

    status_r: int
    status_w: int
    junit_r: int
    junit_w: int
    witness_r: int
    witness_w: int

    @classmethod
    def open(cls, uid: int) -> _Fds:
        status_r, status_w = os.pipe()
        junit_r, junit_w = os.pipe()
        witness_r, witness_w = os.pipe()
        os.fchown(junit_w, uid, uid)  # so the sandbox can reopen it as /proc/self/fd/N
        return cls(status_r, status_w, junit_r, junit_w, witness_r, witness_w)

    def child_ends(self) -> tuple[int, int, int]:
        return self.status_w, self.junit_w, self.witness_w

    def close_child_ends(self) -> None:
        # why -1 after closing: a closed number is soon reused by another thread's pipe.
        for name in ("status_w", "junit_w", "witness_w"):
            if getattr(self, name) >= 0:
                _close(getattr(self, name))
                setattr(self, name, -1)

    def close_all(self) -> None:
        self.close_child_ends()
        for name in ("status_r", "junit_r", "witness_r"):
            if getattr(self, name) >= 0:
                _close(getattr(self, name))
                setattr(self, name, -1)


@dataclass
class _Watched:
    """A launched process and what it has sent so far."""

    launch: _Launch
    fds: _Fds
    log: _CappedBuffer
    proc: subprocess.Popen | None = None  # set once launched
    junit: bytearray = field(default_factory=bytearray)
    witness: bytearray = field(default_factory=bytearray)
    status: bytearray = field(default_factory=bytearray)
    junit_too_big: bool = False
    stopped: bool = False  # killed by us once the primary was done (a companion)
    detached: bool = False  # its run's tmpfs mounts are out of the host's mount table

    @property
    def launched(self) -> subprocess.Popen:
        """Its process: _watch is handed launched ones only."""
        assert self.proc is not None
        return self.proc

    def take(self, kind: str, data: bytes) -> None:
        if kind == "log":
            self.log.write(data)  # why: read as it comes and keep at most the cap
        elif kind == "status":
            self.status += data[: 1 << 16]
        elif kind == "witness":
            self.witness += data[: max(0, WITNESS_MAX_BYTES - len(self.witness))]
        elif len(self.junit) + len(data) <= JUNIT_MAX_BYTES:
            self.junit += data
        else:
            self.junit_too_big = True


# The warm sandbox's command: -P as in the cold path's boot (no script folder on sys.path).
WARM_STARTER = ("python", "-P", f"{SANDBOXED_IN_SANDBOX}/takehome_starter.py")
WARM_POLL_S = 0.1
WARM_REFILL_AFTER_S = 1.0  # why: refilling while a grading runs would take CPU from its runs
WARM_HOLD_S = 2.0  # no refill for this long after a cold run asked for a uid
# why: a packet environment graded once must not keep sandboxes for ever; the
# worker's shared runner (start_warm_sandboxes) is always kept.
WARM_FORGET_S = 3600.0


def warm_eligible(command: Sequence[str]) -> bool:
    """Whether a run of ``command`` (after pytest_command) may use a warm sandbox: ``python -m pytest`` in the runner."""
    return list(command[:4]) == ["python", "-P", "-c", PYTEST_BOOT]


def _send(warm: _Warm, data: bytes) -> None:
    """Write the request into the warm sandbox's stdin, then close it (tar reads up to the end of the stream)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(warm.stdin_w, view) :]
    except OSError:
        pass  # the sandbox ended before reading it all: its result says why
    finally:
        _close(warm.stdin_w)
        warm.stdin_w = -1  # why: a closed number is soon reused by another thread's pipe


def _wanted_file(uid_base: int) -> Path:
    """Touched by a cold run waiting for one of the uids from ``uid_base``; the warm pools holding uids of
    the same range give one back (a pool of another range holds none the run could take)."""
    return LOCK_DIR / f"wanted-{uid_base}"


def _want_slot(uid_base: int) -> None:
    try:
        _wanted_file(uid_base).touch()
    except OSError:
        pass


def _wanted_mark(uid_base: int) -> int:
    try:
        return _wanted_file(uid_base).stat().st_mtime_ns
    except OSError:
        return 0


@dataclass
class _Warm:
    """A pre-started sandbox: its uid's lock, its run's caps, its report pipes, waiting for one run."""

    uid: int
    lock: TextIO
    caps: RunCaps
    fds: _Fds
    proc: subprocess.Popen
    stdin_w: int
    ready_r: int  # the starter writes one byte here once pytest is imported
    started: float
    child: int | None = None  # the host pid of its pid 1 (see _ended)
    ended: bool = False
    released: bool = False  # everything it held is given back
    imported: bool = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def warmed(self) -> bool:
        """Whether its pytest is imported (it may be handed a run before: the run then waits for it)."""
        if not self.imported and self.ready_r >= 0:
            try:
                self.imported = bool(os.read(self.ready_r, 1))
            except BlockingIOError:
                pass
            if self.imported:
                self.caps.detach_mounts()  # bwrap bound them long before (see RunCaps.detach_mounts)
        return self.imported

    def end(self) -> None:
        """Stop it (if still running) and give back everything it held; once."""
        if self.ended:
            return
        self.ended = True
        for name in ("stdin_w", "ready_r"):
            if getattr(self, name) >= 0:
                _close(getattr(self, name))
                setattr(self, name, -1)
        if self.proc.poll() is None:
            _kill_group(self.proc)
        self.proc.wait()
        self.fds.close_all()
        _output(self.proc).close()
        if not _ended(self.child):
            _kill_uid(self.uid)
        self.caps.close()
        self.lock.close()  # the uid goes back to the pool last, once nothing of its runs is left
        self.released = True


class _WarmPool:
    """This process's warm sandboxes for one Sandbox: kept ``sandbox.warm`` strong, refilled while idle."""

    def __init__(self, sandbox: Sandbox, keep: bool = False) -> None:
        self.sandbox = sandbox
        self.keep = keep  # refilled even when no run took one for WARM_FORGET_S
        self.ready: list[_Warm] = []
        self.lock = threading.Lock()
        self.last_take = float("-inf")
        self.hold_until = 0.0
        self.wanted_seen = _wanted_mark(sandbox.uid_base)
        self.closed = False
        self.starting = threading.Lock()  # held while a warm sandbox is being started
        self.failures = 0
        threading.Thread(target=self._loop, name="takehome-warm-sandboxes", daemon=True).start()

    def forgotten(self) -> bool:
        """No run took one for WARM_FORGET_S, and it is not kept: no longer refilled."""
        return not self.keep and time.monotonic() - self.last_take >= WARM_FORGET_S

    def take(self) -> _Warm | None:
        """A warm sandbox with pytest imported (the oldest first), or None: the run goes cold.

        why only imported ones: a starter that could not import pytest never
        gets a run, whose failure would then be blamed on the candidate.
        """
        stale = []
        found = None
        with self.lock:
            self.last_take = time.monotonic()
            for warm in list(self.ready):
                if not warm.alive() or time.monotonic() - warm.started >= self.sandbox.warm_idle_s:
                    self.ready.remove(warm)
                    stale.append(warm)
                elif warm.warmed():
                    self.ready.remove(warm)
                    found = warm
                    break
        for warm in stale:
            warm.end()
        return found

    def _loop(self) -> None:
        # why this thread lives as long as the pool: it launches every warm sandbox, and
        # bwrap's --die-with-parent ends a sandbox when the thread that started it exits.
        while not self.closed:
            try:
                self.tick()
            except Exception as exc:  # why: a failed start must not end the refilling for good
                if isinstance(exc, (SandboxUnavailable, CapsUnavailable, OSError)):
                    logger.warning("warm sandboxes: could not start one: %s", exc)
                else:
                    logger.exception("warm sandboxes: could not refill")
                self.failures += 1
                time.sleep(min(30.0, 0.5 * 2 ** min(self.failures, 6)))
            time.sleep(WARM_POLL_S)

    def tick(self) -> None:
        """One round: end the expired, give a uid back to a waiting cold run, start one more when idle."""
        now = time.monotonic()
        ending: list[_Warm] = []
        with self.lock:
            keep: list[_Warm] = []
            for warm in self.ready:
                (keep if warm.alive() and now - warm.started < self.sandbox.warm_idle_s else ending).append(warm)
                warm.warmed()  # why: detaches its mounts once it is ready
            self.ready = keep
            mark = _wanted_mark(self.sandbox.uid_base)
            if mark != self.wanted_seen:
                self.wanted_seen = mark
                self.hold_until = now + WARM_HOLD_S
                if self.ready:
                    ending.append(self.ready.pop(0))
            refill = (
                not self.closed
                and len(self.ready) < self.sandbox.warm
                and now >= self.hold_until
                and now - self.last_take >= WARM_REFILL_AFTER_S
                and (self.keep or now - self.last_take < WARM_FORGET_S)
            )
        for warm in ending:
            warm.end()
        if refill:
            with self.starting:
                if self.closed:
                    return
                started = self.sandbox._start_warm()
                if started is None:
                    self.hold_until = time.monotonic() + WARM_HOLD_S  # every uid busy: try again later
                    return
                self.failures = 0
                with self.lock:
                    if self.closed:
                        # why an ignore: mypy takes self.closed as False since the check above, but
                        # close() may have run in another thread while this one started the sandbox
                        ending = [started]  # type: ignore[unreachable]
                    else:
                        self.ready.append(started)
                        ending = []
                for extra in ending:
                    extra.end()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            ending, self.ready = self.ready, []
        for warm in ending:
            warm.end()
        with self.starting:
            pass  # why: one being started as we closed is ended by its starter; wait for that


_POOLS: dict[tuple[int, Sandbox], _WarmPool] = {}
_POOLS_LOCK = threading.Lock()


def _warm_pool(sandbox: Sandbox, keep: bool = False) -> _WarmPool:
    # why the pid in the key: a forked worker process starts its own pool (threads do not survive a fork).
    key = (os.getpid(), sandbox)
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = _WarmPool(sandbox, keep)
            if not keep:
                _POOLS[key].last_take = time.monotonic()  # why: made for a run, which counts as its first use
        _POOLS[key].keep |= keep
        return _POOLS[key]


def start_warm_sandboxes(sandbox: Sandbox) -> bool:
    """Start filling this process's pool for ``sandbox`` now (a worker process that starts); False when off."""
    if sandbox.warm <= 0:
        return False
    _warm_pool(sandbox, keep=True)
    return True


def wait_for_warm(sandbox: Sandbox, timeout_s: float = 30.0) -> int:
    """Wait until this process's pool for ``sandbox`` holds ``sandbox.warm`` sandboxes with pytest imported.

    Returns how many are ready (fewer when ``timeout_s`` ran out). For the
    benchmark and tests: a worker never waits, a run finding none goes cold.
    """
    if not start_warm_sandboxes(sandbox):
        return 0
    pool = _warm_pool(sandbox)
    deadline = time.monotonic() + timeout_s
    while True:
        with pool.lock:
            ready = sum(w.warmed() for w in pool.ready)
        if ready >= sandbox.warm or time.monotonic() > deadline:
            return ready
        time.sleep(0.01)


def _forget_inherited_pools() -> None:
    # why: a forked child holds copies of its parent's uid locks and pipes; closing
    # its copies leaves the parent's sandboxes to the parent, and the child never uses them.
    global _POOLS_LOCK
    _POOLS_LOCK = threading.Lock()  # another thread may have held it at the fork
    for (pid, _), pool in list(_POOLS.items()):
        if pid != os.getpid():
            for warm in pool.ready:
                for fd in (
                    warm.stdin_w,
                    warm.ready_r,
                    *warm.fds.child_ends(),
                    warm.fds.status_r,
                    warm.fds.junit_r,
                    warm.fds.witness_r,
                ):
                    if fd >= 0:
                        _close(fd)
                warm.lock.close()
            del _POOLS[(pid, _)]


def close_warm_sandboxes() -> None:
    """End every warm sandbox of this process and stop refilling (at exit; tests)."""
    with _POOLS_LOCK:
        pools = [pool for (pid, _), pool in _POOLS.items() if pid == os.getpid()]
        _POOLS.clear()
    for pool in pools:
        pool.close()


atexit.register(close_warm_sandboxes)
os.register_at_fork(after_in_child=_forget_inherited_pools)


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
