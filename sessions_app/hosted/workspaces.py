"""The Django side of hosted sessions: which workspace an invitation has, opening it, and its life.

The sandbox itself (mounts, the shell under tmux, saving, freezing, the
snapshot) is grading.engine.sandbox.shell, plain Python; this module reads the settings,
keeps the Workspace row (its uid, when it was last used) and seeds a new
workspace with the packet version's fixture, as the download carries it.

Every step of a workspace's life is a function here, the sandbox's part and
the row's together, and this module is the only writer of the Workspace row
(a test keeps it so):

- opened: ``workspace_row``, the row with a uid free on this host;
- shell started: ``ensure_open`` (again after a stop, and by ``restart_shell``);
- seen: ``touch``, at most once a minute;
- shell stopped: ``stop_idle_shell`` (the sweep) and ``stop_for_shutdown``
  (``manage.py stop_workspaces``), its files saved and unmounted;
- frozen: ``freeze`` (the sweep, once time is up or the link is revoked),
  read-only, closed, its uid given back;
- settled at the deadline: ``settle_deadline`` (the sweep, once it submitted
  the frozen files, or found them unchanged since the last submission);
- reopened: ``reopen`` (the next open or sweep on its host, once a recruiter
  extended a deadline that had passed and the link is still valid), writable
  again with its files as they were frozen, under a free uid, its next
  deadline to be settled in turn.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import logging
import os
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from grading.engine.asciicast import append_marker as recorder_marker
from grading.engine.asciicast import copy_written as recorder_copy
from sessions_app.models import Workspace
from shared import stored
from shared.environments import runner_for
from shared.handover import share_with_web
from takehome.models import Invitation, PacketFile

log = logging.getLogger(__name__)

TOUCH_EVERY_S = 60  # last_seen_at is written at most this often per workspace
_touched: dict[int, float] = {}  # invitation id -> monotonic time of the last write, per process


class WorkspaceFull(Exception):
    """Every workspace uid is taken by an open workspace; the message says what to do."""


def backend():
    """grading.engine.sandbox.shell (part A of step 10), imported when first needed.

    why late: this module is imported by the views, and they must load even on
    a server that never opens a workspace.
    """
    return importlib.import_module("grading.engine.sandbox.shell")


def folder_for(invitation: Invitation) -> Path:
    """The invitation's workspace folder; WorkspaceElsewhere on a server that holds no workspaces.

    why the check here: every step of a workspace (its mount, shell, lock, files and recording) starts from
    its folder, so a server that must touch none (TAKEHOME_HOLDS_WORKSPACES=false) is stopped at this door.
    """
    check_held_here(invitation.pk)
    return folder_of(invitation.pk)


def folder_of(invitation_id: int) -> Path:
    """Where the workspace of that invitation lives on a host that holds it (no check: for reads by id)."""
    return Path(settings.WORKSPACES_DIR) / f"inv-{invitation_id}"


class WorkspaceBusy(Exception):
    """Another capture, submit, settling or reopening of the workspace holds its capture_lock."""


@contextlib.contextmanager
def capture_lock(invitation: Invitation, *, wait: bool = False):
    """One capture, hosted submit, deadline's settling or reopening at a time per invitation, across processes
    (web and gate host); WorkspaceBusy when another holds it, unless ``wait``.

    why a file lock: the buttons run in the web process, `gate red` in the gate
    host; two sandboxes over one workspace at once would only race. And a reopening must not
    come between the deadline's submit of the frozen files and its settling.
    """
    folder = folder_for(invitation)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "capture.lock").open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise WorkspaceBusy(f"the workspace of invitation {invitation.pk} is busy") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def cast_path(invitation: Invitation) -> Path:
    """Where the terminal's recording of this invitation lives (asciicast v2)."""
    return folder_for(invitation) / "session.cast"


