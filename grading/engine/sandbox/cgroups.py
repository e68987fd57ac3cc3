"""Caps on one sandboxed run as a whole: total memory, processes, tmpfs inodes.

Plain Python, no Django. The sandbox's rlimits hold per process: four
children of one run each stayed under a 1 GiB RLIMIT_AS and together held
3.6 GiB, and bubblewrap's ``--tmpfs`` (0.8 has ``--size`` but no
``nr_inodes``) took 300,000 empty files. A run is therefore also capped as a
whole, by the strongest mechanism this machine offers (``detect``):

``cgroup2``
    a control group per run under ``<cgroup2 mount>/takehome/``:
    ``memory.max`` (no swap), ``pids.max``.
``cgroup1``
    one per run in the ``memory`` and ``pids`` v1 hierarchies, under
    ``takehome/``: ``memory.limit_in_bytes`` (and ``memsw``), ``pids.max``.
``rlimit``
    no writable cgroup (a container): per-process limits chosen so that
    RLIMIT_AS x RLIMIT_NPROC stays within the run's memory budget.

and, for the tmpfs mounts a sandbox writes to:

``mount``
    the worker (root) mounts a tmpfs per mount point and run with
    ``size=`` and ``nr_inodes=`` on the host, under ``mount_dir``, and the
    sandbox binds it; unmounted when the run ends.
``bwrap``
    mounting is not permitted: bubblewrap's own ``--size`` tmpfs, whose
    inode count is not capped (in a cgroup mode the kernel memory of each
    inode still counts against the run's memory cap).

Every process a run launches joins its cgroup before anything of the run's
starts: through ``RunCaps.wrap`` (an sh that joins, then execs), or, as the
sandbox does it, by the worker with ``RunCaps.join`` while the process waits
(grading/engine/sandbox/__init__.py, ``Sandbox._launch``). A typical run::

    caps = detect()                                 # once per process, cached
    with RunCaps(caps, RunBudget(memory_bytes=1 << 30, processes=64)) as run:
        as_bytes, nproc = run.rlimits()             # for ulimit or prlimit
        tmp = run.tmpfs("/tmp", 256 << 20, uid)     # bwrap arguments
        argv = run.wrap([prlimit, ..., bwrap, *tmp, ...])
        proc = subprocess.Popen(argv, env={}, ...)  # one more process: wrap it too
        run.detach_mounts()                         # optional, once bwrap has bound them
        ...
        report = run.report()                       # read before the block ends
    # leaving the block kills what is left in the cgroup, unmounts, removes it

Names carry their owner (pid namespace, pid, start time): a worker that was
killed leaves cgroups and mounts that ``clean_stale`` removes at the next
start, without touching those of live workers or test runs on the machine.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import logging
import os
import re
import secrets
import signal
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MODES = ("auto", "cgroup2", "cgroup1", "rlimit")
TMPFS_MODES = ("auto", "mount", "bwrap")
PARENT = "takehome"  # the folder in each hierarchy that holds the runs' cgroups
SH = "/bin/sh"
# Writes its own pid into each cgroup.procs given before "--", then execs the
# rest: the launched process (and all it forks) is in the run's cgroup before
# anything of the candidate's runs, without a preexec_fn in a threaded worker.
ENTER_CGROUP = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 126; shift; done; shift; exec "$@"'
# RLIMIT_NPROC stays as a backstop just above the cgroup's cap, so the cap a
# fork bomb meets is the cgroup's, which is counted and reported.
NPROC_MARGIN = 4
_NAME_RE = re.compile(r"^(run|probe|grade|sandbox)-(\d+)-(\d+)-(\d+)-[0-9a-f]+$")

MS_NOSUID, MS_NODEV, MNT_DETACH = 0x2, 0x4, 0x2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class CapsUnavailable(Exception):
    """The mode that was asked for cannot be used on this machine; the message says why."""


@dataclass(frozen=True)
class RunBudget:
    """What one run may use, all its processes together."""

    memory_bytes: int = 1 << 30
    processes: int = 64
    tmpfs_inodes: int = 16384  # files and folders per tmpfs
    # rlimit mode: how many processes a run may have; each gets memory_bytes // this
    fallback_processes: int = 8
    address_space_bytes: int = 1 << 30  # RLIMIT_AS of each process (also under a cgroup)

    def __post_init__(self) -> None:
        if (
            min(self.memory_bytes, self.processes, self.tmpfs_inodes, self.fallback_processes, self.address_space_bytes)
            < 1
        ):
            raise ValueError("every part of a run's budget must be positive")

    def fallback_rlimits(self) -> tuple[int, int]:
        """RLIMIT_AS and RLIMIT_NPROC without a cgroup: their product stays within memory_bytes.

        A uid's processes together can map at most RLIMIT_AS x RLIMIT_NPROC,
        and each run has a uid of its own.
        """
        k = min(self.processes, self.fallback_processes)
        return min(self.address_space_bytes, self.memory_bytes // k), k


@dataclass(frozen=True)
class Caps:
    """What this machine enforces, as found by :func:`detect`."""

    mode: str  # cgroup2 | cgroup1 | rlimit
    tmpfs: str  # mount | bwrap
    memory_parent: Path | None = None  # where the runs' cgroups go
    pids_parent: Path | None = None  # the same folder as memory_parent in cgroup2
    mount_dir: Path | None = None  # where the runs' tmpfs mounts go (mount mode)
    why: tuple[str, ...] = ()  # why a weaker mechanism is in force

    @property
    def parents(self) -> tuple[Path, ...]:
        return tuple(dict.fromkeys(p for p in (self.memory_parent, self.pids_parent) if p))

    def describe(self, budget: RunBudget) -> str:
        """One sentence for the worker's log and the packets page."""
        mib = budget.memory_bytes >> 20
        if self.mode == "rlimit":
            address_space, k = budget.fallback_rlimits()
            first = (
                f"per-process rlimits only: at most {k} processes x {address_space >> 20} MiB "
                f"address space (<= {mib} MiB per run)"
            )
        else:
            first = f"cgroup v{self.mode[-1]}: {mib} MiB memory and {budget.processes} processes per run"
        if self.tmpfs == "mount":
            second = f"tmpfs capped at {budget.tmpfs_inodes} inodes by per-run mounts"
        else:
            second = "tmpfs inodes not capped (bubblewrap's own tmpfs)"
        why = f" ({'; '.join(self.why)})" if self.why else ""
        return f"{first}; {second}{why}"


