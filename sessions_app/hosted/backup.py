"""The hosted sessions' share of a backup (shared.backup): each workspace's recording and files.

Under ``workspaces/inv-<id>/`` in the backup, for each workspace folder of this server:

    saved.tar      its files: an open workspace's as they are now (copied under its lock, in the form
                   a stop saves them, while they stay mounted and its shell runs on), a stopped or
                   frozen one's saved.tar
    session.cast   the terminal's recording, as far as it was written
    frozen         present when the deadline froze it: it opens read-only

The rest of the folder (the mounts, sockets, locks and generated /etc) is made again when the
workspace opens. A restore puts these in place and gives the workspaces to the server it runs
on: their rows named the server the backup was made on, and no shell runs after a restore, so
each row says its shell stopped and the next visit starts it again from its files.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError

from shared.backup import Part
from shared.backup.archive import Collector, size_words
from shared.words import counted, listed

from ..models import Workspace
from . import workspaces

FOLDER = re.compile(r"inv-([1-9][0-9]{0,17})")
KEPT = ("saved.tar", "session.cast", "frozen")


def folder() -> Path:
    return Path(settings.WORKSPACES_DIR)


def owns(entry: str) -> bool:
    """The workspaces' own folders; the host's socket and lock beside them are left alone."""
    return FOLDER.fullmatch(entry) is not None


def accepts(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) == 2 and owns(parts[0]) and parts[1] in KEPT


def _invitations() -> list[int]:
    base = folder()
    if not base.is_dir():
        return []
    return sorted(int(m.group(1)) for entry in base.iterdir()
                  if (m := FOLDER.fullmatch(entry.name)) and entry.is_dir() and not entry.is_symlink())


def _open_here() -> list[int]:
    return [pk for pk in _invitations() if os.path.ismount(workspaces.folder_of(pk) / "home")]


def _add_recording(c: Collector, pk: int) -> int | None:
    """The recording as far as it is written; its size, None when there is none."""
    try:
        fd = os.open(workspaces.folder_of(pk) / "session.cast", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        # why the lock: each line is written whole under it (grading/engine/asciicast.py), so the size read
        # under it ends a line; the file only grows, so that many bytes are copied once it is let go
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            size = os.fstat(fd).st_size
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        c.add_open(f"inv-{pk}/session.cast", source, size, 0o640)
    return size


def _add_live_files(c: Collector, pk: int, row: Workspace | None) -> tuple[str, str]:
    """An open workspace's files as they are now: (what the manifest says, what is printed)."""
    try:
        with c.new_file(f"inv-{pk}/saved.tar") as out:
            report = workspaces.copy_files(pk, row, out)
            if report is None:
                raise FileNotFoundError("its files were unmounted meanwhile")
    except Exception as exc:  # whatever it is, the backup goes on and says what it holds instead
        why = str(exc) or type(exc).__name__
        if isinstance(exc, FileNotFoundError) and c.add_file(f"inv-{pk}/saved.tar", workspaces.folder_of(pk)
                                                              / "saved.tar"):
            return "saved", "open, stopped meanwhile: its files as it saved them"
        if c.add_file(f"inv-{pk}/saved.tar", workspaces.folder_of(pk) / "saved.tar"):
            return "saved before", (f"open, but its files could not be read as they are now ({why}): the backup "
                                    "holds them as last saved, without what changed since")
        return "none", (f"open, but its files could not be read as they are now ({why}), and none were saved "
                        "before: the backup holds none of them")
    words = f"open: its files as they are now ({report.kept} files and folders)"
    if report.left_out:
        words += f"; {report.words()}"
    return "as they are now", words


def collect(c: Collector) -> None:
    here = settings.WORKSPACE_HOST
    ids = _invitations()
    rows = {row.invitation_id: row for row in Workspace.objects.filter(invitation_id__in=ids)}
    sessions: dict[str, dict] = {}
    for pk in ids:
        base, row = workspaces.folder_of(pk), rows.get(pk)
        frozen = (base / "frozen").is_file()
        if os.path.ismount(base / "home"):
            files, words = _add_live_files(c, pk, row)
        elif c.add_file(f"inv-{pk}/saved.tar", base / "saved.tar"):
            files, words = "saved", ("frozen: its saved files" if frozen else "its shell stopped: its saved files")
        else:
            files, words = "none", "no files saved (never opened, or opened and never saved)"
        if frozen:
            c.add_bytes(f"inv-{pk}/frozen", b"", 0o644)
        recording = _add_recording(c, pk)
        words += f"; its recording ({size_words(recording)})" if recording is not None else "; no recording"
        sessions[str(pk)] = {"files": files, "frozen": frozen, "recording": recording}
        c.say(f"invitation {pk}: {words}")
    c.info["host"], c.info["sessions"] = here, sessions
    elsewhere = sorted(set(Workspace.objects.exclude(host=here).values_list("host", flat=True)))
    if elsewhere:
        c.say(f"workspaces kept on other servers ({listed(elsewhere)}) are not in this backup: back those up there")


def busy() -> str | None:
    """Why the workspaces cannot be replaced now: some are open here (their files mounted)."""
    open_here = _open_here()
    if not open_here:
        return None
    return (f"The hosted workspaces of {counted(len(open_here), 'invitation')} ({', '.join(map(str, open_here))}) "
            f"are open on this server, their files mounted under {folder()}: stop the web server and "
            "serve_workspaces, run `manage.py stop_workspaces`, then restore again.")


def restored(info: dict, say: Callable[[str], None]) -> None:
    """Give the restored workspaces to this server, their shells stopped; their folders as a workspace keeps them."""
    info = info if isinstance(info, dict) else {}
    from_host = info.get("host") if isinstance(info.get("host"), str) else ""
    here = settings.WORKSPACE_HOST
    for pk in _invitations():
        os.chmod(workspaces.folder_of(pk), 0o711)  # why: the sandbox's uid passes through, no one lists it
    try:
        moved, stopped = workspaces.adopt_restored(from_host)
    except IntegrityError:
        say(f"Hosted sessions: could not give the workspaces of server {from_host} to this one ({here}): an open "
            f"workspace of this server has one of their uids. Set TAKEHOME_WORKSPACE_HOST={from_host} here and "
            "restart, so that this server serves them under that name.")
        return
    words = []
    if moved:
        words.append(f"{counted(moved, 'workspace')} of server {from_host} given to this one ({here})")
    if stopped:
        words.append(f"{counted(stopped, 'open workspace')} will start again from its files at the next visit")
    if words:
        say(f"Hosted sessions: {'; '.join(words)}.")


PART = Part(name="workspaces", title="hosted sessions (recordings and workspaces)", folder=folder,
            collect=collect, accepts=accepts, owns=owns, busy=busy, restored=restored)