def publish_recording(invitation: Invitation) -> bool:
    """Copy the terminal's recording into the storage every host shares (shared.stored), where the review
    page reads it, unless it has not grown since the last copy; whether it copied.

    why a copy: the terminal appends to the file in the workspace's folder, on this host, line by line;
    a reviewer's page may be served by another host, and a bucket takes no appends. This host copies it
    when the candidate submits, and at each sweep of its workspaces while it grows (gate_host.sweep).
    Logged, never raised: the next sweep tries again.
    """
    cast = cast_path(invitation)
    try:
        size = cast.stat().st_size
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("could not read the recording of invitation %s: %s", invitation.pk, exc)
        return False
    published = cast.with_name("session.cast.published")  # the size last copied: the file only grows
    try:
        # why the lock: two copies at once (a submit and the sweep) must not end with the older one stored
        with published.open("a+") as mark:
            fcntl.flock(mark, fcntl.LOCK_EX)
            mark.seek(0)
            if mark.read().strip() == str(size):
                return False
            part = cast.with_name(".session.cast.publishing")
            copied = recorder_copy(cast, part)
            stored.save(stored.recording_name(invitation.pk), part, move=True)
            mark.seek(0)
            mark.truncate()
            mark.write(str(copied))
    except OSError as exc:
        log.warning("could not copy the recording of invitation %s into the storage: %s", invitation.pk, exc)
        return False
    return True


def limits():
    return backend().WorkspaceLimits(
        disk_bytes=settings.WORKSPACE_DISK_MB << 20,
        memory_bytes=settings.WORKSPACE_MEMORY_MB << 20,
        processes=settings.WORKSPACE_PROCESSES,
        cpu_cores=settings.WORKSPACE_CPUS,
    )


def _free_uid() -> int:
    taken = set(Workspace.objects.filter(closed=False, host=settings.WORKSPACE_HOST).values_list("uid", flat=True))
    base = settings.WORKSPACE_UID_BASE
    for uid in range(base, base + settings.WORKSPACE_SLOTS):
        if uid not in taken:
            return uid
    raise WorkspaceFull(f"All {settings.WORKSPACE_SLOTS} hosted workspaces of this server are in use. Try again "
                        "in a few minutes, or download the files and work on your own machine; if this keeps "
                        "happening, write to the person who invited you.")


class WorkspaceElsewhere(WorkspaceFull):
    """The workspace lives on another server of this site: its files and shell are there, not here."""


def check_held_here(invitation_id: int) -> None:
    """WorkspaceElsewhere when this server holds no workspaces (TAKEHOME_HOLDS_WORKSPACES=false).

    why: such a server (docker-compose.yml's web) runs unprivileged and mounts nothing; a workspace's request
    reaching it was misrouted by the proxy, and a row made here would tie the workspace to the wrong host.
    """
    if settings.HOLDS_WORKSPACES:
        return
    log.error("a request for the workspace of invitation %s reached this server, which holds no workspaces "
              "(TAKEHOME_HOLDS_WORKSPACES=false): route the workspaces' paths (sessions_app/hosted/paths.py) "
              "to a workspace host", invitation_id)
    raise WorkspaceElsewhere("Your workspace is kept on another server of this site, which did not answer this "
                             "request. Reload the page in a minute; if it keeps happening, write to the person "
                             "who invited you.")


def _check_host(row: Workspace) -> None:
    check_held_here(row.invitation_id)
    if row.host != settings.WORKSPACE_HOST:
        log.error("workspace of invitation %s is on host %r, this is %r: route /t/<token>/ to one host",
                  row.invitation_id, row.host, settings.WORKSPACE_HOST)
        raise WorkspaceElsewhere("Your workspace is kept on another server of this site, which did not answer "
                                 "this request. Reload the page in a minute; if it keeps happening, write to "
                                 "the person who invited you.")


def workspace_row(invitation: Invitation) -> Workspace:
    """The invitation's Workspace row, created with a free uid on first use (WorkspaceFull when none is)."""
    check_held_here(invitation.pk)
    row = Workspace.objects.filter(invitation_id=invitation.pk).first()
    if row is not None:
        _check_host(row)
        return row
    for _ in range(5):
        try:
            with transaction.atomic():
                return Workspace.objects.create(invitation_id=invitation.pk, host=settings.WORKSPACE_HOST,
                                                uid=_free_uid())
        except IntegrityError:
            # why retry: another workspace took the same uid, or this invitation's row was just created
            row = Workspace.objects.filter(invitation_id=invitation.pk).first()
            if row is not None:
                _check_host(row)
                return row
    raise WorkspaceFull("The server could not set up your workspace just now (busy). Reload the page to try again.")


