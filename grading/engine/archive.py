"""Unpack a candidate's zip safely, or refuse it with a sentence they can act on.

``safe_extract(archive, dest)`` works in two passes. The first reads only the
central directory and refuses anything hostile or broken before a byte is
written: names, file types, flags, duplicates, counts and the sizes the
archive declares. The second streams each kept file out in chunks, counting
the bytes really inflated against the same limits (declared sizes are only an
early warning, never trusted), and writes through directory descriptors with
``O_EXCL | O_NOFOLLOW``, so nothing can land outside ``dest``. On any refusal
``dest`` is removed again (or emptied, if it existed before). ``REASONS``
holds every refusal sentence.

Skipped as junk, listed in the report, never an error: ``__MACOSX/``, ``._*``
(AppleDouble), ``.DS_Store``, ``Thumbs.db``, ``desktop.ini``, ``__pycache__/``,
``*.pyc``, ``*.pyo``, ``.git/``, ``.hg/``, ``.svn/``, ``.venv/``, any folder
holding ``pyvenv.cfg`` (a virtualenv), ``node_modules/``, ``.pytest_cache/``,
``.mypy_cache/``, ``.ruff_cache/``, ``.tox/``, ``.idea/`` and ``.vscode/``
(editor state: only noise in the diff). A virtualenv made in the project
folder itself (``python -m venv .``: ``pyvenv.cfg`` beside ``.py`` files)
loses only ``pyvenv.cfg`` and the venv's own ``bin/ Scripts/ lib/ lib64/
Lib/ include/ Include/`` folders.

Junk names are still checked for safety (a junk ``../x`` is still refused),
but junk is never opened, so its type (venvs and ``node_modules`` hold
symlinks), encryption and size do not matter. Junk counts against its own,
larger entry cap (``max_skipped_entries``), so an honest upload with a
virtualenv inside is not refused; kept files and folders count against
``max_entries``.

Other decisions: a backslash in a name is a folder separator (Windows
PowerShell 5.1's ``Compress-Archive`` writes ``src\\app.py``), turned into
``/`` before any safety check, so ``..\\x`` is refused like ``../x``;
``kept`` lists files only (folders are created, not listed);
when every kept entry sits under one top-level folder, its contents are
written straight into ``dest`` (so ``root == dest``) and the folder's name is
``stripped_prefix``; case and Unicode-normalisation twins (``A.py``/``a.py``)
are allowed, since the tree lives on a case-sensitive Linux filesystem.
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import stat
import struct
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType

CHUNK = 64 * 1024
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a first entry, or an empty archive
OTHER_FORMATS = {
    b"\x1f\x8b": "a gzip or .tar.gz file",
    b"7z\xbc\xaf": "a 7-Zip file",
    b"Rar!": "a RAR file",
    b"BZh": "a bzip2 file",
    b"\xfd7zXZ": "an xz file",
}
READABLE_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
JUNK_PARTS = {
    "__MACOSX",
    "__pycache__",
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "node_modules",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".idea",
    ".vscode",
}
JUNK_FILES = {".DS_Store", "Thumbs.db", "desktop.ini"}
VENV_OWN = {"pyvenv.cfg", "bin", "Scripts", "lib", "lib64", "Lib", "include", "Include"}
BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
FLAG_ENCRYPTED, FLAG_UTF8 = 0x1, 0x800
AGAIN = "make a fresh zip of the project folder and upload it again"
INSIDE = "zip the project folder itself so that paths start inside it"
REASONS = {  # every refusal, one sentence each; {name} is escaped and shortened
    "not_zip": "The upload is not a zip archive{what}; upload a .zip file, made for example with your "
    "file manager's Compress command or `zip -r project.zip project`.",
    "damaged": f"The archive is damaged or cut short and cannot be read; {AGAIN}.",
    "crc": f"The archive is damaged: {{name}} does not match its checksum; {AGAIN}.",
    "short": f"The archive is damaged: {{name}} is shorter than it says; {AGAIN}.",
    "method": "The archive stores {name} with a compression method this grader cannot read; zip again "
    "with ordinary (deflate) compression, the default of most tools.",
    "encrypted": "The archive holds a password-protected file ({name}); zip the project again without a password.",
    "not_utf8": "The archive holds a file name that is not valid UTF-8 ({name}); rename it with plain letters "
    "and digits, or zip with a tool that writes UTF-8 names (7-Zip, `zip`, macOS Compress).",
    "control": "The archive holds a file name with a control character ({name}); rename the file and zip again.",
    "absolute": f"The archive holds an absolute path ({{name}}); {INSIDE}.",
    "drive": f"The archive holds a path with a drive letter ({{name}}); {INSIDE}.",
    "escape": "The archive holds a path that leaves its folder ({name}); zip the project folder itself.",
    "long": "The archive holds a name longer than 255 bytes ({name}); shorten it and zip again.",
    "deep": "The archive holds a path more than {limit} long or nested more than {depth} folders deep "
    "({name}); move the files to shallower folders and zip again.",
    "nameless": f"The archive holds a file with no name; {AGAIN}.",
    "symlink": "The archive holds a symbolic link ({name}); replace it with a copy of the file it points "
    "to and zip again.",
    "special": "The archive holds a special file ({name}) that is neither a regular file nor a folder; "
    "remove it and zip again.",
    "duplicate": f"The archive holds the same path twice ({{name}}); {AGAIN}.",
    "file_and_folder": f"The archive holds both a file and a folder named {{name}}; {AGAIN}.",
    "too_many": "The archive holds more than {limit} files and folders; zip only the project, without "
    "data sets or installed dependencies.",
    "too_many_skipped": "The archive holds more than {limit} entries, counting skipped folders such as "
    "virtualenvs, node_modules and .git; leave those out and zip again.",
    "empty": "The archive is empty: it holds no files once junk such as __MACOSX, .DS_Store and "
    f"__pycache__ is left out; {AGAIN}.",
    "file_ratio": "{name} expands more than {limit} times when unpacked, which is how a zip bomb looks; "
    "leave it out and zip again.",
    "total_ratio": "The archive expands more than {limit} times when unpacked, which is how a zip bomb "
    f"looks; {AGAIN}.",
    "file_size": "{name} unpacks to more than {limit}, the limit for one file; leave it out and zip again.",
    "total_size": "The archive unpacks to more than {limit}; zip only the project, without data sets or build output.",
}


class UnsafeArchive(Exception):
    """The upload was refused; ``reason`` is one sentence a candidate can act on."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    """Caps on what one upload may unpack to; sizes count inflated bytes."""

    max_entries: int = 2000
    max_total_bytes: int = 50 * 1024 * 1024
    max_file_bytes: int = 10 * 1024 * 1024
    max_ratio: float = 200.0
    max_skipped_entries: int = 20_000  # junk (a virtualenv, node_modules) has its own cap
    ratio_floor_bytes: int = 1024 * 1024  # below this, small files may compress past max_ratio
    max_path_bytes: int = 1024  # a whole path; the tree is copied under longer prefixes (PATH_MAX is 4096)
    max_depth: int = 32


@dataclass(frozen=True)
class EntryTime:
    """When an entry was last modified, as the archive records it.

    ``utc`` comes from the extended-timestamp (0x5455) or NTFS (0x000a) extra
    field; ``local`` is the DOS date and time, a wall clock with no zone.
    """

    utc: datetime | None
    local: datetime
    source: str  # "extended" | "ntfs" | "dos"


@dataclass(frozen=True)
class ExtractReport:
    """What safe_extract wrote: the tree's root, kept files, skipped junk, times."""

    root: Path
    kept: tuple[str, ...]
    skipped: tuple[str, ...]
    times: Mapping[str, EntryTime]
    stripped_prefix: str | None


