import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from shared.backup import BackupRefused
from shared.backup.actions import do_restore


class Command(BaseCommand):
    help = (
        "Replace this installation's database, uploads and hosted sessions with those of a backup written by "
        "`manage.py backup`, once all of the file is checked against its manifest. Refuses (changing nothing) a "
        "damaged or cut-short file, one of a newer version, and an installation that holds data, unless --force. "
        "FILE - reads it from standard input."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("file", metavar="FILE", help="the backup, or - for standard input")
        parser.add_argument("--force", action="store_true",
                            help="replace this installation's data (database, uploads, hosted sessions) when it has some")

    def handle(self, *args, file: str, force: bool, **options):
        try:
            if file == "-":
                if sys.stdin.isatty():
                    raise CommandError("Give the backup on standard input (`manage.py restore - < FILE`), or name "
                                       "it (`manage.py restore FILE`).")
                manifest = do_restore(sys.stdin.buffer, self.stdout.write, label="the backup on standard input",
                                      force=force)
            else:
                path = Path(file)
                try:
                    source = path.open("rb")
                except FileNotFoundError:
                    raise CommandError(f"There is no file {file}.") from None
                except OSError as exc:
                    raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
                with source:
                    manifest = do_restore(source, self.stdout.write, label=file, force=force, source_path=path)
        except BackupRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Restored the backup made {manifest.get('created_at')}. Start the server, the workers "
                          "and beat again.")
