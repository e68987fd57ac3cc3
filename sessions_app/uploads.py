"""Receiving a candidate's zip: streamed to disk while hashed, checked as it arrives.

Django's own upload handlers keep small files in memory and big ones in a
temporary file, and know nothing of zips or of our limit. This handler writes
the ``archive`` field straight to a file beside the place it will be stored
(so storing it is a rename), hashes it on the way, looks at its first bytes
before anything else, and stops reading once the limit is passed.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile, StopUpload

from grading.engine.archive import Limits, UnsafeArchive, safe_extract
from takehome.unavailable import NO_SPACE_ERRNOS

FIELD = "archive"
# A zip that holds at least one file starts with a local file header. An empty
# zip (only the end record, PK\x05\x06) has nothing to grade.
ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"  # a zip with no entries starts with its end record
INCOMING = "uploads/.incoming"


def human_size(n: int) -> str:
    """20971520 -> '20 MB' (decimal-free, as people say it)."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def messages_for(max_bytes: int) -> dict[str, str]:
    """Every refusal of the upload itself, in words a candidate can act on."""
    return {
        "missing": "Choose a zip file to upload.",
        "empty": "The file is empty. Zip your project folder and upload that zip.",
        "not_zip": "This file is not a zip. Zip your project folder (artifacts included) and upload that zip.",
        "empty_zip": "This zip holds no files. Zip your project folder with its files (artifacts included) "
                     "and upload that zip.",
        "too_large": (f"The file is larger than the limit of {human_size(max_bytes)}. Leave out virtual "
                      "environments, .git and caches, or use 'python gate.py submit', which does that for you."),
        "several": "Upload one zip at a time.",
    }


@dataclass
class IncomingArchive:
    """A received zip in its temporary file, with what was learnt while it streamed in."""

    path: Path
    sha256: str
    size: int
    original_name: str

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


class IncomingArchiveFile(UploadedFile):
    """What ``request.FILES['archive']`` holds: an open temporary file and its IncomingArchive."""

    def __init__(self, file, incoming: IncomingArchive):
        super().__init__(file, incoming.original_name, "application/zip", incoming.size)
        self.incoming = incoming


class HashingUploadHandler(FileUploadHandler):
    """Stream the ``archive`` field to disk, hashing it and enforcing the zip magic and the size limit.

    ``error`` holds the key of a refusal (see ``messages_for``) once one is
    found; the view reads it. Every other file field is skipped unread. A full
    disk is "no_space": the part-file is removed and the rest of the body is
    read and dropped, so the client still gets the answer (503, see the view).
    """

    def __init__(self, request, *, max_bytes: int, media_root: Path):
        super().__init__(request)
        self.max_bytes = max_bytes
        self.folder = Path(media_root) / INCOMING
        self.error: str | None = None
        # why not `self.file`: Django's parser calls `.file.close()` on every
        # handler that has one, and ours is None between files.
        self._out = None
        self._path: Path | None = None
        self.received: IncomingArchive | None = None
        self._hash = None
        self._head = b""
        self._size = 0

    def _refuse(self, key: str, connection_reset: bool = False):
        self.error = key
        self._drop()
        return StopUpload(connection_reset=connection_reset)

    def _drop(self) -> None:
        if self._out is not None:
            try:
                self._out.close()
            except OSError:
                pass  # its buffer could not be written out (a full disk): the file goes anyway
            self._path.unlink(missing_ok=True)
            self._out = None

    def _no_space(self, exc: OSError) -> None:
        if exc.errno not in NO_SPACE_ERRNOS:
            raise exc
        self.error = "no_space"
        self._drop()

    def discard(self) -> None:
        """Remove what this request left on disk: a part-file cut short, or a received file not stored."""
        self._drop()
        if self.received is not None:
            self.received.discard()

    def new_file(self, field_name, file_name, content_type, content_length, charset=None, content_type_extra=None):
        super().new_file(field_name, file_name, content_type, content_length, charset, content_type_extra)
        if field_name != FIELD:
            raise SkipFile()
        if self.received is not None or self._out is not None:
            raise self._refuse("several")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # why beside the final place: storing is then an atomic rename on one filesystem.
            fd, name = tempfile.mkstemp(prefix="in-", suffix=".zip", dir=self.folder)
        except OSError as exc:
            return self._no_space(exc)
        self._out, self._path = os.fdopen(fd, "w+b"), Path(name)
        self._hash = hashlib.sha256()
        self._head, self._size = b"", 0

    def receive_data_chunk(self, raw_data, start):
        if self._out is None:
            return None
        # why before writing more: a non-zip is refused on its first bytes, and
        # the size is counted from what arrives, never from what the client declared.
        if len(self._head) < len(ZIP_MAGIC):
            self._head += raw_data[: len(ZIP_MAGIC) - len(self._head)]
            if len(self._head) == len(ZIP_MAGIC) and self._head != ZIP_MAGIC:
                raise self._refuse("empty_zip" if self._head == EMPTY_ZIP_MAGIC else "not_zip")
        self._size += len(raw_data)
        if self._size > self.max_bytes:
            raise self._refuse("too_large", connection_reset=True)
        self._hash.update(raw_data)
        try:
            self._out.write(raw_data)
        except OSError as exc:
            self._no_space(exc)
        return None

    def file_complete(self, file_size):
        if self._out is None:
            return None
        if self._size == 0:
            self._drop()
            self.error = "empty"
            return None
        if self._head != ZIP_MAGIC:  # shorter than the magic itself
            self._drop()
            self.error = "not_zip"
            return None
        try:
            self._out.flush()
            # why: the upload is answered "stored" once its row commits, which
            # survives a power cut (synchronous=FULL); its bytes must too.
            os.fsync(self._out.fileno())
        except OSError as exc:
            return self._no_space(exc)
        self._out.seek(0)
        self.received = IncomingArchive(
            path=self._path,
            sha256=self._hash.hexdigest(),
            size=self._size,
            original_name=(self.file_name or "upload.zip")[:255],
        )
        uploaded = IncomingArchiveFile(self._out, self.received)
        self._out = None
        return uploaded

    def upload_interrupted(self):
        self._drop()


def unpack_limits() -> Limits:
    """The limits grading unpacks an upload with (grading.pipeline.grade_options uses the same settings)."""
    return Limits(max_entries=settings.UPLOAD_MAX_FILES, max_file_bytes=settings.UPLOAD_MAX_FILE_BYTES,
                  max_total_bytes=settings.UPLOAD_MAX_UNPACKED_BYTES)


def unpack_refusal(path: Path, media_root: Path) -> str:
    """Why the zip at ``path`` cannot be unpacked for grading, or "" when it can.

    The same check the worker makes first (grading.engine.archive.safe_extract, same
    limits), made here as the upload arrives, so the candidate learns at once
    and from the bytes alone. why not wait for the worker: when its verdict
    appears depends on how long the grading ahead of it took, which the
    candidate's own code, run on the packet's hidden tests, can stretch.
    """
    folder = Path(media_root) / INCOMING
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix="check-") as tmp:
        try:
            safe_extract(path, Path(tmp) / "tree", unpack_limits())
        except UnsafeArchive as exc:
            return exc.reason
    return ""
