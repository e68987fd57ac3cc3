"""The backup file itself: writing it as a stream, and reading it back into a folder, checked, before any restore.

Written as a stream (gzip over a tar, no seeking), so that `manage.py backup -` can write to a
pipe. Every file is added with the size it had when it was opened and its sha256 computed as
it is read, and the manifest, last, lists them. Reading checks each member as it comes, before
writing a byte of it: a regular file (no link, folder or device), a name that stays inside the
folder it is unpacked into, not seen before, and one the backup's format knows; it is written
under that folder with O_EXCL | O_NOFOLLOW through folders opened without following links
(grading's unpacking does the same: grading/engine/archive.py). Only a file whose every member
matches its manifest is handed on.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import time
import unicodedata
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from grading.engine.archive import BIDI_CONTROLS, _open_dirs

from . import FORMAT, VERSION, BackupRefused, Part

HEADER = "takehome-backup.json"
MANIFEST = "manifest.json"
FILES = "files"  # the folder of a restore's scratch space that members are unpacked into
CHUNK = 1 << 20
MANIFEST_MAX_BYTES = 64 << 20


def size_words(n: int) -> str:
    """20971520 -> '20 MB', as people say it."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


class _Hashing(io.RawIOBase):
    """Reads ``size`` bytes of ``source`` for tarfile, hashing them on the way."""

    def __init__(self, source: BinaryIO):
        self.source = source
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data = self.source.read(n)
        self.digest.update(data)
        return data


class Writer:
    """A backup being written to ``out``: its members in order, each noted (size, mode, sha256) for the manifest."""

    def __init__(self, out: BinaryIO):
        # why level 6: the uploads are zips already; the best compression would only cost time
        self._gzip = gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0)
        self._tar = tarfile.open(fileobj=self._gzip, mode="w|", format=tarfile.PAX_FORMAT)
        self.files: dict[str, dict] = {}
        self.bytes = 0

    def add(self, name: str, source: BinaryIO, size: int, mode: int = 0o600) -> None:
        """Add ``size`` bytes of ``source`` as the file ``name``; OSError when it holds fewer."""
        if name in self.files or name in (HEADER, MANIFEST):
            raise ValueError(f"{name} is in the backup already")
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = size, mode & 0o777, int(time.time())
        reader = _Hashing(source)
        self._tar.addfile(info, reader)
        self.files[name] = {"size": size, "mode": mode & 0o777, "sha256": reader.digest.hexdigest()}
        self.bytes += size

    def add_json(self, name: str, data: dict) -> None:
        """The header or the manifest: outside the list of files (the manifest cannot list itself)."""
        body = json.dumps(data, indent=1, sort_keys=True).encode()
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(body), 0o600, int(time.time())
        self._tar.addfile(info, io.BytesIO(body))

    def close(self) -> None:
        self._tar.close()
        self._gzip.close()

    def abandon(self) -> None:
        """Stop writing a backup that failed, adding nothing more (its file is removed by the caller).

        why: closed as it is, the tar's stream would write its last blocks into the gzip file, and left
        open, it would do so when collected, into a closed file, an error Python reports and cannot
        raise; so the stream is pointed at a throwaway buffer first, and closed there.
        """
        stream = self._tar.fileobj
        if stream is not None:
            stream.fileobj = io.BytesIO()  # type: ignore[union-attr]  (tarfile's stream: what it writes into)
        self._tar.close()
        self._gzip.close()


