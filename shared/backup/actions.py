"""Taking a backup and restoring one: the two commands' work, each step said as it is done."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db import DatabaseError
from django.utils.crypto import salted_hmac

from shared.words import counted, listed

from . import FORMAT, VERSION, BackupRefused, Part, database, parts
from .archive import FILES, HEADER, MANIFEST, Collector, Writer, read, size_words

Say = Callable[[str], None]
ENGINES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def key_check() -> str:
    """A mark of SECRET_KEY that tells two keys apart and gives nothing of either away."""
    return salted_hmac("takehome.backup", "the key a backup was made under").hexdigest()[:16]


def _scratch(prefix: str) -> tempfile.TemporaryDirectory:
    # why under TAKEHOME_VAR_DIR: beside the data, on its disk (a restore then moves its files in place,
    # not copies them), and never in a small /tmp
    Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=prefix, dir=settings.VAR_DIR)


def _database_words(db: dict) -> str:
    rows = sum(facts["rows"] for facts in db["tables"].values())
    return (f"{ENGINES.get(db['engine'], db['engine'])} ({db['method']}): {counted(len(db['tables']), 'table')}, "
            f"{rows:,} rows, at migration {len(db['migrations'])}")


def _database_error(exc: DatabaseError) -> BackupRefused:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return BackupRefused(f"The database cannot be read: {first}. Is it running, and DATABASE_URL right?")


def do_backup(out: BinaryIO, say: Say, skip: tuple[int, int] | None = None) -> dict:
    """Write a backup of this installation to ``out``: the database as one snapshot, then every part's files.

    The database comes first: an upload is stored before its row commits, so every file a row of the
    snapshot names is on disk by then, and it is copied after. ``skip`` is the (device, inode) of the
    file being written, left out should it lie in a folder backed up. Returns the manifest.
    """
    refuse_bucket("back up")
    with _scratch(".backup-") as tmp:
        scratch = Path(tmp)
        writer = Writer(out)
        try:
            return _write(writer, scratch, say, skip)
        except BaseException:
            writer.abandon()
            raise


def _write(writer: Writer, scratch: Path, say: Say, skip: tuple[int, int] | None) -> dict:
    """The backup's members in order: the header, the database, each part's files, the manifest; the manifest."""
    writer.add_json(HEADER, {"format": FORMAT, "version": VERSION})
    try:
        db = database.snapshot(writer, scratch)
    except DatabaseError as exc:
        raise _database_error(exc) from None
    say(f"Database: {_database_words(db)}.")
    facts = {}
    for part in parts():
        collector = Collector(writer, part, scratch, skip)
        part.collect(collector)
        facts[part.name] = {**collector.info, "folder": str(part.folder()), "said": collector.said}
        say(f"{part.title[0].upper()}{part.title[1:]}, from {part.folder()}: "
            f"{counted(collector.info['files'], 'file')}, {size_words(collector.info['bytes'])}"
            + "".join(f"\n  {line}" for line in collector.said))
    manifest = {
        "format": FORMAT, "version": VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "secret_key_check": key_check(),
        "database": db, "parts": facts, "files": writer.files,
    }
    writer.add_json(MANIFEST, manifest)
    writer.close()
    return manifest


# --- restoring ---------------------------------------------------------------------------------------------


def refuse_bucket(what: str) -> None:
    """Uploads and recordings in an S3 bucket are not on this disk: a backup of it would miss them all."""
    if settings.STORAGE != "filesystem":
        raise BackupRefused(
            f"Cannot {what} here: uploads and recordings are kept in the S3 bucket (TAKEHOME_STORAGE="
            f"{settings.STORAGE}), which this file does not hold. Back the bucket up with its own tools "
            "(versioning and replication, or a mirror such as `mc mirror`), the database with pg_dump, and each "
            "workspace host's workspaces folder (docs/operations.md, \"Back up and restore\"). Nothing was "
            "changed.")


def _holds_files(part: Part) -> bool:
    folder = part.folder()
    if not folder.is_dir():
        return False
    for entry in folder.iterdir():
        if not part.owns(entry.name):
            continue
        if not entry.is_dir() or entry.is_symlink():
            return True
        if any(files for _, _, files in os.walk(entry)):
            return True
    return False


def _check_target(registered: list[Part], force: bool) -> None:
    """Refuse to restore over a workspace in use, or over data without ``force``."""
    busy = [why for why in (part.busy() for part in registered) if why]
    if busy:
        raise BackupRefused(" ".join(busy) + " Nothing was restored.")
    if force:
        return
    try:
        rows = database.contents()
    except DatabaseError as exc:
        raise _database_error(exc) from None
    held = [f"the database holds {listed([f'{n:,} {what}' for what, n in rows[:6]])}"
            + (f" and rows in {counted(len(rows) - 6, 'more table')}" if len(rows) > 6 else "")] if rows else []
    held += [f"{part.folder()} holds {part.title}" for part in registered if _holds_files(part)]
    if held:
        raise BackupRefused(
            f"This installation is not empty: {listed(held)}. A restore replaces all of it with the backup's. "
            "To do that, run the restore again with --force (take a backup of this one first if you may want "
            "it back: `manage.py backup FILE`). Nothing was restored.")


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _replace(part: Part, staged: Path, trash: Path, scratch: Path, files: dict) -> int:
    """Move the part's entries out of its folder (into ``trash``) and the backup's in; the files put in place."""
    for name, facts in files.items():
        folder, _, rel = name.partition("/")
        if folder == part.name:
            # why no write bit for others, nor set-id bits, whatever the backup says
            os.chmod(staged / rel, int(facts.get("mode", 0o600)) & 0o755)
    target = part.folder()
    target.mkdir(parents=True, exist_ok=True)
    trash.mkdir(parents=True)
    for entry in sorted(target.iterdir()):
        # why the check: the scratch space lies under TAKEHOME_VAR_DIR, which a part's folder may be
        if part.owns(entry.name) and not _inside(scratch, entry):
            shutil.move(entry, trash / entry.name)
    count = 0
    if staged.is_dir():
        for entry in sorted(staged.iterdir()):
            shutil.move(entry, target / entry.name)
        count = sum(1 for name in files if name.startswith(f"{part.name}/"))
    return count


def do_restore(source: BinaryIO, say: Say, *, label: str, force: bool = False,
               source_path: Path | None = None) -> dict:
    """Replace this installation's database and files with the backup ``source``'s, once all of it is checked.

    Nothing is touched until the whole file has been unpacked aside and every file matches its
    manifest, the database is one this code can restore, no hosted workspace is open here, and the
    installation is empty (or ``force``). Then the database is replaced (all or nothing), then each
    part's files, then the parts fix what the move to this server changes, and the database is
    migrated to this version. BackupRefused, saying why and what to do, when it cannot be done.
    """
    refuse_bucket("restore")
    registered = parts()
    by_name = {part.name: part for part in registered}
    if source_path is not None:
        for part in registered:
            if _inside(source_path, part.folder()):
                raise BackupRefused(f"{label} lies in {part.folder()}, which a restore replaces: move it elsewhere "
                                    "first. Nothing was restored.")

    def known(name: str) -> bool:
        folder, _, rest = name.partition("/")
        return database.accepts(name) or (folder in by_name and by_name[folder].accepts(rest))

    with _scratch(".restore-") as tmp:
        scratch = Path(tmp)
        manifest = read(source, scratch, known, label)
        staged = scratch / FILES
        facts = manifest.get("parts")
        if not isinstance(facts, dict) or not isinstance(manifest.get("database"), dict):
            raise BackupRefused(f"Cannot restore {label}: its manifest is damaged. Nothing was restored.")
        unknown = sorted(set(facts) - set(by_name))
        if unknown:
            raise BackupRefused(f"Cannot restore {label}: it holds {listed(unknown)}, which this version of "
                                "takehome does not restore. Restore it with the version that wrote it. "
                                "Nothing was restored.")
        say(f"Checked {label}: a backup made {manifest.get('created_at', 'at an unknown time')}, "
            f"{counted(len(manifest['files']), 'file')}, each as its manifest says.")
        database.check(manifest["database"], staged / database.FOLDER)
        _check_target(registered, force)

        database.restore(manifest["database"], staged / database.FOLDER)
        say(f"Database: restored, {_database_words(manifest['database'])}.")
        try:
            for part in registered:
                count = _replace(part, staged / part.name, scratch / "replaced" / part.name, scratch,
                                 manifest["files"])
                say(f"{part.title[0].upper()}{part.title[1:]}: {counted(count, 'file')} put in {part.folder()}.")
        except OSError as exc:
            raise BackupRefused(
                f"The database was restored, but the files could not all be put in place: {exc}. Free what is in "
                "the way, then run the restore again with --force to finish it.") from None
        for part in registered:
            part.restored(facts.get(part.name) or {}, say)
        applied = database.migrate_forward()
        if applied:
            say(f"Migrated the database to this version of takehome: {counted(applied, 'migration')} applied.")
        if manifest.get("secret_key_check") != key_check():
            say("Note: this installation's SECRET_KEY is not the one the backup was made under. The links "
                "already sent still work, but the board cannot show or copy them, a resend issues new ones, "
                "and the codes that hide candidates' names from reviewers change. To keep them, put the old "
                "SECRET_KEY back in .env and restart.")
    return manifest
