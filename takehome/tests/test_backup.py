"""`manage.py backup` and `manage.py restore` refuse what they cannot do, each with a sentence saying why and what
to do, and change nothing.

The files a restore must refuse are built here as `manage.py backup` writes them (shared.backup.archive's
Writer: a header, the members, a manifest last), then damaged, forged or cut in one way each. Their checks
read no database, so most of these tests have none; the refusals that depend on the installation (data in
it, a database that does not answer, files that cannot be put in place) take a real backup first. The
refusal of a restore over an open hosted workspace is in sessions_app/tests/test_backup_restore.py, beside
the workspaces' fixture, and the refusal when uploads are kept in an S3 bucket there too.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import io
import os
import sqlite3
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from conftest import free_port
from shared.backup import FORMAT, VERSION
from shared.backup.archive import HEADER, MANIFEST, Writer
from takehome.tests.factories import InvitationFactory

UPLOAD = ("media/uploads/ab/abcd.zip", b"PK\x05\x06" + bytes(18))


def sqlite_database(path: Path, migrations: list[tuple[str, str]]) -> dict:
    """A SQLite file holding ``migrations`` as applied; its entry in a manifest."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE django_migrations (id INTEGER PRIMARY KEY, app TEXT, name TEXT, applied TEXT)")
    db.executemany("INSERT INTO django_migrations (app, name, applied) VALUES (?, ?, '2026-01-01')", migrations)
    db.commit()
    db.close()
    return {"engine": "sqlite", "method": "sqlite3 online backup", "migrations": [list(m) for m in migrations],
            "tables": {"django_migrations": {"rows": len(migrations)}}}


def write_backup(path: Path, tmp_path: Path, *, header: dict | None = None,
                 members: list[tuple[str, bytes]] = (UPLOAD,),
                 change: Callable[[dict], None] = lambda manifest: None,
                 inside: Callable[[Writer], None] = lambda writer: None,
                 after: Callable[[Writer], None] = lambda writer: None) -> Path:
    """A backup as `manage.py backup` writes it, of a SQLite database at its first migration and ``members``;
    ``change`` alters its manifest, ``inside`` adds to it before the manifest, ``after`` after it."""
    sqlite_file = tmp_path / "copy.sqlite3"
    sqlite_file.unlink(missing_ok=True)
    db = sqlite_database(sqlite_file, [("contenttypes", "0001_initial")])
    with path.open("wb") as out:
        writer = Writer(out)
        writer.add_json(HEADER, header if header is not None else {"format": FORMAT, "version": VERSION})
        with sqlite_file.open("rb") as source:
            writer.add("database/db.sqlite3", source, sqlite_file.stat().st_size)
        for name, data in members:
            writer.add(name, io.BytesIO(data), len(data))
        inside(writer)
        manifest = {"format": FORMAT, "version": VERSION, "created_at": "2026-12-01T10:00:00+00:00",
                    "secret_key_check": "0" * 16, "database": db,
                    "parts": {"media": {"title": "uploads (MEDIA_ROOT)", "files": len(members)}},
                    "files": writer.files}
        change(manifest)
        writer.add_json(MANIFEST, manifest)
        after(writer)
        writer.close()
    return path


