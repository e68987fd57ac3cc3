"""The workspace's editor (grading/engine/sandbox/editing.py) on a real capped tmpfs, with no shell.

Each hostile case plants what a candidate's shell could (a link out of the
workspace, a folder swapped for a link) and checks that the editor reads and
writes only inside the workspace, within its caps, and never over a change it
did not see.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import require
from grading.engine.sandbox.editing import (
    MAX_TEXT_BYTES,
    EditRefused,
    FileChanged,
    clean_path,
    create_file,
    digest,
    list_tree,
    read_file,
    rename_path,
    save_file,
)
from grading.engine.sandbox.shell import Workspace, WorkspaceLimits, freeze, open_workspace, release
from shared import pytest_slots

UID = pytest_slots.uids("editing")
LIMITS = WorkspaceLimits(disk_bytes=1 << 20, inodes=40)
SEED = {"invoices.py": b"def total():\n    return 1\n", "tests/test_invoices.py": b"def test_it():\n    pass\n"}


@pytest.fixture
def outside(tmp_path):
    """A folder of the host's, with a secret a link planted in the workspace points at."""
    (tmp_path / "secret.txt").write_text("host secret\n")
    return tmp_path


@pytest.fixture
def ws():
    require(os.geteuid() == 0, "the workspace mounts a tmpfs: run the tests as root")
    from django.conf import settings

    folder = Path(settings.GRADING_SCRATCH_DIR) / f"editing-tests-{os.getpid()}"
    if folder.exists():
        release(Workspace(folder, UID, folder), stop=False)
        shutil.rmtree(folder)
    workspace = Workspace(folder, UID, folder / "no-runner", LIMITS)
    open_workspace(workspace, SEED)
    yield workspace
    release(workspace, stop=False)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("name, clean", [
    ("invoices.py", "invoices.py"),
    ("./src//app.py", "src/app.py"),
    ("src/./app.py/", "src/app.py"),
])
def test_paths_are_normalised(name, clean):
    assert str(clean_path(name)) == clean


@pytest.mark.parametrize("name", [
    "/etc/passwd", "../x.py", "a/../../b", "src/..", "", "  ", "a\0b", "new\nline", "x" * 300, 42, None,
])
def test_paths_that_leave_or_disguise_are_refused(name):
    with pytest.raises(EditRefused) as refused:
        clean_path(name)
    assert refused.value.code == "path"


def test_the_tree_lists_files_folders_and_links_without_caches(ws, outside):
    (ws.home / "__pycache__").mkdir()
    (ws.home / "__pycache__" / "x.pyc").write_bytes(b"\0")
    os.symlink(outside, ws.home / "out")
    tree = list_tree(ws)
    assert [(e.path, e.kind) for e in tree.entries] == [
        ("invoices.py", "file"), ("out", "link"), ("tests", "folder"), ("tests/test_invoices.py", "file")]
    assert not tree.truncated


def test_read_gives_text_and_its_hash_and_says_binary(ws):
    opened = read_file(ws, "tests/test_invoices.py")
    assert opened.text == SEED["tests/test_invoices.py"].decode() and opened.sha256 == digest(
        SEED["tests/test_invoices.py"])
    (ws.home / "blob.bin").write_bytes(b"\x89PNG\0\0")
    assert read_file(ws, "blob.bin").text is None


def test_a_file_too_large_for_the_editor_is_not_opened(ws):
    (ws.home / "big.txt").touch()
    os.truncate(ws.home / "big.txt", MAX_TEXT_BYTES + 1)  # sparse: larger than the editor opens, within the cap
    with pytest.raises(EditRefused, match="the terminal"):
        read_file(ws, "big.txt")


@pytest.mark.parametrize("how", ["file link", "folder link", "swapped folder"])
def test_a_planted_link_out_of_the_workspace_is_never_followed(ws, outside, how):
    if how == "file link":
        os.symlink(outside / "secret.txt", ws.home / "notes.txt")
        name = "notes.txt"
    else:
        if how == "swapped folder":
            shutil.rmtree(ws.home / "tests")
        os.symlink(outside, ws.home / "tests" if how == "swapped folder" else ws.home / "out")
        name = "tests/secret.txt" if how == "swapped folder" else "out/secret.txt"
    with pytest.raises(EditRefused) as refused:
        read_file(ws, name)
    assert refused.value.code == "link"
    with pytest.raises(EditRefused):
        save_file(ws, name, b"pwned\n", digest(b"host secret\n"))
    for target in (name, f"{name}.new"):
        with pytest.raises(EditRefused):
            create_file(ws, target if how != "file link" else f"{name}/x")
    with pytest.raises(EditRefused):
        rename_path(ws, "invoices.py", name if how != "file link" else f"{name}/x")
    assert (outside / "secret.txt").read_text() == "host secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize("target", ["../invoices.py", "/tmp/invoices.py", "tests/../../x.py", "bad\0name"])
