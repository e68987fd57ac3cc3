"""The database in a backup: a consistent snapshot by the engine's own means, and putting it back whole.

SQLite: sqlite3's online backup API copies the live file page by page in one step, under one
read transaction, so the copy is the database as one moment saw it (writers go on, in WAL
mode); the copy is the whole database, schema and all. A restore checks the copy
(``integrity_check``, its rows against the manifest) and copies it over the live database the
same way, as one write transaction: either all of it is in place or nothing changed.

PostgreSQL: every table's rows by COPY, inside one REPEATABLE READ, READ ONLY transaction, so all
of them are one snapshot (as pg_dump takes its data), with the list of applied migrations.
The schema is not copied: the migrations rebuild it, and exactly as it was, to the backup's
migrations. why not pg_dump: its client must be at least as new as the server, and the image
the compose file builds has none; this way the app's own connection does all of it. A restore
runs in one transaction: drop the tables, migrate an empty schema to the backup's migrations,
COPY the rows in with the foreign keys checked at the end, set the sequences past the highest
ids. Anything that fails rolls all of it back, the old database untouched.

Either way the database is then migrated to this version of the code (a backup of an older
version restores); a backup with migrations this code does not know is refused before anything
is touched. A backup of one engine does not restore into the other.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from django.apps import apps
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from . import BackupRefused
from .archive import CHUNK, Writer

FOLDER = "database"
SQLITE_FILE = "db.sqlite3"
# Tables a fresh `manage.py migrate` fills by itself: rows there do not make an installation "in use".
FILLED_BY_MIGRATE = {"django_migrations", "django_content_type", "auth_permission", "auth_group", "sqlite_sequence"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


def engine() -> str:
    return connection.vendor  # "sqlite" or "postgresql"


def accepts(name: str) -> bool:
    """The members of a backup that are the database's."""
    if name == f"{FOLDER}/{SQLITE_FILE}":
        return True
    folder, _, rest = name.partition("/")
    return folder == FOLDER and rest.endswith(".copy") and bool(IDENTIFIER.fullmatch(rest[: -len(".copy")]))


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


# --- the snapshot -----------------------------------------------------------------------------------------


def snapshot(writer: Writer, scratch: Path) -> dict:
    """Add the database to ``writer``; returns its entry in the manifest (engine, migrations, tables and rows)."""
    if engine() == "sqlite":
        return _snapshot_sqlite(writer, scratch)
    if engine() == "postgresql":
        return _snapshot_postgresql(writer, scratch)
    raise BackupRefused(f"A backup cannot be taken of a {connection.vendor} database: only SQLite and PostgreSQL.")


def _sqlite_facts(db: sqlite3.Connection) -> tuple[list[list[str]], dict[str, dict]]:
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    tables = {}
    for name in names:
        quoted = name.replace('"', '""')
        tables[name] = {"rows": db.execute(f'SELECT COUNT(*) FROM "{quoted}"').fetchone()[0]}
    migrations = []
    if "django_migrations" in tables:
        migrations = [list(r) for r in db.execute("SELECT app, name FROM django_migrations ORDER BY id")]
    return migrations, tables


def _snapshot_sqlite(writer: Writer, scratch: Path) -> dict:
    path = scratch / SQLITE_FILE
    copy = sqlite3.connect(path)
    try:
        connection.ensure_connection()
        # why one step (pages=-1): the whole copy under one read transaction, so it is one moment's database
        connection.connection.backup(copy)
        # why: the live file is in WAL mode; the copy is one self-contained file
        copy.execute("PRAGMA journal_mode=DELETE")
        migrations, tables = _sqlite_facts(copy)
    finally:
        copy.close()
    _check_migrated(migrations)
    with path.open("rb") as source:
        writer.add(f"{FOLDER}/{SQLITE_FILE}", source, path.stat().st_size)
    return {"engine": "sqlite", "method": "sqlite3 online backup", "migrations": migrations, "tables": tables}


def _check_migrated(migrations: list) -> None:
    if not migrations:
        raise BackupRefused("The database has no tables of takehome's yet (run `manage.py migrate` first): "
                            "there is nothing to back up.")


def _columns(cursor, table: str) -> list[str]:
    """The columns COPY writes and reads, in order (generated ones are computed, never copied)."""
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped "
        "AND attgenerated = '' ORDER BY attnum", [_qn(table)])
    return [r[0] for r in cursor.fetchall()]


