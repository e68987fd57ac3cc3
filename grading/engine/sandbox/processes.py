"""The processes of a run: launching bwrap with its pipes, finding its child, reading its output within caps,
and killing everything of a uid.
"""

from __future__ import annotations

import logging
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .layout import SETPRIV, WITNESS_MAX_BYTES
from .results import JUNIT_MAX_BYTES, SandboxUnavailable

logger = logging.getLogger(__name__)


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
    return child if _parent_pid(child) == bwrap_pid else None


def _parent_pid(pid: int) -> int | None:
    """The parent's pid of a process, from /proc (after the command's name, which may hold anything); None if
    it has ended."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


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