@dataclass(frozen=True)
class CapReport:
    """Which of a run's caps it ran into, read before its cgroup and mounts are gone."""

    memory_kills: int = 0  # processes the kernel killed at the memory cap
    memory_peak_bytes: int | None = None
    process_cap_hits: int = 0  # forks refused at the process cap
    full_tmpfs: tuple[tuple[str, str], ...] = ()  # (mount point in the sandbox, "inodes" | "space")

    @property
    def killed(self) -> bool:
        return self.memory_kills > 0

    def notes(self, budget: RunBudget) -> list[str]:
        notes = []
        if self.memory_kills:
            peak = f", peak {self.memory_peak_bytes >> 20} MiB" if self.memory_peak_bytes else ""
            notes.append(
                f"killed by the run's memory cap ({budget.memory_bytes >> 20} MiB across all its "
                f"processes{peak}): the kernel ended {self.memory_kills} process(es)"
            )
        if self.process_cap_hits:
            notes.append(
                f"reached the run's process cap ({budget.processes} processes): {self.process_cap_hits} fork(s) refused"
            )
        for where, what in self.full_tmpfs:
            if what == "inodes":
                notes.append(
                    f"{where} ran out of inodes (cap {budget.tmpfs_inodes} files and folders): "
                    "writes there failed with ENOSPC"
                )
            else:
                notes.append(f"{where} is full (its size cap): writes there failed with ENOSPC")
        return notes


# -- small helpers --------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read_keys(path: Path) -> dict[str, int]:
    """A flat-keyed cgroup file ("key value" lines) as a dict; {} when it is missing."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split() for line in lines)
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every mount this process sees."""
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 3:
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                found.append((point, rest[0], rest[2]))
    return found


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _pidns() -> int:
    return os.stat("/proc/self/ns/pid").st_ino


def owned_name(kind: str) -> str:
    """``kind-<pid namespace>-<pid>-<start time>-<random>``: unique, and says which process owns it.

    Cgroups and mounts are named so, and so are the scratch folders of a
    grading (``grade-``) and of a sandboxed run (``sandbox-``), so that what
    a killed worker left is told apart from what a live one is using.
    """
    pid = os.getpid()
    return f"{kind}-{_pidns()}-{pid}-{_start_time(pid)}-{secrets.token_hex(4)}"


