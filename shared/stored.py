"""Uploads and recordings, kept in the one storage every host of the site reads and writes.

A site may run its web server, its grading workers and its workspace hosts on
different machines, which then share only PostgreSQL, Redis and this storage
(docs/operations.md, "Several hosts"). It is Django's default storage
(``settings.STORAGES["default"]``, chosen by TAKEHOME_STORAGE): a folder on
this disk (TAKEHOME_MEDIA_ROOT) by default, or an S3-compatible bucket through
django-storages. Nothing else reads or writes uploads and recordings by their
path on disk: everything goes through the functions below, by name.

Names, the same on every backend:

- ``uploads/<ab>/<sha256>.zip``: a candidate's zip, named by its content, so the
  same bytes are stored once (``upload_name``);
- ``recordings/inv-<id>.cast``: the hosted terminal's recording of an invitation
  (asciicast v2), copied in by the workspace host that records it
  (``recording_name``).

A file is replaced whole: a reader gets the old file or the new one, never
part of one (the filesystem backend writes beside the file and renames it
there; S3 replaces an object in one step). A storage that cannot be reached
raises StorageUnavailable, an OSError: a request answers 503 with Retry-After
(takehome.unavailable), a grading is retried.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage as DjangoFileSystemStorage
from django.core.files.storage import default_storage

UPLOADS = "uploads"
RECORDINGS = "recordings"
S3_BACKEND = "storages.backends.s3.S3Storage"  # django-storages' S3 backend, TAKEHOME_STORAGE=s3


class StorageUnavailable(OSError):
    """The shared storage did not answer, or refused what was asked (its words follow)."""


def upload_name(sha256: str) -> str:
    """Where an upload is stored: by its content."""
    return f"{UPLOADS}/{sha256[:2]}/{sha256}.zip"


def recording_name(invitation_id: int) -> str:
    """Where the recording of an invitation's hosted session is stored."""
    return f"{RECORDINGS}/inv-{invitation_id}.cast"


def _remote_errors() -> tuple[type[BaseException], ...]:
    try:
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:  # no S3 client installed: the filesystem backend raises OSError alone
        return ()
    return (Boto3Error, BotoCoreError, ClientError)


@contextmanager
def _reaching(what: str) -> Iterator[None]:
    """A remote storage's own errors become StorageUnavailable, saying what was being done."""
    try:
        yield
    except OSError:
        raise
    except _remote_errors() as exc:
        raise StorageUnavailable(errno.EIO, f"the shared storage failed to {what}: {exc}") from exc


def exists(name: str) -> bool:
    with _reaching(f"look up {name}"):
        return default_storage.exists(name)


def open(name: str) -> BinaryIO:  # read as stored.open; the builtin is not used in this module
    """The stored file, open for reading in binary; FileNotFoundError when there is none. Close it (``with``)."""
    with _reaching(f"open {name}"):
        return default_storage.open(name, "rb")


def save(name: str, source: bytes | BinaryIO | Path, *, move: bool = False) -> None:
    """Store ``source`` (bytes, a file open for reading in binary, or the path of a file on this disk) as
    ``name``, replacing whatever had that name.

    ``move`` (a path only): the file is moved in, and is gone from its path afterwards: on the filesystem
    backend a rename when both are on one filesystem, else a copy and the original removed.
    """
    with _reaching(f"store {name}"):
        if isinstance(source, bytes):
            default_storage.save(name, ContentFile(source))
        elif isinstance(source, Path):
            with source.open("rb") as handle:
                default_storage.save(name, _MovableFile(handle, source) if move else File(handle))
            if move:
                source.unlink(missing_ok=True)  # copied (another backend, another filesystem): the original goes
        else:
            default_storage.save(name, File(source))


def delete(name: str) -> None:
    """Remove the stored file; nothing when there is none."""
    with _reaching(f"remove {name}"):
        default_storage.delete(name)


