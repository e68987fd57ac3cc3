"""Build honest and hostile zip archives in code, byte by byte.

``zipfile`` refuses to write many of the things an attacker would (NUL in
names, the encrypted flag without encryption, sizes that lie), so this module
writes the format itself: local headers, data, central directory, end record.
``make_zip`` covers the common cases; ``write_raw_zip`` takes ``RawEntry``
values for everything else. Nothing here is committed as a binary.
"""

from __future__ import annotations

import io
import stat
import struct
import tarfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

STORED, DEFLATED = 0, 8
UNIX, MSDOS = 3, 0
FILE_MODE = (stat.S_IFREG | 0o644) << 16
DIR_MODE = (stat.S_IFDIR | 0o755) << 16 | 0x10
LINK_MODE = (stat.S_IFLNK | 0o777) << 16
DEFAULT_TIME = (2024, 3, 1, 12, 30, 10)


@dataclass(frozen=True)
class RawEntry:
    """One entry exactly as it will be written; ``None`` fields are computed honestly."""

    name: bytes | str
    data: bytes = b""
    method: int = DEFLATED
    flags: int = 0
    external_attr: int = FILE_MODE
    create_system: int = UNIX
    extra: bytes = b""
    date_time: tuple[int, ...] = DEFAULT_TIME
    crc: int | None = None
    file_size: int | None = None  # declared uncompressed size (set it to lie)
    compressed: bytes | None = None  # ready-made payload, e.g. a bomb compressed once


def write_raw_zip(path: Path, entries: list[RawEntry], *, central_offsets: list[int] | None = None) -> Path:
    """Write ``entries`` as a zip at ``path`` (a folder gets ``upload.zip``); return the file.

    ``central_offsets`` overrides where each central record says its local
    header is (for overlapping-entry bombs).
    """
    path = path / "upload.zip" if path.is_dir() else path
    body, central = io.BytesIO(), io.BytesIO()
    for i, entry in enumerate(entries):
        name = entry.name if isinstance(entry.name, bytes) else entry.name.encode()
        flags = entry.flags
        if isinstance(entry.name, str) and not entry.name.isascii():
            flags |= 0x800
        payload = entry.compressed if entry.compressed is not None else _compress(entry.data, entry.method)
        crc = entry.crc if entry.crc is not None else zlib.crc32(entry.data)
        size = entry.file_size if entry.file_size is not None else len(entry.data)
        dos_time, dos_date = dos_stamp(entry.date_time)
        common = (20, flags, entry.method, dos_time, dos_date, crc, len(payload), size, len(name), len(entry.extra))
        offset = body.tell()
        body.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, *common) + name + entry.extra + payload)
        if central_offsets is not None:
            offset = central_offsets[i]
        central.write(
            struct.pack("<IH", 0x02014B50, entry.create_system << 8 | 20)
            + struct.pack("<HHHHHIIIHH", *common)
            + struct.pack("<HHHII", 0, 0, 0, entry.external_attr, offset)
            + name
            + entry.extra
        )
    cd = central.getvalue()
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(cd), body.tell(), 0)
    path.write_bytes(body.getvalue() + cd + end)
    return path


def make_zip(
    path: Path,
    entries: dict[str, bytes],
    *,
    symlinks: dict[str, str] | None = None,
    dirs: tuple[str, ...] = (),
    method: int = DEFLATED,
    date_time: tuple[int, ...] = DEFAULT_TIME,
    extra: dict[str, bytes] | None = None,
) -> Path:
    """An ordinary Unix-made zip: folders first, then files, then symlinks (name -> target)."""
    raw = [RawEntry(d if d.endswith("/") else d + "/", method=STORED, external_attr=DIR_MODE, date_time=date_time)
           for d in dirs]
    raw += [
        RawEntry(name, data, method=method, date_time=date_time, extra=(extra or {}).get(name, b""))
        for name, data in entries.items()
    ]
    raw += [
        RawEntry(name, target.encode(), method=STORED, external_attr=LINK_MODE, date_time=date_time)
        for name, target in (symlinks or {}).items()
    ]
    return write_raw_zip(path, raw)


def dos_stamp(date_time: tuple[int, ...]) -> tuple[int, int]:
    """(time, date) in MS-DOS format, two-second resolution."""
    y, mo, d, h, mi, s = date_time
    return h << 11 | mi << 5 | s // 2, (y - 1980) << 9 | mo << 5 | d


def extended_time(when: datetime) -> bytes:
    """A central-directory extended-timestamp field (0x5455) holding mtime only."""
    return struct.pack("<HHBi", 0x5455, 5, 1, int(when.timestamp()))


