"""The storage of uploads and recordings (shared/stored.py), the same on this disk and in an S3 bucket.

The bucket is a real S3 endpoint on 127.0.0.1 (conftest.s3_server); the same tests run on both backends.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from shared import stored


@pytest.fixture(params=["filesystem", "s3"])
def backend(request, media_root) -> str:
    if request.param == "s3":
        request.getfixturevalue("s3_bucket")
    return request.param


def test_a_file_is_stored_read_listed_and_removed_by_name(backend):
    name = stored.upload_name("ab" * 32)
    assert name == f"uploads/ab/{'ab' * 32}.zip"
    assert not stored.exists(name) and stored.stat(name) is None
    stored.save(name, b"PK\x03\x04 zip bytes")
    stored.save(stored.recording_name(7), b'{"version": 2}\n')
    assert stored.exists(name)
    with stored.open(name) as handle:
        assert handle.read() == b"PK\x03\x04 zip bytes"
    size, written = stored.stat(name)
    assert size == len(b"PK\x03\x04 zip bytes") and written > 0
    assert stored.names(stored.UPLOADS) == [name]
    assert stored.names(stored.RECORDINGS) == ["recordings/inv-7.cast"]
    stored.delete(name)
    stored.delete(name)  # nothing there: nothing to do
    assert not stored.exists(name) and stored.names(stored.UPLOADS) == []
    with pytest.raises(FileNotFoundError):
        stored.open(name)


def test_a_name_is_replaced_whole_never_given_another_name(backend):
    """Django's own filesystem storage would store a second file under a made-up name beside the first."""
    name = stored.recording_name(3)
    stored.save(name, b"first, and longer than the second\n")
    stored.save(name, io.BytesIO(b"second\n"))
    with stored.open(name) as handle:
        assert handle.read() == b"second\n"
    assert stored.names(stored.RECORDINGS) == [name]


def test_a_file_on_this_disk_is_moved_in(backend, tmp_path):
    source = tmp_path / "in-upload.zip"
    source.write_bytes(b"the upload")
    inode = source.stat().st_ino
    name = stored.upload_name("cd" * 32)
    stored.save(name, source, move=True)
    assert not source.exists()
    with stored.open(name) as handle:
        assert handle.read() == b"the upload"
    if backend == "filesystem":  # a rename: the same file, no copy
        assert Path(default_storage.path(name)).stat().st_ino == inode


def test_a_file_copied_in_stays_where_it_was(backend, tmp_path):
    source = tmp_path / "session.cast"
    source.write_bytes(b"lines\n")
    stored.save(stored.recording_name(1), source)
    assert source.read_bytes() == b"lines\n"


def test_names_leave_out_what_is_on_its_way_in(backend):
    stored.save(stored.upload_name("ef" * 32), b"kept")
    stored.save("uploads/.incoming/in-123.zip", b"arriving")  # where an upload streams in, on this disk
    stored.save("uploads/ef/.part-x1y2", b"being written")
    assert stored.names(stored.UPLOADS) == [stored.upload_name("ef" * 32)]


def test_a_local_file_is_the_stored_one_on_this_disk_and_a_copy_from_a_bucket(backend, tmp_path):
    name = stored.upload_name("01" * 32)
    stored.save(name, b"zip to unpack")
    scratch = tmp_path / "scratch"
    with stored.local_file(name, scratch) as path:
        assert path.read_bytes() == b"zip to unpack"
        if backend == "filesystem":
            assert path == Path(default_storage.path(name)) and not scratch.exists()
        else:
            assert path.parent == scratch
    if backend == "s3":
        assert list(scratch.iterdir()) == []  # the copy went with the block
    else:
        assert path.exists()  # the stored file itself, left as it was
    with pytest.raises(FileNotFoundError), stored.local_file(stored.upload_name("02" * 32), scratch):
        pass


def test_a_write_that_fails_leaves_the_old_file_whole_and_no_part_behind(media_root):
    name = stored.recording_name(9)
    stored.save(name, b"the old recording\n")

    class Failing(ContentFile):
        def chunks(self, chunk_size=None):
            yield b"the new rec"
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        default_storage.save(name, Failing(b""))
    assert (media_root / name).read_bytes() == b"the old recording\n"
    assert os.listdir(media_root / "recordings") == ["inv-9.cast"]


def test_a_bucket_that_does_not_answer_is_storage_unavailable(s3_bucket, settings):
    from conftest import free_port
    from shared.stored import s3_storage

    settings.STORAGES = {**settings.STORAGES, "default": s3_storage(
        bucket=s3_bucket.name, endpoint_url=f"http://127.0.0.1:{free_port()}", region="us-east-1",
        access_key="k", secret_key="s")}
    with pytest.raises(stored.StorageUnavailable) as raised:
        stored.save(stored.upload_name("aa" * 32), b"zip")
    assert raised.value.strerror.startswith(f"the shared storage failed to store {stored.upload_name('aa' * 32)}")
    with pytest.raises(stored.StorageUnavailable):
        stored.exists("uploads/x.zip")