def test_rename_onto_a_path_outside_is_refused(ws, target):
    with pytest.raises(EditRefused) as refused:
        rename_path(ws, "invoices.py", target)
    assert refused.value.code == "path"
    assert (ws.home / "invoices.py").read_bytes() == SEED["invoices.py"]


def test_save_writes_as_the_workspaces_uid_and_keeps_the_mode(ws):
    (ws.home / "invoices.py").chmod(0o755)
    new = save_file(ws, "invoices.py", b"def total():\n    return 2\n", digest(SEED["invoices.py"]))
    path = ws.home / "invoices.py"
    assert path.read_bytes() == b"def total():\n    return 2\n" and new == digest(path.read_bytes())
    assert (path.stat().st_uid, path.stat().st_gid, path.stat().st_mode & 0o777) == (UID, UID, 0o755)
    assert [p.name for p in ws.home.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_create_and_rename_make_the_folders_on_the_way(ws):
    assert create_file(ws, "src/pkg/new.py") == "src/pkg/new.py"
    assert (ws.home / "src" / "pkg").stat().st_uid == UID and (ws.home / "src/pkg/new.py").stat().st_uid == UID
    with pytest.raises(EditRefused, match="already exists"):
        create_file(ws, "src/pkg/new.py")
    assert rename_path(ws, "src/pkg/new.py", "lib/moved.py") == "lib/moved.py"
    assert (ws.home / "lib/moved.py").exists() and not (ws.home / "src/pkg/new.py").exists()
    with pytest.raises(EditRefused, match="already exists"):
        rename_path(ws, "lib/moved.py", "invoices.py")


def test_a_save_over_the_disk_cap_is_refused_and_the_old_file_is_intact(ws):
    (ws.home / "ballast.bin").write_bytes(b"\1" * (LIMITS.disk_bytes - (200 << 10)))
    with pytest.raises(EditRefused) as refused:
        save_file(ws, "invoices.py", b"# " + b"y" * (400 << 10), digest(SEED["invoices.py"]))
    assert refused.value.code == "full" and refused.value.message.startswith("The workspace is full: saving invoices.py")
    assert (ws.home / "invoices.py").read_bytes() == SEED["invoices.py"]
    assert not [p for p in ws.home.iterdir() if p.name.startswith(".")]


def test_too_many_files_are_refused_with_a_sentence(ws):
    made = 0
    with pytest.raises(EditRefused) as refused:
        while made < LIMITS.inodes:
            create_file(ws, f"many/f{made}.py")
            made += 1
    assert refused.value.code == "full" and "as many files and folders" in refused.value.message
    assert 0 < made < LIMITS.inodes


def test_a_save_over_a_change_on_disk_is_a_conflict_and_writes_nothing(ws):
    opened = read_file(ws, "invoices.py")
    (ws.home / "invoices.py").write_bytes(b"changed in the terminal\n")
    with pytest.raises(FileChanged) as changed:
        save_file(ws, "invoices.py", b"from the editor\n", opened.sha256)
    assert "changed on disk by the terminal" in changed.value.message
    assert changed.value.sha256 == digest(b"changed in the terminal\n")
    assert (ws.home / "invoices.py").read_bytes() == b"changed in the terminal\n"
    # overwriting is a save over what is on disk now, named by the hash the conflict gave
    save_file(ws, "invoices.py", b"from the editor\n", changed.value.sha256)
    assert (ws.home / "invoices.py").read_bytes() == b"from the editor\n"


def test_a_frozen_workspace_refuses_every_write_and_still_reads(ws):
    freeze(ws)
    for write in (lambda: save_file(ws, "invoices.py", b"x", digest(SEED["invoices.py"])),
                  lambda: create_file(ws, "new.py"), lambda: rename_path(ws, "invoices.py", "b.py")):
        with pytest.raises(EditRefused) as refused:
            write()
        assert refused.value.code == "frozen"
    assert read_file(ws, "invoices.py").text == SEED["invoices.py"].decode()
