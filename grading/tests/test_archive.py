"""safe_extract: every hostile archive is refused with a reason, honest ones unpack exactly."""

from __future__ import annotations

import functools
import os
import random
import shutil
import stat
import subprocess
import zipfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import require
from grading.engine import archive as archive_mod
from grading.engine.archive import EntryTime, Limits, UnsafeArchive, safe_extract
from grading.tests import zips
from grading.tests.zips import RawEntry, make_zip, write_raw_zip

APP = {"app.py": b"print('hi')\n"}


def snapshot(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def reject(tmp_path: Path, archive: Path, limits: Limits = Limits()) -> str:
    """Run safe_extract expecting a refusal; check nothing was left anywhere; return the reason."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    before = snapshot(tmp_path)
    dest = work / "out"
    with pytest.raises(UnsafeArchive) as caught:
        safe_extract(archive, dest, limits)
    assert snapshot(tmp_path) == before, "something was written, or left behind, on rejection"
    assert not dest.exists()
    return caught.value.reason


def assert_human(reason: str) -> None:
    """One readable sentence that tells the candidate what to do, no internals."""
    assert reason.endswith(".") and "\n" not in reason and len(reason) < 400
    assert "zip" in reason.lower()  # every reason says how to zip again or what to upload
    for internal in ("BadZipFile", "Error", "Traceback", "errno", "0x", "b'"):
        assert internal not in reason


def raw(tmp_path: Path, *entries: RawEntry, **kw) -> Path:
    return write_raw_zip(tmp_path, [RawEntry("app.py", b"print('hi')\n"), *entries], **kw)


def ifmt(kind: int) -> int:
    return (kind | 0o644) << 16


# Each case: id, builder(tmp_path) -> archive, words the reason must hold.
HOSTILE = [
    # not a zip
    ("empty-file", lambda t: _write(t, b""), "not a zip archive (it is an empty file)"),
    ("tar-gz", lambda t: zips.tar_gz(t, APP), "gzip or .tar.gz"),
    ("renamed-text", lambda t: _write(t, b"def main():\n    pass\n"), "not a zip archive;"),
    ("7z", lambda t: _write(t, b"7z\xbc\xaf\x27\x1c" + bytes(40)), "7-Zip"),
    ("self-extracting", lambda t: _write(t, b"MZ" + bytes(100) + make_zip(t / "inner.zip", APP).read_bytes()),
     "not a zip archive"),
    # truncated or corrupt
    ("pk-then-garbage", lambda t: _write(t, b"PK\x03\x04" + b"garbage" * 10), "damaged or cut short"),
    ("truncated-central-directory", lambda t: zips.truncate(make_zip(t, APP), -10), "damaged or cut short"),
    ("truncated-half", lambda t: zips.truncate(make_zip(t, {"a.py": os.urandom(5000)}), 2000),
     "damaged or cut short"),
    ("bad-crc", lambda t: raw(t, RawEntry("b.py", b"x = 1\n", crc=12345)), "b.py does not match its checksum"),
    ("bad-deflate-stream", lambda t: raw(t, RawEntry("b.py", b"x", compressed=b"\xff\xff\xff\xff")),
     "damaged or cut short"),
    ("local-name-differs", lambda t: zips.patch(make_zip(t, {"aaa.py": b"x"}), b"aaa.py", b"bbb.py", 1),
     "damaged or cut short"),
    ("overlapping-entries", lambda t: write_raw_zip(
        t, [RawEntry("a.py", b"x"), RawEntry("b.py", b"x")], central_offsets=[0, 0]), "damaged or cut short"),
    ("shorter-than-declared", lambda t: raw(t, RawEntry("b.py", b"x = 1\n", file_size=50)), "damaged"),
    # encryption and compression
    ("encrypted", lambda t: raw(t, RawEntry("secret.py", b"x", flags=0x1)), "password-protected file (secret.py)"),
    ("unknown-method", lambda t: raw(t, RawEntry("b.py", b"x", method=9)), "compression method"),
    # escaping paths
    ("dotdot", lambda t: raw(t, RawEntry("../evil.py", b"x")), "leaves its folder (../evil.py)"),
    ("dotdot-deep", lambda t: raw(t, RawEntry("a/../../evil.py", b"x")), "leaves its folder"),
    ("dotdot-junk", lambda t: raw(t, RawEntry("__MACOSX/../../evil.py", b"x")), "leaves its folder"),
    ("absolute", lambda t: raw(t, RawEntry("/tmp/evil.py", b"x")), "absolute path (/tmp/evil.py)"),
    ("unc", lambda t: raw(t, RawEntry("//server/share/evil.py", b"x")), "absolute path"),
    ("drive-letter", lambda t: raw(t, RawEntry("C:/evil.py", b"x")), "drive letter (C:/evil.py)"),
    ("drive-relative", lambda t: raw(t, RawEntry("c:evil.py", b"x")), "drive letter"),
    # backslashes are separators (PowerShell 5.1), so these escape like their "/" twins
    ("backslash-dotdot", lambda t: raw(t, RawEntry("..\\evil.py", b"x")), "leaves its folder (..\\evil.py)"),
    ("backslash-dotdot-deep", lambda t: raw(t, RawEntry("src\\..\\..\\evil.py", b"x")), "leaves its folder"),
    ("backslash-dotdot-mixed", lambda t: raw(t, RawEntry("src/..\\../evil.py", b"x")), "leaves its folder"),
    ("backslash-dotdot-junk", lambda t: raw(t, RawEntry("__MACOSX\\..\\..\\evil.py", b"x")), "leaves its folder"),
    ("backslash-absolute", lambda t: raw(t, RawEntry("\\tmp\\evil.py", b"x")), "absolute path (\\tmp\\evil.py)"),
    ("backslash-unc", lambda t: raw(t, RawEntry("\\\\server\\share\\evil.py", b"x")), "absolute path"),
    ("backslash-drive", lambda t: raw(t, RawEntry("C:\\evil.py", b"x")), "drive letter (C:\\evil.py)"),
    ("backslash-powershell-dotdot", lambda t: zips.powershell_zip(
        t, {"a.py": b"x", "..\\..\\evil.py": b"x"}, datetime(2024, 1, 1)), "leaves its folder"),
    ("backslash-duplicate", lambda t: raw(t, RawEntry("a/b.py", b"1"), RawEntry("a\\b.py", b"2")),
     "same path twice (a/b.py and a\\b.py)"),
    ("backslash-file-and-folder", lambda t: raw(t, RawEntry("lib", b"x"), RawEntry("lib\\a.py", b"y")),
     "both a file and a folder named lib"),
    ("long-name", lambda t: raw(t, RawEntry("a" * 300 + ".py", b"x")), "longer than 255 bytes"),
    # links and special files
    ("symlink", lambda t: make_zip(t, APP, symlinks={"passwd": "/etc/passwd"}), "symbolic link (passwd)"),
    ("symlink-dir", lambda t: make_zip(t, APP, symlinks={"up": "../.."}), "symbolic link (up)"),
    ("symlink-claims-msdos", lambda t: raw(t, RawEntry("l", b"/etc", external_attr=ifmt(stat.S_IFLNK),
                                                       create_system=0)), "symbolic link"),
    ("fifo", lambda t: raw(t, RawEntry("pipe", external_attr=ifmt(stat.S_IFIFO))), "special file (pipe)"),
    ("char-device", lambda t: raw(t, RawEntry("null", external_attr=ifmt(stat.S_IFCHR))), "special file"),
    ("block-device", lambda t: raw(t, RawEntry("sda", external_attr=ifmt(stat.S_IFBLK))), "special file"),
    ("socket", lambda t: raw(t, RawEntry("sock", external_attr=ifmt(stat.S_IFSOCK))), "special file"),
    # duplicates
    ("duplicate", lambda t: raw(t, RawEntry("app.py", b"evil")), "same path twice (app.py)"),
    ("duplicate-double-slash", lambda t: raw(t, RawEntry("a/b.py", b"1"), RawEntry("a//b.py", b"2")),
     "same path twice (a/b.py and a//b.py)"),
    ("duplicate-dot", lambda t: raw(t, RawEntry("./app.py", b"2")), "same path twice"),
    ("file-and-folder", lambda t: raw(t, RawEntry("lib", b"x"), RawEntry("lib/a.py", b"y")),
     "both a file and a folder named lib"),
    # names
    ("nul", lambda t: raw(t, RawEntry(b"a\x00b.py", b"x")), "control character (a\\x00b.py)"),
    ("newline", lambda t: raw(t, RawEntry("a\nFAILED.py", b"x")), "control character (a\\nFAILED.py)"),
    ("escape", lambda t: raw(t, RawEntry("\x1b[31mred.py", b"x")), "control character"),
    ("delete", lambda t: raw(t, RawEntry("a\x7f.py", b"x")), "control character"),
    ("bidi-override", lambda t: raw(t, RawEntry("test_\u202eyp.evil", b"x")), "control character"),
    ("latin1-no-flag", lambda t: raw(t, RawEntry(b"caf\xe9.py", b"x")), "not valid UTF-8 (caf\\xe9.py)"),
    ("latin1-with-flag", lambda t: raw(t, RawEntry(b"caf\xe9.py", b"x", flags=0x800)), "not valid UTF-8"),
    # emptiness
    ("empty-zip", lambda t: write_raw_zip(t, []), "The archive is empty"),
    ("only-junk", lambda t: zips.finder_zip(t, {}), "The archive is empty"),
    ("only-folders", lambda t: make_zip(t, {}, dirs=("src", "tests")), "The archive is empty"),
    ("nameless-file", lambda t: raw(t, RawEntry("", b"x")), "file with no name"),
    # bombs
    ("bomb-100mb-zeros", lambda t: write_raw_zip(t, [zips.zeros_entry("zeros.txt", 100 << 20)]),
     "zeros.txt expands more than 200 times"),
    ("bomb-lying-size", lambda t: write_raw_zip(t, [zips.zeros_entry("zeros.txt", 100 << 20, declared=1000)]),
     "zeros.txt does not match its checksum"),
    ("bomb-many-small", lambda t: write_raw_zip(t, [replace(one_mb_zeros(), name=f"z{i}.txt") for i in range(60)]),
     "The archive expands more than 200 times"),
    ("too-many-entries", lambda t: make_zip(t, {f"f{i}.py": b"" for i in range(2001)}),
     "more than 2000 files and folders"),
]


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "upload.zip"
    path.write_bytes(data)
    return path


@functools.cache
def one_mb_zeros() -> RawEntry:
    """1 MiB of zeros, compressed once and reused under many names."""
    return zips.zeros_entry("z", 1 << 20)


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_safe_extract_rejects_hostile_archive(tmp_path, build, expected):
    reason = reject(tmp_path, build(tmp_path))
    assert expected in reason
    assert_human(reason)


@pytest.mark.parametrize(
    ("limits", "entries", "expected"),
    [
        (Limits(max_file_bytes=1000), {"big.bin": os.urandom(2000)}, "big.bin unpacks to more than 1,000 bytes"),
        (Limits(max_total_bytes=3000), {f"{i}.bin": os.urandom(1000) for i in range(4)},
         "The archive unpacks to more than 3,000 bytes"),
        (Limits(max_entries=5), {f"{i}.py": b"" for i in range(6)}, "more than 5 files and folders"),
        (Limits(max_ratio=10, ratio_floor_bytes=100), {"a.txt": b"a" * 5000}, "a.txt expands more than 10 times"),
    ],
    ids=["one-file", "total", "entries", "ratio"],
)
def test_safe_extract_enforces_limits(tmp_path, limits, entries, expected):
    reason = reject(tmp_path, make_zip(tmp_path, entries), limits)
    assert expected in reason
    assert_human(reason)


def test_junk_has_its_own_entry_cap(tmp_path):
    venv = {f".venv/lib/m{i}.py": b"" for i in range(30)}
    limits = Limits(max_entries=5, max_skipped_entries=20)
    reason = reject(tmp_path, make_zip(tmp_path, {**APP, **venv}), limits)
    assert "counting skipped folders such as virtualenvs" in reason


def test_streaming_guard_holds_when_declared_sizes_are_not_checked(tmp_path, monkeypatch):
    # The declared sizes give an early refusal; prove the byte count while
    # streaming refuses the bomb on its own, and removes the partial file.
    monkeypatch.setattr(archive_mod, "_check_declared_sizes", lambda *a: None)
    bomb = write_raw_zip(tmp_path, [RawEntry("a.py", b"x"), zips.zeros_entry("zeros.txt", 100 << 20)])
    assert "zeros.txt unpacks to more than 10 MB" in reject(tmp_path, bomb)
    roomy = Limits(max_file_bytes=1 << 30, max_total_bytes=1 << 30)
    assert "zeros.txt expands more than 200 times" in reject(tmp_path, bomb, roomy)
    big = make_zip(tmp_path, {"a.bin": os.urandom(3000), "b.bin": os.urandom(3000)})
    reason = reject(tmp_path, big, Limits(max_total_bytes=4000))
    assert "The archive unpacks to more than 4,000 bytes" in reason


def test_resolve_guard_catches_an_escape_the_name_checks_missed(tmp_path, monkeypatch):
    def lax_check_name(info):  # the name checks with every rule forgotten
        return archive_mod._Entry(info, info.filename, info.filename, info.filename.endswith("/"))

    monkeypatch.setattr(archive_mod, "_check_name", lax_check_name)
    for name in ("../evil.py", "/tmp/evil.py"):
        assert f"leaves its folder ({name})" in reject(tmp_path, raw(tmp_path, RawEntry(name, b"x")))


def test_rejection_empties_a_dest_that_existed(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(UnsafeArchive):
        safe_extract(raw(tmp_path, RawEntry("b.py", b"x", crc=1)), dest)
    assert dest.is_dir() and not any(dest.iterdir())


def test_dest_must_be_empty(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "old.py").write_text("x")
    with pytest.raises(FileExistsError):
        safe_extract(make_zip(tmp_path, APP), dest)
    assert (dest / "old.py").read_text() == "x"


def test_good_archive_round_trips_bytes_exactly(tmp_path):
    rng = random.Random(3)
    files = {
        "app.py": b"print('hi')\r\n",
        "empty.txt": b"",
        "data/sample.csv": b"id,cents\n1,-250\n",
        "data/deep/er/blob.bin": bytes(rng.randrange(256) for _ in range(200_000)),
        "caf\u00e9.py": "x = '\u00e9'\n".encode(),
        "App.py": b"# case twin of app.py, fine on Linux\n",
    }
    stored = make_zip(tmp_path / "stored.zip", files, method=zips.STORED, dirs=("data", "emptydir"))
    deflated = make_zip(tmp_path / "deflated.zip", files, dirs=("data", "emptydir"))
    for archive in (stored, deflated):
        dest = tmp_path / archive.stem
        before = snapshot(tmp_path)
        report = safe_extract(archive, dest)
        assert snapshot(tmp_path) - before == snapshot(dest) | {dest}, "wrote outside dest"
        assert report.root == dest
        assert report.kept == tuple(sorted(files))
        assert report.skipped == () and report.stripped_prefix is None
        for name, data in files.items():
            assert (dest / name).read_bytes() == data
        assert (dest / "emptydir").is_dir()


def test_permissions_are_readable_by_the_sandbox_whatever_the_umask(tmp_path):
    archive = write_raw_zip(tmp_path, [
        RawEntry("src/", external_attr=zips.DIR_MODE),
        RawEntry("app.py", b"x"),
        RawEntry("src/a.py", b"x", external_attr=(stat.S_IFREG | 0o4700) << 16),  # setuid, owner-only
    ])
    old = os.umask(0o077)
    try:
        safe_extract(archive, tmp_path / "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out/src/a.py").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "out/src").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755


def test_a_python_zipfile_archive_unpacks(tmp_path):
    archive = tmp_path / "py.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/__init__.py", b"")
        zf.writestr("pkg/mod.py", b"X = 1\n")
        zf.writestr("test_mod.py", b"def test(): pass\n")
    report = safe_extract(archive, tmp_path / "out")
    assert report.kept == ("pkg/__init__.py", "pkg/mod.py", "test_mod.py")


def test_an_info_zip_archive_unpacks_with_its_times(tmp_path):
    require(shutil.which("zip") is not None, "Info-ZIP `zip` is not installed (apt-get install zip)")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src/a.py").write_text("A = 1\n")
    os.utime(project / "src/a.py", (1_700_000_000, 1_700_000_000))
    subprocess.run(["zip", "-qr", str(tmp_path / "up.zip"), "project"], cwd=tmp_path, check=True)
    report = safe_extract(tmp_path / "up.zip", tmp_path / "out")
    assert report.kept == ("src/a.py",) and report.stripped_prefix == "project"
    assert report.times["src/a.py"].utc == datetime.fromtimestamp(1_700_000_000, UTC)


@pytest.mark.parametrize(
    "junk",
    [
        ["__MACOSX/", "__MACOSX/._app.py"],
        ["._app.py"],
        [".DS_Store", "sub/.DS_Store"],
        ["Thumbs.db", "desktop.ini"],
        ["pkg/__pycache__/", "pkg/__pycache__/m.cpython-311.pyc"],
        ["old.pyc", "old.pyo"],
        [".git/", ".git/HEAD", ".git/objects/ab/cdef"],
        [".venv/bin/python", ".venv/lib/python3.11/site-packages/x.py"],
        ["venv/", "venv/pyvenv.cfg", "venv/lib/python3.11/site-packages/x.py", "venv/.gitignore"],
        ["env/pyvenv.cfg", "env/bin/activate"],
        ["node_modules/left-pad/index.js"],
        [".pytest_cache/v/cache/lastfailed", ".mypy_cache/x.json", ".ruff_cache/x", ".tox/py/x"],
        [".idea/workspace.xml", ".vscode/settings.json"],
    ],
    ids=lambda junk: junk[0],
)
def test_junk_is_skipped_and_listed(tmp_path, junk):
    archive = write_raw_zip(tmp_path, [RawEntry("app.py", b"x"), *[
        RawEntry(name, external_attr=zips.DIR_MODE) if name.endswith("/") else RawEntry(name, b"junk")
        for name in junk
    ]])
    report = safe_extract(archive, tmp_path / "out")
    assert report.kept == ("app.py",)
    assert report.skipped == tuple(sorted(junk))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["app.py"]


def test_junk_is_never_opened_so_its_links_and_bombs_are_harmless(tmp_path):
    archive = write_raw_zip(tmp_path, [
        RawEntry("app.py", b"x"),
        RawEntry(".venv/bin/python", b"/usr/bin/python3", external_attr=zips.LINK_MODE),
        RawEntry("node_modules/.bin/jest", b"../jest/bin", external_attr=zips.LINK_MODE),
        RawEntry(".git/secret", b"x", flags=0x1),
        zips.zeros_entry("__MACOSX/._bomb", 100 << 20),
    ])
    report = safe_extract(archive, tmp_path / "out")
    assert report.kept == ("app.py",) and len(report.skipped) == 4


def test_a_venv_made_in_the_project_folder_keeps_the_project(tmp_path):
    archive = make_zip(tmp_path, {
        "pyvenv.cfg": b"home = /usr/bin\n", "bin/python": b"", "lib/python3.11/site-packages/x.py": b"",
        "invoices.py": b"x", "test_invoices.py": b"y", "data/sample.csv": b"z",
    })
    report = safe_extract(archive, tmp_path / "out")
    assert report.kept == ("data/sample.csv", "invoices.py", "test_invoices.py")
    assert report.skipped == ("bin/python", "lib/python3.11/site-packages/x.py", "pyvenv.cfg")


def test_macos_finder_zip_strips_the_wrapping_folder(tmp_path):
    files = {"invoices.py": b"def total(): ...\n", "artifacts/red.log": b"1 failed\n"}
    report = safe_extract(zips.finder_zip(tmp_path, files), tmp_path / "out")
    assert report.stripped_prefix == "project"
    assert report.kept == ("artifacts/red.log", "invoices.py")
    assert report.skipped == (
        "__MACOSX/", "__MACOSX/project/", "__MACOSX/project/._artifacts/red.log",
        "__MACOSX/project/._invoices.py", "project/.DS_Store",
    )
    assert (tmp_path / "out/artifacts/red.log").read_bytes() == b"1 failed\n"
    assert not (tmp_path / "out/project").exists()
    assert report.times["invoices.py"].utc == datetime(2024, 3, 1, 11, 30, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("names", "prefix", "kept"),
    [
        (["project/a.py", "project/src/b.py"], "project", ("a.py", "src/b.py")),
        (["project/", "project/src/", "project/src/b.py"], "project", ("src/b.py",)),
        (["outer/inner/a.py"], "outer", ("inner/a.py",)),  # only one folder is stripped
        (["a.py", "src/b.py"], None, ("a.py", "src/b.py")),
        (["one/a.py", "two/b.py"], None, ("one/a.py", "two/b.py")),
        (["project/a.py", "README"], None, ("README", "project/a.py")),
        (["project/a.py", "__MACOSX/project/._a.py", ".DS_Store"], "project", ("a.py",)),
    ],
)
def test_one_wrapping_folder_is_stripped(tmp_path, names, prefix, kept):
    archive = write_raw_zip(tmp_path, [
        RawEntry(n, external_attr=zips.DIR_MODE) if n.endswith("/") else RawEntry(n, n.encode()) for n in names
    ])
    report = safe_extract(archive, tmp_path / "out")
    assert (report.stripped_prefix, report.kept) == (prefix, kept)
    for path in kept:
        assert (tmp_path / "out" / path).is_file()


def test_times_from_extended_ntfs_and_dos(tmp_path):
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    later = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    archive = make_zip(tmp_path, {"ext.py": b"", "ntfs.py": b"", "dos.py": b"", "both.py": b""}, extra={
        "ext.py": zips.extended_time(when),
        "ntfs.py": zips.ntfs_time(later),
        "both.py": zips.ntfs_time(later) + zips.extended_time(when),
    }, date_time=(2024, 5, 6, 9, 8, 10))
    times = safe_extract(archive, tmp_path / "out").times
    local = datetime(2024, 5, 6, 9, 8, 10)
    assert times["ext.py"] == EntryTime(utc=when, local=local, source="extended")
    assert times["ntfs.py"] == EntryTime(utc=later, local=local, source="ntfs")
    assert times["dos.py"] == EntryTime(utc=None, local=local, source="dos")
    assert times["both.py"].source == "extended"


def test_windows_explorer_zip_gives_ntfs_times(tmp_path):
    when = datetime(2024, 2, 29, 23, 59, 58, tzinfo=UTC)
    report = safe_extract(zips.windows_zip(tmp_path, {"src/a.py": b"x"}, when), tmp_path / "out")
    assert report.kept == ("a.py",) and report.stripped_prefix == "src"
    assert report.times["a.py"] == EntryTime(utc=when, local=datetime(2024, 2, 29, 23, 59, 58), source="ntfs")


SAMPLE_TREE = {"invoices.py": b"def total(path):\r\n    return 0\r\n", "test_invoices.py": b"def test(): pass\r\n",
               "data/sample.csv": b"id,cents\r\n", "artifacts/red.log": b"F\r\n1 failed in 0.01s\r\n"}


def test_a_powershell_5_zip_with_backslashes_unpacks(tmp_path):
    # Windows PowerShell 5.1's Compress-Archive: backslash separators, a wrapping
    # folder, MS-DOS attributes, DOS times only, an entry for an empty folder.
    archive = zips.powershell_zip(tmp_path, SAMPLE_TREE, datetime(2024, 2, 29, 23, 59, 58),
                                  empty_dirs=("artifacts/old",))
    with zipfile.ZipFile(archive) as zf:  # the names really hold backslashes
        assert "project\\artifacts\\red.log" in zf.namelist()
    report = safe_extract(archive, tmp_path / "out")
    assert report.stripped_prefix == "project"
    assert report.kept == tuple(sorted(SAMPLE_TREE))
    for name, data in SAMPLE_TREE.items():
        assert (tmp_path / "out" / name).read_bytes() == data
    assert (tmp_path / "out/artifacts/old").is_dir()
    assert not any("\\" in p.name for p in (tmp_path / "out").rglob("*"))
    assert report.times["artifacts/red.log"] == EntryTime(utc=None, local=datetime(2024, 2, 29, 23, 59, 58),
                                                           source="dos")


def test_a_windows_zip_with_backslashes_and_ntfs_times_unpacks(tmp_path):
    when = datetime(2024, 1, 1, 9, 30, tzinfo=UTC)
    report = safe_extract(zips.windows_zip(tmp_path, {"src/a.py": b"x", "src/sub/b.py": b"y", "c.py": b"z"}, when,
                                           backslashes=True), tmp_path / "out")
    assert report.kept == ("c.py", "src/a.py", "src/sub/b.py") and report.stripped_prefix is None
    assert report.times["src/sub/b.py"].utc == when


def test_backslash_junk_is_still_skipped(tmp_path):
    archive = write_raw_zip(tmp_path, [RawEntry("project\\app.py", b"x"),
                                       RawEntry("project\\__pycache__\\app.cpython-311.pyc", b"junk"),
                                       RawEntry("project\\.venv\\Scripts\\python.exe", b"junk")])
    report = safe_extract(archive, tmp_path / "out")
    assert report.kept == ("app.py",) and report.stripped_prefix == "project"
    assert report.skipped == ("project\\.venv\\Scripts\\python.exe", "project\\__pycache__\\app.cpython-311.pyc")


def test_git_archive_gives_every_entry_the_commit_time(tmp_path):
    commit = datetime(2024, 4, 1, 10, 0, 0, tzinfo=UTC)
    files = {"artifacts/red.log": b"r", "artifacts/green.log": b"g", "invoices.py": b"i"}
    report = safe_extract(zips.git_archive_zip(tmp_path, files, commit, prefix="repo/"), tmp_path / "out")
    assert report.stripped_prefix == "repo"
    assert {t.utc for t in report.times.values()} == {commit}
    assert {t.source for t in report.times.values()} == {"extended"}


def test_malformed_times_fall_back_without_failing(tmp_path):
    archive = make_zip(tmp_path, {"a.py": b"", "b.py": b""}, date_time=(1980, 0, 0, 0, 0, 0), extra={
        "a.py": b"UT\x01\x00\x00",  # extended field with mtime flag but no room for it
        "b.py": b"\x0a\x00\x08\x00" + bytes(8),  # NTFS field with no time tag
    })
    times = safe_extract(archive, tmp_path / "out").times
    assert times["a.py"] == EntryTime(utc=None, local=datetime(1980, 1, 1), source="dos")
    assert times["b.py"].source == "dos"


def test_utf8_names_without_the_flag_are_read_as_utf8(tmp_path):
    archive = raw(tmp_path, RawEntry("r\u00e9sum\u00e9.py".encode(), b"x"))  # bytes name: flag left unset
    assert "r\u00e9sum\u00e9.py" in safe_extract(archive, tmp_path / "out").kept


def test_dest_behind_a_symlinked_parent_still_works(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    report = safe_extract(make_zip(tmp_path, APP), tmp_path / "link" / "out")
    assert report.kept == ("app.py",) and (tmp_path / "real/out/app.py").is_file()


# -- the scale limits: paths past PATH_MAX, odd but legal archives ------------------------------


@pytest.mark.parametrize("name", [
    "/".join(["d" * 200] * 25) + "/x.py",          # 5 KB: past PATH_MAX once copied under the work folders
    "/".join(["d"] * 40) + "/x.py",                # short, but 40 folders deep
], ids=["long", "deep"])
def test_a_path_too_long_or_too_deep_is_refused_before_it_breaks_grading(tmp_path, name):
    reason = reject(tmp_path, make_zip(tmp_path, {**APP, name: b"x = 1\n"}))
    assert "more than 1 KB long or nested more than 32 folders deep" in reason
    assert_human(reason)


def test_a_long_honest_path_still_unpacks(tmp_path):
    name = "/".join(["package"] * 20) + "/module_with_a_long_descriptive_name.py"
    report = safe_extract(make_zip(tmp_path, {**APP, name: b"x = 1\n"}), tmp_path / "out")
    assert name in report.kept


def test_odd_but_legal_archives(tmp_path):
    # zip64 records, an archive that is only the end record, a file and a folder both named artifacts,
    # and a central directory whose name disagrees with the local header.
    z64 = tmp_path / "z64.zip"
    with zipfile.ZipFile(z64, "w") as zf:
        with zf.open("a.py", "w", force_zip64=True) as fh:
            fh.write(b"x = 1\n")
    assert safe_extract(z64, tmp_path / "z64").kept == ("a.py",)
    only_end = _write(tmp_path, b"PK\x05\x06" + bytes(18))
    assert "empty" in reject(tmp_path, only_end)
    both = write_raw_zip(tmp_path / "both.zip", [RawEntry("artifacts", b"x"), RawEntry("artifacts/red.log", b"y")])
    assert "both a file and a folder named artifacts" in reject(tmp_path, both)
    data = bytearray(make_zip(tmp_path / "lie.zip", {"good.py": b"print(1)\n"}).read_bytes())
    at = data.find(b"good.py")  # the local header's copy of the name
    data[at:at + 7] = b"evil.py"
    assert "damaged" in reject(tmp_path, _write(tmp_path, bytes(data)))