@dataclass(frozen=True)
class _Entry:
    """One central-directory entry whose name passed the checks."""

    info: zipfile.ZipInfo
    name: str  # as in the archive, decoded
    path: str  # normalised POSIX path: no empty, "." or ".." segments
    is_dir: bool


def refuse(key: str, name: str = "", **fields: object) -> UnsafeArchive:
    """The UnsafeArchive for ``REASONS[key]``, with the entry name made safe to show."""
    return UnsafeArchive(REASONS[key].format(name=_show(name), **fields))


def safe_extract(archive: Path, dest: Path, limits: Limits = Limits()) -> ExtractReport:
    """Unpack ``archive`` into ``dest`` (absent or empty) or raise UnsafeArchive."""
    _check_magic(archive)
    archive_size = archive.stat().st_size
    with _open_zip(archive) as zf:
        kept, skipped = _plan(zf, limits, archive_size)
        prefix = _wrapping_folder(kept)
        created = _prepare_dest(dest)
        try:
            times = _write_tree(zf, kept, prefix, dest, limits, archive_size)
        except BaseException:
            # why: a refused upload must leave no partial tree for later steps to grade
            _remove_written(dest, created)
            raise
    return ExtractReport(
        root=dest,
        kept=tuple(sorted(times)),
        skipped=tuple(sorted(skipped)),
        times=MappingProxyType(times),
        stripped_prefix=prefix,
    )


