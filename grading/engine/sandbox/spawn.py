"""Starting a sandbox's first process under the run's uid with no program of its own (setpriv's work, done here).

A sandbox's first process, bwrap, must start as the run's unprivileged uid,
with its gid, no supplementary groups, no capabilities and no_new_privs.
``setpriv`` did that: one more program started for every run, about 1.5 ms of
a cold start (0.6 of it glibc looking the numeric ids up by name through its
systemd module). Here one thread of the worker does setpriv's work on itself
and spawns the process, which inherits it, then takes root's ids back.

Linux keeps credentials, no_new_privs and the capability bounding set per
thread, and the raw system calls and prctl used here change only the calling
thread's (glibc's own setuid wrappers would change every thread of the
process). Once, when it starts, the thread sets no_new_privs and empties its
bounding and inheritable sets, for good: setpriv's ``--no-new-privs``,
``--bounding-set=-all`` and ``--inh-caps=-all``, which it never needs back
(it only ever spawns). For each spawn it takes the run's gid, uid and no
groups (keeping its saved uid 0), spawns, and takes root's ids back through
that saved uid. The spawned process then execs bwrap: with no_new_privs a
setuid or file-capability bwrap gains nothing, and the exec leaves real,
effective and saved ids all the run's and every capability set empty, as
under setpriv.

why one thread for this, made once per process and kept: Python runs signal
handlers only in the main thread, so no asynchronous exception (a Celery time
limit, a KeyboardInterrupt) can fall between taking the ids and giving them
back (the garbage collector, which could run other objects' finalizers there,
is held off for that moment); and bwrap's ``--die-with-parent`` watches the
thread that started it, which must outlive the sandbox. A caller interrupted
while it waits either withdraws its request before the thread takes it, or
waits for the spawn to finish and ends the process it made: no spawn ever runs
on a caller's pipes that are already closed.

It is used only where that is sure (``unavailable()`` says why not): the
worker is root on a 64-bit x86 or Arm whose system call numbers are known
here, the thread is an OS thread of its own (not a green thread of gevent or
eventlet, which would share its caller's: locust patches threading so), and
it could harden itself as above. Elsewhere the sandbox
starts setpriv as before.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import platform
import queue
import signal
import subprocess
import threading
from collections.abc import Sequence

log = logging.getLogger(__name__)

# The kernel's system call numbers, per architecture (64-bit only).
_NUMBERS = {
    "x86_64": {"setgroups": 116, "setresgid": 119, "setresuid": 117, "capget": 125, "capset": 126},
    "aarch64": {"setgroups": 159, "setresgid": 149, "setresuid": 147, "capget": 90, "capset": 91},
}
PR_CAPBSET_DROP, PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 24, 3, 4, 38
_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _syscall(name: str, *args) -> int:
    number = _NUMBERS[platform.machine()][name]
    return _check(_libc.syscall(ctypes.c_long(number), *args), name)


def _prctl(option: int, arg: int = 0) -> int:
    return _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _harden_this_thread() -> None:
    """setpriv's --no-new-privs, --bounding-set=-all and --inh-caps=-all, on the calling thread, for good."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _syscall("capget", ctypes.byref(header), data)
    for half in data:
        half.inheritable = 0
    _syscall("capset", ctypes.byref(header), data)


def thread_status() -> dict[str, str]:
    """The calling thread's credentials as the kernel shows them (/proc/thread-self/status)."""
    with open("/proc/thread-self/status") as fh:
        fields = dict(line.split(":", 1) for line in fh.read().splitlines() if ":" in line)
    return {k: " ".join(v.split()) for k, v in fields.items()}


def _os_thread() -> str:
    """The calling OS thread, as the kernel names it ("<pid>/task/<tid>"); green threads share one."""
    return os.readlink("/proc/thread-self")


HARDENED = {"NoNewPrivs": "1", "CapBnd": "0" * 16, "CapInh": "0" * 16, "CapAmb": "0" * 16}


def _drop_ids(uid: int, gid: int) -> None:
    """This thread takes ``uid`` and ``gid`` (real and effective) and no groups; its saved ids stay root's."""
    _syscall("setgroups", ctypes.c_size_t(0), None)
    _syscall("setresgid", ctypes.c_uint(gid), ctypes.c_uint(gid), ctypes.c_uint(0))
    # last: with its effective uid no longer 0 the thread has no effective capabilities
    _syscall("setresuid", ctypes.c_uint(uid), ctypes.c_uint(uid), ctypes.c_uint(0))


def _take_back(groups: Sequence[int]) -> None:
    """This thread takes root's ids back (allowed by its saved uid 0, which brings the capabilities back first)."""
    _syscall("setresuid", ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_uint(0))
    _syscall("setresgid", ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_uint(0))
    array = (ctypes.c_uint * max(1, len(groups)))(*groups)
    _syscall("setgroups", ctypes.c_size_t(len(groups)), array)


class _Request:
    """One process to start: queued, then taken by the thread (running), done; or withdrawn (cancelled)."""

    def __init__(self, uid: int, gid: int, argv: Sequence[str], kwargs: dict) -> None:
        self.uid, self.gid, self.argv, self.kwargs = uid, gid, argv, kwargs
        self.lock = threading.Lock()
        self.state = "queued"
        self.done = threading.Event()
        self.proc: subprocess.Popen | None = None
        self.error: BaseException | None = None