class Collector:
    """What a Part's ``collect`` adds its files through: each under the part's folder in the backup.

    ``info`` is the part's entry in the manifest (its own facts: counts, states), ``said`` the
    lines the command prints about it.
    """

    def __init__(self, writer: Writer, part: Part, scratch: Path, skip: tuple[int, int] | None = None):
        self.writer, self.part, self.scratch, self.skip = writer, part, scratch, skip
        self.info: dict = {"title": part.title, "files": 0, "bytes": 0}
        self.said: list[str] = []

    def _name(self, rel: str) -> str:
        if not self.part.accepts(rel):
            raise ValueError(f"{self.part.name} does not accept {rel!r} in a backup")
        return f"{self.part.name}/{rel}"

    def say(self, line: str) -> None:
        self.said.append(line)

    def add_open(self, rel: str, source: BinaryIO, size: int, mode: int = 0o600) -> None:
        self.writer.add(self._name(rel), source, size, mode)
        self.info["files"] += 1
        self.info["bytes"] += size

    def add_bytes(self, rel: str, data: bytes, mode: int = 0o600) -> None:
        self.add_open(rel, io.BytesIO(data), len(data), mode)

    def add_file(self, rel: str, path: Path) -> bool:
        """Add the regular file at ``path`` as it is now; False (and a line said) for anything else."""
        try:
            # why O_NOFOLLOW and O_NONBLOCK: a link is not followed out of the folder, a FIFO never waits
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            return False  # removed since it was listed
        except OSError as exc:
            self.say(f"left out {rel}: {exc.strerror}")
            return False
        with os.fdopen(fd, "rb") as source:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.say(f"left out {rel}: not a regular file")
                return False
            if self.skip == (st.st_dev, st.st_ino):
                self.say(f"left out {rel}: the backup being written")
                return False
            self.add_open(rel, source, st.st_size, stat.S_IMODE(st.st_mode))
        return True

    @contextlib.contextmanager
    def new_file(self, rel: str, mode: int = 0o600) -> Iterator[BinaryIO]:
        """A file written now (a copy of something live): written to scratch space first, then added whole."""
        path = self.scratch / f"new-{len(self.writer.files)}"
        try:
            with path.open("wb") as out:
                yield out
            with path.open("rb") as source:
                self.add_open(rel, source, path.stat().st_size, mode)
        finally:
            path.unlink(missing_ok=True)


# --- reading --------------------------------------------------------------------------------------------


class _Bad(Exception):
    """What is wrong with the file being read, as the end of a sentence about it (read() makes it BackupRefused)."""


def member_parts(name: str) -> list[str]:
    """The folders and file name of a member; _Bad when it could land outside the restore's folders."""
    parts = name.split("/")
    # why each: NUL ends a name in C and control characters forge what is printed; an absolute
    # name is written wherever it points; "..", "." and empty parts climb out or hide where it goes
    if (
        not name
        or any(unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS for c in name)
        or name.startswith("/")
        or any(p in ("", ".", "..") or len(p.encode()) > 255 for p in parts)
    ):
        raise _Bad(
            f"it holds a member named {name.encode('unicode_escape').decode()[:200]!r}, which would be written "
            "outside the folders a restore fills: `manage.py backup` never writes such a name."
        )
    return parts


class _Staging:
    """The folder a restore unpacks into, written only through descriptors that never follow a link."""

    def __init__(self, root: Path):
        self.root = root / FILES
        self.root.mkdir(mode=0o700)
        self.real = self.root.resolve()

    def write(self, name: str, source: BinaryIO) -> tuple[int, str]:
        parts = member_parts(name)
        # why again, apart from the name's check: a second guard that holds whatever the check missed
        if not (self.root / name).resolve().is_relative_to(self.real):
            raise _Bad(f"the member {name!r} would be written outside the restore's folder.")
        root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            dir_fd = _open_dirs(root_fd, parts[:-1])
        finally:
            os.close(root_fd)
        try:
            # why O_EXCL: a name seen twice is refused before this, and nothing is ever written over
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        digest, written = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
                written += len(chunk)
        return written, digest.hexdigest()


def _json_member(tar: tarfile.TarFile, info: tarfile.TarInfo, what: str) -> dict:
    if not info.isreg() or info.size > MANIFEST_MAX_BYTES:
        raise _Bad(f"its {what} is not a file a backup writes.")
    body = tar.extractfile(info)
    try:
        data = json.loads(body.read() if body is not None else b"")
    except ValueError:
        raise _Bad(f"its {what} is damaged (not JSON).") from None
    if not isinstance(data, dict):
        raise _Bad(f"its {what} is damaged.")
    return data


def check_version(data: dict) -> None:
    if data.get("format") != FORMAT:
        raise _Bad("it is not a takehome backup (it does not say it is one).")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise _Bad("it is not a takehome backup (its format has no version).")
    if version > VERSION:
        raise _Bad(
            f"it was written by a newer version of takehome (backup format {version}; this one reads format "
            f"{VERSION} and older). Restore it with that version or a newer one."
        )