def _check_magic(archive: Path) -> None:
    """Refuse anything that does not start like a zip."""
    # why: is_zipfile only looks for an end record, which can be appended to any
    # file (self-extracting executables, polyglots); a plain zip starts with PK.
    with archive.open("rb") as f:
        head = f.read(8)
    if head[:4] in ZIP_MAGIC:
        return
    what = "an empty file" if not head else next((k for m, k in OTHER_FORMATS.items() if head.startswith(m)), "")
    raise refuse("not_zip", what=f" (it is {what})" if what else "")


def _open_zip(archive: Path) -> zipfile.ZipFile:
    """Read the central directory, turning every parse failure into a reason."""
    try:
        return zipfile.ZipFile(archive)
    except UnicodeDecodeError as err:
        # why: flag 0x800 promises UTF-8 names, and zipfile stops at the first bad one
        raise refuse("not_utf8", err.object.decode("utf-8", "backslashreplace")) from err
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, struct.error) as err:
        raise refuse("damaged") from err


def _plan(zf: zipfile.ZipFile, limits: Limits, archive_size: int) -> tuple[list[_Entry], list[str]]:
    """Check every entry without writing anything; return the kept entries and skipped names."""
    infos = zf.infolist()
    cap = limits.max_entries + limits.max_skipped_entries
    if len(infos) > cap:  # why: bounds all the per-entry work that follows
        raise refuse("too_many_skipped", limit=cap)
    entries = [_check_name(info) for info in infos]
    if any(not e.path and not e.is_dir for e in entries):  # why: a nameless file has nowhere to go
        raise refuse("nameless")
    entries = [e for e in entries if e.path]  # "./" names the root itself
    venvs = _virtualenvs(entries)
    junk = [_is_junk(e, venvs) for e in entries]
    kept = [e for e, j in zip(entries, junk) if not j]
    skipped = [e.name for e, j in zip(entries, junk) if j]
    if len(kept) > limits.max_entries:  # why: each kept entry costs inodes and syscalls
        raise refuse("too_many", limit=limits.max_entries)
    for entry in kept:
        _check_entry(entry)
        # why: the tree is read, copied and walked by path under other folders;
        # past PATH_MAX that fails with "File name too long" and grading errors out
        if len(entry.path.encode()) > limits.max_path_bytes or entry.path.count("/") >= limits.max_depth:
            raise refuse("deep", entry.name, limit=_size(limits.max_path_bytes), depth=limits.max_depth)
    _check_unique(kept)
    if all(e.is_dir for e in kept):
        raise refuse("empty")
    _check_declared_sizes(kept, limits, archive_size)
    return kept, skipped