def owner_gone(name: str) -> bool:
    """True when the process that made ``name`` no longer runs; False when alive or not ours to judge."""
    m = _NAME_RE.match(name)
    if not m or int(m.group(2)) != _pidns():
        return False  # another pid namespace's (another container's): its pids mean nothing here
    pid = int(m.group(3))
    if _start_time(pid) != int(m.group(4)):
        return True
    return _zombie(pid)  # why: a killed process not yet reaped keeps its entry, and holds nothing


def _zombie(pid: int) -> bool:
    """True when the process has ended and only waits to be reaped (state Z or X)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _mount_tmpfs(path: Path, size: int, inodes: int, uid: int) -> None:
    # why mode 0700 and the run's uid: the sandbox writes there, and no other
    # run's uid (nor any other user of the host) may look in.
    opts = f"size={size},nr_inodes={inodes},mode=0700,uid={uid},gid={uid}".encode()
    # why nosuid, nodev: nothing the candidate writes there may act as a device or gain privileges
    if _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))


def _umount(path: Path) -> None:
    if _libc.umount2(str(path).encode(), 0) == 0:
        return
    # busy (a process that outlived the kill still has a file open): detach now,
    # the kernel frees it with the last user
    if _libc.umount2(str(path).encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))


def _kill_members(cgroup: Path, wait_s: float = 2.0) -> None:
    """SIGKILL every process in ``cgroup`` until it is empty (or ``wait_s`` passes)."""
    if (cgroup / "cgroup.kill").exists():  # cgroup v2, Linux 5.14+: one write kills them all
        try:
            _write(cgroup / "cgroup.kill", "1")
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _remove_cgroup(cgroup: Path, wait_s: float = 2.0) -> None:
    """rmdir, retried while killed processes finish exiting (EBUSY)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.rmdir(cgroup)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
        _kill_members(cgroup, 0.0)
        time.sleep(0.01)


# -- detection ------------------------------------------------------------------


def _probe_cgroup(memory_parent: Path, pids_parent: Path, v2: bool) -> None:
    """Make a throwaway cgroup with both caps set, and remove it; raises OSError if anything is refused."""
    made = []
    try:
        for parent in dict.fromkeys((memory_parent, pids_parent)):
            path = parent / owned_name("probe")
            os.mkdir(path)
            made.append(path)
        _write(made[0] / ("memory.max" if v2 else "memory.limit_in_bytes"), str(64 << 20))
        _write(made[-1] / "pids.max", "16")
    finally:
        for path in made:
            os.rmdir(path)


def _detect_cgroup2() -> tuple[Path, Path]:
    """The parent folder for runs' cgroups in a cgroup2 hierarchy with memory and pids; raises CapsUnavailable."""
    seen = []
    for point, fstype, _ in _mounts():
        if fstype != "cgroup2":
            continue
        root = Path(point)
        try:
            controllers = set((root / "cgroup.controllers").read_text().split())
        except OSError:
            continue
        seen.append(f"{point} offers {' '.join(sorted(controllers)) or 'no controllers'}")
        if {"memory", "pids"} <= controllers:
            break
    else:
        raise CapsUnavailable(
            "no cgroup2 hierarchy offers memory and pids" + (f" ({'; '.join(seen)})" if seen else " (none mounted)")
        )
    try:
        _enable_controllers(root)
        parent = root / PARENT
        parent.mkdir(mode=0o755, exist_ok=True)
        if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
            _write(parent / "cgroup.subtree_control", "+memory +pids")
        _probe_cgroup(parent, parent, v2=True)
    except OSError as exc:
        raise CapsUnavailable(f"cgroup2 at {root} is not writable here: {exc}") from None
    return parent, parent


