"""Step 11: each file of an upload is written once, in memory; none on the worker's disk.

The grading of a real upload runs in the real sandbox while an audit hook
records every file this process opens for writing and every folder it makes:
the unpacked upload goes to a tmpfs of ours (/dev/shm), and the reruns' trees
go into each sandbox's own tmpfs: written there by the worker for a cold run
where it mounts that tmpfs itself, else sent as a tar in memory and unpacked
inside. On the worker's disk (the scratch folder, the system's temporary
folder) nothing is written.
"""

from __future__ import annotations

import os
import shutil
import sys

from conftest import require
from grading.engine.core import grade_archive
from grading.engine.sandbox.cgroups import work_dir_for
from grading.engine.spec import sample_spec
from grading.tests.corpus import honest_files, zip_with_times

# Writes that are no copy of the tree: cgroups, the uid pool's locks, tmpfs mounts and our tmpfs work folder.
IN_MEMORY_OR_KERNEL = ("/sys/fs/cgroup/", "/run/lock/", "/dev/shm/")


def test_grading_an_upload_writes_no_file_of_it_on_disk(grading_sandbox, scratch_dir, tmp_path):
    require(str(work_dir_for(scratch_dir)).startswith("/dev/shm/"), "needs /dev/shm as a tmpfs")
    archive = zip_with_times(tmp_path / "ideal.zip", {**honest_files(), **{f"data/f{i}.txt": b"x" for i in range(50)}})
    spec = sample_spec()
    grading_sandbox.check()  # the one copy of our sandboxed helpers under the scratch folder, made before
    written: list[str] = []
    watching = [True]

    def audit(event, args):
        # why absolute paths only: grading.engine.archive writes through folder descriptors
        # (relative names), below a destination folder it makes by its absolute path.
        if not watching[0] or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = os.fsdecode(args[0])
        if not os.path.isabs(path):
            return
        if (event == "open" and isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR)
                or event == "os.mkdir" and not os.path.exists(path)):
            written.append(path)

    sys.addaudithook(audit)
    try:
        evidence = grade_archive(archive, spec, grading_sandbox, scratch=scratch_dir)
    finally:
        watching[0] = False
    assert evidence["archive"]["accepted"] and evidence["runs"]["submitted"]["as_expected"], evidence["runs"]
    assert "data/f49.txt" in evidence["archive"]["kept"]
    on_disk = [p for p in written if not p.startswith(IN_MEMORY_OR_KERNEL)]
    assert on_disk == [], on_disk
    assert any(p.startswith(str(work_dir_for(scratch_dir))) for p in written), "the upload was not unpacked at all?"


def test_an_upload_is_unpacked_on_disk_when_dev_shm_has_no_room_for_it(tmp_path):
    require(str(work_dir_for(tmp_path)).startswith("/dev/shm/"), "needs /dev/shm as a tmpfs")
    try:
        assert work_dir_for(tmp_path, room=1 << 60) == tmp_path  # more than any machine's memory
        assert str(work_dir_for(tmp_path, room=1 << 20)).startswith("/dev/shm/takehome-work-")
    finally:
        shutil.rmtree(work_dir_for(tmp_path), ignore_errors=True)