def _check_name(info: zipfile.ZipInfo) -> _Entry:
    """Decode and normalise one entry's name, refusing anything that could escape or mislead."""
    # zipfile decodes names without flag 0x800 as cp437, as the spec says. In
    # practice tools that leave the flag unset (Info-ZIP on Linux, Java, older
    # macOS) write raw UTF-8, and cp437 would turn "café.py" into a name the
    # candidate never wrote. So: re-encode to the exact raw bytes (cp437 maps
    # all 256 bytes one to one) and require UTF-8. ASCII passes either way; a
    # name in a legacy code page is refused rather than guessed at.
    raw = info.orig_filename.encode("utf-8" if info.flag_bits & FLAG_UTF8 else "cp437")
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("not_utf8", raw.decode("utf-8", "backslashreplace")) from None
    # why: NUL truncates names in C code, newlines and escapes forge log and
    # terminal output, bidi controls make a name read other than it is
    if any(unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS for c in name):
        raise refuse("control", name)
    # Windows PowerShell 5.1's Compress-Archive writes "\\" as the separator
    # (the zip format wants "/"); Info-ZIP and libarchive read it as one.
    # why before every check below: "..\\x", "\\abs" and "C:\\x" must meet
    # the same rules as "../x", "/abs" and "C:/x", on every platform the tree reaches
    path = name.replace("\\", "/")
    if path.startswith("/"):  # why: an absolute path is written wherever it points
        raise refuse("absolute", name)
    if re.match(r"[A-Za-z]:", path):  # why: "C:x" is absolute for any Windows tool reusing the tree
        raise refuse("drive", name)
    parts = path.split("/")
    if ".." in parts:  # why: ".." climbs out of dest (zip slip)
        raise refuse("escape", name)
    parts = [p for p in parts if p not in ("", ".")]
    if any(len(p.encode()) > 255 for p in parts):  # why: would fail halfway through writing
        raise refuse("long", name)
    kind = stat.S_IFMT(info.external_attr >> 16)
    return _Entry(info, name, "/".join(parts), path.endswith("/") or kind == stat.S_IFDIR)


def _virtualenvs(entries: list[_Entry]) -> dict[str, bool]:
    """Folders holding pyvenv.cfg -> True when the whole folder is the venv."""
    folders = {e.path.rpartition("/")[0] for e in entries if e.path.rpartition("/")[2] == "pyvenv.cfg"}
    own_code = {e.path.rpartition("/")[0] for e in entries if e.path.endswith(".py") and not e.is_dir}
    return {folder: folder not in own_code for folder in folders}


def _is_junk(entry: _Entry, venvs: dict[str, bool]) -> bool:
    """True for OS, tool and cache clutter, which is skipped rather than unpacked."""
    parts = entry.path.split("/")
    if any(p in JUNK_PARTS for p in parts) or parts[-1] in JUNK_FILES or parts[-1].startswith("._"):
        return True
    if not entry.is_dir and parts[-1].endswith((".pyc", ".pyo")):
        return True
    for folder, whole in venvs.items():
        if whole and entry.path == folder:
            return True
        inside = f"{folder}/" if folder else ""
        if entry.path.startswith(inside) and entry.path != folder:
            if whole or entry.path[len(inside) :].split("/")[0] in VENV_OWN:
                return True
    return False


def _check_entry(entry: _Entry) -> None:
    """Refuse kept entries we could not unpack faithfully: encrypted, links, special files."""
    if entry.info.flag_bits & FLAG_ENCRYPTED:  # why: no password; guessing would only make garbage
        raise refuse("encrypted", entry.name)
    # why: checked whatever "made by" system the entry claims, since a hostile
    # tool can claim any; honest non-Unix tools leave these bits zero
    kind = stat.S_IFMT(entry.info.external_attr >> 16)
    if kind == stat.S_IFLNK:  # why: a link could point anywhere on the grader's disk
        raise refuse("symlink", entry.name)
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):  # why: fifos, devices and sockets are not source
        raise refuse("special", entry.name)
    if not entry.is_dir and entry.info.compress_type not in READABLE_METHODS:
        raise refuse("method", entry.name)


def _check_unique(kept: list[_Entry]) -> None:
    """Refuse two entries for one path, and a path that is both a file and a folder."""
    seen: dict[str, str] = {}
    for entry in kept:
        # why: a second copy would silently replace the first, so reviewers and
        # reruns could see different files
        if entry.path in seen:
            first = seen[entry.path]
            both = first if first == entry.name else f"{_show(first)} and {_show(entry.name)}"
            raise UnsafeArchive(REASONS["duplicate"].format(name=_show(both, 200)))
        seen[entry.path] = entry.name
    files = {e.path for e in kept if not e.is_dir}
    for entry in kept:
        parent = entry.path
        while "/" in parent:
            parent = parent.rpartition("/")[0]
            if parent in files:  # why: writing under a file's path would fail halfway
                raise refuse("file_and_folder", parent)