def _enable_controllers(root: Path) -> None:
    """Let children of the hierarchy's root (as this process sees it) use memory and pids."""
    control = root / "cgroup.subtree_control"
    missing = {"memory", "pids"} - set(control.read_text().split())
    if not missing:
        return
    wanted = " ".join(f"+{c}" for c in sorted(missing))
    try:
        _write(control, wanted)
    except OSError as exc:
        own = next(
            (line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::")),
            None,
        )
        if exc.errno != errno.EBUSY or own != "/":
            raise
        # A container's own cgroup (the root of its cgroup namespace) may not
        # hold processes and hand controllers to children at once ("no internal
        # processes"): move its processes into a leaf of their own first, as
        # container init systems do. Memory is still accounted to the container.
        leaf = root / f"{PARENT}-worker"
        leaf.mkdir(mode=0o755, exist_ok=True)
        for pid in (root / "cgroup.procs").read_text().split():
            try:
                _write(leaf / "cgroup.procs", pid)
            except OSError:
                pass  # exited meanwhile, or a kernel thread
        log.info("moved the processes of the container's cgroup into %s to enable memory and pids", leaf)
        _write(control, wanted)


def _detect_cgroup1() -> tuple[Path, Path]:
    """The parent folders for runs' cgroups in the memory and pids v1 hierarchies; raises CapsUnavailable."""
    roots: dict[str, Path] = {}
    for point, fstype, options in _mounts():
        if fstype == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options.split(",") and controller not in roots:
                    roots[controller] = Path(point)
    missing = [c for c in ("memory", "pids") if c not in roots]
    if missing:
        raise CapsUnavailable(f"no cgroup v1 hierarchy for {' and '.join(missing)}")
    try:
        parents = []
        for controller in ("memory", "pids"):
            parent = roots[controller] / PARENT
            parent.mkdir(mode=0o755, exist_ok=True)
            parents.append(parent)
        _probe_cgroup(parents[0], parents[1], v2=False)
    except OSError as exc:
        raise CapsUnavailable(f"cgroup v1 is not writable here: {exc}") from None
    return parents[0], parents[1]


def mount_dir_for(scratch: Path) -> Path:
    """Where the runs' mount points go for a sandbox whose scratch folder is ``scratch``.

    In /dev/shm when it is a tmpfs: a run makes and removes four folders, and
    on this project's machines' disks each mkdir or rmdir took 2 to 4 ms under
    load (a tmpfs: microseconds). One folder per scratch folder, so a test run
    and a worker on one machine keep apart.
    """
    return _in_memory(Path(scratch), "mounts") or Path(scratch).resolve() / "mounts"


def work_dir_for(scratch: Path, room: int = 0, make: bool = True) -> Path:
    """Where gradings unpack uploads for a worker whose scratch folder is ``scratch``.

    A folder of our own in /dev/shm when it is a tmpfs with at least ``room``
    bytes free (made, mode 0711, and checked: root's, not a link), else
    ``scratch`` itself: on the machines' disks each file written cost 0.5 to
    0.7 ms, against about 0.03 ms on a tmpfs, and an upload holds up to 2,000
    files. The upload caps (50 MiB inflated) bound the memory each grading
    holds there; a container's /dev/shm (64 MB by default in Docker) is too
    small for a few of them at once, and the disk is used instead. With
    ``make`` false, only the name of the folder in /dev/shm (for cleaning up).
    """
    folder = _in_memory(Path(scratch), "work")
    if folder is None or not make:
        return folder or Path(scratch)
    free = os.statvfs("/dev/shm")
    if free.f_bavail * free.f_frsize < room:
        return Path(scratch)
    try:
        _own_folder(folder)
    except (OSError, CapsUnavailable) as exc:
        log.warning("unpacking on disk, under %s: %s", scratch, exc)
        return Path(scratch)
    return folder


_IN_MEMORY: dict[tuple[str, str], Path | None] = {}


def _in_memory(scratch: Path, kind: str) -> Path | None:
    """/dev/shm/takehome-<kind>-<hash of scratch> when /dev/shm is a tmpfs, else None.

    why remembered: every run asks (mount_dir_for), and reading the mount
    table took 1 to 5 ms with a few hundred mounts (other runs' tmpfs) on the
    machine; what /dev/shm is does not change while a process runs.
    """
    key = (str(scratch), kind)
    if key not in _IN_MEMORY:
        folder = None
        if any(point == "/dev/shm" and fstype == "tmpfs" for point, fstype, _ in _mounts()):
            digest = hashlib.sha256(str(Path(scratch).resolve()).encode()).hexdigest()[:12]
            folder = Path("/dev/shm") / f"takehome-{kind}-{digest}"
        _IN_MEMORY[key] = folder
    return _IN_MEMORY[key]


def _own_folder(path: Path) -> None:
    """Make ``path`` (mode 0711), or check that it is root's own: a real folder nobody else may write."""
    path.mkdir(mode=0o711, parents=True, exist_ok=True)
    st = os.lstat(path)
    # why: /dev/shm is writable by every user; a folder or symlink planted there
    # under our name would let its owner swap a run's mount point.
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise CapsUnavailable(f"{path} is not a folder of our own (owner {st.st_uid}, mode {st.st_mode & 0o7777:o})")


def _detect_mount(mount_dir: Path | None) -> None:
    """Raise CapsUnavailable unless this process can mount a tmpfs with an inode cap under ``mount_dir``."""
    if mount_dir is None:
        raise CapsUnavailable("no folder for per-run mounts was given")
    if os.geteuid() != 0:
        raise CapsUnavailable("mounting a tmpfs needs root")
    probe = Path(mount_dir) / owned_name("probe")
    try:
        _own_folder(Path(mount_dir))
        probe.mkdir(mode=0o700)
        try:
            _mount_tmpfs(probe, 1 << 20, 16, os.getuid())
            try:
                if os.statvfs(probe).f_files != 16:
                    raise CapsUnavailable("a tmpfs mounted here ignores nr_inodes")
            finally:
                _umount(probe)
        finally:
            probe.rmdir()
    except OSError as exc:
        raise CapsUnavailable(f"cannot mount a tmpfs here: {exc.strerror or exc}") from None


_cache: dict[tuple, Caps] = {}
_cache_lock = threading.Lock()


def detect(mode: str = "auto", tmpfs: str = "auto", mount_dir: Path | None = None) -> Caps:
    """Find (once per process and arguments) which caps this machine can enforce.

    ``mode`` and ``tmpfs`` force one mechanism (tests, or an operator who knows
    better); a forced mechanism that does not work raises CapsUnavailable, never
    a silent weaker one. "auto" takes the strongest that works and says in
    ``Caps.why`` why a stronger one was not used.
    """
    if mode not in MODES or tmpfs not in TMPFS_MODES:
        raise ValueError(f"caps mode must be one of {MODES} and tmpfs one of {TMPFS_MODES}")
    key = (mode, tmpfs, str(mount_dir), os.getpid())
    with _cache_lock:
        if key not in _cache:
            _cache[key] = _detect(mode, tmpfs, mount_dir)
        return _cache[key]


def _detect(mode: str, tmpfs: str, mount_dir: Path | None) -> Caps:
    why: list[str] = ["rlimits chosen by configuration"] if mode == "rlimit" else []
    chosen = "rlimit"
    parents: tuple[Path | None, Path | None] = (None, None)
    for candidate, probe in (("cgroup2", _detect_cgroup2), ("cgroup1", _detect_cgroup1)):
        if mode not in ("auto", candidate):
            continue
        try:
            parents = probe()
            chosen = candidate
            break
        except CapsUnavailable as exc:
            if mode == candidate:
                raise
            why.append(str(exc))
    if chosen != "rlimit":
        why = []  # a v2 machine's reason to skip v1 (or the reverse) is no news
    in_force = "bwrap"
    if tmpfs == "bwrap":
        why.append("bubblewrap's tmpfs chosen by configuration")
    else:
        try:
            _detect_mount(mount_dir)
            in_force = "mount"
        except CapsUnavailable as exc:
            if tmpfs == "mount":
                raise
            why.append(f"inode cap: {exc}")
    return Caps(
        mode=chosen,
        tmpfs=in_force,
        memory_parent=parents[0],
        pids_parent=parents[1],
        mount_dir=Path(mount_dir) if mount_dir else None,
        why=tuple(why),
    )


# -- one run --------------------------------------------------------------------


class RunCaps:
    """The caps of one run: its own cgroup and tmpfs mounts, from ``with`` to the end of the block.

    Thread-safe across runs (each has its own names); one RunCaps belongs to one
    run, which may launch several processes: wrap each one's argv.
    """

    def __init__(self, caps: Caps, budget: RunBudget, defer_cgroups: bool = False) -> None:
        self.caps, self.budget = caps, budget
        # why deferrable: the sandbox makes them while setpriv and bwrap start (see ensure_cgroups)
        self.defer_cgroups = defer_cgroups
        self.name = owned_name("run")
        self.cgroups: list[Path] = []  # v1: memory first, then pids; v2: one
        self._mount_root: Path | None = None
        self._mounts: list[tuple[str, Path]] = []  # (mount point in the sandbox, host folder)
        self._roots: dict[Path, int] = {}  # host folder -> an open fd of its tmpfs (for report, once detached)
        self._detached: set[Path] = set()

    def __enter__(self) -> RunCaps:
        try:
            if not self.defer_cgroups:
                self.ensure_cgroups()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def uses_cgroups(self) -> bool:
        """Whether the run's processes join a cgroup of its own (not in rlimit mode)."""
        return self.caps.mode != "rlimit"

    def ensure_cgroups(self) -> None:
        """Make the run's cgroups unless they are made (or the mode has none); before ``join``.

        Called by ``with`` unless the RunCaps was made with ``defer_cgroups``:
        then by its user, at any time before a process must join (``join`` and
        ``wrap`` call it too). On a failure none is left made.
        """
        if self.uses_cgroups and not self.cgroups:
            self._make_cgroups()

    def _make_cgroups(self) -> None:
        v2 = self.caps.mode == "cgroup2"
        mem, procs = self.budget.memory_bytes, self.budget.processes
        try:
            for parent in self.caps.parents:
                path = parent / self.name
                os.mkdir(path, 0o755)
                self.cgroups.append(path)
            memory, pids = self.cgroups[0], self.cgroups[-1]
            if v2:
                _write(memory / "memory.max", str(mem))
                if (memory / "memory.swap.max").exists():
                    _write(memory / "memory.swap.max", "0")  # why: swap would stretch the cap past RAM
            else:
                _write(memory / "memory.limit_in_bytes", str(mem))
                if (memory / "memory.memsw.limit_in_bytes").exists():
                    _write(memory / "memory.memsw.limit_in_bytes", str(mem))  # why: memory plus swap, same cap
            _write(pids / "pids.max", str(procs))
        except OSError as exc:
            # why removed at once: a cgroup made but not capped must never count as made (see ensure_cgroups)
            for path in reversed(self.cgroups):
                try:
                    os.rmdir(path)
                except OSError:
                    pass
            self.cgroups.clear()
            raise CapsUnavailable(f"cannot set up the run's cgroup ({self.caps.mode}): {exc}") from None

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with a prefix that puts the process into this run's cgroup, then execs it.

        The prefix runs with the caller's privileges (root: it must write to
        cgroupfs), so put it in front of everything, before prlimit and setpriv.
        In rlimit mode ``argv`` is returned unchanged.
        """
        self.ensure_cgroups()
        if not self.cgroups:
            return list(argv)
        return [SH, "-c", ENTER_CGROUP, "enter-cgroup", *(str(c / "cgroup.procs") for c in self.cgroups), "--", *argv]

    def join(self, pids: Sequence[int]) -> None:
        """Move the processes ``pids`` into this run's cgroup (by the caller, root); nothing in rlimit mode.

        What they fork afterwards is born in it. Raises ProcessLookupError for
        a process that is gone, CapsUnavailable when the cgroup refuses it.
        """
        self.ensure_cgroups()
        for cgroup in self.cgroups:
            for pid in pids:
                try:
                    _write(cgroup / "cgroup.procs", str(pid))
                except OSError as exc:
                    if exc.errno == errno.ESRCH:
                        raise ProcessLookupError(pid) from None
                    raise CapsUnavailable(f"cannot move a process into the run's cgroup {cgroup}: {exc}") from None

    def rlimits(self) -> tuple[int, int]:
        """RLIMIT_AS and RLIMIT_NPROC for the processes of this run (give them to prlimit).

        Under a cgroup the run's total is the cgroup's, and RLIMIT_NPROC stays a
        backstop just above its process cap. Without one, both shrink until
        their product fits the run's memory budget (RunBudget.fallback_rlimits);
        RLIMIT_NPROC counts per uid, so that bound holds per uid: a run whose
        processes run under two uids may take twice the budget in rlimit mode
        (give that run a budget of half).
        """
        if self.caps.mode != "rlimit":
            return self.budget.address_space_bytes, self.budget.processes + NPROC_MARGIN
        return self.budget.fallback_rlimits()

    def tmpfs(self, where: str, size_bytes: int, uid: int) -> list[str]:
        """bubblewrap arguments for a writable tmpfs at ``where`` in the sandbox, owned by ``uid``.

        In mount mode a tmpfs with ``size`` and ``nr_inodes`` is mounted on the
        host now (unmounted when the block ends) and bound; otherwise
        bubblewrap's ``--size`` tmpfs, with no inode cap.
        """
        if self.caps.tmpfs != "mount":
            return ["--size", str(size_bytes), "--tmpfs", where]
        if (host := self._host(where)) is not None:
            return ["--bind", str(host), where]  # mounted already (see tmpfs_root)
        try:
            if self._mount_root is None:
                mount_dir = self.caps.mount_dir
                assert mount_dir is not None  # mount mode is chosen only with a folder (_detect_mount)
                _own_folder(Path(mount_dir))  # made again if it went missing
                # why 0711 (root's): the sandbox's uid passes through to its own mount, lists nothing
                (root := Path(mount_dir) / self.name).mkdir(mode=0o711)
                self._mount_root = root
            host = self._mount_root / f"{len(self._mounts)}{re.sub(r'[^a-z0-9]+', '-', where.lower())}"
            host.mkdir(mode=0o700)
            try:
                _mount_tmpfs(host, size_bytes, self.budget.tmpfs_inodes, uid)
            except OSError:
                host.rmdir()
                raise
            self._mounts.append((where, host))
            self._roots[host] = os.open(host, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise CapsUnavailable(f"cannot mount the run's tmpfs for {where}: {exc}") from None
        return ["--bind", str(host), where]

    def tmpfs_root(self, where: str, size_bytes: int, uid: int) -> int | None:
        """An open fd of the run's own tmpfs for ``where``, mounted now if it is not yet; None in bwrap mode.

        For the worker to write into before the sandbox starts (a later
        ``tmpfs(where, ...)`` binds the same mount). The fd stays this
        object's: it is closed when the block ends. In bwrap mode the tmpfs is
        bubblewrap's own, made inside the sandbox: there is no host folder.
        """
        if self.caps.tmpfs != "mount":
            return None
        self.tmpfs(where, size_bytes, uid)
        host = self._host(where)
        assert host is not None  # tmpfs() mounted it, or raised
        return self._roots[host]

    def _host(self, where: str) -> Path | None:
        return next((host for mounted, host in self._mounts if mounted == where), None)

    @property
    def mounted(self) -> bool:
        """Whether the run has tmpfs mounts of its own (mount mode, after ``tmpfs``)."""
        return bool(self._mounts)

    def detach_mounts(self) -> None:
        """Take the run's tmpfs mounts out of the host's mount table, once the sandbox has bound them.

        The sandbox keeps them (its binds hold them) until it ends, and so does
        the worker's open fd, for ``report``; close() then only removes folders.
        why: every sandbox copies the host's mount table and bubblewrap reads it
        again for each bind it makes (about fifteen a start); each live run's
        three mounts, warm ones included, made every other start slower (a few
        hundred mounts on a busy machine cost 10 ms and more a start), and
        unmounting them at the end waited for the sandbox's own teardown.
        """
        for _, host in self._mounts:
            if host not in self._detached:
                if _libc.umount2(str(host).encode(), MNT_DETACH) != 0:
                    # the mount stays, and close() unmounts it as before
                    log.warning("could not detach the run's tmpfs %s: %s", host, os.strerror(ctypes.get_errno()))
                    continue
                self._detached.add(host)

    def report(self) -> CapReport:
        """Which caps the run ran into so far; call it after the processes end, inside the block."""
        kills = hits = 0
        peak: int | None = 0
        if self.cgroups:
            memory, pids = self.cgroups[0], self.cgroups[-1]
            if self.caps.mode == "cgroup2":
                kills = _read_keys(memory / "memory.events").get("oom_kill", 0)
                peak = _read_int(memory / "memory.peak")
            else:
                kills = _read_keys(memory / "memory.oom_control").get("oom_kill", 0)
                peak = _read_int(memory / "memory.max_usage_in_bytes")
            hits = _read_keys(pids / "pids.events").get("max", 0)
        full = []
        for where, host in self._mounts:
            try:
                st = os.fstatvfs(self._roots[host]) if host in self._roots else os.statvfs(host)
            except OSError:
                continue
            if st.f_files and st.f_ffree == 0:
                full.append((where, "inodes"))
            elif st.f_blocks and st.f_bavail == 0:
                full.append((where, "space"))
        return CapReport(
            memory_kills=kills, memory_peak_bytes=peak or None, process_cap_hits=hits, full_tmpfs=tuple(full)
        )

    def close(self) -> None:
        """Kill what is left in the cgroup, unmount the tmpfs mounts, remove both. Safe to call twice."""
        # why removed first: a cgroup with nothing left in it (the usual end: the sandbox's pid 1
        # ended, and the kernel ended the rest of its pid namespace) goes at once, its members
        # unread; one that still holds a process refuses (EBUSY) and is emptied below.
        left = []
        for cgroup in self.cgroups:
            try:
                os.rmdir(cgroup)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(cgroup)
        self.cgroups = left
        for cgroup in self.cgroups:
            _kill_members(cgroup)
        for fd in self._roots.values():
            os.close(fd)
        self._roots.clear()
        for _, host in reversed(self._mounts):
            try:
                if host not in self._detached:
                    _umount(host)
                host.rmdir()
            except OSError as exc:
                log.warning("could not unmount %s: %s", host, exc)
        self._mounts.clear()
        self._detached.clear()
        if self._mount_root is not None:
            try:
                self._mount_root.rmdir()
            except OSError as exc:
                log.warning("could not remove %s: %s", self._mount_root, exc)
            self._mount_root = None
        for cgroup in self.cgroups:
            try:
                _remove_cgroup(cgroup)
            except OSError as exc:
                log.warning("could not remove the cgroup %s: %s", cgroup, exc)
        self.cgroups.clear()


# -- after a worker died --------------------------------------------------------


def _stale_mount_roots(mount_dir: Path | None) -> list[Path]:
    """The runs' mount folders whose owner is gone: under ``mount_dir``, and under every other scratch folder's in /dev/shm.

    why the others too: a scratch folder that is used once (a test run's, a
    benchmark's) is never swept by a worker of its own, and every run's
    mounts left there stayed in the host's mount table, which bubblewrap reads
    again for each bind of every later start (a thousand left by killed test
    workers made each start 30 ms slower). Each name carries its owner, so a
    live owner's mounts, of any installation, are never touched.
    """
    folders = set()
    if mount_dir is not None:
        folders.add(Path(mount_dir))
    try:
        folders.update(
            p
            for p in Path("/dev/shm").glob("takehome-mounts-*")
            if p.is_dir() and not p.is_symlink() and p.stat().st_uid == os.geteuid()
        )
    except OSError:
        pass
    roots: list[Path] = []
    for folder in sorted(folders):
        try:
            roots.extend(r for r in folder.iterdir() if r.is_dir() and owner_gone(r.name))
        except OSError:
            continue
    return roots


def clean_stale(caps: Caps) -> list[str]:
    """Remove cgroups and tmpfs mounts whose owner process is gone; returns what was removed.

    Call it when a worker starts. Runs of live processes (other workers, a test
    run) on the same machine are left alone, and so is anything made in
    another pid namespace.
    """
    removed = []
    for parent in caps.parents:
        try:
            children = [p for p in parent.iterdir() if p.is_dir() and owner_gone(p.name)]
        except OSError:
            continue
        for cgroup in children:
            _kill_members(cgroup)
            try:
                _remove_cgroup(cgroup)
                removed.append(str(cgroup))
            except OSError as exc:
                log.warning("could not remove the stale cgroup %s: %s", cgroup, exc)
    roots = _stale_mount_roots(caps.mount_dir)
    mounted = [Path(p) for p, _, _ in _mounts()] if roots else []
    for root in roots:
        points = sorted((p for p in mounted if root in (p, p.parent)), reverse=True)
        try:
            for point in points:
                _umount(point)
            for sub in root.iterdir():
                sub.rmdir()  # only empty mount points: never delete through a mount
            root.rmdir()
            removed.append(str(root))
        except OSError as exc:
            log.warning("could not remove the stale mounts in %s: %s", root, exc)
    return removed
