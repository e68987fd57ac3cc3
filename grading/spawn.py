"""Starting a sandbox's first process under the run's uid with no program of its own (setpriv's work, done here).

A sandbox's first process, bwrap, must start as the run's unprivileged uid,
with its gid, no supplementary groups and no capabilities. ``setpriv`` did
that: one more program started for every run, about 1.5 ms of a cold start
(0.6 of it glibc looking the numeric ids up by name through its systemd
module). Here one thread of the worker takes the run's ids for itself,
spawns the process, which inherits them, and takes root's back.

Linux keeps credentials per thread; the raw system calls used here change
only the calling thread's (glibc's own wrappers would change every thread of
the process). The thread keeps its saved uid 0, so it may take root back;
the spawned process then execs bwrap, which leaves it with real, effective
and saved ids all the run's and no capabilities at all (bwrap has no file
capabilities, and the exec of a non-root program drops the permitted set the
saved uid kept). bwrap itself sets no_new_privs before anything else, as
setpriv's ``--no-new-privs`` did; setpriv's ``--inh-caps=-all`` is not needed
where the worker holds no inheritable capabilities, and where it does this
is not used (below). Its ``--bounding-set=-all`` only ever mattered to a
process that could gain capabilities through an exec, which no_new_privs
forbids; bwrap clears the sandbox's own bounding set inside.

why one thread for this, made once per process and kept: Python runs signal
handlers only in the main thread, so nothing asynchronous (a Celery time
limit, a KeyboardInterrupt) can fall between taking the ids and giving them
back; and bwrap's ``--die-with-parent`` watches the thread that started it,
which must outlive the sandbox.

It is used only where that is sure (``unavailable()`` says why not): the
worker is root, holds no inheritable capabilities, and runs on an
architecture whose system call numbers are known here. Elsewhere the sandbox
starts setpriv as before.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
import queue
import subprocess
import threading
from collections.abc import Sequence

log = logging.getLogger(__name__)

# (setgroups, setresgid, setresuid): the kernel's numbers, per architecture.
_NUMBERS = {"x86_64": (116, 119, 117), "aarch64": (159, 149, 147)}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args) -> None:
    if _libc.syscall(ctypes.c_long(number), *args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _drop_ids(uid: int, gid: int) -> None:
    """This thread takes ``uid`` and ``gid`` (real and effective) and no groups; its saved ids stay root's."""
    setgroups, setresgid, setresuid = _NUMBERS[platform.machine()]
    _syscall(setgroups, ctypes.c_size_t(0), None)
    _syscall(setresgid, ctypes.c_uint(gid), ctypes.c_uint(gid), ctypes.c_uint(0))
    # last: with its effective uid no longer 0 the thread has no effective capabilities
    _syscall(setresuid, ctypes.c_uint(uid), ctypes.c_uint(uid), ctypes.c_uint(0))


def _take_back(groups: Sequence[int]) -> None:
    """This thread takes root's ids back (allowed by its saved uid 0, which brings the capabilities back first)."""
    setgroups, setresgid, setresuid = _NUMBERS[platform.machine()]
    _syscall(setresuid, ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_uint(0))
    _syscall(setresgid, ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_uint(0))
    array = (ctypes.c_uint * max(1, len(groups)))(*groups)
    _syscall(setgroups, ctypes.c_size_t(len(groups)), array)


def _inheritable_caps() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("CapInh:"):
                return int(line.split()[1], 16)
    return 0


@functools.cache
def _unavailable(pid: int) -> str | None:
    machine = platform.machine()
    if machine not in _NUMBERS:
        return f"no system call numbers known for {machine}"
    if os.getresuid() != (0, 0, 0) or os.getresgid() != (0, 0, 0):
        return "the worker is not root"
    try:
        if _inheritable_caps():
            return "the worker holds inheritable capabilities (setpriv clears them)"
    except (OSError, ValueError):
        return "the worker's capabilities cannot be read"
    return None


def unavailable() -> str | None:
    """Why a process cannot be started under another uid here (setpriv is used then); None where it can."""
    if _spawner is not None and _spawner.pid == os.getpid() and _spawner.broken:
        return "the spawning thread could not take root's ids back"
    return _unavailable(os.getpid())


class _Spawner:
    """The thread that starts every such process of this process, one at a time."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.broken = False
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.groups = os.getgroups()
        threading.Thread(target=self._loop, name="takehome-spawn", daemon=True).start()

    def popen(self, uid: int, gid: int, argv: Sequence[str], kwargs: dict) -> subprocess.Popen:
        done = threading.Event()
        box: dict = {}
        self.requests.put((uid, gid, argv, kwargs, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["proc"]

    def _loop(self) -> None:
        while True:
            uid, gid, argv, kwargs, box, done = self.requests.get()
            try:
                box["proc"] = self._spawn(uid, gid, argv, kwargs)
            except BaseException as exc:  # why: the caller's thread raises it, not this one
                box["error"] = exc
            finally:
                done.set()

    def _spawn(self, uid: int, gid: int, argv: Sequence[str], kwargs: dict) -> subprocess.Popen:
        if self.broken:
            raise OSError("the spawning thread could not take root's ids back")
        try:
            _drop_ids(uid, gid)
            return subprocess.Popen(argv, **kwargs)
        finally:
            try:
                _take_back(self.groups)
            except OSError as exc:
                log.critical("the sandbox's spawning thread could not take root's ids back: %s", exc)
            if os.getresuid() != (0, 0, 0) or os.getresgid() != (0, 0, 0) or os.getgroups() != self.groups:
                # why: this thread stays as it is (its sandboxes watch it), and nothing starts from it again
                self.broken = True


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _after_fork() -> None:
    global _spawner_lock
    _spawner_lock = threading.Lock()  # why: another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork)


def popen_as(uid: int, gid: int, argv: Sequence[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(argv, **kwargs)`` started under ``uid`` and ``gid``, with no supplementary groups.

    Only where ``unavailable()`` is None. The process has no capabilities
    once it has exec'd ``argv[0]`` (a program without file capabilities);
    between the spawn and that exec only Python's own child code runs.
    """
    global _spawner
    with _spawner_lock:
        # why per pid: a forked worker process has no copy of its parent's thread
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.popen(uid, gid, argv, kwargs)