def read(source: BinaryIO, scratch: Path, known: Callable[[str], bool], label: str) -> dict:
    """Unpack the backup ``source`` into ``scratch``/files, check every file against the manifest, return it.

    ``known`` says whether a member's name is one this installation can restore. BackupRefused,
    with the reason, for anything that is not a whole, unaltered backup of a format this code reads;
    ``label`` names the file in it.
    """
    try:
        return _read(source, scratch, known)
    except _Bad as exc:
        raise BackupRefused(f"Cannot restore {label}: {exc} Nothing was restored.") from None


def _check_start(source: io.BufferedReader) -> None:
    """The file's first bytes, for a plain sentence about a file that is no backup at all."""
    head = source.peek(4)[:4]
    if not head:
        raise _Bad("it is empty.")
    if head[:2] != b"\x1f\x8b":
        kind = "a zip file" if head.startswith(b"PK") else "not gzip-compressed"
        raise _Bad(f"it is not a takehome backup ({kind}: `manage.py backup` writes a .tar.gz).")


def _read(source: BinaryIO, scratch: Path, known: Callable[[str], bool]) -> dict:
    staging = _Staging(scratch)
    found: dict[str, tuple[int, str]] = {}
    manifest = None
    buffered = source if isinstance(source, io.BufferedReader) else io.BufferedReader(source)  # type: ignore[arg-type]
    try:
        _check_start(buffered)
        with gzip.GzipFile(fileobj=buffered, mode="rb") as gz:
            try:
                tar = tarfile.open(fileobj=gz, mode="r|")
            except tarfile.ReadError:
                raise _Bad("it is not a takehome backup (a gzip'd file, but not a tar).") from None
            with tar:
                header = False
                for info in tar:
                    if not header:
                        if info.name != HEADER:
                            raise _Bad(f"it is not a takehome backup (it does not start with {HEADER}).")
                        check_version(_json_member(tar, info, "header"))
                        header = True
                        continue
                    if manifest is not None:
                        raise _Bad(f"something follows its manifest ({info.name!r}): it was altered.")
                    if info.name == MANIFEST:
                        manifest = _json_member(tar, info, "manifest")
                        continue
                    member_parts(info.name)
                    if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
                        # why: a link could point anywhere on this server, a device or FIFO is no data of ours
                        raise _Bad(f"its member {info.name!r} is not a regular file (a link, folder or device).")
                    if info.name in found:
                        raise _Bad(f"it holds {info.name!r} twice.")
                    if not known(info.name):
                        raise _Bad(
                            f"it holds {info.name!r}, which this version of takehome does not restore. Restore it "
                            "with the version that wrote it."
                        )
                    body = tar.extractfile(info)
                    assert body is not None  # a regular file always has a body
                    found[info.name] = staging.write(info.name, body)
                if not header:
                    raise _Bad("it is not a takehome backup (an empty tar).")
            # why read to the end: gzip checks its CRC and length there, so a file cut after the tar's end is seen
            while gz.read(CHUNK):
                pass
    except _Bad:
        raise
    except (EOFError, zlib.error, tarfile.ReadError) as exc:
        raise _Bad(
            f"it is cut short or damaged ({exc}): it was not written to the end, or changed since. Use another "
            "copy, or take the backup again."
        ) from None
    except gzip.BadGzipFile as exc:
        raise _Bad(f"it is damaged ({exc}): use another copy, or take the backup again.") from None
    except OSError as exc:
        if exc.errno is None:  # tarfile's own "unexpected end of data"
            raise _Bad(f"it is cut short ({exc}): use another copy, or take the backup again.") from None
        raise BackupRefused(
            f"The backup could not be unpacked to check it: {exc.strerror} ({exc.filename or scratch}). "
            "Nothing was restored."
        ) from None
    if manifest is None:
        raise _Bad(
            "it is cut short: its manifest, written last, is missing. Use another copy, or take the backup again."
        )
    check_version(manifest)
    listed = manifest.get("files")
    if not isinstance(listed, dict):
        raise _Bad("its manifest is damaged (no list of files).")
    missing = sorted(set(listed) - set(found))
    extra = sorted(set(found) - set(listed))
    if missing or extra:
        names = ", ".join((missing or extra)[:5])
        raise _Bad(f"its files are not the ones its manifest lists ({'missing' if missing else 'not listed'}: {names}).")
    for name, (size, sha256) in found.items():
        facts = listed[name]
        if not isinstance(facts, dict) or facts.get("size") != size or facts.get("sha256") != sha256:
            raise _Bad(f"{name} is not what its manifest says (size or sha256 differ): the file was altered or damaged.")
    return manifest
