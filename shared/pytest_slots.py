"""Each test process gets a slot of its own: uids, ports, folders and a Redis database no other one uses.

The suite runs in several processes at once (pytest-xdist's workers), and a
second suite may run beside it on the same machine. What they would share
otherwise, and how a slot keeps it apart:

- the sandbox's uids: the grading pool's and the workspaces' bases move to a
  band of the slot's own (the workspaces' uids are handed out from the
  database, which each process has its own copy of, so two processes would
  hand out the same uid to two shells);
- ports for the servers the tests start (``free_port`` in conftest.py takes
  them from the slot's band, below the kernel's ephemeral range);
- the scratch, workspace and media folders;
- a broker on the machine's Redis (CI's second pass): each slot uses a
  database number of its own, so one process's worker never takes another
  one's task.

A slot is claimed by holding an exclusive flock on its file for the life of
the process, so a process that dies frees it. The settings enter it under
pytest, before they read any variable (pytest-django imports them before any
conftest.py runs); the servers and workers the tests start inherit the
environment, and with it the slot.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SLOTS = 16  # Redis has 16 databases by default: one each
UID_BAND = 70000  # above the defaults (62000 grading, 63000 workspaces)
UIDS_PER_SLOT = 1000
WORKSPACE_UID_OFFSET = 100  # the grading pool takes [0, 100) of a slot's band, the workspaces [100, 600)
# The pools a test file runs sandboxes or shells under for itself, each [offset, offset + 20) of its slot's
# band, above the settings' two (a test that counts a pool's processes sees only its own file's).
TEST_POOLS = {name: 600 + 20 * number for number, name in enumerate((
    "sandbox", "sandbox_caps", "spawn", "warm_sandbox", "bench_grading", "envs", "worker_faults", "workspace",
    "workspace_gate", "hosted_shell", "hosted_cleanup", "terminal_stuck", "bench_sessions", "bench_sessions_shell",
    "terminal_page_fixes", "editing"))}
TEST_POOL_SIZE = 20
PORT_BAND = 20000  # below Linux's ephemeral ports (32768 and up)
PORTS_PER_SLOT = 500

_held = None  # the open lock file: closing it (or exiting) frees the slot
slot: int | None = None


def _lock_dir() -> Path:
    for folder in (Path("/run/lock"), Path(tempfile.gettempdir())):
        if os.access(folder, os.W_OK):
            path = folder / "takehome-test-slots"
            path.mkdir(mode=0o1777, exist_ok=True)
            return path
    raise RuntimeError("no writable folder for the test slots' lock files (/run/lock or the temp folder)")


def claim() -> int:
    """The first free slot, held until this process exits."""
    global _held, slot
    if slot is not None:
        return slot
    from grading.engine.sandbox import flock_free

    folder = _lock_dir()
    free = flock_free(((number, folder / f"slot-{number}.lock") for number in range(SLOTS)), 1)
    if free:
        [(slot, _held)] = free
        return slot
    raise RuntimeError(f"all {SLOTS} test slots are taken: at most {SLOTS} test processes run on one machine")


def number() -> int:
    """This process's slot (claimed now if it has none yet)."""
    return int(os.environ.get("TAKEHOME_TEST_SLOT") or claim())


def ports() -> range:
    """This process's ports: nothing else on the machine that follows the slots takes them."""
    start = PORT_BAND + number() * PORTS_PER_SLOT
    return range(start, start + PORTS_PER_SLOT)


def uids(pool: str) -> int:
    """The first of the TEST_POOL_SIZE uids the named test pool has in this process's slot."""
    return UID_BAND + number() * UIDS_PER_SLOT + TEST_POOLS[pool]


TEST_WARM_SANDBOXES = 1


def _with_database(url: str, number: int) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url
    return urlunsplit(parts._replace(path=f"/{number}"))


def environment(number: int, var_dir: Path) -> dict[str, str]:
    base = UID_BAND + number * UIDS_PER_SLOT
    folder = var_dir / "test-slots" / str(number)
    env = {
        "TAKEHOME_SANDBOX_UID_BASE": str(base),
        "TAKEHOME_WORKSPACE_UID_BASE": str(base + WORKSPACE_UID_OFFSET),
        "TAKEHOME_SCRATCH_DIR": str(folder / "scratch"),
        "TAKEHOME_WORKSPACES_DIR": str(folder / "workspaces"),
        # why: recordings are stored by invitation id, which every test process's database hands out from 1
        "TAKEHOME_MEDIA_ROOT": str(folder / "media"),
        "TAKEHOME_TEST_SLOT": str(number),
    }
    broker = os.environ.get("CELERY_BROKER_URL")
    if broker:
        env["CELERY_BROKER_URL"] = _with_database(broker, number)
    # why fewer warm sandboxes than a worker's six: the suite starts dozens of workers and stacks, and grades in
    # its own processes, each keeping its pool full; one still sends a grading's first run through the warm
    # path, and the rest was CPU spent starting sandboxes no test took. A value given to the run is kept.
    env["TAKEHOME_WARM_SANDBOXES"] = os.environ.get("TAKEHOME_WARM_SANDBOXES", str(TEST_WARM_SANDBOXES))
    return env


def _xdist_worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def enter(default_var_dir: Path) -> None:
    """Claim a slot and put its settings into the environment; nothing when this process inherited one
    from the test process that started it (a server or a worker a test runs goes on in its test's slot).

    why the xdist worker's name beside the slot: pytest-xdist's workers inherit the environment of the
    process that started them, which claimed a slot of its own to collect the tests; each worker takes
    one of its own, and everything it starts inherits that one.
    """
    if os.environ.get("TAKEHOME_TEST_SLOT") and os.environ.get("TAKEHOME_TEST_SLOT_WORKER", "") == _xdist_worker():
        return
    from grading.engine.runner import sandbox_home

    number = claim()
    var_dir = Path(os.environ.get("TAKEHOME_VAR_DIR") or default_var_dir).resolve()
    for name, value in environment(number, sandbox_home(var_dir)).items():
        os.environ[name] = value
    os.environ["TAKEHOME_TEST_SLOT_WORKER"] = _xdist_worker()


def describe() -> str:
    number = int(os.environ["TAKEHOME_TEST_SLOT"])
    start = PORT_BAND + number * PORTS_PER_SLOT
    return (f"test slot {number}: uids from {UID_BAND + number * UIDS_PER_SLOT}, "
            f"ports {start}-{start + PORTS_PER_SLOT - 1}")