def _snapshot_postgresql(writer: Writer, scratch: Path) -> dict:
    tables: dict[str, dict] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        # why first: the whole transaction then reads one snapshot, whatever commits meanwhile
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        names = sorted(connection.introspection.table_names(cursor))
        migrations = []
        if "django_migrations" in names:
            cursor.execute("SELECT app, name FROM django_migrations ORDER BY id")
            migrations = [list(r) for r in cursor.fetchall()]
        _check_migrated(migrations)
        for table in names:
            if not IDENTIFIER.fullmatch(table):
                raise BackupRefused(f"The database has a table named {table!r}, which a backup cannot hold.")
            columns = _columns(cursor, table)
            path = scratch / f"{table}.copy"
            rows = 0
            with path.open("wb") as out:
                cols = ", ".join(_qn(c) for c in columns)
                with cursor.cursor.copy(f"COPY {_qn(table)} ({cols}) TO STDOUT") as copy:
                    for data in copy:
                        out.write(data)
                        rows += bytes(data).count(b"\n")  # COPY's text format: one line a row
            with path.open("rb") as source:
                writer.add(f"{FOLDER}/{table}.copy", source, path.stat().st_size)
            path.unlink()
            tables[table] = {"rows": rows, "columns": columns}
    return {"engine": "postgresql", "method": "COPY in one REPEATABLE READ transaction", "migrations": migrations,
            "tables": tables}


# --- checking a backup's database before anything is touched ----------------------------------------------


def _known_migrations() -> set[tuple[str, str]]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    known = set(loader.disk_migrations)
    for migration in loader.disk_migrations.values():
        known.update(migration.replaces)
    return known


def check(db: dict, staged: Path) -> None:
    """BackupRefused when the backup's database cannot be restored here: another engine, migrations this code
    does not have (a newer version made it), or a copy that is not what its manifest says."""
    if not isinstance(db, dict) or not isinstance(db.get("tables"), dict) or not isinstance(db.get("migrations"), list):
        raise BackupRefused("The backup's manifest is damaged (no database in it). Nothing was restored.")
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    if db.get("engine") != engine():
        raise BackupRefused(
            f"The backup holds a {names.get(db.get('engine'), db.get('engine'))} database and this installation "
            f"uses {names.get(engine(), engine())} (DATABASE_URL): a backup restores into the same kind of "
            "database. Nothing was restored.")
    try:
        applied = {(app, name) for app, name in db["migrations"]}
    except (TypeError, ValueError):
        raise BackupRefused("The backup's manifest is damaged (its migrations). Nothing was restored.") from None
    unknown = sorted(applied - _known_migrations())
    if unknown:
        shown = ", ".join(f"{app}.{name}" for app, name in unknown[:5])
        raise BackupRefused(
            f"The backup was made by a newer version of takehome: its database has migrations this version does "
            f"not have ({shown}{', ...' if len(unknown) > 5 else ''}). Restore it with that version or a newer "
            "one. Nothing was restored.")
    if engine() == "sqlite":
        _check_sqlite(db, staged / SQLITE_FILE)
    else:
        _check_postgresql(db, staged)


def _damaged(what: str) -> BackupRefused:
    return BackupRefused(f"The backup's database is damaged: {what}. Use another copy. Nothing was restored.")


def _check_sqlite(db: dict, path: Path) -> None:
    if not path.is_file():
        raise _damaged(f"{FOLDER}/{SQLITE_FILE} is missing")
    try:
        copy = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            result = copy.execute("PRAGMA integrity_check").fetchone()[0]
            if result != "ok":
                raise _damaged(f"SQLite's integrity check says {result[:200]!r}")
            migrations, tables = _sqlite_facts(copy)
        finally:
            copy.close()
    except sqlite3.DatabaseError as exc:
        raise _damaged(f"SQLite cannot read it ({exc})") from None
    if {t: f["rows"] for t, f in tables.items()} != {t: f.get("rows") if isinstance(f, dict) else None
                                                     for t, f in db["tables"].items()}:
        raise _damaged("its tables and rows are not the ones its manifest counts")


def _check_postgresql(db: dict, staged: Path) -> None:
    for table, facts in db["tables"].items():
        columns = facts.get("columns") if isinstance(facts, dict) else None
        if (not IDENTIFIER.fullmatch(table) or not isinstance(columns, list) or not columns
                or not all(isinstance(c, str) and IDENTIFIER.fullmatch(c) for c in columns)):
            raise _damaged(f"its manifest names a table or column {table!r} that no migration makes")
        path = staged / f"{table}.copy"
        if not path.is_file():
            raise _damaged(f"the rows of {table} are missing")
        rows = 0
        with path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                rows += chunk.count(b"\n")
        if rows != facts.get("rows"):
            raise _damaged(f"{table} holds {rows} rows, and its manifest counts {facts.get('rows')}")


# --- the installation's own database -----------------------------------------------------------------------


def contents() -> list[tuple[str, int]]:
    """(what, rows) of every table holding rows a fresh `migrate` does not write; [] for an empty database."""
    names = {m._meta.db_table: (str(m._meta.verbose_name), str(m._meta.verbose_name_plural))
             for m in apps.get_models(include_auto_created=True)}
    held = []
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names(cursor)):
            if table in FILLED_BY_MIGRATE:
                continue
            cursor.execute(f"SELECT COUNT(*) FROM {_qn(table)}")
            rows = cursor.fetchone()[0]
            if rows:
                one, many = names.get(table, (f"row of {table}", f"rows of {table}"))
                held.append((one if rows == 1 else many, rows))
    return held