def _check_sizes(entry: _Entry, size: int, total: int, limits: Limits, archive_size: int) -> None:
    """Refuse a bomb-like expansion, one file past its cap, or the tree past its cap."""
    ratio = f"{limits.max_ratio:g}"
    # why: honest code rarely expands 200x, a zip bomb does by design; stop at
    # the first sign rather than inflate up to the size caps
    if size > limits.ratio_floor_bytes and size > limits.max_ratio * max(entry.info.compress_size, 1):
        raise refuse("file_ratio", entry.name, limit=ratio)
    # why: overlapping entries can reuse one small compressed block; the file's real size can't lie
    if total > limits.ratio_floor_bytes and total > limits.max_ratio * max(archive_size, 1):
        raise refuse("total_ratio", limit=ratio)
    if size > limits.max_file_bytes:  # why: one huge file fills the disk or the sandbox's tmpfs
        raise refuse("file_size", entry.name, limit=_size(limits.max_file_bytes))
    if total > limits.max_total_bytes:  # why: the same, spread over many files
        raise refuse("total_size", limit=_size(limits.max_total_bytes))


def _check_declared_sizes(kept: list[_Entry], limits: Limits, archive_size: int) -> None:
    """Early refusal on the sizes the archive declares; streaming checks the real ones."""
    total = 0
    for entry in (e for e in kept if not e.is_dir):
        total += entry.info.file_size
        _check_sizes(entry, entry.info.file_size, total, limits, archive_size)


def _wrapping_folder(kept: list[_Entry]) -> str | None:
    """The single top-level folder every kept entry lives in, if there is one."""
    tops = {e.path.split("/")[0] for e in kept}
    if len(tops) == 1 and all("/" in e.path or e.is_dir for e in kept):
        return tops.pop()
    return None


def _prepare_dest(dest: Path) -> bool:
    """Create dest, or accept an empty one; True when we created it."""
    try:
        dest.mkdir(parents=True)
        created = True
    except FileExistsError:
        # why: unpacking over an existing tree would mix two submissions
        if dest.is_symlink() or not dest.is_dir() or any(dest.iterdir()):
            raise FileExistsError(f"{dest} must be an empty folder or not exist") from None
        created = False
    dest.chmod(0o755)
    return created


def _remove_written(dest: Path, created: bool) -> None:
    """Undo a partial extraction: remove dest, or empty it if it existed before."""
    if created:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _write_tree(
    zf: zipfile.ZipFile, kept: list[_Entry], prefix: str | None, dest: Path, limits: Limits, archive_size: int
) -> dict[str, EntryTime]:
    """Write every kept entry under dest; return kept file path -> time."""
    times: dict[str, EntryTime] = {}
    real_dest, total = dest.resolve(), 0
    root_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    # why one folder kept open: entries of one folder usually come together, and
    # opening every folder of the path again for each file (a mkdir, an open and
    # a chmod per level) was most of the unpacking time of a 2,000-file upload.
    folder: tuple[str, ...] | None = None
    folder_fd = -1
    try:
        for entry in kept:
            rel = entry.path[len(prefix) + 1 :] if prefix else entry.path
            if not rel:
                continue  # the wrapping folder's own entry
            parts = rel.split("/")
            folder_parts = tuple(parts if entry.is_dir else parts[:-1])
            # why: a second guard, independent of the name checks above; the whole
            # path is resolved for the first entry of each folder, and the next
            # ones of that folder only add a plain name to it (created with
            # O_EXCL | O_NOFOLLOW, so an existing link in its place is never followed)
            if (
                folder_parts != folder
                and not (dest / rel).resolve().is_relative_to(real_dest)
                or parts[-1] in ("", ".", "..")
            ):
                raise refuse("escape", entry.name)
            if folder_parts != folder:
                if folder_fd >= 0:
                    os.close(folder_fd)
                    folder_fd = -1
                folder_fd, folder = _open_dirs(root_fd, list(folder_parts)), folder_parts
            if not entry.is_dir:
                total += _write_file(zf, entry, folder_fd, parts[-1], total, limits, archive_size)
                times[rel] = entry_time(entry.info)
    finally:
        if folder_fd >= 0:
            os.close(folder_fd)
        os.close(root_fd)
    return times


