"""A candidate's hosted workspace: files on a capped tmpfs, and a tmux shell in bubblewrap.

Plain Python, no Django (sessions_app/hosted/workspaces.py is the glue). The shell
runs in the same kind of sandbox as grading (see grading/engine/sandbox/__init__.py and
docs/security.md: each measure there answers an attack), but lives
for hours, not for one run, and must survive the web server's restart.

Host layout of one workspace (``Workspace.folder``, root's, mode 0711)::

    home/          a tmpfs (size, nr_inodes, uid/gid = ws.uid, 0700): /workspace inside
    tmux/          a tmpfs of its own (run_bytes, run_inodes, ws.uid's) while the shell runs: tmux's
                   socket, bound at /run/tmux in every sandbox of it; unmounted when the shell
                   stops, and its mount point is root's 0700, so nothing is ever written to disk there
    gate/          root's 0755: the gate socket (C1's host), read-only at /run/takehome
    etc/           root's: the generated passwd, group, bash.bashrc and tmux.conf
    shell.pid      "<pid> <start time>" of the shell's bwrap (root's)
    lock           flocked while the workspace is opened, started, stopped, released or frozen
    saved.tar      the files, saved when the workspace is released (idle, restart)
    frozen         present once the deadline froze the workspace: it stays read-only until
                   a later deadline thaws it (``thaw``)
    session.cast   the recording (grading/engine/asciicast.py), never visible inside

Caps: a cgroup per workspace (``takehome/ws-<uid>`` in the memory, pids and,
where there is one, cpu hierarchies) holds the tmux server, the shell and
every client; it lives as long as the workspace has a process. Without a
writable cgroup, rlimits (RunBudget.fallback_rlimits) stand in, and there is
no CPU cap. The tmpfs is mounted by us (root) so that its inode count is
capped: where mounting is impossible, WorkspaceUnavailable says so rather
than opening a workspace with no disk cap.

What a workspace can write, all of it capped and none of it the host's disk:
/workspace (home/), /run/tmux (tmux/), and each sandbox's own /tmp (HOME in
it) and /dev/shm (bwrap's tmpfs, sized, gone with the sandbox); everything
else is read-only. A new holder of the uid finds nothing of the last one's:
home/ is saved and unmounted, tmux/ unmounted, and no process survives.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import io
import logging
import os
import pty
import shutil
import signal
import stat
import struct
import subprocess
import tarfile
import termios
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO, cast

from grading.engine.archive import JUNK_FILES, JUNK_PARTS, Limits, _size

from . import _sandboxed_copy, interpreter_binds
from .cgroups import (
    ENTER_CGROUP,
    PARENT,
    SH,
    CapsUnavailable,
    RunBudget,
    _libc,
    _mount_tmpfs,
    _mounts,
    _read_int,
    _read_keys,
    _remove_cgroup,
    _start_time,
    _umount,
    _write,
    detect,
)
from .layout import BWRAP, ENV, PRLIMIT, RUNNER_IN_SANDBOX, SANDBOXED_IN_SANDBOX, SETPRIV
from .processes import _kill_uid, _uid_processes

log = logging.getLogger(__name__)

GATE_SOCKET = "/run/takehome/gate.sock"
GATE_DIR_IN_SANDBOX = "/run/takehome"
TMUX_DIR_IN_SANDBOX = "/run/tmux"
TMUX_SOCKET = f"{TMUX_DIR_IN_SANDBOX}/sock"
WORKSPACE_IN_SANDBOX = "/workspace"
HOME_IN_SANDBOX = "/tmp/home"
SESSION = "main"
TMUX, BASH = "/usr/bin/tmux", "/bin/bash"
TERM = "xterm-256color"
PROMPT = r"candidate:\w\$ "
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 0x1, 0x2, 0x4, 0x20
CHUNK = 1 << 16
MAX_SIDE = 1000  # columns or rows a client may ask for
# Which cap on memory and processes: auto (the strongest this machine offers) |
# cgroup2 | cgroup1 | rlimit, as grading's (grading/engine/sandbox/cgroups.py). The Django glue
# may set it from the settings; a mode asked for that does not work is an error.
CAPS_MODE = "auto"
FALLBACK_PROCESS_BYTES = 48 << 20
SAVED_MAX_BYTES = 1 << 30  # a saved.tar larger than this is not ours

TMUX_CONF = f"""\
# Written by grading/engine/sandbox/shell.py. The server runs in the foreground (-D) as the
# sandbox's main process and ends with the last session: the shell's exit ends it.
set -s exit-empty on
set -s escape-time 0
set -g history-limit 10000
set -g status off
set -g default-terminal {TERM}
set -g default-shell {BASH}
# why not a login shell (tmux's default): bash then reads /etc/bash.bashrc, our prompt
set -g default-command "exec {BASH} -i"
# why mouse off and no alternate screen: the browser's terminal keeps its own
# selection (copy and paste) and its own scrollback of what scrolls off
set -g mouse off
set -as terminal-overrides ',xterm*:smcup@:rmcup@'
new-session -d -s {SESSION} -c {WORKSPACE_IN_SANDBOX}
"""
BASHRC = f"""\
# Written by grading/engine/sandbox/shell.py
PS1='{PROMPT}'
HISTFILE={HOME_IN_SANDBOX}/.bash_history
alias ls='ls --color=auto'
"""


class WorkspaceUnavailable(Exception):
    """Our side failed (no bwrap, no mount, no free cap); the message says how to fix it."""


class WorkspaceTooBig(Exception):
    """The workspace's files cannot be handed in (over the upload limits, a name that is not UTF-8).

    The message is for the candidate: it says what to change."""


@dataclass(frozen=True)
class WorkspaceLimits:
    disk_bytes: int = 64 << 20  # the workspace's files (a size-capped tmpfs mount)
    inodes: int = 20000
    memory_bytes: int = 512 << 20  # all processes of the shell together (cgroup)
    processes: int = 128
    cpu_cores: float = 1.0  # cgroup cpu quota where available
    file_size_bytes: int = 32 << 20
    nofile: int = 1024
    tmp_bytes: int = 64 << 20  # /tmp (and HOME in it) inside the sandbox
    shm_bytes: int = 16 << 20  # /dev/shm inside the sandbox
    # /run/tmux: tmux's socket and nothing else (a socket is an inode and no bytes)
    run_bytes: int = 1 << 20
    run_inodes: int = 32


@dataclass(frozen=True)
class Workspace:
    folder: Path  # host folder of this workspace
    uid: int  # its own sandbox uid, never shared with another open workspace or grading
    runner_dir: Path  # the packet's runner venv (shared.environments.runner_for)
    limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)

    def __post_init__(self) -> None:
        # why: uid 0 or a system uid would hand candidate code real privileges.
        if self.uid < 1000:
            raise ValueError("a workspace's uid must be >= 1000")

    @property
    def home(self) -> Path:
        return Path(self.folder) / "home"

    def part(self, name: str) -> Path:
        return Path(self.folder) / name


# -- files ----------------------------------------------------------------------------


def _is_mounted(path: Path) -> bool:
    where = str(Path(path).resolve())
    return any(point == where for point, _, _ in _mounts())


def _mount_options(path: Path) -> str | None:
    where = str(Path(path).resolve())
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split(" - ")[0].split()
            if len(fields) >= 6 and fields[4] == where:
                return fields[5]
    return None


def _remount(path: Path, read_only: bool) -> None:
    flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | (MS_RDONLY if read_only else 0)
    if _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))


def _workspace_folder(ws: Workspace) -> None:
    """The workspace's folder, made and checked (ours, 0711, reachable by the uid): the only step before its lock.

    why nothing more: the lock's file is in this folder, so this runs unlocked, in every request
    that opens the workspace at once; what is in the folder changes only under the lock.
    """
    folder = Path(ws.folder)
    folder.mkdir(mode=0o711, parents=True, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise WorkspaceUnavailable(f"{folder} is not a folder of our own: remove it and open the workspace again")
    os.chmod(folder, 0o711)  # why: the uid may pass through to its mounts, not list or write
    parent = os.lstat(folder.parent)
    if parent.st_uid == os.geteuid() and not parent.st_mode & 0o002:
        os.chmod(folder.parent, 0o711)  # why: no candidate lists the other workspaces' names
    blocked = [p for p in folder.parents if p.exists() and not p.stat().st_mode & 0o001]
    if blocked:
        raise WorkspaceUnavailable(
            f"the sandbox uid cannot reach {folder}: {', '.join(map(str, blocked))} "
            "must be traversable by others (chmod o+x), or set TAKEHOME_WORKSPACES_DIR "
            "to a folder under one that is"
        )


def _prepare_folder(ws: Workspace) -> None:
    """The mount points and etc/ files in the workspace's folder (made by _workspace_folder); under its lock.

    why under the lock: home/ and tmux/ are mounted under it. A look at a mount point taken
    outside it (not mounted) and acted on after another request mounted there (chown to
    root, rmtree) made the tmpfs's root root's: the shell could not enter /workspace or bind
    tmux's socket, and exited 1.
    """
    folder = Path(ws.folder)
    for name, owner, mode in (("home", 0, 0o700), ("tmux", 0, 0o700), ("gate", 0, 0o755), ("etc", 0, 0o755)):
        path = folder / name
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            pass  # an earlier opening made it
        if not _is_mounted(path):
            if name == "tmux" and os.lstat(path).st_uid != 0:
                # why: tmux/ was once a folder of the uid's on the host's disk, with no cap;
                # what a shell of an earlier version left there goes, and the mount point is root's
                shutil.rmtree(path)
                path.mkdir(mode=mode)
            os.chown(path, owner, owner)
            os.chmod(path, mode)
    etc = folder / "etc"
    for name, text in (
        (
            "passwd",
            f"root:x:0:0:root:/root:/usr/sbin/nologin\ncandidate:x:{ws.uid}:{ws.uid}:candidate:"
            f"{HOME_IN_SANDBOX}:{BASH}\n",
        ),
        ("group", f"root:x:0:\ncandidate:x:{ws.uid}:\n"),
        ("bash.bashrc", BASHRC),
        ("tmux.conf", TMUX_CONF),
    ):
        try:
            if (etc / name).read_bytes() == text.encode():
                continue
        except OSError:
            pass
        _write_atomic(etc / name, text.encode(), 0o644)


@contextmanager
def _atomic_file(path: Path, mode: int):
    """A file written beside ``path`` under a temporary name, synced and put in its place at the end;
    removed instead when the writing fails, so ``path`` is either the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    with _atomic_file(path, mode) as fh:
        fh.write(data)


