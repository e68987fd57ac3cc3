import sys

from django.core.management.base import BaseCommand, CommandError

from takehome.team.actions import ROLES, TeamError, do_create_member


class Command(BaseCommand):
    help = (
        "Create a recruiter or reviewer account for EMAIL (also its username). Without "
        "--password-stdin, prints a link on the last line where its owner sets a password. "
        "An email that already has an account is refused and nothing changes."
    )

    def add_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--role", action="append", choices=list(ROLES), required=True,
                            help="recruiter, reviewer or team-admin (the Team page); give --role again for more")
        parser.add_argument("--password-stdin", action="store_true",
                            help="read the password from the first line of standard input")

    def handle(self, *args, **options):
        password = None
        if options["password_stdin"]:
            password = sys.stdin.readline().rstrip("\r\n")
            if not password:
                raise CommandError("--password-stdin was given but standard input held no password.")
        try:
            new = do_create_member(options["email"], options["role"], password=password)
        except TeamError as exc:
            raise CommandError(str(exc)) from exc
        roles = " and ".join(options["role"])
        if password is None:
            self.stderr.write(f"Created {new.user.username} ({roles}). Send them this link to set a password:")
            self.stdout.write(new.link)
        else:
            self.stdout.write(f"Created {new.user.username} ({roles}); they can log in now.")