def workspace_for(invitation: Invitation, row: Workspace | None = None):
    """grading.engine.sandbox.shell.Workspace of the invitation: its folder, uid, the packet's runner and the caps."""
    row = row or workspace_row(invitation)
    spec = invitation.packet_version.to_spec()
    return backend().Workspace(folder=folder_for(invitation), uid=row.uid, runner_dir=runner_for(spec),
                               limits=limits())


def seed_files(invitation: Invitation) -> dict[str, bytes]:
    """What a new workspace starts with: the version's fixture and, when it has one, its requirements.txt."""
    version = invitation.packet_version
    files = dict(version.files_of(PacketFile.Kind.FIXTURE))
    if version.requirements:
        files["requirements.txt"] = version.requirements.encode("utf-8")
    return files


def open_files(invitation: Invitation):
    """The invitation's workspace with its files mounted; its shell is left as it is.

    why: a capture or submit must read a workspace the sweep released (idle:
    its files only in saved.tar) or froze, without starting a shell the
    candidate did not ask for. Idempotent; raises grading.engine.sandbox.shell's errors.
    """
    ws = workspace_for(invitation)
    backend().open_workspace(ws, seed_files(invitation))
    return ws


def write_files(invitation: Invitation, files: dict[str, bytes]) -> bool:
    """Put the server's ``files`` (relative name -> content) into the invitation's workspace, as its uid's.

    False when there is nothing to write into: no workspace, or one closed or
    frozen. A workspace whose shell was stopped has its files mounted again
    (open_files). Raises grading.engine.sandbox.shell's errors, and OSError
    (the workspace full, a name taken by a folder or a FIFO).
    """
    row = Workspace.objects.filter(invitation_id=invitation.pk).first()
    if row is None or row.closed or row.frozen_at is not None:
        return False
    _check_host(row)
    ws = workspace_for(invitation, row)
    backend().open_workspace(ws, seed_files(invitation))
    backend().write_files(ws, files)
    return True


def read_file(invitation: Invitation, name: str, cap: int) -> bytes | None:
    """One file of the invitation's workspace (mounted again when its shell was stopped); None when not there."""
    return backend().read_file(open_files(invitation), name, cap)


def ensure_open(invitation: Invitation):
    """Open the invitation's workspace (seeded when new, restored when saved) and start its shell.

    Idempotent. A frozen workspace (past the deadline) is opened read-only and
    its shell stays stopped, unless its deadline was extended since (``reopen``).
    """
    row = reopen(invitation, workspace_row(invitation))
    ws = workspace_for(invitation, row)
    sandbox = backend()
    sandbox.open_workspace(ws, seed_files(invitation))
    if row.frozen_at is None:
        sandbox.start_shell(ws)
        now = timezone.now()
        Workspace.objects.filter(pk=row.pk).update(last_seen_at=now, shell_stopped_at=None)
        _touched[invitation.pk] = time.monotonic()
    return ws


class RestartRefused(Exception):
    """The shell may not be restarted now; the message says why, for the candidate."""


def restart_shell(invitation: Invitation):
    """End every process of the invitation's workspace and start a fresh shell; the files stay as they are.

    why: a fork bomb (or a memory hog) holds the workspace's caps, and no terminal can attach
    to the shell any more (consumers.STUCK); without this the candidate waited for the idle
    sweep. Every open terminal of the invitation loses its client and reconnects to the new shell.
    """
    from .consumers import refusal_for

    refusal = refusal_for(invitation)
    if refusal is not None:
        raise RestartRefused(refusal[1])
    row = Workspace.objects.filter(invitation_id=invitation.pk).first()
    if row is not None:
        row = reopen(invitation, row)
    if row is not None and (row.closed or row.frozen_at is not None):
        raise RestartRefused("Time is up: your workspace is closed and read-only.")
    if row is not None:
        _check_host(row)
        backend().stop_shell(workspace_for(invitation, row))
    log.info("restarted the shell of invitation %s", invitation.pk)
    return ensure_open(invitation)