def _open_dirs(root_fd: int, parts: list[str]) -> int:
    """Create and open the folders ``parts`` below root_fd, never following a link."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            # why: O_NOFOLLOW at every step, so no link in the tree can redirect a write
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
            os.fchmod(fd, 0o755)  # why: the sandbox's unprivileged uid must read the tree
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_file(
    zf: zipfile.ZipFile, entry: _Entry, dir_fd: int, base: str, total: int, limits: Limits, archive_size: int
) -> int:
    """Stream one entry into a new file, counting real bytes; return the bytes written."""
    # why: O_EXCL never reuses or truncates a file, O_NOFOLLOW never follows a link
    fd = os.open(base, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
    os.fchmod(fd, 0o644)  # why: readable by the sandbox uid whatever the worker's umask
    written = 0
    with os.fdopen(fd, "wb") as out:
        for chunk in _read_entry(zf, entry):
            written += len(chunk)
            # why: declared sizes can lie; these are the bytes really inflated
            # (zipfile also stops at the declared size, but we don't rely on it)
            _check_sizes(entry, written, total + written, limits, archive_size)
            out.write(chunk)
    if written != entry.info.file_size:  # why: the data is not what the directory claims
        raise refuse("short", entry.name)
    return written


def _read_entry(zf: zipfile.ZipFile, entry: _Entry) -> Iterator[bytes]:
    """Yield an entry's inflated bytes, turning decoding failures into reasons."""
    try:
        with zf.open(entry.info) as src:
            while chunk := src.read(CHUNK):
                yield chunk
    except zipfile.BadZipFile as err:
        # why: a CRC mismatch means these are not the bytes the candidate zipped
        raise refuse("crc" if "CRC" in str(err) else "damaged", entry.name) from err
    except (zlib.error, lzma.LZMAError, EOFError, OSError, struct.error) as err:
        raise refuse("damaged") from err  # bz2 reports bad data as OSError
    except NotImplementedError as err:
        raise refuse("method", entry.name) from err


def entry_time(info: zipfile.ZipInfo) -> EntryTime:
    """An entry's modification time from its central-directory extra fields, else its DOS time.

    The extended timestamp wins over NTFS when both are present; a DOS date
    that is no date (month 0, as some tools write) reads as 1980-01-01.
    """
    try:
        local = datetime(*info.date_time)
    except ValueError:
        local = datetime(1980, 1, 1)
    extended = ntfs = None
    for tag, data in _extra_fields(info.extra):
        if tag == 0x5455 and len(data) >= 5 and data[0] & 1:  # flags, then mtime if bit 0
            extended = datetime.fromtimestamp(struct.unpack_from("<i", data, 1)[0], UTC)
        elif tag == 0x000A:
            ntfs = _ntfs_mtime(data)
    if extended is not None:
        return EntryTime(utc=extended, local=local, source="extended")
    if ntfs is not None:
        return EntryTime(utc=ntfs, local=local, source="ntfs")
    return EntryTime(utc=None, local=local, source="dos")


def _extra_fields(extra: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield (tag, data) for each well-formed field of a zip extra block."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, pos)
        if pos + 4 + size > len(extra):
            return
        yield tag, extra[pos + 4 : pos + 4 + size]
        pos += 4 + size


def _ntfs_mtime(data: bytes) -> datetime | None:
    """The mtime of an NTFS extra field: 4 reserved bytes, then tag 1 holding three FILETIMEs."""
    for tag, attr in _extra_fields(data[4:]):
        if tag == 1 and len(attr) >= 24 and attr[:8] != bytes(8):
            ticks = struct.unpack_from("<Q", attr)[0]  # 100 ns since 1601-01-01 UTC
            try:
                return datetime(1601, 1, 1, tzinfo=UTC) + timedelta(microseconds=ticks // 10)
            except OverflowError:
                return None
    return None


def _show(name: str, width: int = 80) -> str:
    """A name made safe to print: control characters escaped, long names cut."""
    shown = "".join(
        c.encode("unicode_escape").decode() if unicodedata.category(c) == "Cc" or c in BIDI_CONTROLS else c
        for c in name
    )
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.3g} MB"
    return f"{n // 1024} KB" if n % 1024 == 0 else f"{n:,} bytes"
