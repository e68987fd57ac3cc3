"""The workspace's editor: list, read, create, rename and save the files of an open workspace.

Plain Python, no Django (sessions_app/hosted/workspaces.py is the glue). The
candidate's shell may run while we work, as their uid, on the same tmpfs: it can
swap a folder for a symlink between two of our steps. So every step opens its
folder from the workspace's root descriptor, one name at a time, with
O_NOFOLLOW (as shell._walk and shell._restore do): a link anywhere on the way
stops the step, and nothing outside the workspace is ever read or written.

Writes happen inside the workspace's own tmpfs, so its size and inode caps
hold for them as for the shell; the files are the workspace uid's. A save is
written under a temporary name beside the file and renamed over it, so a save
the caps refuse leaves the old file as it was. Each function holds the
workspace's lock (shell._locked): a save never lands on files that a release
is unmounting, and a frozen workspace (the deadline) is never written.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from grading.engine.archive import JUNK_PARTS, _size

from .shell import CHUNK, Workspace, _folder_of, _is_mounted, _locked

MAX_TEXT_BYTES = 1 << 20  # the largest file the editor opens or saves
MAX_LISTED = 2000  # entries the tree lists; a workspace holds more only with build output or copies
MAX_NAME_BYTES = 255  # one part of a path, as Linux allows
MAX_PATH_BYTES = 1024
TEMP_SUFFIX = ".editor-save"  # a save's temporary file, never listed


class EditRefused(Exception):
    """The editor's request cannot be done; ``message`` says why, for the candidate."""

    code = "refused"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class FileChanged(EditRefused):
    """The file on disk is not the one the editor read: the terminal changed it since."""

    code = "changed"

    def __init__(self, message: str, sha256: str | None) -> None:
        super().__init__(message)
        self.sha256 = sha256  # what is on disk now (None: no file there any more)


@dataclass(frozen=True)
class Entry:
    path: str
    kind: Literal["file", "folder", "link"]
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Tree:
    entries: tuple[Entry, ...]
    truncated: bool  # more than MAX_LISTED entries: the rest are not listed


@dataclass(frozen=True)
class FileText:
    path: str
    sha256: str  # of the bytes on disk: a save names it as its base
    size: int
    text: str | None  # None when the file is not UTF-8 text (binary)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def clean_path(name: object) -> PurePosixPath:
    """A path relative to the workspace, normalised (``./a//b`` is ``a/b``); EditRefused for anything else.

    why each refusal: an absolute path or ``..`` names a place outside the workspace; NUL and
    control characters cut or disguise a name; a name too long fails later with a worse message.
    """
    if not isinstance(name, str) or not name.strip():
        raise EditRefused("Give a file name, such as src/new_module.py.", "path")
    if "\0" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise EditRefused("A file name cannot hold control characters (NUL, tab, newline).", "path")
    if name.startswith("/"):
        raise EditRefused(
            f"{name[:80]!r} is an absolute path: name files relative to the workspace, such as src/app.py.", "path"
        )
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise EditRefused(
            f"{name[:80]!r} goes up with '..': the editor reaches only the workspace's own files.", "path"
        )
    if not parts:
        raise EditRefused("Give a file name, such as src/new_module.py.", "path")
    try:
        encoded = [part.encode("utf-8") for part in parts]
    except UnicodeEncodeError:
        raise EditRefused("A file name must be valid text (UTF-8).", "path") from None
    if any(len(part) > MAX_NAME_BYTES for part in encoded) or sum(len(p) + 1 for p in encoded) > MAX_PATH_BYTES:
        raise EditRefused("That file name is too long.", "path")
    return PurePosixPath(*parts)


@contextmanager
def _root(ws: Workspace, write: bool) -> Iterator[int]:
    """The workspace's root descriptor, under its lock; EditRefused when it is closed or frozen."""
    with _locked(ws):
        if not _is_mounted(ws.home):
            raise EditRefused("The workspace is not open: reload the page.", "closed")
        if write and ws.part("frozen").exists():
            raise EditRefused("Time is up: the workspace is read-only, and nothing was saved.", "frozen")
        fd = os.open(ws.home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            yield fd
        finally:
            os.close(fd)


def _through_link(rel: PurePosixPath) -> EditRefused:
    return EditRefused(
        f"{rel} goes through a link or a file, not a folder: the editor never follows links "
        "(open what the link points to by its own name).",
        "link",
    )


def _folder(root_fd: int, rel: PurePosixPath) -> int:
    """A descriptor of the existing folder ``rel`` lies in, never through a link."""
    dir_fd = os.dup(root_fd)
    for part in rel.parts[:-1]:
        try:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        except FileNotFoundError:
            raise EditRefused(f"There is no folder {part} on the way to {rel}.", "missing") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _through_link(rel) from None
            raise
        finally:
            os.close(dir_fd)
        dir_fd = nxt
    return dir_fd


def _made_folder(root_fd: int, rel: PurePosixPath, uid: int) -> int:
    """As _folder, making the missing folders (the uid's) on the way."""
    try:
        return _folder_of(root_fd, rel, uid)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST):
            raise _through_link(rel) from None
        raise _disk_error(exc, rel, 0) from None


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _full_inodes() -> EditRefused:
    return EditRefused(
        "The workspace is full: it holds as many files and folders as it may. Delete some you do "
        "not need (build output, copies, caches) and try again; nothing was changed.",
        "full",
    )