def tar_gz(path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return path


def refused(path: Path, *args: str) -> str:
    with pytest.raises(CommandError) as failed:
        call_command("restore", str(path), *args, stdout=io.StringIO())
    return str(failed.value)


def raw_member(writer: Writer, info: tarfile.TarInfo, data: bytes = b"") -> None:
    """A member added past the Writer's own checks (a link, a name twice), as a forger would."""
    info.size = len(data) if info.isreg() else 0
    writer._tar.addfile(info, io.BytesIO(data) if info.isreg() else None)


def named(name: str, data: bytes = b"x") -> Callable[[Writer], None]:
    return lambda writer: raw_member(writer, tarfile.TarInfo(name), data)


def link(name: str, target: str) -> Callable[[Writer], None]:
    def add(writer: Writer) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = tarfile.SYMTYPE, target
        raw_member(writer, info)
    return add


def set_in(*keys: str, value) -> Callable[[dict], None]:
    def change(manifest: dict) -> None:
        for key in keys[:-1]:
            manifest = manifest[key]
        manifest[keys[-1]] = value
    return change


def raw(data: bytes) -> Callable[[Path, Path], Path]:
    def make(path: Path, tmp_path: Path) -> Path:
        path.write_bytes(data)
        return path
    return make


def tar_of(*entries: tuple[str, bytes]) -> Callable[[Path, Path], Path]:
    return lambda path, tmp_path: tar_gz(path, list(entries))


def backup(**how) -> Callable[[Path, Path], Path]:
    return lambda path, tmp_path: write_backup(path, tmp_path, **how)


def cut_short(path: Path, tmp_path: Path) -> Path:
    data = write_backup(path, tmp_path).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def checksum_broken(path: Path, tmp_path: Path) -> Path:
    data = bytearray(write_backup(path, tmp_path).read_bytes())
    data[-8] ^= 0xFF  # the gzip trailer's CRC-32 of the data
    path.write_bytes(bytes(data))
    return path


def add_missing(manifest: dict) -> None:
    manifest["files"]["media/uploads/cd/gone.zip"] = {"size": 1, "mode": 0o600, "sha256": "0" * 64}


def drop_listed(manifest: dict) -> None:
    del manifest["files"][UPLOAD[0]]


def alter_hash(manifest: dict) -> None:
    manifest["files"][UPLOAD[0]]["sha256"] = hashlib.sha256(b"what it held before").hexdigest()


def add_part(manifest: dict) -> None:
    manifest["parts"]["plugins"] = {}


HEADER_ONLY = (HEADER, b'{"format": "takehome-backup", "version": 1}')
NEWER = f"it was written by a newer version of takehome (backup format {VERSION + 1}; this one reads format {VERSION}"
OUTSIDE = "which would be written outside the folders a restore fills"
UNKNOWN = "which this version of takehome does not restore. Restore it with the version that wrote it."

# Each way a file may not be a whole, unaltered backup of a format this version reads, and the words said.
NOT_A_BACKUP = [
    pytest.param(raw(b""), "it is empty.", id="empty"),
    pytest.param(raw(b"PK\x03\x04rest"), "it is not a takehome backup (a zip file: `manage.py backup` writes a "
                 ".tar.gz).", id="a zip"),
    pytest.param(raw(b"-- PostgreSQL database dump\n"), "it is not a takehome backup (not gzip-compressed: "
                 "`manage.py backup` writes a .tar.gz).", id="text"),
    pytest.param(raw(gzip.compress(b"just some text, not a tar" * 40)),
                 "it is not a takehome backup (a gzip'd file, but not a tar).", id="gzip, no tar"),
    pytest.param(tar_of(), "it is not a takehome backup (an empty tar).", id="an empty tar"),
    pytest.param(tar_of(("media/x", b"x")), "it is not a takehome backup (it does not start with "
                 "takehome-backup.json).", id="no header first"),
    pytest.param(tar_of((HEADER, b"{not json")), "its header is damaged (not JSON).", id="header not JSON"),
    pytest.param(backup(header={"format": "other", "version": 1}),
                 "it is not a takehome backup (it does not say it is one).", id="another format"),
    pytest.param(backup(header={"format": FORMAT}), "it is not a takehome backup (its format has no version).",
                 id="no version"),
    pytest.param(backup(header={"format": FORMAT, "version": VERSION + 1}), NEWER, id="a newer format"),
    pytest.param(backup(inside=named("media/../../etc/cron.d/x")), OUTSIDE, id="a name climbing out"),
    pytest.param(backup(inside=named("/etc/passwd")), OUTSIDE, id="an absolute name"),
    pytest.param(backup(inside=link("media/uploads/ab/link.zip", "/etc/shadow")),
                 "its member 'media/uploads/ab/link.zip' is not a regular file (a link, folder or device).",
                 id="a link"),
    pytest.param(backup(inside=named(UPLOAD[0], b"other bytes")), f"it holds '{UPLOAD[0]}' twice.",
                 id="a name twice"),
    pytest.param(backup(members=[UPLOAD, ("plugins/x.py", b"import os")]), f"it holds 'plugins/x.py', {UNKNOWN}",
                 id="a folder this version does not know"),
    pytest.param(backup(after=named("media/late.zip")),
                 "something follows its manifest ('media/late.zip'): it was altered.", id="a member after the manifest"),
    pytest.param(tar_of(HEADER_ONLY, ("media/x", b"x")), "it is cut short: its manifest, written last, is missing.",
                 id="no manifest"),
    pytest.param(cut_short, "it is cut short", id="cut short"),
    pytest.param(checksum_broken, "it is damaged (", id="its checksum broken"),
    pytest.param(tar_of(HEADER_ONLY, (MANIFEST, b"[1, 2")), "its manifest is damaged (not JSON).",
                 id="the manifest not JSON"),
    pytest.param(backup(change=set_in("version", value=VERSION + 1)), NEWER, id="the manifest of a newer format"),
    pytest.param(backup(change=set_in("files", value=None)), "its manifest is damaged (no list of files).",
                 id="the manifest lists no files"),
    pytest.param(backup(change=add_missing), "its files are not the ones its manifest lists (missing: "
                 "media/uploads/cd/gone.zip).", id="a file missing"),
    pytest.param(backup(change=drop_listed), f"its files are not the ones its manifest lists (not listed: "
                 f"{UPLOAD[0]}).", id="a file not listed"),
    pytest.param(backup(change=alter_hash), f"{UPLOAD[0]} is not what its manifest says (size or sha256 differ): "
                 "the file was altered or damaged.", id="a file altered"),
    # read whole and each file as listed, then the manifest's own facts
    pytest.param(backup(change=set_in("parts", value=[])), "its manifest is damaged.", id="no parts"),
    pytest.param(backup(change=add_part), f"it holds plugins, {UNKNOWN}", id="a part this version does not know"),
    pytest.param(backup(change=set_in("database", value=None)), "its manifest is damaged.", id="no database"),
]


@pytest.mark.parametrize(("make", "words"), NOT_A_BACKUP)
def test_a_restore_refuses_a_file_that_is_not_a_whole_unaltered_backup_and_changes_nothing(
        make, words, tmp_path, media_root, settings):
    # why a var of its own: the restore's scratch folder goes there, and the shared one holds other test
    # processes' restores while they run (a parallel run once found one there and failed 14 of these).
    settings.VAR_DIR = tmp_path / "var"
    Path(media_root).mkdir()
    (Path(media_root) / "kept.txt").write_text("the installation's own file")
    path = make(tmp_path / "takehome-backup.tar.gz", tmp_path)
    message = refused(path)
    assert message.startswith(f"Cannot restore {path}: "), message
    assert words in message, message
    assert message.endswith("Nothing was restored."), message
    # nothing unpacked is left, nothing of the installation's changed
    assert sorted(p.name for p in Path(media_root).iterdir()) == ["kept.txt"]
    assert not [p for p in Path(settings.VAR_DIR).iterdir() if p.name.startswith(".restore-")]


def other_engine() -> tuple[str, str]:
    return ("postgresql", "PostgreSQL") if connection.vendor == "sqlite" else ("sqlite", "SQLite")


def test_a_restore_refuses_a_database_of_another_kind(tmp_path, media_root):
    engine, name = other_engine()
    path = write_backup(tmp_path / "b.tar.gz", tmp_path, change=set_in("database", "engine", value=engine))
    here = "SQLite" if connection.vendor == "sqlite" else "PostgreSQL"
    assert refused(path) == (f"The backup holds a {name} database and this installation uses {here} (DATABASE_URL): "
                             "a backup restores into the same kind of database. Nothing was restored.")


@pytest.mark.sqlite_only  # the backups built here hold a SQLite database
def test_a_restore_refuses_a_database_with_migrations_this_version_does_not_have(tmp_path, media_root):
    def newer(manifest: dict) -> None:
        manifest["database"]["migrations"].append(["grading", "9999_from_the_future"])

    path = write_backup(tmp_path / "b.tar.gz", tmp_path, change=newer)
    assert refused(path) == ("The backup was made by a newer version of takehome: its database has migrations "
                             "this version does not have (grading.9999_from_the_future). Restore it with that "
                             "version or a newer one. Nothing was restored.")


@pytest.mark.sqlite_only
@pytest.mark.parametrize(("damage", "words"), [
    (lambda w, t: None, "database/db.sqlite3 is missing"),
    (lambda w, t: w.add("database/db.sqlite3", io.BytesIO(b"SQLite format 3\x00" + bytes(200)), 216),
     "SQLite cannot read it ("),
])
def test_a_restore_refuses_a_database_file_that_is_damaged(tmp_path, media_root, damage, words):
    # a backup whose database member is replaced: the header, the damaged file, a manifest listing it
    path = tmp_path / "b.tar.gz"
    with path.open("wb") as out:
        writer = Writer(out)
        writer.add_json(HEADER, {"format": FORMAT, "version": VERSION})
        damage(writer, tmp_path)
        writer.add_json(MANIFEST, {"format": FORMAT, "version": VERSION, "parts": {},
                                   "database": {"engine": "sqlite", "migrations": [], "tables": {}},
                                   "files": writer.files})
        writer.close()
    message = refused(path)
    assert message.startswith(f"The backup's database is damaged: {words}"), message
    assert message.endswith("Use another copy. Nothing was restored."), message


@pytest.mark.sqlite_only
def test_a_restore_refuses_a_database_whose_rows_are_not_the_ones_its_manifest_counts(tmp_path, media_root):
    path = write_backup(tmp_path / "b.tar.gz", tmp_path,
                        change=set_in("database", "tables", "django_migrations", "rows", value=5))
    assert refused(path) == ("The backup's database is damaged: its tables and rows are not the ones its manifest "
                             "counts. Use another copy. Nothing was restored.")


def test_a_restore_refuses_a_backup_kept_in_a_folder_it_replaces(tmp_path, media_root):
    Path(media_root).mkdir()
    path = write_backup(Path(media_root) / "b.tar.gz", tmp_path)
    assert refused(path) == (f"{path} lies in {media_root}, which a restore replaces: move it elsewhere first. "
                             "Nothing was restored.")
    assert path.exists()


# --- the commands' own words -----------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("command", "stream", "words"), [
    ("backup", "stdout", "The backup is a binary file: send it to a file (`manage.py backup - > FILE`), or name "
                         "the file (`manage.py backup FILE`)."),
    ("restore", "stdin", "Give the backup on standard input (`manage.py restore - < FILE`), or name it "
                         "(`manage.py restore FILE`)."),
])
def test_the_commands_refuse_a_terminal_for_the_backup(command, stream, words, monkeypatch, media_root):
    monkeypatch.setattr(sys, stream, Terminal())
    with pytest.raises(CommandError) as failed:
        call_command(command, "-", stdout=io.StringIO())
    assert str(failed.value) == words