def _check_relative(name: str) -> PurePosixPath:
    rel = PurePosixPath(name)
    if not name or rel.is_absolute() or any(p in ("", ".", "..") for p in name.split("/")) or "\0" in name:
        raise ValueError(f"not a plain relative path: {name!r}")
    return rel


def _write_files(root: Path, files: Iterator[tuple[str, bytes | None, int]], uid: int) -> None:
    """Write (relative name, content or None for a folder, mode) under ``root``, as ``uid``'s; never through a link."""
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name, data, mode in files:
            rel = _check_relative(name)
            dir_fd = _folder_of(root_fd, rel, uid)
            try:
                if data is None:  # a folder
                    _make_folder(rel.name, dir_fd, uid)
                    continue
                # why O_NONBLOCK and the check: in a live workspace the candidate may have put a FIFO
                # at the name, and opening it to write would wait for a reader for ever.
                fd = os.open(
                    rel.name,
                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY,
                    mode & 0o755,
                    dir_fd=dir_fd,
                )
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        raise OSError(errno.EEXIST, "not a regular file", name)
                    os.fchown(fd, uid, uid)
                    os.fchmod(fd, 0o755 if mode & 0o100 else 0o644)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view[:CHUNK]) :]
                finally:
                    os.close(fd)
            finally:
                os.close(dir_fd)
    finally:
        os.close(root_fd)


def write_files(ws: Workspace, files: Mapping[str, bytes]) -> None:
    """Put ``files`` (relative name -> content) into an open workspace, as its uid's, folders made as needed.

    For the server's own writes into a live workspace (the model's reply). Never
    through a link, never into a FIFO; raises OSError when a name is taken by
    something else or the workspace is full (ENOSPC: its cap), WorkspaceUnavailable
    when it is not open, ValueError for a name that is not a plain relative path.
    """
    with _locked(ws):
        if not _is_mounted(ws.home):
            raise WorkspaceUnavailable(f"the workspace {ws.folder} is not open")
        _write_files(ws.home, ((name, data, 0o644) for name, data in files.items()), ws.uid)


