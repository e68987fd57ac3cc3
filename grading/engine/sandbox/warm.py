"""Warm sandboxes: each process keeps a few sandboxes started exactly as a cold run's, pytest imported,
each waiting for one run; a cold run that finds no free uid asks the pools for one back.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .cgroups import (
    CapsUnavailable,
    RunCaps,
)
from .layout import LOCK_DIR, PYTEST_BOOT, SANDBOXED_IN_SANDBOX
from .processes import _close, _ended, _Fds, _kill_group, _kill_uid, _output
from .results import SandboxUnavailable

if TYPE_CHECKING:
    from . import Sandbox

logger = logging.getLogger(__name__)


# The warm sandbox's command: -P as in the cold path's boot (no script folder on sys.path).
WARM_STARTER = ("python", "-P", f"{SANDBOXED_IN_SANDBOX}/takehome_starter.py")


WARM_POLL_S = 0.1


WARM_REFILL_AFTER_S = 1.0  # why: refilling while a grading runs would take CPU from its runs


WARM_HOLD_S = 2.0  # no refill for this long after a cold run asked for a uid


# why: a packet environment graded once must not keep sandboxes for ever; the
# worker's shared runner (start_warm_sandboxes) is always kept.
WARM_FORGET_S = 3600.0


# why: the idle time counts from when pytest is imported; a sandbox still starting is not idle, and on a
# loaded machine a start may take longer than the idle time. One not ready after this long is stuck.
WARM_START_S = 60.0


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
    imported_at: float = 0.0  # time.monotonic() when it was seen ready

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
                self.imported_at = time.monotonic()
                self.caps.detach_mounts()  # bwrap bound them long before (see RunCaps.detach_mounts)
        return self.imported

    def expired(self, idle_s: float, now: float) -> bool:
        """Ended, ready and unused for ``idle_s``, or still not ready WARM_START_S (or ``idle_s``) after its start."""
        if not self.alive():
            return True
        if self.warmed():
            return now - self.imported_at >= idle_s
        return now - self.started >= max(idle_s, WARM_START_S)

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
                if warm.expired(self.sandbox.warm_idle_s, time.monotonic()):
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
            for warm in self.ready:  # expired() also detaches the mounts of one just ready (warmed())
                (ending if warm.expired(self.sandbox.warm_idle_s, now) else keep).append(warm)
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
