"""A run's tree into the sandbox without a copy on the worker's disk: written into the run's own tmpfs through
directory file descriptors (never through a link, owned by the run's uid), or streamed in as a tar.
"""

from __future__ import annotations

import errno
import logging
import os
import tarfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from .results import SandboxUnavailable

logger = logging.getLogger(__name__)


_TAR_BLOCK = 512


def _tar_header(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> bytes:
    """One POSIX ustar header block (GNU tar's long-name blocks first for a name or link over 100 bytes)."""
    raw, raw_link = name.encode("utf-8", "surrogateescape"), link.encode("utf-8", "surrogateescape")
    if len(raw) > 100 or len(raw_link) > 100:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.size, info.linkname, info.mtime = kind, mode, size, link, int(time.time())
        return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    # why by hand: tarfile's own header code took 0.14 s for 2,000 small files,
    # and a grading builds a tar for each of its eight or so runs.
    header = bytearray(_TAR_BLOCK)
    header[0 : len(raw)] = raw
    header[100:108] = b"%07o\0" % mode
    header[108:124] = b"0000000\0" * 2  # uid, gid: tar runs as the sandbox's uid with --no-same-owner
    header[124:136] = b"%011o\0" % size
    header[136:148] = b"%011o\0" % int(time.time())
    header[148:156] = b" " * 8  # the checksum counts its own field as spaces
    header[156:157] = kind
    header[157 : 157 + len(raw_link)] = raw_link
    header[257:265] = b"ustar\x0000"
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def _tar_file(out, name: str, mode: int, data: bytes) -> None:
    out.write(_tar_header(name, tarfile.REGTYPE, mode, len(data)))
    out.write(data)
    out.write(b"\0" * (-len(data) % _TAR_BLOCK))


def _dir_entries(src: Path, prefix: str) -> Iterator[tuple[bytes, str, int, bytes | str]]:
    # why: only directories, regular files and symlinks (added as links, never
    # followed on the host, so a link to /etc/shadow carries a link, not the file);
    # FIFOs and devices are skipped (opening a FIFO would hang the worker).
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        name = prefix + entry.name
        if entry.is_symlink():
            yield tarfile.SYMTYPE, name, 0o777, os.readlink(entry.path)
        elif entry.is_dir(follow_symlinks=False):
            yield tarfile.DIRTYPE, name, 0o755, b""
            yield from _dir_entries(Path(entry.path), name + "/")
        elif entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as fh:
                mode = 0o755 if os.fstat(fh.fileno()).st_mode & 0o100 else 0o644
                data = fh.read()
            yield tarfile.REGTYPE, name, mode, data


def _tree_entries(tree: Path | Mapping[str, bytes]) -> Iterator[tuple[bytes, str, int, bytes | str]]:
    """(kind, posix name, mode, data or link target) of each entry of ``tree``, parents before children.

    Directories 0755, files 0644 or 0755 (the owner's exec bit), symlinks as
    links; a mapping's files are 0644 and its folders are implied by the names.
    """
    if isinstance(tree, Mapping):
        for path, data in sorted(tree.items()):
            yield tarfile.REGTYPE, path, 0o644, data
    elif Path(tree).is_dir():
        yield from _dir_entries(Path(tree), "")


def _tree_arg(tree: Path | Mapping[str, bytes]) -> Path | Mapping[str, bytes]:
    return tree if isinstance(tree, Mapping) else Path(tree)


def _write_tree(out, tree: Path | Mapping[str, bytes]) -> None:
    for kind, name, mode, payload in _tree_entries(tree):
        if kind == tarfile.REGTYPE and isinstance(payload, bytes):
            _tar_file(out, name, mode, payload)
        else:
            link = payload if kind == tarfile.SYMTYPE and isinstance(payload, str) else ""
            out.write(_tar_header(name, kind, mode, link=link))
    out.write(b"\0" * (2 * _TAR_BLOCK))  # the end of the archive


class TreeRefused(Exception):
    """A tree that cannot be written into its run's /tree: too big for the tmpfs, or a name tar refuses too."""


class _TreesRefused(Exception):
    """A run's trees did not all fit their sandboxes: why, per launch (None for those that fit or were not tried)."""

    def __init__(self, refused: list[str | None]) -> None:
        super().__init__("a tree did not fit its sandbox")
        self.refused = refused


# The errors that are the tree's, not ours: out of space or inodes, and shapes
# tar fails on too (a name twice, a file where a folder is wanted, a link on the way).
_TREE_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EEXIST,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EMLINK,
    }
)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(parent: int, name: str, uid: int) -> int:
    """The folder ``name`` in ``parent`` (made, 0755 and ``uid``'s, if missing); never through a link."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        pass
    os.mkdir(name, 0o700, dir_fd=parent)
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    try:
        os.fchown(fd, uid, uid)
        os.fchmod(fd, 0o755)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_tree_into(root_fd: int, tree: Path | Mapping[str, bytes], uid: int) -> None:
    """Write ``tree`` (a folder, or {posix path: bytes}) into the folder open as ``root_fd``, owned by ``uid``.

    The same files, modes and links as ``tar -x -p --no-same-owner`` run by
    ``uid`` makes of ``tree_stream``'s tar: a leading "/" is dropped, a name
    with ".." is refused. The caller is root, writing into the run's own
    tmpfs before its sandbox starts: nothing is ever followed through a link.
    Each folder is opened from its parent's fd with O_NOFOLLOW, each entry is
    made in it by name (O_EXCL for files), so a link in the tree (``a`` to
    /etc, then ``a/passwd``) or a hostile name cannot reach outside
    ``root_fd``. Raises TreeRefused when the tree does not fit (ENOSPC: bytes
    or inodes) or has a shape tar fails on too; other OSErrors are ours.
    """
    _write_entries(root_fd, _tree_entries(tree), uid)


def _write_entries(root_fd: int, entries, uid: int) -> None:
    chain: list[tuple[str, int]] = []  # the folders open below root_fd, outermost first
    name = ""
    entries = iter(entries)
    try:
        while True:
            try:
                kind, name, mode, payload = next(entries)
            except StopIteration:
                break
            except OSError as exc:  # reading the tree (the worker's own folder) failed: ours, not the tree's
                raise SandboxUnavailable(f"could not read the tree: {exc}") from None
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if not parts or ".." in parts:
                raise TreeRefused(f"{name!r}: a name no tree may hold")
            *folders, leaf = parts
            keep = 0
            while keep < min(len(chain), len(folders)) and chain[keep][0] == folders[keep]:
                keep += 1
            while len(chain) > keep:
                os.close(chain.pop()[1])
            for folder in folders[keep:]:
                chain.append((folder, _open_dir(chain[-1][1] if chain else root_fd, folder, uid)))
            parent = chain[-1][1] if chain else root_fd
            if kind == tarfile.DIRTYPE:
                os.mkdir(leaf, 0o700, dir_fd=parent)  # why here: a name already there is refused (EEXIST)
                chain.append((leaf, _open_dir(parent, leaf, uid)))
                os.fchown(chain[-1][1], uid, uid)
                os.fchmod(chain[-1][1], mode)
            elif kind == tarfile.SYMTYPE:
                os.symlink(payload, leaf, dir_fd=parent)
                os.chown(leaf, uid, uid, dir_fd=parent, follow_symlinks=False)
            else:
                fd = os.open(
                    leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent
                )
                try:
                    os.fchown(fd, uid, uid)
                    os.fchmod(fd, mode)
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view) :]
                finally:
                    os.close(fd)
    except OSError as exc:
        if exc.errno in _TREE_ERRNOS:
            raise TreeRefused(f"{name}: {exc.strerror}") from None
        raise
    except ValueError as exc:  # a NUL in a name
        raise TreeRefused(f"{name!r}: {exc}") from None
    finally:
        for _, fd in chain:
            os.close(fd)


def tree_stream(tree: Path | Mapping[str, bytes]) -> int:
    """A tar of ``tree`` (a folder, or {posix path: bytes}) in memory, as a file descriptor read from its start.

    For a cold run in bwrap mode (see write_tree_into for mount mode).
    why: the sandbox's wrapper unpacks it straight into its own size- and
    inode-capped tmpfs /tree, so each file of a rerun is written once, in
    memory; no copy of the tree is made on the worker's disk. A memfd has no
    path: nothing outside this process and the sandbox it is passed to sees it.
    """
    fd = os.memfd_create("takehome-tree", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb", buffering=1 << 20) as out:
            _write_tree(out, tree)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    except BaseException:
        os.close(fd)
        raise