def ntfs_time(when: datetime) -> bytes:
    """An NTFS extra field (0x000a) with mtime, atime and ctime all set to ``when``."""
    epoch = datetime(1601, 1, 1, tzinfo=UTC)
    delta = when - epoch
    ticks = (delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10
    return struct.pack("<HHIHHQQQ", 0x000A, 32, 0, 1, 24, ticks, ticks, ticks)


def zeros_entry(name: str, size: int, *, declared: int | None = None) -> RawEntry:
    """``size`` zero bytes deflated in chunks (a bomb without holding it in memory).

    ``declared`` makes the entry lie about its uncompressed size.
    """
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk, out, crc, left = bytes(1 << 20), [], 0, size
    while left:
        piece = chunk[: min(left, len(chunk))]
        out.append(comp.compress(piece))
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    out.append(comp.flush())
    return RawEntry(name, compressed=b"".join(out), crc=crc, file_size=size if declared is None else declared)


def finder_zip(path: Path, files: dict[str, bytes], folder: str = "project") -> Path:
    """What macOS Finder's Compress makes: a wrapping folder, __MACOSX/._* twins, .DS_Store."""
    when = extended_time(datetime(2024, 3, 1, 11, 30, 10, tzinfo=UTC))
    raw = [RawEntry(f"{folder}/", method=STORED, external_attr=DIR_MODE, extra=when)]
    raw += [RawEntry(f"{folder}/{name}", data, extra=when) for name, data in files.items()]
    raw.append(RawEntry(f"{folder}/.DS_Store", b"\x00\x00\x00\x01Bud1" + bytes(64), extra=when))
    raw.append(RawEntry("__MACOSX/", method=STORED, external_attr=DIR_MODE))
    raw.append(RawEntry(f"__MACOSX/{folder}/", method=STORED, external_attr=DIR_MODE))
    raw += [RawEntry(f"__MACOSX/{folder}/._{name}", b"\x00\x05\x16\x07" + bytes(78)) for name in files]
    return write_raw_zip(path, raw)


def git_archive_zip(path: Path, files: dict[str, bytes], commit_time: datetime, prefix: str = "") -> Path:
    """Like ``git archive --format=zip``: every entry carries the commit's time."""
    dt = commit_time.astimezone(UTC).timetuple()[:6]
    when = extended_time(commit_time)
    raw = [RawEntry(prefix, method=STORED, external_attr=DIR_MODE, date_time=dt, extra=when)] if prefix else []
    raw += [RawEntry(prefix + name, data, date_time=dt, extra=when) for name, data in files.items()]
    return write_raw_zip(path, raw)


def windows_zip(path: Path, files: dict[str, bytes], when: datetime, *, backslashes: bool = False) -> Path:
    """A zip made on Windows: MS-DOS attributes, NTFS times; odd tools use backslashes."""
    dt = when.timetuple()[:6]
    return write_raw_zip(path, [
        RawEntry(name.replace("/", "\\") if backslashes else name, data, create_system=MSDOS,
                 external_attr=0x20, extra=ntfs_time(when), date_time=dt)
        for name, data in files.items()
    ])


def powershell_zip(path: Path, files: dict[str, bytes], when: datetime, *, folder: str = "project",
                   empty_dirs: tuple[str, ...] = ()) -> Path:
    """What Windows PowerShell 5.1's ``Compress-Archive -Path project`` writes.

    .NET Framework's ZipArchive as that cmdlet drives it: the folder's name
    first, backslashes as separators (PowerShell/Microsoft.PowerShell.Archive#48),
    "made by" MS-DOS with no attributes, the DOS time only (local, no extra
    field), and an entry only for empty folders, ending in a backslash.
    """
    dt = when.timetuple()[:6]
    raw = [RawEntry(f"{folder}\\{name}".replace("/", "\\"), data, create_system=MSDOS, external_attr=0,
                    date_time=dt) for name, data in files.items()]
    raw += [RawEntry(f"{folder}\\{name}\\".replace("/", "\\"), method=STORED, create_system=MSDOS,
                     external_attr=0, date_time=dt) for name in empty_dirs]
    return write_raw_zip(path, raw)


def patch(path: Path, old: bytes, new: bytes, count: int = -1) -> Path:
    """Replace ``old`` with ``new`` (same length) in the archive's bytes: names zipfile won't write."""
    assert len(old) == len(new), "patches must keep every offset"
    data = path.read_bytes()
    assert old in data, f"{old!r} not in archive"
    path.write_bytes(data.replace(old, new, count))
    return path


def truncate(path: Path, keep: int) -> Path:
    """Cut the archive to its first ``keep`` bytes (negative: drop that many from the end)."""
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    return path


def tar_gz(path: Path, files: dict[str, bytes]) -> Path:
    """A .tar.gz, the most common wrong upload."""
    path = path / "upload.zip" if path.is_dir() else path
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _compress(data: bytes, method: int) -> bytes:
    if method == DEFLATED:
        comp = zlib.compressobj(6, zlib.DEFLATED, -15)
        return comp.compress(data) + comp.flush()
    return data  # stored, or a method we only pretend to use

