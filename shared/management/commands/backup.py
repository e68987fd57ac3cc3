import os
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from shared.backup import BackupRefused
from shared.backup.actions import do_backup
from shared.backup.archive import size_words


class Command(BaseCommand):
    help = (
        "Write one file (a .tar.gz) holding everything this installation keeps: the database as one consistent "
        "snapshot, the uploads, and the hosted sessions' recordings and files (an open workspace's as they are "
        "now), with a manifest that `manage.py restore` checks. FILE - writes it to standard output."
    )
    # why: the sandbox's system checks are not a backup's business, and with FILE - only the backup may go to stdout
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("file", metavar="FILE", help="where to write the backup, or - for standard output")

    def handle(self, *args, file: str, **options):
        if file == "-":
            if sys.stdout.isatty():
                raise CommandError("The backup is a binary file: send it to a file (`manage.py backup - > FILE`), "
                                   "or name the file (`manage.py backup FILE`).")
            say = self.stderr.write
            try:
                do_backup(sys.stdout.buffer, say)
                sys.stdout.buffer.flush()
            except BackupRefused as exc:
                raise CommandError(str(exc)) from None
            say("Wrote the backup to standard output. Keep .env (its SECRET_KEY) with it: it is not in the backup.")
            return
        path = Path(file)
        if path.is_dir():
            raise CommandError(f"{file} is a folder: name the file to write, e.g. {path / 'takehome-backup.tar.gz'}.")
        if not path.parent.is_dir():
            raise CommandError(f"There is no folder {path.parent} to write {path.name} into.")
        # why beside it, then renamed: a backup that fails half-way never takes the name (nor replaces an older one)
        partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
        try:
            # why 0600: the backup holds every candidate's name and email and the accounts' password hashes
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise CommandError(f"Cannot write in {path.parent}: {exc.strerror}.") from None
        try:
            with os.fdopen(fd, "wb") as out:
                st = os.fstat(fd)
                do_backup(out, self.stdout.write, skip=(st.st_dev, st.st_ino))
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, path)
        except BackupRefused as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"The backup could not be written: {exc.strerror or exc} ({exc.filename or file}). "
                               f"{file} was not written.") from None
        finally:
            partial.unlink(missing_ok=True)
        self.stdout.write(f"Wrote {file} ({size_words(path.stat().st_size)}). Keep .env (its SECRET_KEY) with it: "
                          "it is not in the backup.")