def read_file(ws: Workspace, name: str, cap: int) -> bytes | None:
    """The regular file ``name`` of an open workspace, read as _walk reads (never through a link, no FIFO).

    None when it is not there or not a regular file; WorkspaceTooBig past ``cap`` bytes.
    """
    rel = _check_relative(name)
    if not _is_mounted(ws.home):
        raise WorkspaceUnavailable(f"the workspace {ws.folder} is not open")
    dir_fd = os.open(ws.home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in rel.parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            except OSError:
                return None
            os.close(dir_fd)
            dir_fd = nxt
        return _read_regular(rel.name, dir_fd, cap, name)
    finally:
        os.close(dir_fd)


def _walk(root: Path, limits: Limits, skip_junk: bool) -> Iterator[tuple[str, bytes | None, int]]:
    """(relative name, content or None for a folder, mode) of what is under ``root``, read safely.

    why descriptors: the candidate's shell may still run and swap a folder for
    a symlink while we read; every step opens with O_NOFOLLOW relative to its
    folder's descriptor, so nothing outside ``root`` is ever read. Only regular
    files are read (opened non-blocking: a FIFO never hangs us, a device is skipped).
    """
    entries = total = 0
    stack = [(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW), "")]
    try:
        while stack:
            dir_fd, prefix = stack.pop()
            try:
                names = sorted(os.listdir(dir_fd))
                for name in names:
                    rel = f"{prefix}{name}"
                    try:
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    is_dir = stat.S_ISDIR(st.st_mode)
                    if is_dir and skip_junk and name in JUNK_PARTS:
                        continue
                    if not is_dir and (
                        not stat.S_ISREG(st.st_mode)
                        or (
                            skip_junk
                            and (name in JUNK_FILES or name.endswith((".pyc", ".pyo")) or name.startswith("._"))
                        )
                    ):
                        continue  # links, FIFOs, sockets, devices: never read; caches: as an upload skips them
                    if skip_junk:  # an upload refuses such names; saving keeps them as they are
                        _check_name(rel)
                    entries += 1  # why folders too: the upload's max_entries counts both
                    if entries > limits.max_entries:
                        raise WorkspaceTooBig(
                            f"The workspace holds more than {limits.max_entries} files and folders; delete what "
                            "the solution does not need (build output, copies, caches) and try again."
                        )
                    if is_dir:
                        try:
                            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                        except OSError:
                            continue  # swapped for something else meanwhile
                        stack.append((sub, rel + "/"))
                        if not skip_junk:
                            yield rel, None, 0o755
                        continue
                    data = _read_regular(name, dir_fd, limits.max_file_bytes, rel)
                    if data is None:
                        continue
                    total += len(data)
                    if total > limits.max_total_bytes:
                        raise WorkspaceTooBig(
                            f"The workspace's files add up to more than {_size(limits.max_total_bytes)}; "
                            "delete large files the solution does not need and try again."
                        )
                    yield rel, data, st.st_mode
            finally:
                os.close(dir_fd)
    finally:
        for fd, _ in stack:
            os.close(fd)


def _check_name(rel: str) -> None:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise WorkspaceTooBig(
            f"The file name {shown!r} is not valid UTF-8; rename it with plain letters and digits and try again."
        ) from None


def _read_regular(name: str, dir_fd: int, cap: int, rel: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError:
        return None  # a symlink or something swapped in meanwhile
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        parts, size = [], 0
        while chunk := os.read(fd, CHUNK):
            size += len(chunk)
            if size > cap:
                raise WorkspaceTooBig(f"{rel} is larger than {_size(cap)}; delete it or make it smaller and try again.")
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def snapshot_files(ws: Workspace, limits: Limits = Limits()) -> dict[str, bytes]:
    """The workspace's files as an upload would carry them (no caches, no links, no FIFOs); WorkspaceTooBig."""
    if not _is_mounted(ws.home):
        raise WorkspaceUnavailable(f"the workspace {ws.folder} is not open")
    return {name: data for name, data, _ in _walk(ws.home, limits, skip_junk=True) if data is not None}


def _junk(rel: str) -> bool:
    """Whether a snapshot (and so a submission) leaves this file out: caches and archivers' leftovers."""
    parts = PurePosixPath(rel).parts
    name = parts[-1]
    return (
        any(part in JUNK_PARTS for part in parts[:-1])
        or name in JUNK_FILES
        or name.endswith((".pyc", ".pyo"))
        or name.startswith("._")
    )


def frozen_files(ws: Workspace, max_file_bytes: int) -> dict[str, bytes | None]:
    """The files of a closed workspace, to be shown read-only: name -> content, None for a file larger than
    ``max_file_bytes``; {} when it has none kept.

    Regular files only, without caches, as a snapshot reads them: from the mount when the files are
    mounted (a save that failed keeps them there), else from saved.tar, which is only read, never
    unpacked. why a cap per file, by its stated size: a sparse file can claim far more than the
    workspace's disk holds, and its holes would be read as zeros.
    """
    if _is_mounted(ws.home):
        return {name: data if len(data) <= max_file_bytes else None for name, data in snapshot_files(ws).items()}
    saved = ws.part("saved.tar")
    if not saved.is_file():
        return {}
    if saved.stat().st_size > SAVED_MAX_BYTES:
        raise WorkspaceUnavailable(f"{saved} is larger than any workspace can be: remove it")
    files: dict[str, bytes | None] = {}
    try:
        with tarfile.open(saved, mode="r:") as tar:
            for info in tar:
                if not info.isreg() or _junk(info.name):
                    continue
                if info.size > max_file_bytes:
                    files[info.name] = None
                    continue
                body = tar.extractfile(info)
                files[info.name] = body.read(max_file_bytes + 1)[:max_file_bytes] if body is not None else None
    except (OSError, tarfile.TarError) as exc:
        raise WorkspaceUnavailable(f"could not read {saved}: {exc}") from None
    return files


@dataclass(frozen=True)
class SaveReport:
    """What a save kept, and what it could not keep (each "name: why"), for the log and the recruiter."""

    kept: int  # folders, files and links
    left_out: tuple[str, ...] = ()

    def words(self) -> str:
        shown = "; ".join(self.left_out[:10]) + (
            f"; and {len(self.left_out) - 10} more" if len(self.left_out) > 10 else ""
        )
        return f"{len(self.left_out)} of the workspace's files could not be saved: {shown}"


def _entries(root: Path) -> Iterator[tuple[str, int, str, os.stat_result]]:
    """(relative name, folder's descriptor, name in it, lstat) of the folders, regular files and
    symlinks under ``root``, each folder before what it holds; never through a link (see _walk)."""
    stack = [(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW), "")]
    try:
        while stack:
            dir_fd, prefix = stack.pop()
            try:
                for name in sorted(os.listdir(dir_fd)):
                    try:
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                        continue  # FIFOs and sockets: nothing in them to keep
                    yield f"{prefix}{name}", dir_fd, name, st
                    if stat.S_ISDIR(st.st_mode):
                        try:
                            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                        except OSError:
                            continue
                        stack.append((sub, f"{prefix}{name}/"))
            finally:
                os.close(dir_fd)
    finally:
        for fd, _ in stack:
            os.close(fd)


def _data_segments(fd: int, size: int) -> list[tuple[int, int]]:
    """(offset, length) of the parts of a file that hold data; a hole between them reads as zeros."""
    segments, offset = [], 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            return [(0, size)]  # a file system that cannot tell: all of it is data
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        segments.append((start, end - start))
        offset = end
    return segments


def _read_segments(fd: int, segments: list[tuple[int, int]]) -> bytes:
    parts = []
    for offset, length in segments:
        while length:
            chunk = os.pread(fd, min(length, CHUNK), offset)
            if not chunk:
                raise OSError(errno.EIO, "the file grew shorter while it was read")
            parts.append(chunk)
            offset, length = offset + len(chunk), length - len(chunk)
    return b"".join(parts)