@pytest.mark.parametrize(("where", "words"), [
    (lambda t: t, "{file} is a folder: name the file to write, e.g. {file}/takehome-backup.tar.gz."),
    (lambda t: t / "no-such-folder" / "b.tar.gz", "There is no folder {parent} to write b.tar.gz into."),
])
def test_a_backup_refuses_a_place_it_cannot_write_to(tmp_path, where, words):
    target = where(tmp_path)
    with pytest.raises(CommandError) as failed:
        call_command("backup", str(target), stdout=io.StringIO())
    assert str(failed.value) == words.format(file=target, parent=target.parent)


def test_a_restore_refuses_a_file_that_is_not_there(tmp_path):
    with pytest.raises(CommandError) as failed:
        call_command("restore", str(tmp_path / "nothing.tar.gz"), stdout=io.StringIO())
    assert str(failed.value) == f"There is no file {tmp_path / 'nothing.tar.gz'}."


# --- what depends on the installation: a real backup first -----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_restore_over_data_refuses_without_force_and_with_it_replaces_it_and_notes_another_key(
        invitation, tmp_path, media_root, settings):
    kept = invitation
    Path(media_root, "uploads").mkdir(parents=True)
    Path(media_root, "uploads", "old.zip").write_bytes(b"an upload")
    backup = tmp_path / "b.tar.gz"
    call_command("backup", str(backup), stdout=io.StringIO())
    InvitationFactory(packet_version=kept.packet_version)  # written after the backup

    message = refused(backup)
    assert message.startswith("This installation is not empty: the database holds "), message
    assert f"and {media_root} holds uploads (MEDIA_ROOT)" in message
    assert message.endswith("To do that, run the restore again with --force (take a backup of this one first if "
                            "you may want it back: `manage.py backup FILE`). Nothing was restored.")
    assert type(kept).objects.count() == 2

    settings.SECRET_KEY = "another-key-" + "x" * 50
    said = io.StringIO()
    call_command("restore", str(backup), "--force", stdout=said)
    assert list(type(kept).objects.values_list("pk", flat=True)) == [kept.pk]
    assert Path(media_root, "uploads", "old.zip").read_bytes() == b"an upload"
    assert "Note: this installation's SECRET_KEY is not the one the backup was made under." in said.getvalue()