def names(folder: str) -> list[str]:
    """Every stored file under ``folder`` (UPLOADS or RECORDINGS), as full names, sorted.

    Names starting with a dot are not stored files: an upload on its way in, a file being written.
    """
    found: list[str] = []
    with _reaching(f"list {folder}"):
        _walk(folder.rstrip("/"), found)
    return sorted(found)


def _walk(folder: str, found: list[str]) -> None:
    try:
        folders, files = default_storage.listdir(folder)
    except FileNotFoundError:
        return
    found += [f"{folder}/{name}" for name in files if not name.startswith(".")]
    for name in folders:
        if not name.startswith("."):
            _walk(f"{folder}/{name}", found)


def stat(name: str) -> tuple[int, float] | None:
    """The stored file's size in bytes and when it was last written (a POSIX time); None when there is none."""
    with _reaching(f"look up {name}"):
        try:
            return default_storage.size(name), default_storage.get_modified_time(name).timestamp()
        except FileNotFoundError:
            return None
        except _remote_errors() as exc:
            if getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return None  # why: django-storages' get_modified_time raises the client's 404 as it comes
            raise


@contextmanager
def local_file(name: str, scratch: Path) -> Iterator[Path]:
    """The stored file as a file on this host's disk, for what needs a path (unpacking a zip).

    On the filesystem backend the stored file itself (read it, never change it); else a copy in
    ``scratch``, removed when the block ends. FileNotFoundError when there is none.
    """
    try:
        path = Path(default_storage.path(name))
    except NotImplementedError:  # not on this disk: copied below
        pass
    else:
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no such stored file", name)
        yield path
        return
    scratch.mkdir(parents=True, exist_ok=True)
    fd, copy = tempfile.mkstemp(dir=scratch, prefix="stored-", suffix=Path(name).suffix)
    try:
        with os.fdopen(fd, "wb") as out, open(name) as handle, _reaching(f"read {name}"):
            shutil.copyfileobj(handle, out, 1 << 20)
        yield Path(copy)
    finally:
        Path(copy).unlink(missing_ok=True)


def s3_storage(*, bucket: str, endpoint_url: str = "", region: str = "", access_key: str = "",
               secret_key: str = "") -> dict:
    """The ``STORAGES["default"]`` of an S3-compatible bucket (django-storages' S3 backend, over boto3), as
    TAKEHOME_STORAGE=s3 sets it: empty values leave the S3 client's own defaults."""
    from botocore.config import Config

    return {
        "BACKEND": S3_BACKEND,
        "OPTIONS": {
            "bucket_name": bucket,
            "endpoint_url": endpoint_url or None,
            "region_name": region or None,
            "access_key": access_key or None,
            "secret_key": secret_key or None,
            "file_overwrite": True,  # a name is replaced whole, as on the filesystem
            "default_acl": None,  # the bucket's own: private
            # why: a file read is held in memory up to this much, then on disk (django-storages' default
            # holds a whole upload in memory)
            "max_memory_size": 1024 * 1024,
            # why path-style for a server of one's own: MinIO, Garage and SeaweedFS answer it without a DNS
            # name per bucket. why the timeouts: an upload must not wait minutes on a server that is down
            # (boto3 waits 60 s a try, 5 tries); it answers 503 at once instead.
            "client_config": Config(s3={"addressing_style": "path" if endpoint_url else "auto"},
                                    connect_timeout=5, read_timeout=60,
                                    retries={"max_attempts": 3, "mode": "standard"}),
        },
    }


def in_bucket() -> bool:
    """Whether uploads and recordings are kept in an S3 bucket (the default storage is django-storages' S3)."""
    from django.conf import settings

    return settings.STORAGES["default"]["BACKEND"] == S3_BACKEND


_probe_clients: dict[tuple, Any] = {}  # the client bucket_problem asks with, by its settings