def _sparse_info(info: tarfile.TarInfo, size: int, segments: list[tuple[int, int]], data: bytes) -> bytes:
    """Make ``info`` a GNU sparse 1.0 member (as GNU tar and Python's tarfile read it); returns its body."""
    layout = f"{len(segments)}\n" + "".join(f"{offset}\n{length}\n" for offset, length in segments)
    head = layout.encode("ascii")
    head += b"\0" * (-len(head) % tarfile.BLOCKSIZE)
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.realsize": str(size)}
    info.size = len(head) + len(data)
    return head + data


def save(ws: Workspace) -> SaveReport | None:
    """Write the workspace's folders, regular files and links to saved.tar (atomically: a crash keeps the old one).

    Space is counted as the tmpfs counts it, so everything the workspace can hold is saved:
    a sparse file is stored sparsely (its holes are not written out), and a file with several
    names once, the other names as hard links. A file that cannot be read is left out and named
    in the report; the rest is saved all the same. None when the workspace is not open. An
    OSError is ours (the host's disk): the files stay mounted, nothing is lost.
    """
    if not _is_mounted(ws.home):
        return None
    with _atomic_file(ws.part("saved.tar"), 0o600) as out:
        return _write_saved(ws, out)


def save_copy(ws: Workspace, out: BinaryIO) -> SaveReport | None:
    """Write the files of an open workspace to ``out`` exactly as ``save`` writes saved.tar, and change nothing.

    For a backup of a running server: the files stay mounted, the shell keeps running, saved.tar is
    left as it was. None when the files are not mounted (saved.tar, if any, holds them). Holds the
    workspace's lock meanwhile, so no stop, save or freeze runs halfway through the copy.
    """
    with _locked(ws):
        if not _is_mounted(ws.home):
            return None
        return _write_saved(ws, out)


def _write_saved(ws: Workspace, out: BinaryIO) -> SaveReport:
    """The tar of ``save``: the mounted files, each once, written to ``out``; the report of what was left out."""
    lim = ws.limits
    kept, left_out = 0, []
    first_name: dict[tuple[int, int], str] = {}
    allocated = 0
    now = int(time.time())
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, dir_fd, name, st in _entries(ws.home):
            info = tarfile.TarInfo(rel)
            info.mtime = now
            body = None
            if stat.S_ISDIR(st.st_mode):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif stat.S_ISLNK(st.st_mode):
                try:
                    info.linkname = os.readlink(name, dir_fd=dir_fd)
                except OSError as exc:
                    left_out.append(f"{rel}: {exc.strerror}")
                    continue
                info.type, info.mode = tarfile.SYMTYPE, 0o777
            elif (st.st_dev, st.st_ino) in first_name:
                info.type, info.linkname = tarfile.LNKTYPE, first_name[(st.st_dev, st.st_ino)]
                info.mode = 0o755 if st.st_mode & 0o100 else 0o644
            else:
                try:
                    body = _file_body(info, name, dir_fd, st)
                except OSError as exc:
                    left_out.append(f"{rel}: could not be read ({exc.strerror or exc})")
                    continue
                # why the allocated space, each file once: that is what the tmpfs caps
                allocated += st.st_blocks * 512
                if allocated > lim.disk_bytes:
                    allocated -= st.st_blocks * 512
                    left_out.append(f"{rel}: more than the workspace's {_size(lim.disk_bytes)} in all")
                    continue
                if st.st_nlink > 1:
                    first_name[(st.st_dev, st.st_ino)] = rel
            tar.addfile(info, io.BytesIO(body) if body is not None else None)
            kept += 1
    report = SaveReport(kept, tuple(left_out))
    if left_out:
        log.warning("workspace %s: %s", ws.folder, report.words())
    return report