def _disk_error(exc: OSError, rel: PurePosixPath, size: int, disk_bytes: int | None = None) -> EditRefused:
    """The words for an OSError of a write: the caps, a read-only workspace; others are ours and raised."""
    if exc.errno == errno.ENOSPC:
        if size == 0:
            return _full_inodes()
        cap = f" of {_size(disk_bytes)}" if disk_bytes else ""
        return EditRefused(
            f"The workspace is full: saving {rel} ({_size(size)}) does not fit in its space{cap}. "
            "Delete files you do not need (in the terminal, `du -sh *` shows what is large) and "
            "save again; the file on disk is as it was.",
            "full",
        )
    if exc.errno == errno.EDQUOT:
        return _full_inodes()
    if exc.errno == errno.EROFS:
        return EditRefused("Time is up: the workspace is read-only, and nothing was saved.", "frozen")
    if exc.errno == errno.EFBIG:
        return EditRefused(f"{rel} is larger than a file of the workspace may be; nothing was saved.", "too_big")
    raise exc


def _hidden(rel: str) -> bool:
    parts = rel.split("/")
    return any(part in JUNK_PARTS for part in parts) or parts[-1].endswith(TEMP_SUFFIX)


def list_tree(ws: Workspace) -> Tree:
    """The workspace's folders, files and links (a link is listed, never followed), sorted by path.

    Caches and tools' folders (``__pycache__``, ``.git``, virtualenvs: what an upload skips) are left out.
    """
    entries: list[Entry] = []
    truncated = False
    with _root(ws, write=False) as root_fd:
        stack = [(os.dup(root_fd), "")]
        try:
            while stack:
                dir_fd, prefix = stack.pop()
                try:
                    for name in sorted(os.listdir(dir_fd), reverse=True):
                        rel = prefix + name
                        st = _lstat(dir_fd, name)
                        if st is None or _hidden(rel):
                            continue
                        if len(entries) >= MAX_LISTED:
                            truncated = True
                            break
                        if stat.S_ISDIR(st.st_mode):
                            entries.append(Entry(rel, "folder", 0, st.st_mtime_ns))
                            try:
                                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                            except OSError:
                                continue  # swapped for something else meanwhile
                            stack.append((sub, rel + "/"))
                        elif stat.S_ISREG(st.st_mode):
                            entries.append(Entry(rel, "file", st.st_size, st.st_mtime_ns))
                        elif stat.S_ISLNK(st.st_mode):
                            entries.append(Entry(rel, "link", 0, st.st_mtime_ns))
                finally:
                    os.close(dir_fd)
        finally:
            for fd, _ in stack:
                os.close(fd)
    return Tree(tuple(sorted(entries, key=lambda e: e.path.split("/"))), truncated)