def restore(db: dict, staged: Path) -> None:
    """Replace the whole database with the backup's (checked before by ``check``); all or nothing."""
    try:
        if engine() == "sqlite":
            _restore_sqlite(staged / SQLITE_FILE)
        else:
            _restore_postgresql(db, staged)
    except BackupRefused:
        raise
    except DatabaseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        busy = "lock" in first.lower()
        raise BackupRefused(
            f"The database could not be restored, and it is as it was: {first}."
            + (" Something else is using it: stop the web server, the workers and beat, then restore again."
               if busy else "") + " Nothing was restored.") from None
    finally:
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()  # why: this process's cache holds the old database's rows


def _restore_sqlite(path: Path) -> None:
    if connection.in_atomic_block:
        raise RuntimeError("a restore replaces the whole database: not inside a transaction")
    copy = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        connection.ensure_connection()
        # why the backup API again: one write transaction on the live file, so it is all replaced or not at all
        copy.backup(connection.connection)
    except sqlite3.Error as exc:
        raise DatabaseError(str(exc)) from None
    finally:
        copy.close()
    connection.close()  # the next query opens it afresh, in WAL mode again (the settings' init_command)


def _targets(loader, applied: list) -> list[tuple[str, str]]:
    """Per app, the last of the backup's migrations: what an empty schema is migrated to."""
    graph = loader.graph
    targets = []
    for app in sorted({app for app, _ in applied}):
        nodes = [(a, n) for a, n in applied if a == app and (a, n) in graph.nodes]
        if nodes:
            targets.append(max(nodes, key=lambda node: len(graph.forwards_plan(node))))
    return targets


def _rebuild_schema(db: dict) -> None:
    """Drop every table and migrate the empty schema to the backup's migrations (inside the restore's transaction)."""
    with connection.cursor() as cursor:
        # why immediate while migrating: a data migration's rows must not leave checks pending when a
        # later migration alters their table ("pending trigger events")
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"DROP TABLE IF EXISTS {_qn(table)} CASCADE")
    executor = MigrationExecutor(connection)
    targets = _targets(executor.loader, db["migrations"])
    plan = executor.migration_plan(targets, clean_start=True)
    planned = {(m.app_label, m.name) for m, _ in plan}
    if planned - {tuple(m) for m in db["migrations"]}:
        raise BackupRefused("The backup's migrations cannot be rebuilt by this version of takehome (its "
                            "history differs). Nothing was restored.")
    executor.migrate(targets, plan=plan)


def _applied_here() -> set[tuple[str, str]] | None:
    with connection.cursor() as cursor:
        if "django_migrations" not in connection.introspection.table_names(cursor):
            return None
        cursor.execute("SELECT app, name FROM django_migrations")
        return {(app, name) for app, name in cursor.fetchall()}


def _restore_postgresql(db: dict, staged: Path) -> None:
    with transaction.atomic():
        # why not always rebuilt: when this database is at the backup's migrations already (a restore over
        # the same version), its schema is the backup's, and migrating an empty one takes seconds
        if _applied_here() != {tuple(m) for m in db["migrations"]}:
            _rebuild_schema(db)
        with connection.cursor() as cursor:
            present = set(connection.introspection.table_names(cursor))
            missing = sorted(set(db["tables"]) - present)
            if missing:
                raise BackupRefused(f"The backup's tables {', '.join(missing[:5])} are not made by its migrations "
                                    "here: the backup was altered. Nothing was restored.")
            # why: the rows the migrations wrote (the groups, the migrations' own list) come from the backup too
            cursor.execute(f"TRUNCATE {', '.join(_qn(t) for t in sorted(present))} RESTART IDENTITY CASCADE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            for table, facts in db["tables"].items():
                columns = facts["columns"]
                if set(columns) - set(_columns(cursor, table)):
                    raise BackupRefused(f"The backup's {table} has columns its migrations do not make here: the "
                                        "backup was altered. Nothing was restored.")
                cols = ", ".join(_qn(c) for c in columns)
                with cursor.cursor.copy(f"COPY {_qn(table)} ({cols}) FROM STDIN") as copy, \
                        (staged / f"{table}.copy").open("rb") as fh:
                    while chunk := fh.read(CHUNK):
                        copy.write(chunk)
            # why here: every foreign key is checked now, inside the transaction, so a backup whose rows do
            # not hold together is refused and rolled back
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table in db["tables"]:
                for sequence in connection.introspection.get_sequences(cursor, table):
                    column = _qn(sequence["column"])
                    cursor.execute(f"SELECT setval(%s, COALESCE(MAX({column}), 1), MAX({column}) IS NOT NULL) "
                                   f"FROM {_qn(table)}", [sequence["name"]])


def migrate_forward() -> int:
    """Migrate the restored database to this version of the code; how many migrations that applied."""
    executor = MigrationExecutor(connection)
    pending = len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    if pending:
        call_command("migrate", interactive=False, verbosity=0)
    return pending