@pytest.mark.django_db(transaction=True)
# why: the backup begun is abandoned whole; its tar stream, collected later, must not write into the closed file
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_backup_of_a_database_that_does_not_answer_says_so_and_writes_no_file(tmp_path, media_root, settings,
                                                                                monkeypatch):
    live = connection.settings_dict
    connection.close()
    if connection.vendor == "sqlite":
        monkeypatch.setitem(live, "NAME", str(tmp_path / "no-such-folder" / "db.sqlite3"))
    else:
        monkeypatch.setitem(live, "PORT", str(free_port()))
    target = tmp_path / "b.tar.gz"
    with pytest.raises(CommandError) as failed:
        call_command("backup", str(target), stdout=io.StringIO())
    connection.close()
    message = str(failed.value)
    del failed  # its traceback holds the backup's frames: let them go now, within the test
    gc.collect()
    assert message.startswith("The database cannot be read: "), message
    assert message.endswith("Is it running, and DATABASE_URL right?")
    assert not target.exists() and not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


@pytest.mark.django_db(transaction=True)
def test_a_restore_whose_files_cannot_be_put_in_place_says_how_to_finish_it(invitation, tmp_path, media_root):
    backup = tmp_path / "b.tar.gz"
    call_command("backup", str(backup), stdout=io.StringIO())
    # the uploads' folder is a file now: the database is restored, the files cannot go in
    Path(media_root).write_text("in the way")
    message = refused(backup, "--force")
    assert message.startswith("The database was restored, but the files could not all be put in place: "), message
    assert message.endswith("Free what is in the way, then run the restore again with --force to finish it.")
    os.unlink(media_root)
    said = io.StringIO()
    call_command("restore", str(backup), "--force", stdout=said)
    assert "Restored the backup made " in said.getvalue()