def touch(invitation: Invitation | int) -> None:
    """The candidate did something in the workspace: keep it from the idle stop.

    Cheap enough to call on every keystroke: it writes at most once a minute
    per workspace and process.
    """
    pk = invitation if isinstance(invitation, int) else invitation.pk
    now = time.monotonic()
    if now - _touched.get(pk, -TOUCH_EVERY_S) < TOUCH_EVERY_S:
        return
    _touched[pk] = now
    Workspace.objects.filter(invitation_id=pk).update(last_seen_at=timezone.now())


def tell_unsaved(invitation: Invitation, words: str) -> None:
    """Say in the log and on the recruiter's board (the invitation's history) what a save could not keep."""
    from takehome.audit import record

    log.error("workspace of invitation %s: %s", invitation.pk, words)
    try:
        record(None, "workspace_unsaved", invitation, words[:2000])
    except Exception:  # the log has it; a failing trail must not keep the workspace open
        log.exception("could not record the unsaved files of invitation %s", invitation.pk)


def close_files(invitation: Invitation, ws, *, stop: bool = True) -> bool:
    """Save the files of a workspace that closes (frozen) and unmount them; never raises for the save.

    why: a save that fails must not keep the workspace open, its uid taken and the sweep
    failing every round. What could not be saved is told (tell_unsaved); a save that failed
    as a whole leaves the files mounted, read-only, so that nothing is lost, and
    ``manage.py stop_workspaces`` tries again. Returns whether the files are on disk.
    """
    try:
        report = backend().release(ws, stop=stop)
    except Exception as exc:
        tell_unsaved(invitation, f"The workspace's files could not be saved ({exc}); they are kept on the "
                                 "server, read-only and in memory, until `manage.py stop_workspaces` saves them.")
        return False
    if report is not None and report.left_out:
        tell_unsaved(invitation, report.words())
    return True


def append_marker(invitation: Invitation, label: str) -> None:
    """Mark a moment in the recording ("red captured", "submitted"), its header first if there is none yet.

    A failure to mark is logged, never raised: the capture itself stands.
    """
    path = cast_path(invitation)
    try:
        recorder_marker(path, label)
    except OSError as exc:
        log.warning("could not mark %r in %s: %s", label, path, exc)
        return
    share_with_web(path)


def share_recording(invitation: Invitation) -> None:
    """Let the web server, a user of its own (docker-compose.yml), read the recording for the review page's
    player; its owner stays this host's (root), so it only reads it. Nothing to do under one user (make run)."""
    path = cast_path(invitation)
    if path.exists():
        share_with_web(path)


def save_files(invitation: Invitation, row: Workspace) -> None:
    """Stop the workspace's shell and put its files on disk, unmounted; a save that fails raises (the files
    stay mounted, the next sweep tries again), one that left files out says which."""
    report = backend().release(workspace_for(invitation, row))
    if report is not None and report.left_out:
        tell_unsaved(invitation, report.words())


def stop_idle_shell(invitation: Invitation, row: Workspace, now) -> None:
    """A shell idle past TAKEHOME_WORKSPACE_IDLE_MINUTES: stopped, its files saved; the next visit starts it again."""
    save_files(invitation, row)
    Workspace.objects.filter(pk=row.pk).update(shell_stopped_at=now)


def freeze(invitation: Invitation, row: Workspace, now) -> bool:
    """Close a workspace whose time is up or whose link was revoked: read-only for good, its shell stopped,
    its files saved and unmounted, its uid given back. Returns whether its files are on disk (close_files)."""
    ws = workspace_for(invitation, row)
    backend().freeze(ws)
    # why release too: the frozen files wait in saved.tar, not in memory; a visit
    # mounts them again, read-only (grading.engine.sandbox.shell keeps the frozen mark). A save
    # that fails is told and never keeps the workspace from closing.
    saved = close_files(invitation, ws)
    Workspace.objects.filter(pk=row.pk).update(frozen_at=now, closed=True, shell_stopped_at=row.shell_stopped_at or now)
    return saved