def bucket_problem(timeout: float) -> str | None:
    """Whether the bucket answers: None when it does, else why not, in words fit to show anyone.

    One HEAD of the bucket (no object is read or written), on a client of its own whose connect and
    read give up after ``timeout`` and which does not retry, so a readiness probe never waits on a
    server that is down or stalled. why not the storage's own client: it waits 60 s a read and tries
    three times. The words name the setting to look at, never the bucket, the server or the key.
    """
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError
    from django.conf import settings

    options = settings.STORAGES["default"].get("OPTIONS", {})
    config = options.get("client_config")
    style = (config.s3 or {}).get("addressing_style", "auto") if config is not None else "auto"
    key = (options.get("endpoint_url"), options.get("region_name"), options.get("access_key"),
           options.get("secret_key"), style, timeout)
    client = _probe_clients.get(key)
    if client is None:
        # why kept: making a client reads the S3 service's whole description (a few hundred ms); boto3's
        # clients may be shared by threads
        client = boto3.session.Session().client(
            "s3", endpoint_url=options.get("endpoint_url"), region_name=options.get("region_name"),
            aws_access_key_id=options.get("access_key"), aws_secret_access_key=options.get("secret_key"),
            config=Config(s3={"addressing_style": style}, connect_timeout=timeout, read_timeout=timeout,
                          retries={"total_max_attempts": 1}))
        _probe_clients.clear()  # why: one, that of the settings in use
        _probe_clients[key] = client
    try:
        client.head_bucket(Bucket=options.get("bucket_name"))
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404:
            return "the bucket does not exist on the S3 server (TAKEHOME_S3_BUCKET): create it, or name another"
        if status in (401, 403):
            return ("the S3 server refuses the access key (TAKEHOME_S3_ACCESS_KEY_ID and its secret): it may not "
                    "read the bucket")
        return f"the S3 server answered {status or 'an error'} to a look at the bucket"
    except (ConnectTimeoutError, ReadTimeoutError):
        return f"the S3 server did not answer within {timeout:g} s (TAKEHOME_S3_ENDPOINT_URL)"
    except EndpointConnectionError:
        return "the S3 server cannot be reached (TAKEHOME_S3_ENDPOINT_URL): nothing answers there"
    return None


class _MovableFile(File):
    """A file on this disk the filesystem backend may rename into place instead of copying."""

    def __init__(self, handle: BinaryIO, path: Path):
        super().__init__(handle, name=path.name)
        self.path = path

    def temporary_file_path(self) -> str:  # the name Django's storages look for
        return str(self.path)


class FileSystemStorage(DjangoFileSystemStorage):
    """Django's storage on this disk (under MEDIA_ROOT), writing each file whole.

    why not Django's own: it writes into the final file in place, so a reader
    (the review page, a worker) could read a recording half-replaced; here each
    file is written beside its place, flushed to disk, and renamed there, which a
    reader sees all at once, and which survives a power cut once answered stored.
    A file moved in (``save(..., move=True)``) is renamed when it is on the same
    filesystem: no copy.
    """

    def __init__(self, **options):
        options.setdefault("allow_overwrite", True)
        super().__init__(**options)

    def _save(self, name, content):
        full = Path(self.path(name))
        try:
            full.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise FileExistsError(f"{full.parent} exists and is not a folder.") from None
        moved = False
        if hasattr(content, "temporary_file_path"):
            try:
                os.replace(content.temporary_file_path(), full)
                moved = True
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
        if not moved:
            fd, part = tempfile.mkstemp(dir=full.parent, prefix=".part-")
            try:
                with os.fdopen(fd, "wb") as out:
                    content.seek(0)
                    for chunk in content.chunks():
                        out.write(chunk if isinstance(chunk, bytes) else chunk.encode())
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(part, full)
            except BaseException:
                Path(part).unlink(missing_ok=True)
                raise
        if self.file_permissions_mode is not None:
            os.chmod(full, self.file_permissions_mode)
        return str(name).replace("\\", "/")