def rewritten(source: Path, target: Path, change: Callable[[dict], None]) -> Path:
    """``source``, a real backup, written again member for member with its manifest changed by ``change``."""
    import json

    with tarfile.open(source) as tar, target.open("wb") as out:
        writer = Writer(out)
        for info in tar:
            body = tar.extractfile(info)
            data = body.read() if body is not None else b""
            if info.name in (HEADER, MANIFEST):
                content = json.loads(data)
                if info.name == MANIFEST:
                    change(content)
                writer.add_json(info.name, content)
            else:
                writer.add(info.name, io.BytesIO(data), len(data), info.mode)
        writer.close()
    return target


@pytest.mark.django_db(transaction=True)
def test_a_restore_refuses_a_database_whose_rows_are_not_the_ones_its_manifest_counts_on_either_engine(
        invitation, tmp_path, media_root):
    backup = tmp_path / "b.tar.gz"
    call_command("backup", str(backup), stdout=io.StringIO())
    table = type(invitation)._meta.db_table
    forged = rewritten(backup, tmp_path / "forged.tar.gz",
                       set_in("database", "tables", table, "rows", value=2))
    words = ("its tables and rows are not the ones its manifest counts" if connection.vendor == "sqlite"
             else f"{table} holds 1 rows, and its manifest counts 2")
    assert refused(forged, "--force") == (f"The backup's database is damaged: {words}. Use another copy. "
                                          "Nothing was restored.")
    assert type(invitation).objects.get() == invitation  # as it was
    # the backup itself, unchanged, restores
    call_command("restore", str(backup), "--force", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_a_restore_run_as_root_gives_the_uploads_to_the_web_servers_user(invitation, tmp_path, media_root):
    # docker-compose.yml: the restore runs in the workspace host's container (root), the web server as another
    # user, who owns MEDIA_ROOT and must read and add to what the restore put there
    from conftest import require

    require(os.geteuid() == 0, "this test runs as root, as the compose file's restore does")
    web_user = 65534  # nobody: any user but root
    upload = Path(media_root, "uploads", "ab", "abcd.zip")
    upload.parent.mkdir(parents=True)
    upload.write_bytes(b"an upload")
    upload.chmod(0o600)
    backup = tmp_path / "b.tar.gz"
    call_command("backup", str(backup), stdout=io.StringIO())
    for path in (upload, upload.parent, upload.parent.parent):
        os.chown(path, 0, 0)
    os.chown(media_root, web_user, web_user)
    said = io.StringIO()
    call_command("restore", str(backup), "--force", stdout=said)
    assert f"Uploads: given to MEDIA_ROOT's owner (uid {web_user}), the web server's user." in said.getvalue()
    for path in (upload, upload.parent, upload.parent.parent):
        assert (path.stat().st_uid, path.stat().st_gid) == (web_user, web_user), path
    assert upload.read_bytes() == b"an upload"