def _read(dir_fd: int, rel: PurePosixPath) -> tuple[bytes, os.stat_result] | None:
    """The bytes and stat of the regular file ``rel.name`` in ``dir_fd``; None when there is none."""
    try:
        fd = os.open(rel.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EditRefused(f"{rel} is a link: the editor never follows links.", "link") from None
        if exc.errno == errno.EISDIR:
            raise EditRefused(f"{rel} is a folder, not a file.", "folder") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise EditRefused(f"{rel} is not a regular file (a pipe, a socket or a device).", "special")
        if st.st_size > MAX_TEXT_BYTES:
            raise EditRefused(
                f"{rel} is {_size(st.st_size)}, more than the {_size(MAX_TEXT_BYTES)} the editor "
                "opens: look at it in the terminal.",
                "too_big",
            )
        parts, size = [], 0
        while chunk := os.read(fd, CHUNK):
            size += len(chunk)
            if size > MAX_TEXT_BYTES:  # it grew since fstat
                raise EditRefused(
                    f"{rel} is more than the {_size(MAX_TEXT_BYTES)} the editor opens: look at it in the terminal.",
                    "too_big",
                )
            parts.append(chunk)
        return b"".join(parts), st
    finally:
        os.close(fd)


def as_text(data: bytes) -> str | None:
    """The file's text, or None when it is binary (a NUL byte, or not UTF-8)."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_file(ws: Workspace, name: str) -> FileText:
    """The file ``name`` of the workspace, as text when it is; EditRefused when missing, a link, a folder or too big."""
    rel = clean_path(name)
    with _root(ws, write=False) as root_fd:
        dir_fd = _folder(root_fd, rel)
        try:
            found = _read(dir_fd, rel)
        finally:
            os.close(dir_fd)
    if found is None:
        raise EditRefused(f"There is no file {rel} in the workspace.", "missing")
    data, _ = found
    return FileText(str(rel), digest(data), len(data), as_text(data))


def save_file(ws: Workspace, name: str, data: bytes, base: str) -> str:
    """Replace the file ``name`` with ``data``, when what is on disk is still what the editor read (``base``,
    its sha256); the new sha256. FileChanged when it is not; EditRefused over the caps, the old file intact."""
    rel = clean_path(name)
    limit = min(MAX_TEXT_BYTES, ws.limits.file_size_bytes)
    if len(data) > limit:
        raise EditRefused(
            f"{rel} would be {_size(len(data))}, more than the {_size(limit)} the editor saves; nothing was saved.",
            "too_big",
        )
    with _root(ws, write=True) as root_fd:
        dir_fd = _folder(root_fd, rel)
        try:
            found = _read(dir_fd, rel)
            if found is None:
                raise FileChanged(
                    f"{rel} is no longer on disk: it was deleted or renamed from the terminal. "
                    "Save it again to write it back.",
                    None,
                )
            old, st = found
            if digest(old) != base:
                raise FileChanged(
                    f"{rel} was changed on disk by the terminal since you opened it: reload it to see "
                    "the change, or overwrite it with what the editor holds.",
                    digest(old),
                )
            _replace(dir_fd, rel, data, stat.S_IMODE(st.st_mode), ws)
        finally:
            os.close(dir_fd)
    return digest(data)


def _replace(dir_fd: int, rel: PurePosixPath, data: bytes, mode: int, ws: Workspace) -> None:
    """Write ``data`` under a temporary name beside ``rel`` and rename it over; on failure the old file stays."""
    tmp = f".{secrets.token_hex(6)}{TEMP_SUFFIX}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise _disk_error(exc, rel, 0) from None
    try:
        try:
            os.fchown(fd, ws.uid, ws.uid)
            os.fchmod(fd, mode & 0o777)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view[:CHUNK]) :]
        finally:
            os.close(fd)
        os.rename(tmp, rel.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        if isinstance(exc, OSError):
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY):
                raise EditRefused(f"{rel} is a folder now; nothing was saved.", "folder") from None
            raise _disk_error(exc, rel, len(data), ws.limits.disk_bytes) from None
        raise


def create_file(ws: Workspace, name: str, folder: bool = False) -> str:
    """Make the empty file (or folder) ``name``, and the folders on the way; its path. EditRefused when it exists."""
    rel = clean_path(name)
    with _root(ws, write=True) as root_fd:
        dir_fd = _made_folder(root_fd, rel, ws.uid)
        try:
            if folder:
                os.mkdir(rel.name, 0o755, dir_fd=dir_fd)
                os.chown(rel.name, ws.uid, ws.uid, dir_fd=dir_fd, follow_symlinks=False)
            else:
                fd = os.open(rel.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
                try:
                    os.fchown(fd, ws.uid, ws.uid)
                    os.fchmod(fd, 0o644)
                finally:
                    os.close(fd)
        except FileExistsError:
            raise EditRefused(
                f"{rel} already exists: open it from the list, or choose another name.", "exists"
            ) from None
        except OSError as exc:
            raise _disk_error(exc, rel, 0) from None
        finally:
            os.close(dir_fd)
    return str(rel)


def rename_path(ws: Workspace, name: str, new_name: str) -> str:
    """Rename the file or folder ``name`` to ``new_name`` (making the folders on the way); the new path.

    EditRefused when ``name`` is missing or a link, or ``new_name`` exists or leaves the workspace.
    """
    rel, new = clean_path(name), clean_path(new_name)
    if rel == new:
        return str(new)
    if new.parts[: len(rel.parts)] == rel.parts:
        raise EditRefused(f"{rel} cannot move into itself.", "path")
    with _root(ws, write=True) as root_fd:
        src_fd = _folder(root_fd, rel)
        try:
            st = _lstat(src_fd, rel.name)
            if st is None:
                raise EditRefused(f"There is no file {rel} in the workspace.", "missing")
            if stat.S_ISLNK(st.st_mode):
                raise EditRefused(f"{rel} is a link: rename it in the terminal (mv).", "link")
            dst_fd = _made_folder(root_fd, new, ws.uid)
            try:
                if _lstat(dst_fd, new.name) is not None:
                    raise EditRefused(
                        f"{new} already exists: choose another name, or delete it in the terminal first.", "exists"
                    )
                os.rename(rel.name, new.name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            except OSError as exc:
                raise _disk_error(exc, new, 0) from None
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)
    return str(new)