def _file_body(info: tarfile.TarInfo, name: str, dir_fd: int, st: os.stat_result) -> bytes:
    """The stored body of a regular file (its data, or its data and layout when sparse); sets ``info``."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise OSError(errno.ESTALE, "it was replaced while the workspace was saved")
        info.mode = 0o755 if now.st_mode & 0o100 else 0o644
        segments = _data_segments(fd, now.st_size)
        data = _read_segments(fd, segments)
        if segments in ([], [(0, now.st_size)]) and len(data) == now.st_size:
            info.size = len(data)
            return data
        return _sparse_info(info, now.st_size, segments, data)
    finally:
        os.close(fd)


def _restore(root: Path, saved: Path, uid: int) -> None:
    """Write saved.tar's folders, files (holes as holes), hard links and symlinks under ``root``, owned by ``uid``.

    Never through a link: each name's folders are opened with O_NOFOLLOW from ``root``.
    """
    if saved.stat().st_size > SAVED_MAX_BYTES:
        raise WorkspaceUnavailable(f"{saved} is larger than any workspace can be: remove it")
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with tarfile.open(saved, mode="r:") as tar:
            for info in tar:
                rel = _check_relative(info.name)
                dir_fd = _folder_of(root_fd, rel, uid)
                try:
                    if info.isdir():
                        _make_folder(rel.name, dir_fd, uid)
                    elif info.issym():
                        os.symlink(info.linkname, rel.name, dir_fd=dir_fd)
                        os.chown(rel.name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)
                    elif info.islnk():
                        target = _check_relative(info.linkname)
                        target_fd = _folder_of(root_fd, target, uid)
                        try:
                            os.link(
                                target.name, rel.name, src_dir_fd=target_fd, dst_dir_fd=dir_fd, follow_symlinks=False
                            )
                        finally:
                            os.close(target_fd)
                    elif info.isreg():
                        _restore_file(tar, info, rel.name, dir_fd, uid)
                finally:
                    os.close(dir_fd)
    finally:
        os.close(root_fd)


def _make_folder(name: str, dir_fd: int, uid: int) -> None:
    """The folder ``name`` in ``dir_fd``, made (``uid``'s, 0755) unless it is there."""
    try:
        os.mkdir(name, 0o755, dir_fd=dir_fd)
        os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        pass


def _folder_of(root_fd: int, rel: PurePosixPath, uid: int) -> int:
    """A descriptor of the folder ``rel`` lies in, made (``uid``'s) where missing; never through a link."""
    dir_fd = os.dup(root_fd)
    for part in rel.parts[:-1]:
        _make_folder(part, dir_fd, uid)
        try:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        dir_fd = nxt
    return dir_fd


def _restore_file(tar: tarfile.TarFile, info: tarfile.TarInfo, name: str, dir_fd: int, uid: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
    try:
        os.fchown(fd, uid, uid)
        os.fchmod(fd, 0o755 if info.mode & 0o100 else 0o644)
        segments: list[tuple[int, int]]
        if info.sparse is not None:
            # why by hand: tarfile would hand the holes over as zeros, and zeros written take space
            tar.fileobj.seek(info.offset_data)
            # why a cast: typeshed calls it bytes, but tarfile keeps a sparse member's (offset, size) pairs there
            segments = cast("list[tuple[int, int]]", info.sparse)
        else:
            tar.fileobj.seek(info.offset_data)
            segments = [(0, info.size)]
        for offset, length in segments:
            while length:
                chunk = tar.fileobj.read(min(length, CHUNK))
                if not chunk:
                    raise tarfile.ReadError(f"{info.name} is cut short in saved.tar")
                view = memoryview(chunk)
                while view:
                    written = os.pwrite(fd, view, offset)
                    view, offset = view[written:], offset + written
                length -= len(chunk)
        os.ftruncate(fd, info.size)
    finally:
        os.close(fd)


@contextmanager
def _locked(ws: Workspace) -> Iterator[None]:
    """Hold the workspace's lock: one change of state at a time, across threads and server processes.

    flock belongs to an open file, so threads of one process exclude each other
    too; the public functions take it once and call only unlocked helpers.
    """
    with open(ws.part("lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def open_workspace(ws: Workspace, seed: Mapping[str, bytes]) -> None:
    """Mount the workspace's tmpfs and fill it (from saved.tar if there is one, else ``seed``); idempotent."""
    if os.geteuid() != 0:
        raise WorkspaceUnavailable("mounting the workspace's size-capped tmpfs needs root: run the server as root")
    _workspace_folder(ws)
    with _locked(ws):
        _prepare_folder(ws)
        _open(ws, seed)


def _open(ws: Workspace, seed: Mapping[str, bytes]) -> None:
    home = ws.home
    if _is_mounted(home):
        return
    lim = ws.limits
    try:
        _mount_tmpfs(home, lim.disk_bytes, lim.inodes, ws.uid)
    except OSError as exc:
        raise WorkspaceUnavailable(
            f"cannot mount the workspace's tmpfs at {home}: {exc.strerror or exc} "
            "(the server must run as root, with permission to mount)"
        ) from None
    try:
        saved = ws.part("saved.tar")
        if saved.exists():
            _restore(home, saved, ws.uid)
        else:
            _write_files(home, ((name, data, 0o644) for name, data in seed.items()), ws.uid)
        if ws.part("frozen").exists():
            _remount(home, read_only=True)
    except (OSError, tarfile.TarError, ValueError) as exc:
        _umount(home)
        raise WorkspaceUnavailable(f"could not fill the workspace {ws.folder}: {exc}") from None
    except BaseException:
        _umount(home)
        raise


# -- caps -----------------------------------------------------------------------------


def _cpu_parent() -> Path | None:
    """The folder for workspaces' cpu cgroups (cgroup v1 ``cpu`` hierarchy), or None where there is none."""
    for point, fstype, options in _mounts():
        if fstype == "cgroup" and "cpu" in options.split(","):
            parent = Path(point) / PARENT
            try:
                parent.mkdir(mode=0o755, exist_ok=True)
            except OSError:
                return None
            return parent
    return None


def _v2_cpu(parent: Path, create: bool) -> bool:
    """Whether the workspaces' cgroup2 parent hands the cpu controller to its children (enabled when ``create``)."""
    try:
        if "cpu" in (parent / "cgroup.subtree_control").read_text().split():
            return True
        if create and "cpu" in (parent / "cgroup.controllers").read_text().split():
            _write(parent / "cgroup.subtree_control", "+cpu")
            return True
    except OSError:
        pass  # no cpu controller here: no CPU quota, as without a cgroup
    return False


def _cgroup_name(ws: Workspace) -> str:
    return f"ws-{ws.uid}"  # why not an owned name: it outlives the process that made it


def _cgroups(ws: Workspace, create: bool) -> list[Path]:
    """The workspace's cgroups (memory and pids, then cpu where it exists); made and capped when ``create``."""
    try:
        caps = detect(CAPS_MODE, "bwrap")
    except CapsUnavailable as exc:
        raise WorkspaceUnavailable(f"workspace caps {CAPS_MODE}: {exc}") from None
    if caps.mode == "rlimit":
        return []
    name = _cgroup_name(ws)
    lim = ws.limits
    paths = [parent / name for parent in caps.parents]
    cpu = None
    if caps.mode == "cgroup1":
        cpu_parent = _cpu_parent()
        cpu = cpu_parent / name if cpu_parent else None
    elif caps.memory_parent is not None and _v2_cpu(caps.memory_parent, create):
        cpu = paths[0]
    if cpu is not None and cpu not in paths:
        paths.append(cpu)
    if not create:
        return [p for p in paths if p.is_dir()]
    try:
        for path in paths:
            os.makedirs(path, 0o755, exist_ok=True)
        memory, pids = paths[0], paths[1] if caps.mode == "cgroup1" else paths[0]
        if caps.mode == "cgroup2":
            _write(memory / "memory.max", str(lim.memory_bytes))
            if (memory / "memory.swap.max").exists():
                _write(memory / "memory.swap.max", "0")
        else:
            _write(memory / "memory.limit_in_bytes", str(lim.memory_bytes))
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", str(lim.memory_bytes))
        _write(pids / "pids.max", str(lim.processes))
        if cpu is not None:
            period = 100_000
            quota = max(1000, int(lim.cpu_cores * period))
            if caps.mode == "cgroup2":
                _write(cpu / "cpu.max", f"{quota} {period}")
            else:
                _write(cpu / "cpu.cfs_period_us", str(period))
                _write(cpu / "cpu.cfs_quota_us", str(quota))
    except OSError as exc:
        raise WorkspaceUnavailable(f"cannot set up the workspace's cgroup ({caps.mode}): {exc}") from None
    return paths


def _cgroup_procs(paths: list[Path]) -> list[int]:
    pids: set[int] = set()
    for path in paths:
        try:
            pids.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            pass
    return sorted(pids)


def _budget(ws: Workspace) -> RunBudget:
    lim = ws.limits
    # without a cgroup: as many processes as fit the memory at FALLBACK_PROCESS_BYTES
    # each (python with pytest needs 48 MiB of address space; a shell with one
    # client is 6 processes), so that all of them together stay within memory_bytes
    fallback = max(4, lim.memory_bytes // FALLBACK_PROCESS_BYTES)
    return RunBudget(
        memory_bytes=lim.memory_bytes,
        processes=lim.processes,
        tmpfs_inodes=lim.inodes,
        address_space_bytes=2 * lim.memory_bytes,
        fallback_processes=fallback,
    )


def _rlimits(ws: Workspace, cgroups: list[Path]) -> tuple[int, int]:
    """RLIMIT_AS and RLIMIT_NPROC: backstops above the cgroup's caps, or the fallback without one."""
    budget = _budget(ws)
    if cgroups:
        # why twice the memory: the cgroup is the cap a memory bomb meets (and is killed by)
        return budget.address_space_bytes, ws.limits.processes + 4
    return budget.fallback_rlimits()


# -- pinned at the cap ------------------------------------------------------------------

# A fork bomb holds every process the cap allows, and takes back each one that ends: no
# terminal can attach (a client needs new processes), and one that slipped in shows a
# screen flooded with "fork: retry". An honest build meets the cap differently: measured
# here, `make -j` over 300 targets touched 128 of 128 once and failed within 0.25 s, and
# 110 parallel workers stayed at 116 without a refused fork.
AT_CAP_SLACK = 1  # why: one process that just ended, not yet replaced by the bomb
PINNED_S = 2.0  # at the cap this long, with a fork refused, is pinned; below it this long, free again


@dataclass(frozen=True)
class ProcessCount:
    """The workspace's processes against their cap at one moment."""

    current: int
    limit: int
    # forks the cap refused since the cgroup was made (pids.events "max"); None where nothing counts them
    refused: int | None

    @property
    def at_cap(self) -> bool:
        return self.current >= self.limit - AT_CAP_SLACK


def process_count(ws: Workspace) -> ProcessCount | None:
    """The workspace's pids cgroup (pids.current of pids.max), or its uid's processes under rlimits.

    None when there is nothing to count (no shell has made the cgroup, or it has no cap) or
    when it cannot be read: this feeds an offer to the candidate, never a reason to fail.
    Cheap under a cgroup (three small reads, no walk of the mounts as _cgroups makes): an
    attached terminal calls it every half second.
    """
    try:
        caps = detect(CAPS_MODE, "bwrap")
    except CapsUnavailable:
        return None
    if caps.mode == "rlimit":
        return ProcessCount(len(_uid_processes(ws.uid)), _rlimits(ws, [])[1], None)
    # the pids cgroup of _cgroups: its own hierarchy under cgroup v1, the one folder under v2
    parent = caps.pids_parent or caps.memory_parent
    if parent is None:
        return None
    path = parent / _cgroup_name(ws)
    current, limit = _read_int(path / "pids.current"), _read_int(path / "pids.max")  # "max": no cap
    if current is None or limit is None:
        return None
    return ProcessCount(current, limit, _read_keys(path / "pids.events").get("max", 0))


class CapWatch:
    """From counts taken over time, whether the workspace's processes are pinned at their cap (a fork bomb).

    Pinned: at the cap in every count for ``hold_s``, and a fork refused since the last count below
    it (or ever, for the first counts a watch sees: the page may come back to a bomb that started
    before it). Free again: below the cap in every count for ``hold_s``. No count is below the cap.
    """

    def __init__(self, hold_s: float = PINNED_S) -> None:
        self.hold_s = hold_s
        self.pinned = False
        self._since: float | None = None  # when the counts began to say otherwise than ``pinned``
        self._refused_below = 0  # refused forks at the last count below the cap

    def add(self, count: ProcessCount | None, now: float) -> bool:
        """Take one count (made at ``now``, in seconds of a monotonic clock); returns ``pinned``."""
        at_cap = count is not None and count.at_cap
        if count is not None and not at_cap:
            self._refused_below = count.refused or 0
        if at_cap == self.pinned:
            self._since = None
            return self.pinned
        if self._since is None:
            self._since = now
        refused = at_cap and count is not None and (count.refused is None or count.refused > self._refused_below)
        if now - self._since >= self.hold_s and (self.pinned or refused):
            self.pinned, self._since = at_cap, None
        return self.pinned


# -- the sandbox ----------------------------------------------------------------------


def _enter(cgroups: list[Path]) -> list[str]:
    if not cgroups:
        return []
    return [SH, "-c", ENTER_CGROUP, "enter-cgroup", *(str(c / "cgroup.procs") for c in cgroups), "--"]


def _check_tools(ws: Workspace) -> tuple[Path, Path]:
    for tool, package in (
        (BWRAP, "bubblewrap"),
        (SETPRIV, "util-linux"),
        (PRLIMIT, "util-linux"),
        (TMUX, "tmux"),
        (BASH, "bash"),
    ):
        if not os.access(tool, os.X_OK):
            raise WorkspaceUnavailable(f"{tool} is missing: install it with 'apt-get install {package}'")
    runner = Path(ws.runner_dir).resolve()
    if not (runner / "bin" / "python").exists():
        raise WorkspaceUnavailable(f"no runner venv at {runner}: build it with 'python manage.py build_runner'")
    try:
        sandboxed = _sandboxed_copy(Path(ws.folder).resolve().parent)
    except OSError as exc:
        raise WorkspaceUnavailable(
            f"could not copy grading/engine/sandbox/sandboxed next to {ws.folder}: {exc}"
        ) from None
    return runner, sandboxed


def _argv(ws: Workspace, cgroups: list[Path], command: list[str], *, new_session: bool) -> list[str]:
    """The command line of one sandbox of the workspace, joining its cgroups first."""
    runner, sandboxed = _check_tools(ws)
    lim = ws.limits
    folder = Path(ws.folder).resolve()
    address_space, nproc = _rlimits(ws, cgroups)
    # each option beside its values, as env, prlimit, setpriv and bwrap read them
    # fmt: off
    return [
        *_enter(cgroups),
        # why env -i: bwrap's own pid 1 would otherwise show the server's environment.
        ENV, "-i",
        PRLIMIT, f"--as={address_space}", f"--nproc={nproc}", f"--fsize={lim.file_size_bytes}",
        f"--nofile={lim.nofile}", "--core=0",
        # why an unprivileged uid with no caps: launched by root, RLIMIT_NPROC is not enforced.
        SETPRIV, f"--reuid={ws.uid}", f"--regid={ws.uid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
        BWRAP,
        "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
        *(["--new-session"] if new_session else []),
        # why: bwrap's own init would outlive the outer bwrap as a zombie of the
        # host's pid 1, counted against the uid's RLIMIT_NPROC until reaped. tmux
        # is pid 1 instead: it reaps its children, and when it ends the kernel
        # ends everything left in the namespace.
        "--as-pid-1",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
        # why only these of /etc: the loader cache, Debian's alternatives (links
        # only: /usr/bin/vim and vi go through them), a passwd naming the user (bash,
        # vim, python's getpass), and our shell and tmux settings; no shadow, hosts, keys.
        "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
        "--ro-bind", str(folder / "etc" / "passwd"), "/etc/passwd",
        "--ro-bind", str(folder / "etc" / "group"), "/etc/group",
        "--ro-bind", str(folder / "etc" / "bash.bashrc"), "/etc/bash.bashrc",
        "--ro-bind", str(folder / "etc" / "tmux.conf"), "/etc/tmux.conf",
        "--ro-bind", str(runner), RUNNER_IN_SANDBOX,
        *interpreter_binds(runner),
        "--ro-bind", str(sandboxed), SANDBOXED_IN_SANDBOX,
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(lim.shm_bytes), "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",
        "--size", str(lim.tmp_bytes), "--tmpfs", "/tmp",
        "--dir", HOME_IN_SANDBOX,
        "--bind", str(folder / "home"), WORKSPACE_IN_SANDBOX,
        "--bind", str(folder / "tmux"), TMUX_DIR_IN_SANDBOX,
        # why read-only: the candidate reaches the gate's socket and nothing else of the host's.
        "--ro-bind", str(folder / "gate"), GATE_DIR_IN_SANDBOX,
        "--remount-ro", "/",
        "--chdir", WORKSPACE_IN_SANDBOX,
        "--setenv", "PATH", f"{SANDBOXED_IN_SANDBOX}/bin:{RUNNER_IN_SANDBOX}/bin:/usr/bin:/bin",
        "--setenv", "HOME", HOME_IN_SANDBOX,
        "--setenv", "USER", "candidate",
        "--setenv", "LOGNAME", "candidate",
        "--setenv", "SHELL", BASH,
        "--setenv", "TERM", TERM,
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "EDITOR", "nano",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "TAKEHOME_GATE_SOCKET", GATE_SOCKET,
        *command,
    ]
    # fmt: on


def _pid_file(ws: Workspace) -> Path:
    return ws.part("shell.pid")


def _shell_pid(ws: Workspace) -> int | None:
    """The pid of the shell's bwrap, if it still runs (pid and start time both match)."""
    try:
        pid, started = (int(x) for x in _pid_file(ws).read_text().split())
    except (OSError, ValueError):
        return None
    if _start_time(pid) != started:
        return None
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            state = next(line for line in fh if line.startswith(b"State:")).split()[1]
    except (OSError, StopIteration):
        return None
    return None if state in (b"Z", b"X") else pid


def shell_running(ws: Workspace) -> bool:
    return _shell_pid(ws) is not None


def start_shell(ws: Workspace) -> None:
    """Start the workspace's tmux server and shell (detached: it outlives the caller); idempotent."""
    with _locked(ws):
        if (pid := _shell_pid(ws)) is not None:
            if not os.path.lexists(ws.part("tmux") / "sock"):
                # the candidate removed tmux's socket: SIGUSR1 makes the server create it again
                _kill_signal(_children(pid), signal.SIGUSR1)
                _wait_for_socket(ws, None)
            return
        if not _is_mounted(ws.home):
            raise WorkspaceUnavailable(f"the workspace {ws.folder} is not open (open_workspace first)")
        _end_processes(ws)  # a shell that ended leaves nothing behind to count against the caps
        _mount_run(ws)  # a fresh one: what the last shell left in /run/tmux is gone
        cgroups = _cgroups(ws, create=True)
        argv = _argv(ws, cgroups, [TMUX, "-D", "-S", TMUX_SOCKET, "-f", "/etc/tmux.conf"], new_session=True)
        # why a new session, no pipes and no --die-with-parent: the web server may
        # restart; the shell must not notice. A thread reaps it while we live.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        threading.Thread(target=proc.wait, name=f"workspace-{ws.uid}", daemon=True).start()
        _write_atomic(_pid_file(ws), f"{proc.pid} {_start_time(proc.pid)}\n".encode(), 0o644)
        _wait_for_socket(ws, proc)
        _run_config(ws, cgroups)


def _mount_run(ws: Workspace) -> None:
    """Mount a new, empty tmux/ for a shell that starts (a capped tmpfs of the uid's), the last one's gone."""
    _umount_run(ws)
    lim = ws.limits
    try:
        _mount_tmpfs(ws.part("tmux"), lim.run_bytes, lim.run_inodes, ws.uid)
    except OSError as exc:
        raise WorkspaceUnavailable(
            f"cannot mount the tmpfs of tmux's socket at {ws.part('tmux')}: "
            f"{exc.strerror or exc} (the server must run as root, with permission "
            "to mount)"
        ) from None


def _umount_run(ws: Workspace) -> None:
    """Unmount tmux/ (every layer, should one have been mounted twice); what was in it is gone."""
    path = ws.part("tmux")
    while _is_mounted(path):
        _umount(path)


def _run_config(ws: Workspace, cgroups: list[Path]) -> None:
    """Have the new server run its config (our options, then the session and its shell) before any client.

    why: a server started with -D runs its config when its first client arrives; two
    clients arriving together (the page's history and its terminal) both ran it, and
    one got a session of tmux's defaults (a status bar, a login shell without our
    prompt) and "Duplicate session". One client of ours, here, under the lock, runs it once.
    """
    argv = _argv(ws, cgroups, [TMUX, "-N", "-S", TMUX_SOCKET, "has-session", "-t", SESSION], new_session=True)
    try:
        subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=HISTORY_WAIT_S,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass  # the client that attaches next runs the config instead


def _wait_for_socket(ws: Workspace, proc: subprocess.Popen | None, wait_s: float = 5) -> None:
    """Wait until tmux listens (its socket exists); a shell that does not start is our failure."""
    deadline = time.monotonic() + wait_s
    while not os.path.lexists(ws.part("tmux") / "sock"):
        ended = proc.poll() is not None if proc else not shell_running(ws)
        if ended or time.monotonic() > deadline:
            _end_processes(ws)
            raise WorkspaceUnavailable(
                f"the workspace's shell did not start (exit {proc and proc.poll()}): "
                "is bubblewrap working? (manage.py check); the next visit starts it again"
            )
        time.sleep(0.01)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _parent(pid: int) -> int | None:
    return st[1] if (st := _stat(pid)) else None


def _live(pids) -> set[int]:
    """Those of ``pids`` that still run (a zombie runs nothing; its parent reaps it)."""
    return {p for p in pids if (st := _stat(p)) and st[0] not in ("Z", "X")}


def _kill(pids: list[int]) -> None:
    _kill_signal(pids, signal.SIGKILL)


def _kill_signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _end_processes(ws: Workspace, wait_s: float = 1.0) -> None:
    """SIGKILL every process of the workspace, found by its cgroups and by its uid.

    why inside first: each sandbox is an outer bwrap (our child) over the
    namespace's init. Killed together, the init is orphaned to the host's pid 1,
    and its zombie counts against the uid's RLIMIT_NPROC until that reaps it
    (slowly, or never without a real init). Killed first, the namespace ends
    inside, and the outer bwrap exits by itself and is reaped by its parent.
    """
    cgroups = _cgroups(ws, create=False)
    deadline = time.monotonic() + wait_s
    while True:
        pids = _live(_cgroup_procs(cgroups)) | set(_uid_processes(ws.uid))
        if not pids:
            break
        inner = [p for p in pids if _parent(p) in pids]
        if inner and time.monotonic() < deadline:
            _kill(inner)
        elif time.monotonic() >= deadline:
            _kill(sorted(pids))  # an outer bwrap that did not end by itself
        time.sleep(0.01)
        if time.monotonic() > deadline + 2:
            break
    _kill_uid(ws.uid)
    for cgroup in cgroups:
        try:
            _remove_cgroup(cgroup)
        except OSError:
            pass


def stop_shell(ws: Workspace) -> None:
    """End every process of the workspace (shell, tmux, clients); the files stay. Idempotent."""
    if not Path(ws.folder).is_dir():
        _end_processes(ws)  # nothing of ours to lock; its uid's processes still end
        return
    with _locked(ws):
        _stop(ws)


def _stop(ws: Workspace) -> None:
    _end_processes(ws)
    _umount_run(ws)  # why: no shell, no socket; nothing a candidate put there outlives the shell
    try:
        os.unlink(_pid_file(ws))
    except FileNotFoundError:
        pass


def release(ws: Workspace, *, stop: bool = True) -> SaveReport | None:
    """Stop the shell, save the files to saved.tar and unmount (an idle workspace). Idempotent.

    Returns the save's report (None when nothing was mounted). ``stop=False`` for a workspace
    closed since (frozen): its processes ended then, and its uid may be another workspace's
    now, whose processes must not be touched; its files are saved and unmounted only.
    """
    if not Path(ws.folder).is_dir():
        return None
    with _locked(ws):
        if stop:
            _stop(ws)
        if not _is_mounted(ws.home):
            return None
        report = save(ws)  # why first: a save that fails leaves the files mounted, not lost
        _umount(ws.home)
        return report


def freeze(ws: Workspace) -> None:
    """Stop the shell and make the files read-only for good (the deadline). Idempotent."""
    _workspace_folder(ws)
    with _locked(ws):
        _prepare_folder(ws)
        _stop(ws)
        _write_atomic(ws.part("frozen"), b"", 0o644)
        if _is_mounted(ws.home):
            opts = _mount_options(ws.home) or ""
            if "ro" not in opts.split(","):
                _remount(ws.home, read_only=True)


def thaw(ws: Workspace) -> SaveReport | None:
    """Undo ``freeze`` (the deadline was moved later): the next ``open_workspace`` mounts the files writable.

    The files stay as they were frozen: mounted ones are saved to saved.tar and unmounted
    first, because the next open may be under another uid (the frozen workspace gave its
    own back) and restores them as that uid's. No process is touched: a frozen workspace
    has none, and its old uid may be another workspace's now. A save that fails raises
    OSError and leaves the workspace frozen and mounted (nothing lost); returns the save's
    report, None when nothing was mounted. Idempotent.
    """
    if not Path(ws.folder).is_dir():
        return None
    with _locked(ws):
        report = None
        if _is_mounted(ws.home):
            report = save(ws)  # why before the mark goes: a save that fails leaves the workspace as it was
            _umount(ws.home)
        try:
            os.unlink(ws.part("frozen"))
        except FileNotFoundError:
            pass
        return report


# -- clients --------------------------------------------------------------------------


def _winsize(cols: int, rows: int) -> bytes:
    cols, rows = max(1, min(int(cols), MAX_SIDE)), max(1, min(int(rows), MAX_SIDE))
    return struct.pack("HHHH", rows, cols, 0, 0)


class Client:
    """A tmux client attached to the workspace's session, on a pty of its own."""

    def __init__(self, fd: int, proc: subprocess.Popen) -> None:
        self.fd, self.proc = fd, proc

    def resize(self, cols: int, rows: int) -> None:
        """Set the pty's size; the kernel tells the client (SIGWINCH), and tmux follows."""
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, _winsize(cols, rows))

    def close(self) -> None:
        """Detach: end the client (the shell runs on) and close the pty. Idempotent."""
        # why the hang-up first: the client then ends by itself, inside out; a
        # SIGKILL to its whole group would orphan the tmux client (see _end_processes).
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            _kill(_children(self.proc.pid))
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                _kill([self.proc.pid])
                self.proc.wait()


HISTORY_LINES = 2000  # lines of the pane's history a new client is sent before tmux draws the screen
HISTORY_WAIT_S = 5


def pane_history(ws: Workspace, lines: int = HISTORY_LINES) -> str:
    """The shell's pane history (the lines above its screen, with their colours), for a client's scrollback.

    why: a client that attaches gets tmux's redraw of the screen only; the browser's terminal
    keeps what scrolls off in its own scrollback, so after a reload the history is sent first.
    Runs tmux capture-pane in a sandbox of the same kind, under the workspace's uid. "" when there
    is no shell or no history: a scrollback is a help, never a reason to refuse the terminal.

    why the history's size first: with none, tmux clamps ``-E -1`` to the screen's first line and
    captures that, which the redraw then shows a second time (the first command line, twice).
    """
    if not shell_running(ws):
        return ""
    cgroups = _cgroups(ws, create=True)
    # fmt: off
    argv = _argv(ws, cgroups, [TMUX, "-N", "-S", TMUX_SOCKET, "display-message", "-p", "-t", SESSION,
                               "#{history_size}", ";", "capture-pane", "-p", "-e", "-J",
                               "-S", f"-{max(1, int(lines))}", "-E", "-1", "-t", SESSION], new_session=True)
    # fmt: on
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=HISTORY_WAIT_S,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if done.returncode != 0:
        return ""
    size, _, history = done.stdout.decode("utf-8", "replace").partition("\n")
    if not size.strip().isdigit() or int(size) == 0:
        return ""
    return history.rstrip("\n")


def _children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _parent(int(name)) == pid:
            found.append(int(name))
    return found


def spawn_client(ws: Workspace, cols: int, rows: int) -> Client:
    """A tmux client (attach, creating the session if the shell had ended) in a sandbox of the same kind."""
    start_shell(ws)
    cgroups = _cgroups(ws, create=True)
    master, slave = pty.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, _winsize(cols, rows))
        # why setsid --ctty inside, and no bwrap --new-session: the pty becomes the
        # tmux client's controlling terminal, so a resize reaches it as SIGWINCH and
        # a hang-up (our side closed) as SIGHUP; the pty is the candidate's own, so
        # TIOCSTI on it reaches only their own shell. Outside, bwrap is in a session
        # of its own without a terminal, so the hang-up does not end it before tmux.
        # why no --die-with-parent: its signal follows the thread that spawned the
        # client, and a web server's worker thread may end before the page does;
        # our side of the pty closes with our process in any case.
        # why -N: a shell that ended just now must not be replaced by a server inside
        # the client's sandbox (it would die with the client); the client ends instead.
        # fmt: off
        argv = _argv(ws, cgroups, ["/usr/bin/setsid", "--ctty", TMUX, "-N", "-S", TMUX_SOCKET, "-f",
                                   "/etc/tmux.conf", "new-session", "-A", "-s", SESSION, "-c", WORKSPACE_IN_SANDBOX],
                     new_session=False)
        # fmt: on
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True, start_new_session=True)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    return Client(master, proc)


__all__ = [
    "GATE_SOCKET",
    "CapWatch",
    "Client",
    "ProcessCount",
    "SaveReport",
    "Workspace",
    "WorkspaceLimits",
    "WorkspaceTooBig",
    "WorkspaceUnavailable",
    "freeze",
    "open_workspace",
    "pane_history",
    "process_count",
    "release",
    "save",
    "shell_running",
    "snapshot_files",
    "spawn_client",
    "start_shell",
    "stop_shell",
]