class _Spawner:
    """The thread that starts every such process of this process, one at a time."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.creator = _os_thread()
        self.groups = os.getgroups()
        self.broken: str | None = None  # why it may not be used (any more)
        self.status: dict[str, str] = {}  # the thread's own, once hardened
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(ready,), name="takehome-spawn", daemon=True)
        self.thread.start()
        ready.wait()

    def popen(self, uid: int, gid: int, argv: Sequence[str], kwargs: dict) -> subprocess.Popen:
        if self.broken:
            raise OSError(self.broken)
        request = _Request(uid, gid, argv, kwargs)
        try:
            # why inside: an interruption just after the put must still withdraw the request
            self.requests.put(request)
            self._wait(request)
        except BaseException:
            with request.lock:
                taken = request.state != "queued"
                if not taken:
                    request.state = "cancelled"  # the thread will skip it
            if taken:
                self._end_abandoned(request)
            raise
        if request.error is not None:
            raise request.error
        assert request.proc is not None  # done: the thread set either the process or the error
        return request.proc

    def _wait(self, request: _Request) -> None:
        while not request.done.wait(1.0):
            if not self.thread.is_alive():
                raise OSError("the sandbox's spawning thread is gone")

    def _end_abandoned(self, request: _Request) -> None:
        """Wait for a spawn whose caller was interrupted, whatever else comes, and end what it started."""
        while True:
            try:
                self._wait(request)
                break
            except OSError:
                return  # the thread is gone: nothing more will start
            except BaseException:
                continue  # why: the caller's pipes must outlive the spawn; the first interruption is raised
        if request.proc is not None:
            try:
                os.killpg(request.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            request.proc.wait()
            for stream in (request.proc.stdin, request.proc.stdout, request.proc.stderr):
                if stream is not None:
                    stream.close()

    def _loop(self, ready: threading.Event) -> None:
        try:
            if _os_thread() == self.creator:
                # why: green threads (gevent's or eventlet's patching) share one OS thread, so hardening
                # and the uid window would be the whole program's, and others would run inside the window
                self.broken = (
                    "the spawning thread is not an OS thread of its own (threading is patched to green threads here)"
                )
                log.warning("sandbox: %s; setpriv starts bwrap instead", self.broken)
                return
            _harden_this_thread()
            self.status = thread_status()
            if any(self.status.get(k) != v for k, v in HARDENED.items()):
                raise OSError(f"the thread's state stayed {self.status}")
        except OSError as exc:
            self.broken = f"the spawning thread could not drop what setpriv drops: {exc}"
            log.warning("sandbox: %s; setpriv starts bwrap instead", self.broken)
        finally:
            ready.set()
        while True:
            request = self.requests.get()
            with request.lock:
                if request.state == "cancelled":
                    continue
                request.state = "running"
            try:
                request.proc = self._spawn(request)
            except BaseException as exc:  # why: the caller's thread raises it, not this one
                request.error = exc
            finally:
                request.done.set()

    def _spawn(self, request: _Request) -> subprocess.Popen:
        if self.broken:
            raise OSError(self.broken)
        collecting = gc.isenabled()
        dumpable = _prctl(PR_GET_DUMPABLE)
        # why: a collection here would run other objects' finalizers under the run's uid
        gc.disable()
        try:
            _drop_ids(request.uid, request.gid)
            return subprocess.Popen(request.argv, **request.kwargs)
        finally:
            try:
                _take_back(self.groups)
                if _prctl(PR_GET_DUMPABLE) != dumpable:
                    _prctl(PR_SET_DUMPABLE, dumpable)  # why: a change of uid made the worker undumpable
            except OSError as exc:
                log.critical("the sandbox's spawning thread could not take root's ids back: %s", exc)
            if os.getresuid() != (0, 0, 0) or os.getresgid() != (0, 0, 0) or os.getgroups() != self.groups:
                # why: this thread stays as it is (its sandboxes watch it), and nothing starts from it again
                self.broken = "the spawning thread could not take root's ids back"
            if collecting:
                gc.enable()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _after_fork() -> None:
    global _spawner_lock
    _spawner_lock = threading.Lock()  # why: another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork)


def _this_process_spawner() -> _Spawner:
    global _spawner
    with _spawner_lock:
        # why per pid: a forked worker process has no copy of its parent's thread
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        return _spawner


def _static_reason() -> str | None:
    machine = platform.machine()
    if machine not in _NUMBERS or ctypes.sizeof(ctypes.c_void_p) != 8:
        return f"no system call numbers known for {machine} ({ctypes.sizeof(ctypes.c_void_p) * 8}-bit Python)"
    if os.getresuid() != (0, 0, 0) or os.getresgid() != (0, 0, 0):
        return "the worker is not root"
    return None


def unavailable() -> str | None:
    """Why a process cannot be started under another uid here (setpriv is used then); None where it can."""
    if (reason := _static_reason()) is not None:
        return reason
    return _this_process_spawner().broken


def popen_as(uid: int, gid: int, argv: Sequence[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(argv, **kwargs)`` started under ``uid`` and ``gid``, no groups, no_new_privs.

    Only where ``unavailable()`` is None. The process has no capabilities
    once it has exec'd ``argv[0]``; between the spawn and that exec only
    Python's own child code runs.
    """
    return _this_process_spawner().popen(uid, gid, argv, kwargs)