def settle_deadline(invitation: Invitation, row: Workspace, now) -> bool:
    """The deadline's submit of a frozen workspace is done (submitted, found unchanged, or refused and kept
    as refused): its files go back to disk, unmounted (reading them mounted them), and the sweep is done
    with it until a recruiter extends the deadline (``reopen``). Whether it was settled: not when the
    deadline was extended since (its submit stored nothing then) or the workspace was reopened."""
    # why the lock: a reopening between the check and the unmount would lose the candidate's mount
    with capture_lock(invitation, wait=True):
        fresh = Invitation.objects.only("started_at", "deadline", "revoked_at").get(pk=invitation.pk)
        if _extended(fresh, now):
            return False  # its next open or sweep reopens it, and the new deadline is settled in turn
        if not Workspace.objects.filter(pk=row.pk, frozen_at__isnull=False).update(deadline_settled_at=now):
            return False
        # why stop=False: the workspace is closed, its uid may be another open workspace's now
        close_files(invitation, workspace_for(invitation, row), stop=False)
    return True


def reopen(invitation: Invitation, row: Workspace, now=None, *, wait: bool = True) -> Workspace:
    """The workspace's row, reopened first when it is frozen and its deadline was extended since: its files
    writable again as they were frozen, under a uid free on this host, closed no more, and its next
    deadline to be settled in turn. A revoked link never reopens.

    Runs on the workspace's own host (WorkspaceElsewhere otherwise), where the frozen mark is: the
    recruiter's extension may be made on any server and changes only the invitation. Raises
    WorkspaceFull when no uid is free (the row stays frozen; the next try reopens it), WorkspaceBusy
    when a capture, submit or the deadline's settling of it runs and not ``wait``, and OSError when
    the frozen files cannot be saved before they are opened under the new uid (frozen still: nothing lost).
    """
    if row.frozen_at is None or not _extended(invitation, now):
        return row
    _check_host(row)
    with capture_lock(invitation, wait=wait):
        # why read both again under the lock: a sweep may have settled or reopened it, or the link been revoked
        invitation.refresh_from_db(fields=["started_at", "deadline", "revoked_at"])
        row = Workspace.objects.get(pk=row.pk)
        if row.frozen_at is None or not _extended(invitation, now):
            return row
        frozen = workspace_for(invitation, row)
        with transaction.atomic():
            # why the row first, in the transaction: a thaw that fails rolls it back, and the workspace
            # stays frozen on both sides
            for _ in range(5):
                try:
                    with transaction.atomic():
                        uid = _free_uid()
                        Workspace.objects.filter(pk=row.pk).update(
                            uid=uid, closed=False, frozen_at=None, deadline_settled_at=None,
                            last_seen_at=now or timezone.now())
                    break
                except IntegrityError:
                    continue  # another workspace of this host took the same uid just now
            else:
                raise WorkspaceFull("The server could not reopen your workspace just now (busy). Reload the "
                                    "page to try again.")
            report = backend().thaw(frozen)
        if report is not None and report.left_out:
            tell_unsaved(invitation, report.words())
    log.info("reopened the workspace of invitation %s under uid %s: its deadline was extended", invitation.pk, uid)
    return Workspace.objects.get(pk=row.pk)


def _extended(invitation: Invitation, now=None) -> bool:
    """Whether a frozen workspace's invitation has time again: its link valid, its uploads open."""
    return invitation.revoked_at is None and invitation.phase_at(now or timezone.now()) in (
        Invitation.RUNNING, Invitation.GRACE)


SHOWN_FILE_BYTES = 256 << 10  # a closed workspace's page shows each file up to this size


def closed_files(invitation: Invitation) -> dict[str, bytes | None] | None:
    """The files of the invitation's frozen workspace, to be shown read-only (None for one too large to show);
    None when it is not frozen yet (the sweep freezes it within a minute of the deadline plus grace)
    or was never opened. Reads only: nothing is mounted, no shell starts, the row stays as it is.
    Raises WorkspaceElsewhere (kept on another host) and the sandbox's WorkspaceUnavailable."""
    row = Workspace.objects.filter(invitation_id=invitation.pk).first()
    if row is None or row.frozen_at is None:
        return None
    _check_host(row)
    return backend().frozen_files(workspace_for(invitation, row), SHOWN_FILE_BYTES)


def stop_for_shutdown(invitation: Invitation, row: Workspace) -> bool | None:
    """Stop a workspace as its server goes down: end its shell, save its files to saved.tar and unmount them.

    Returns None when there was nothing to stop, else whether its shell was
    running; raises the sandbox's errors. The next visit restores the files.
    """
    mounted = os.path.ismount(folder_for(invitation) / "home")
    if row.closed and not mounted:
        return None  # frozen and saved; its uid may be another workspace's now
    sandbox = backend()
    ws = workspace_for(invitation, row)
    # why not for a closed one: its processes ended when it froze, and its uid
    # may be another open workspace's now; only its files are left to save
    running = not row.closed and sandbox.shell_running(ws)
    if not (mounted or running):
        return None
    report = sandbox.release(ws, stop=not row.closed)
    if report is not None and report.left_out:
        tell_unsaved(invitation, report.words())
    Workspace.objects.filter(pk=row.pk, shell_stopped_at=None).update(shell_stopped_at=timezone.now())
    return running


def copy_files(invitation_id: int, row: Workspace | None, out):
    """Write the files of the invitation's open workspace to ``out`` as saved.tar holds them, for a backup;
    the workspace is left as it is (mounted, its shell running). None when its files are not mounted.

    why not workspace_for: runner_for may build the packet's environment first, and a copy needs none.
    """
    ws = backend().Workspace(folder=folder_of(invitation_id),
                             uid=row.uid if row is not None else settings.WORKSPACE_UID_BASE,
                             runner_dir=Path(settings.GRADING_RUNNER_DIR), limits=limits())
    return backend().save_copy(ws, out)


def adopt_restored(from_host: str) -> tuple[int, int]:
    """After a restore on this server, whose files came from ``from_host``'s: (rows moved, shells marked stopped).

    The workspaces that server held are this one's now: their files are here, so their rows say so
    (else every visit would be sent to a server that no longer has them). No shell runs after a restore:
    an open workspace's row says its shell stopped, and the next visit starts it again from saved.tar.
    Raises IntegrityError when an open workspace of this server already has one of their uids.
    """
    here = settings.WORKSPACE_HOST
    moved = 0
    with transaction.atomic():
        if from_host and from_host != here:
            moved = Workspace.objects.filter(host=from_host).update(host=here)
        stopped = Workspace.objects.filter(host=here, closed=False, shell_stopped_at=None).update(
            shell_stopped_at=timezone.now())
    return moved, stopped


def idle_since():
    """Workspaces whose shell was last used before this moment are idle (TAKEHOME_WORKSPACE_IDLE_MINUTES)."""
    return timezone.now() - timedelta(minutes=settings.WORKSPACE_IDLE_MINUTES)


# -- the editor: every read and write of a file by the workspace page's editor --------


def editing():
    """grading.engine.sandbox.editing, imported when first needed (see backend)."""
    return importlib.import_module("grading.engine.sandbox.editing")


def _editor_workspace(invitation: Invitation, write: bool):
    """The invitation's workspace with its files mounted, for the editor; EditRefused once it is frozen.

    why mount: the sweep may have released an idle workspace (its files only in saved.tar);
    the editor reads and writes it as the terminal would find it, without starting a shell.
    """
    row = reopen(invitation, workspace_row(invitation))
    if write and (row.closed or row.frozen_at is not None):
        raise editing().EditRefused("Time is up: the workspace is read-only, and nothing was saved.", "frozen")
    ws = workspace_for(invitation, row)
    backend().open_workspace(ws, seed_files(invitation))
    touch(invitation)  # why: working in the editor is working in the workspace, as typing in the terminal is
    return ws


def editor_tree(invitation: Invitation):
    return editing().list_tree(_editor_workspace(invitation, write=False))


def editor_read(invitation: Invitation, path: str):
    return editing().read_file(_editor_workspace(invitation, write=False), path)


def editor_save(invitation: Invitation, path: str, data: bytes, base: str) -> str:
    """Save a file the editor read (``base``: the sha256 it read); its new sha256 (editing.save_file)."""
    return editing().save_file(_editor_workspace(invitation, write=True), path, data, base)


def editor_create(invitation: Invitation, path: str) -> str:
    return editing().create_file(_editor_workspace(invitation, write=True), path)


def editor_rename(invitation: Invitation, path: str, new_path: str) -> str:
    return editing().rename_path(_editor_workspace(invitation, write=True), path, new_path)
